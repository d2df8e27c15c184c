#!/usr/bin/env bash
# Download a vault's backup from the gateway with a service token, check it, keep the newest N.
#
#   MEMVAULT_TOKEN=<service token with the admin scope> scripts/backup.sh URL VAULT DIR [KEEP]
#   scripts/backup.sh --check FILE
#
# URL is the gateway (e.g. https://memvault.example.com or http://127.0.0.1:8080), DIR the folder
# the file goes to (memvault-VAULT-<UTC time>.jsonl), KEEP how many of this vault's backups to keep
# there (default 7; older ones are deleted only after the new one checked out). Set
# MEMVAULT_EMBEDDINGS=0 to leave out the embeddings. The manifest at the end of the file is checked
# (every line there, counts per kind, sha256 of everything before it) before the file gets its
# name. Prints the file's path; on any problem, one line on stderr and a non-zero exit.
# Needs curl and python3. The format: docs/backup-format.md.
set -euo pipefail

die() {
  echo "backup.sh: $*" >&2
  exit 1
}

check() {
  python3 - "$1" <<'PY' || exit 1
import hashlib, json, sys
path = sys.argv[1]
sha, counts, previous, last = hashlib.sha256(), {}, None, None
try:
    with open(path, "rb") as stream:
        for line in stream:
            if previous is not None:
                sha.update(previous)
                kind = json.loads(previous).get("kind")
                counts[kind] = counts.get(kind, 0) + 1
            previous = line
    if previous is None:
        raise ValueError("the file is empty")
    if not previous.endswith(b"\n"):
        raise ValueError("the file ends in the middle of a line: it is truncated")
    manifest = json.loads(previous)
    if manifest.get("kind") != "manifest":
        raise ValueError("the last line is not the manifest: the file is truncated")
    header = counts.pop("header", 0)
    if header != 1:
        raise ValueError("the file has no header: it is not a memvault backup")
    for kind, stated in manifest.get("counts", {}).items():
        if counts.get(kind, 0) != stated:
            raise ValueError(f"the manifest counts {stated} {kind} records but the file holds {counts.get(kind, 0)}")
    if manifest.get("sha256") != sha.hexdigest():
        raise ValueError("the manifest's sha256 does not match the file")
except (OSError, ValueError) as error:
    print(f"backup.sh: {path}: {error}", file=sys.stderr)
    sys.exit(1)
PY
}

if [ "${1:-}" = "--check" ]; then
  [ $# -eq 2 ] || die "usage: backup.sh --check FILE"
  check "$2"
  echo "$2: whole"
  exit 0
fi

[ $# -ge 3 ] && [ $# -le 4 ] || die "usage: MEMVAULT_TOKEN=... backup.sh URL VAULT DIR [KEEP]"
url=${1%/}
vault=$2
dir=$3
keep=${4:-7}
[ -n "${MEMVAULT_TOKEN:-}" ] || die "set MEMVAULT_TOKEN to a service token with the admin scope for vault $vault"
[[ $vault =~ ^[a-z0-9][a-z0-9-]{0,62}$ ]] || die "not a vault name: $vault"
[[ $keep =~ ^[1-9][0-9]*$ ]] || die "KEEP must be a whole number of at least 1, not $keep"
command -v curl >/dev/null || die "curl is not installed"
command -v python3 >/dev/null || die "python3 is not installed"
mkdir -p "$dir" || die "cannot create $dir"

name="memvault-$vault-$(date -u +%Y%m%dT%H%M%S%NZ).jsonl"
partial="$dir/.$name.partial"
trap 'rm -f "$partial"' EXIT
query=""
[ "${MEMVAULT_EMBEDDINGS:-1}" = "0" ] && query="?embeddings=0"

status=$(curl --silent --show-error --output "$partial" --write-out '%{http_code}' \
  --header "Authorization: Bearer $MEMVAULT_TOKEN" "$url/api/v1/vaults/$vault/backup$query" 2>&1) ||
  die "download from $url failed: ${status##*curl: }"
if [ "$status" != "200" ]; then
  detail=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("detail", ""))' "$partial" 2>/dev/null || true)
  die "the gateway answered $status${detail:+: $detail}"
fi
check "$partial"
mv "$partial" "$dir/$name"
trap - EXIT

# The newest KEEP of this vault's backups stay (names sort by time).
find "$dir" -maxdepth 1 -name "memvault-$vault-*.jsonl" | sort | head -n "-$keep" | while read -r old; do
  rm -f "$old"
done
echo "$dir/$name"
