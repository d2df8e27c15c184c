"""Texts that are secrets and texts that only look like them, for the secret detector.

Every token below is generated here from a fixed seed, so the repository holds no real
credential (and no string a secret scanner would flag) while each text keeps the exact shape
of the real thing. POSITIVES must be refused; NEGATIVES (the tricky part) must be stored.
"""

from __future__ import annotations

import base64
import json
import random

_random = random.Random(20261130)
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
BASE32 = UPPER + "234567"


def fake(length: int, alphabet: str = ALNUM) -> str:
    return "".join(_random.choice(alphabet) for _ in range(length))


def b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def jwt() -> str:
    return f"{b64url({'alg': 'HS256', 'typ': 'JWT'})}.{b64url({'sub': '1234', 'exp': 1900000000})}.{fake(43, ALNUM + '-_')}"


BEGIN, END = "-----BEGIN ", "-----END "
PEM_BODY = "\n".join(fake(64, ALNUM + "+/") for _ in range(3))

# (kind the detector should name, text)
POSITIVES: list[tuple[str, str]] = [
    ("private key", f"Deploy key for the NAS:\n{BEGIN}OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n{END}OPENSSH PRIVATE KEY-----"),
    ("private key", f"{BEGIN}RSA PRIVATE KEY-----\n{PEM_BODY}\n{END}RSA PRIVATE KEY-----"),
    ("private key", f"Keep this for the VPN: {BEGIN}EC PRIVATE KEY----- {fake(60, ALNUM + '+/')}"),
    ("private key", f"{BEGIN}PRIVATE KEY-----\n{PEM_BODY}"),
    ("private key", f"{BEGIN}PGP PRIVATE KEY BLOCK-----\n\n{PEM_BODY}"),
    (
        "private key",
        json.dumps(
            {
                "type": "service_account",
                "project_id": "homelab-123",
                "private_key_id": fake(40, HEX),
                "private_key": f"{BEGIN}PRIVATE KEY-----\\n{fake(64, ALNUM)}\\n",
            }
        ),
    ),
    ("AWS access key", f"The backup user's AWS key id is AKIA{fake(16, BASE32)}."),
    ("AWS access key", f"aws_access_key_id = ASIA{fake(16, BASE32)}"),
    ("credential", f"aws_secret_access_key = {fake(40, ALNUM + '+/')}"),
    ("credential", f"AWS secret access key: {fake(40, ALNUM + '+/')}"),
    ("Google API key", f"Maps API key AIza{fake(35, ALNUM + '_-')} for the family site."),
    ("Google OAuth client secret", f"client secret GOCSPX-{fake(28, ALNUM + '_-')}"),
    ("Google OAuth token", f"use ya29.{fake(80, ALNUM + '_-')} to call Drive"),
    ("Google refresh token", f"refresh: 1//0{fake(60, ALNUM + '_-')}"),
    ("GitHub token", f"My GitHub token is ghp_{fake(36)}"),
    ("GitHub token", f"gho_{fake(36)}"),
    ("GitHub token", f"export GH_TOKEN=github_pat_{fake(22)}_{fake(59)}"),
    ("GitHub token", f"The Actions app token ghs_{fake(36)} expires hourly."),
    ("GitLab token", f"GitLab PAT: glpat-{fake(20, ALNUM + '_-')}"),
    ("GitLab token", f"deploy token gldt-{fake(20, ALNUM + '_-')}"),
    ("GitLab runner token", f"register the runner with GR1348941{fake(20, ALNUM + '_-')}"),
    ("Slack token", f"Slack bot token: xoxb-{fake(12, DIGITS)}-{fake(13, DIGITS)}-{fake(24)}"),
    ("Slack token", f"xoxp-{fake(11, DIGITS)}-{fake(11, DIGITS)}-{fake(12, DIGITS)}-{fake(32, HEX)}"),
    ("Slack webhook", f"Alerts post to https://hooks.slack.com/services/T{fake(8, UPPER + DIGITS)}/B{fake(8, UPPER + DIGITS)}/{fake(24)}"),
    ("Slack app token", f"xapp-1-A{fake(10, UPPER + DIGITS)}-{fake(13, DIGITS)}-{fake(64, HEX)}"),
    ("OpenAI API key", f"OpenAI key sk-{fake(48)}"),
    ("OpenAI API key", f"OPENAI_API_KEY=sk-proj-{fake(74, ALNUM + '_-')}"),
    ("OpenAI API key", f"the service account key is sk-svcacct-{fake(60, ALNUM + '_-')}"),
    ("Anthropic API key", f"Claude API key: sk-ant-api03-{fake(93, ALNUM + '_-')}AA"),
    ("Anthropic API key", f"sk-ant-admin01-{fake(80, ALNUM + '_-')}"),
    ("Stripe secret key", f"Stripe live key sk_live_{fake(24)}"),
    ("Stripe secret key", f"sk_test_{fake(99)}"),
    ("Stripe secret key", f"restricted key rk_live_{fake(24)}"),
    ("Stripe webhook secret", f"STRIPE_WEBHOOK_SECRET=whsec_{fake(32)}"),
    ("JSON Web Token", f"The session cookie was {jwt()}"),
    ("JSON Web Token", f"Authorization: Bearer {jwt()}"),
    ("npm token", f"//registry.npmjs.org/:_authToken=npm_{fake(36)}"),
    ("PyPI token", f"pypi-AgEIcHlwaS5vcmc{fake(60, ALNUM + '_-')}"),
    ("Hugging Face token", f"HF token hf_{fake(34, ALNUM)}"),
    ("SendGrid API key", f"SG.{fake(22, ALNUM + '_-')}.{fake(43, ALNUM + '_-')}"),
    ("Twilio API key", f"Twilio SK{fake(32, HEX)}"),
    ("DigitalOcean token", f"doctl auth init -t dop_v1_{fake(64, HEX)}"),
    ("Telegram bot token", f"bot token {fake(10, DIGITS)}:AA{fake(33, ALNUM + '_-')}"),
    ("Tailscale key", f"tskey-auth-k{fake(10)}CNTRL-{fake(30)}"),
    ("Azure storage key", f"DefaultEndpointsProtocol=https;AccountName=photos;AccountKey={fake(86, ALNUM + '+/')}==;"),
    ("age secret key", f"AGE-SECRET-KEY-1{fake(58, UPPER + DIGITS)}"),
    ("Databricks token", f"dapi{fake(32, HEX)}"),
    ("password in a URL", f"DATABASE_URL=postgresql://app:{fake(18)}@db.internal:5432/app"),
    ("password in a URL", f"The router admin page is https://admin:Tr0ub4dor{fake(4, DIGITS)}@192.168.1.1/"),
    ("password in a URL", f"redis://:{fake(24)}@cache:6379/0"),
    ("password", "The wifi password is sunshine-Meadow-42."),
    ("password", "My NAS password: hunter2!"),
    ("password", 'password = "correct horse battery staple"'),
    ("password", "The password for the Synology is Tr0ub4dor&3"),
    ("password", "DB_PASSWORD=s3cr3tP4ss"),
    ("password", "Passphrase: purple-elephant-dances-at-midnight"),
    ("password", "the old password was Winter2024! and the new one is Spring2025!"),
    ("PIN", "The garage door PIN is 4821."),
    ("password", "The admin password for Proxmox is Pr0xm0x-2025"),
    ("HashiCorp Vault token", f"vault login hvs.{fake(90, ALNUM + '_-')}"),
    ("credential", f"API key: {fake(32)}"),
    ("credential", f"datadog api_key={fake(32, HEX)}"),
    ("credential", f"client_secret: {fake(40, ALNUM + '~._-')}"),
    ("credential", f"The Home Assistant long-lived access token is {fake(40)}"),
    ("credential", f"recovery codes: {fake(5, LOWER + DIGITS)}-{fake(5, LOWER + DIGITS)} {fake(5, LOWER + DIGITS)}-{fake(5, LOWER + DIGITS)}x9"),
    ("credential", f'{{"apiKey": "{fake(39, ALNUM + "_-")}"}}'),
    ("Mailgun API key", f"Mailgun key-{fake(32, HEX)}"),
    ("authorization header", f"curl -H 'Authorization: Bearer {fake(40)}' https://api.example.org"),
    ("authorization header", f"Authorization: Basic {base64.b64encode(b'admin:' + fake(12).encode()).decode()}"),
]  # fmt: skip

