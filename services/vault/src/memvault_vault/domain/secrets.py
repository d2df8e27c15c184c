"""Secret detection: content that looks like a credential is refused before anything is stored.

Two kinds of evidence, checked in order:

1. Token formats that are secrets by construction (private key blocks, cloud and SaaS tokens,
   JWTs, webhook URLs). A match is a secret unless it is an obvious placeholder
   (`ghp_XXXX…`, the AWS documentation's `…EXAMPLE` key).
2. A value right after a credential-like name ("password is …", `api_key = "…"`,
   `https://user:pass@host`). Passwords count whatever they look like, unless the value is an
   ordinary word ("the password is stored in 1Password"), a placeholder (`<password>`,
   `${DB_PASSWORD}`, `****`) or code (`os.environ["TOKEN"]`); key- and token-like names need a
   long, high-entropy value that is not a UUID, a hash, a path or a kebab-case name.

A finding names the kind and where it is, never the value, so it can be shown to the caller and
written to the audit log. Detection is a safety net, not a guarantee.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretFinding:
    kind: str
    start: int
    end: int

    def describe(self) -> str:
        return f"{self.kind} at characters {self.start + 1}-{self.end}"


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


_PLACEHOLDER_WORDS = re.compile(r"example|placeholder|redacted|your[_\-]?|changeme|dummy|sample|fake|xxxx|\.\.\.", re.I)


def _placeholder_token(body: str) -> bool:
    """A documentation stand-in rather than a real token."""
    if _PLACEHOLDER_WORDS.search(body):
        return True
    stripped = re.sub(r"[^A-Za-z0-9]", "", body)
    return len(stripped) >= 8 and entropy(stripped) < 2.5


def _jwt(token: str) -> bool:
    header = token.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _mixed(body: str) -> bool:
    """Letters and digits both present, and not a run of one pattern."""
    return bool(re.search(r"[0-9]", body)) and bool(re.search(r"[A-Za-z]", body)) and entropy(body) >= 3.0


# (kind, pattern, group holding the random part, extra check on that part)
_FORMATS: list[tuple[str, re.Pattern[str], int, object]] = [
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), 0, None),
    ("private key", re.compile(r"PuTTY-User-Key-File-\d: "), 0, None),
    ("age secret key", re.compile(r"\bAGE-SECRET-KEY-1([0-9A-Z]{50,})"), 1, None),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])([A-Z2-7]{16})\b"), 1, None),
    ("Google API key", re.compile(r"\bAIza([0-9A-Za-z_\-]{35})(?![0-9A-Za-z_\-])"), 1, None),
    ("Google OAuth client secret", re.compile(r"\bGOCSPX-([0-9A-Za-z_\-]{28})"), 1, None),
    ("Google OAuth token", re.compile(r"\bya29\.([0-9A-Za-z_\-]{30,})"), 1, None),
    ("Google refresh token", re.compile(r"(?<![\w/])1//0([0-9A-Za-z_\-]{30,})"), 1, None),
    ("GitHub token", re.compile(r"\bgh[pousr]_([A-Za-z0-9]{36,255})\b"), 1, None),
    ("GitHub token", re.compile(r"\bgithub_pat_([A-Za-z0-9_]{40,255})\b"), 1, None),
    ("GitLab token", re.compile(r"\bgl(?:pat|dt|rt|ptt|cbt|imt|oas|soat|ft|agent)-([A-Za-z0-9_\-]{20,})"), 1, None),
    ("GitLab runner token", re.compile(r"\bGR1348941([A-Za-z0-9_\-]{20,})"), 1, None),
    ("Slack token", re.compile(r"\bxox[abposre]-((?:[0-9A-Za-z]+-)+[0-9A-Za-z]{6,})"), 1, None),
    ("Slack app token", re.compile(r"\bxapp-\d-([A-Z0-9]+-\d+-[a-z0-9]{20,})"), 1, None),
    (
        "Slack webhook",
        re.compile(
            r"https://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/(T[A-Z0-9]+/[A-Za-z0-9/]{16,})"
        ),
        1,
        None,
    ),
    ("Discord webhook", re.compile(r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/([\w\-]{40,})"), 1, None),
    ("Anthropic API key", re.compile(r"\bsk-ant-(?:api|admin|oat|sid)\d{2}-([A-Za-z0-9_\-]{20,})"), 1, None),
    ("OpenAI API key", re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?([A-Za-z0-9_\-]{20,})"), 1, _mixed),
    ("Stripe secret key", re.compile(r"\b(?:sk|rk)_(?:live|test)_([A-Za-z0-9]{16,})\b"), 1, None),
    ("Stripe webhook secret", re.compile(r"\bwhsec_([A-Za-z0-9+/=]{24,})"), 1, None),
    ("JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.([A-Za-z0-9_\-]{16,})"), 1, None),
    ("npm token", re.compile(r"\bnpm_([A-Za-z0-9]{36})\b"), 1, None),
    ("PyPI token", re.compile(r"\bpypi-AgE([A-Za-z0-9_\-]{50,})"), 1, None),
    ("Hugging Face token", re.compile(r"\bhf_([A-Za-z0-9]{30,})\b"), 1, None),
    ("SendGrid API key", re.compile(r"\bSG\.([A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,})"), 1, None),
    ("Twilio API key", re.compile(r"\bSK([0-9a-f]{32})\b"), 1, None),
    ("DigitalOcean token", re.compile(r"\bdo[opr]_v1_([a-f0-9]{64})\b"), 1, None),
    ("Shopify token", re.compile(r"\bshp(?:at|ca|pa|ss)_([a-fA-F0-9]{32})\b"), 1, None),
    ("Telegram bot token", re.compile(r"\b\d{8,10}:(AA[A-Za-z0-9_\-]{33})\b"), 1, None),
    ("Tailscale key", re.compile(r"\btskey-(?:auth|api|client|scim|webhook)-([A-Za-z0-9]+-[A-Za-z0-9]{10,})"), 1, None),
    ("Atlassian API token", re.compile(r"\bATATT3([A-Za-z0-9_\-=]{50,})"), 1, None),
    ("HashiCorp Vault token", re.compile(r"\bhv[sbr]\.([A-Za-z0-9_\-]{24,})"), 1, None),
    ("Linear API key", re.compile(r"\blin_api_([A-Za-z0-9]{32,})\b"), 1, None),
    ("Notion token", re.compile(r"\b(?:secret|ntn)_([A-Za-z0-9]{40,})\b"), 1, _mixed),
    ("Databricks token", re.compile(r"\bdapi([a-f0-9]{32})(?:-\d)?\b"), 1, None),
    ("Mailgun API key", re.compile(r"\bkey-([0-9a-f]{32})\b"), 1, None),
    ("Azure storage key", re.compile(r"\bAccountKey=([A-Za-z0-9+/]{40,}={0,2})"), 1, None),
    (
        "authorization header",
        re.compile(r"\bAuthorization:\s*(?:Bearer|Basic|Token)\s+([A-Za-z0-9._~+/\-]{16,}=*)", re.I),
        1,
        _mixed,
    ),
]

# Each format without its leading zero-width assertions (`\b`, a lookbehind): it matches wherever the format
# does, and starts from a literal, which `re` finds far faster than it tries `\b` at every position. A text
# it finds nothing in (nearly every text) skips the format: 14 instead of 58 µs per text of 72 characters.
_LEADING_ASSERTIONS = re.compile(r"^(?:\\b|\(\?<[!=][^()]*\))+")
_QUICK_FORMATS = [
    re.compile(_LEADING_ASSERTIONS.sub("", pattern.pattern), pattern.flags) for _, pattern, _, _ in _FORMATS
]

_URL_CREDENTIALS = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://([^\s:/@]*):([^\s/@]+)@[^\s/]+")

_PASSWORD_NAMES = r"pass(?:word|wd|phrase|code)?|pwd|pin"  # noqa: S105 (names, not a password)
_KEY_NAMES = (
    r"[\w.\-]*?(?:secret|token|api[_\- ]?key|apikey|access[_\- ]?key|private[_\- ]?key|client[_\- ]?secret"
    r"|auth[_\- ]?key|credentials?|session[_\- ]?key|signing[_\- ]?key|encryption[_\- ]?key|master[_\- ]?key"
    r"|recovery[_\- ]?codes?|license[_\- ]?key|webhook[_\- ]?secret|(?<![a-z])key)s?"
)
# A credential-like name, up to four words of context ("password for the NAS"), a separator, a value.
_ASSIGNMENT = re.compile(
    rf"(?P<name>\b(?:[\w.\-]*?[_.\-])?(?:{_PASSWORD_NAMES})\b|\b{_KEY_NAMES}\b)[\"']?"
    r"(?P<context>(?:[ \t]+(?:for|of|on|to|at|in)(?:[ \t]+[\w.\-+]+){1,3}?)?)"
    r"[ \t]*(?P<sep>:=|=>|=|:|\bis\b|\bwas\b|\bare\b|\bset to\b|\bchanged to\b|\bbecomes\b)[ \t]*"
    r"(?P<value>\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|`[^`\n]{1,200}`|[^\s\"'`]{1,300})",
    re.I,
)

# Every name `_ASSIGNMENT` accepts contains one of these (case-insensitively, as it matches): a text with
# none of them has no assignment, and this search costs a fifth of the full one.
_ASSIGNMENT_NAMES = re.compile(r"pass|pwd|pin|secret|token|key|credential|recovery", re.I)

_PLACEHOLDER_VALUES = {
    "password", "passwd", "pass", "secret", "token", "changeme", "none", "null", "nil", "empty", "blank",
    "redacted", "hidden", "todo", "tbd", "n/a", "na", "unknown", "required", "optional", "true", "false",
    "admin", "example", "test", "string", "str", "value", "default", "yes", "no", "****",
}  # fmt: skip

# Words that follow "password is" in a sentence about a password rather than one stating it.
_PROSE_WORDS = {
    "a", "an", "the", "in", "on", "at", "by", "from", "with", "via", "under", "inside", "within", "not", "never",
    "still", "also", "now", "then", "always", "only", "stored", "saved", "kept", "managed", "held", "set",
    "required", "needed", "missing", "changed", "rotated", "reset", "expired", "correct", "wrong", "incorrect",
    "same", "different", "long", "short", "strong", "weak", "secure", "insecure", "shared", "unknown",
    "available", "hidden", "encrypted", "hashed", "salted", "generated", "random", "written", "printed",
    "located", "listed", "documented", "known", "lost", "forgotten", "valid", "invalid", "used", "reused",
    "ignored", "disabled", "enabled", "too", "very", "being", "been", "be", "and", "or", "but", "that", "which",
    "who", "it", "its", "their", "my", "our", "your", "his", "her", "this", "these", "those", "there", "here",
    "auto", "automatic", "automatically", "handled", "provided", "supplied", "injected", "mounted", "read",
    "loaded", "fetched", "pulled", "sent", "passed", "prompted", "asked", "entered", "typed", "pasted", "ok",
    "fine", "good", "bad", "old", "new", "current", "temporary", "permanent", "personal", "mine", "yours",
    "protected", "optional", "mandatory", "configured", "defined", "specified", "given", "taken", "all", "one",
    "two", "both", "each", "every", "any", "some", "many", "few", "more", "less", "just", "easy", "hard",
    "simple", "complex", "complicated", "memorable", "rotating", "expiring", "case-sensitive", "what", "how",
    "why", "when", "where", "whatever", "something", "nothing", "anything", "everything", "must", "should",
    "shall", "can", "cannot", "could", "will", "would", "may", "might", "needs", "has", "have", "had", "contains",
    "includes", "requires", "expires", "changes", "lives", "sits", "goes", "see", "ask", "check", "use", "per",
}  # fmt: skip

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_CODE = re.compile(
    r"[()\[\]{}]|^(?:os|env|process|settings|config|self|this|secrets|vault|ENV|getenv)\b[.\[]|^\$|^%|^&|^\*[a-z]",
)
_DOTTED_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+$")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_WORDS = re.compile(r"^[a-z]+(?:[-_][a-z]+)*$")
_HASHY_NAME = re.compile(r"sha|hash|digest|checksum|fingerprint|commit|etag|id$", re.I)


def _placeholder_value(value: str) -> bool:
    lowered = value.lower().strip(".,;:!?")
    if not lowered or lowered in _PLACEHOLDER_VALUES:
        return True
    if re.fullmatch(r"(.)\1{2,}", lowered) or re.fullmatch(r"[*•·.x#?_\-]+", lowered):
        return True
    if "<" in value or ">" in value or "${" in value or "{{" in value or "%(" in value:
        return True
    return bool(re.search(r"example|placeholder|redacted|your[_\- ]|changeme|\bhere\b|xxx", value, re.I))


def _unquote(value: str) -> tuple[str, bool]:
    if len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
        return value[1:-1], True
    return value.rstrip(".,;:!?)"), False


def _password_value(value: str, quoted: bool) -> bool:
    if _placeholder_value(value) or _CODE.search(value) or _ENV_NAME.match(value) or _DOTTED_IDENTIFIER.match(value):
        return False
    if quoted:
        return len(value) >= 3
    if value.lower() in _PROSE_WORDS:
        return False
    if re.fullmatch(r"\d{1,3}|\d+(?:\.\d+)+", value):  # a count or a version, not a password
        return False
    return len(value) >= 4


def _key_value(name: str, value: str) -> bool:
    if (
        len(value) < (8 if re.search("recovery", name, re.I) else 16)
        or _placeholder_value(value)
        or _CODE.search(value)
    ):
        return False
    if _ENV_NAME.match(value) or _DOTTED_IDENTIFIER.match(value) or _WORDS.match(value) or _UUID.match(value):
        return False
    if value.startswith(("http://", "https://", "/", "~/", "./", "../")) or re.match(
        r"^[\w.\-]+\.(?:json|pem|key|txt|env|ya?ml|toml)$", value
    ):
        return False
    if re.fullmatch(r"[0-9a-f]+", value, re.I) and _HASHY_NAME.search(name):
        return False
    if not (re.search(r"[0-9]", value) and re.search(r"[A-Za-z]", value)):
        return False
    return entropy(value) >= 3.0


def _pin_value(value: str) -> bool:
    return bool(re.fullmatch(r"\d{4,8}", value))


def find_secret(text: str) -> SecretFinding | None:
    """The first thing in `text` that looks like a secret, or None."""
    for (kind, pattern, group, check), quick in zip(_FORMATS, _QUICK_FORMATS, strict=True):
        if quick.search(text) is None:
            continue
        for match in pattern.finditer(text):
            body = match.group(group)
            if group and _placeholder_token(body):
                continue
            if kind == "JSON Web Token" and not _jwt(match.group(0)):
                continue
            if callable(check) and not check(body):
                continue
            return SecretFinding(kind, match.start(), match.end())
    for match in _URL_CREDENTIALS.finditer(text):
        if not _placeholder_value(match.group(2)) and not match.group(2).startswith("$"):
            return SecretFinding("password in a URL", match.start(), match.end())
    if _ASSIGNMENT_NAMES.search(text) is None:
        return None
    for match in _ASSIGNMENT.finditer(text):
        name = match.group("name").strip()
        value, quoted = _unquote(match.group("value"))
        lowered = name.lower()
        if lowered == "pin":
            found = _pin_value(value)
            kind = "PIN"
        elif re.search(rf"(?:^|[_.\-])(?:{_PASSWORD_NAMES})$", lowered):
            found = _password_value(value, quoted)
            kind = "password"
        else:
            found = _key_value(name, value)
            kind = "credential"
        if found:
            return SecretFinding(kind, match.start(), match.end())
    return None
