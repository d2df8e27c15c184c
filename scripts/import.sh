#!/usr/bin/env bash
# Import a mem0 / OpenMemory export, a basic-memory folder or a memvault JSON Lines export into a
# vault as one undoable batch, with a service token (scopes read and write).
#
#   MEMVAULT_TOKEN=<service token> scripts/import.sh URL VAULT FORMAT PATH
#
# FORMAT is mem0, basic-memory or memvault-jsonl; PATH the file, or for basic-memory the folder
# (zipped here) or a zip of it. Prints the gateway's answer (a summary per outcome, each item's
# outcome and origin); on a refused file, one line on stderr naming the file, line and field, and
# a non-zero exit. Needs curl, python3 (and nothing else). The formats: docs/interchange.md.
set -euo pipefail

die() {
  echo "import.sh: $*" >&2
  exit 1
}

[[ $# -eq 4 ]] || die "usage: MEMVAULT_TOKEN=... scripts/import.sh URL VAULT FORMAT PATH"
url=${1%/} vault=$2 format=$3 path=$4
[[ -n ${MEMVAULT_TOKEN:-} ]] || die "set MEMVAULT_TOKEN to a service token with the read and write scopes"
case $format in mem0 | basic-memory | memvault-jsonl) ;; *) die "FORMAT must be mem0, basic-memory or memvault-jsonl" ;; esac
[[ -e $path ]] || die "no such file: $path"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
upload=$path
if [[ -d $path ]]; then
  [[ $format == basic-memory ]] || die "$path is a folder; only basic-memory takes a folder"
  upload="$work/folder.zip"
  python3 -c 'import shutil, sys; shutil.make_archive(sys.argv[1][:-4], "zip", sys.argv[2])' "$upload" "$path"
fi
name=$(basename "$path")
[[ -d $path ]] && name="$name.zip"
query=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlencode({"format": sys.argv[1], "name": sys.argv[2]}))' "$format" "$name")

status=$(curl -sS -o "$work/answer" -w '%{http_code}' -X POST \
  -H "Authorization: Bearer $MEMVAULT_TOKEN" -H "Content-Type: application/octet-stream" \
  --data-binary "@$upload" "$url/api/v1/vaults/$vault/imports?$query") || die "could not reach $url"
if [[ $status != 200 ]]; then
  detail=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("detail", ""))' "$work/answer" 2>/dev/null || true)
  die "the gateway answered $status${detail:+: $detail}"
fi
cat "$work/answer"
echo