# (why it is not a secret, text)
NEGATIVES: list[tuple[str, str]] = [
    ("UUID", "The memvault default vault id is 3f2b8c4e-9a1d-4e5f-8b7c-2d1e0f9a8b7c."),
    ("UUID", "Request 123e4567-e89b-12d3-a456-426614174000 failed with a timeout."),
    ("UUID", "The tenant id is 9b2f6d3c-1a4e-4b8f-9c7d-5e6f7a8b9c0d; it is not secret."),
    ("git hash", "The fix landed in commit 4f9d2c1ab3e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4."),
    ("git hash", "Pin the chart to revision 8d3e2f1 until the upstream bug is fixed."),
    ("git hash", "sha256 digest: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
    ("git hash", "The image is ghcr.io/owner/memvault@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"),
    ("base64 image", "Avatar: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="),
    ("base64 image", "The favicon is inlined as data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="),
    ("code sample", 'api_key = os.environ["OPENAI_API_KEY"]'),
    ("code sample", "token = get_token(scope='read')"),
    ("code sample", 'password = input("Password: ")'),
    ("code sample", "const secret = process.env.JWT_SECRET;"),
    ("code sample", "export GITHUB_TOKEN=$(gh auth token)"),
    ("code sample", "client_secret: ${OAUTH_CLIENT_SECRET}"),
    ("code sample", "headers = {'Authorization': f'Bearer {token}'}"),
    ("code sample", "password: {{ .Values.postgres.password }}"),
    ("code sample", "The setting is read with secret_key = settings.secret_key in Django."),
    ("code sample", "api_key=API_KEY_FROM_VAULT is how the job gets its key."),
    ("placeholder", "Set API_KEY=your-api-key-here in the .env file."),
    ("placeholder", "postgres://user:password@localhost:5432/mydb is the example connection string."),
    ("placeholder", "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"),
    ("placeholder", "The AWS docs use AKIAIOSFODNN7EXAMPLE as a sample access key id."),
    ("placeholder", "password: ********"),
    ("placeholder", "token: <paste your token here>"),
    ("placeholder", "OPENAI_API_KEY=sk-..."),
    ("placeholder", "redis://:${REDIS_PASSWORD}@cache:6379"),
    ("prose about secrets", "The password is stored in 1Password under 'Homelab'."),
    ("prose about secrets", "The NAS password is in the family vault in Bitwarden."),
    ("prose about secrets", "API keys are rotated every 90 days by a cron job."),
    ("prose about secrets", "Never paste tokens into chat; the owner keeps them in pass."),
    ("prose about secrets", "The wifi password is written on the back of the router."),
    ("prose about secrets", "Password managers: the family uses Bitwarden, work uses 1Password."),
    ("prose about secrets", "My password manager is KeePassXC with the database on the NAS."),
    ("prose about secrets", "The key is to recall before writing anything."),
    ("prose about secrets", "The primary key is customer_id in the orders table."),
    ("prose about secrets", "SSH key type is ed25519 for every machine."),
    ("prose about secrets", "The token budget for the summariser is 4096 tokens."),
    ("prose about secrets", "Tokens are issued for one hour; refresh tokens last 90 days."),
    ("prose about secrets", "The deploy key name is memvault-ci-deploy-key."),
    ("prose about secrets", "The Stripe publishable key starts with pk_live_ and is safe to ship in the browser."),
    ("prose about secrets", "Keys: the house key is under the blue pot."),
    ("prose about secrets", "The secret to good coffee is a 1:16 ratio."),
    ("prose about secrets", "The PIN pad on the garage was replaced in 2024."),
    ("prose about secrets", "Password: must contain a number and be at least 12 characters."),
    ("prose about secrets", "The API token for Home Assistant is in the HA UI under the profile page."),
    ("ordinary text", "The homelab NAS is a Synology DS920+ with four 8 TB drives at 192.168.1.20."),
    ("ordinary text", "Prefers Python 3.12 and uv for new projects; pins dependencies with constraints.txt."),
    ("ordinary text", "The sk-learn pipeline uses a StandardScaler before the logistic regression."),
    ("ordinary text", "The monkey-patched client lives in tests/helpers/fake_oauth_client.py."),
    ("ordinary text", "Model file all-MiniLM-L6-v2 is 90 MB; the ONNX export is in the wheel."),
    ("ordinary text", "Backups run nightly at 02:00 with restic to the B2 bucket homelab-backups-2024."),
    ("ordinary text", "The Grafana dashboard id is 1860 (Node Exporter Full)."),
    ("ordinary text", "Flight confirmation code is QX7P2L for the trip to Lisbon."),
    ("ordinary text", "Her phone number is +44 20 7946 0958 (office)."),
    ("ordinary text", "The JWT library is joserfc; tokens are signed with HS256 and expire after 120 s."),
    ("ordinary text", "Cloudflare zone id: 023e105f4ecef8ad9ca31a8372d0c353 (public in every API URL)."),
    ("ordinary text", "The Kubernetes secret is named memvault-identity and mounted at /var/run/secrets/memvault."),
    ("ordinary text", "The tracking number is 1Z999AA10123456784 for the UPS parcel."),
    ("ordinary text", "Uses ssh-ed25519 keys; the public key comment is sam@laptop."),
    ("ordinary text", "An access token is a JWT that starts with eyJ; never save one."),
    ("ordinary text", "The S3 bucket arn:aws:s3:::homelab-backups holds the restic repository."),
]  # fmt: skip
