#!/usr/bin/env bash
# Part of `make lint`: `buf lint` and `buf breaking` on the contracts in proto/ (config: proto/buf.yaml).
#
# buf comes from the npm registry (package @bufbuild/buf, pinned below; its platform package holds
# the native binary) and is installed into .tools/buf/ (git-ignored) on first run. After that the
# check runs offline: the module has no remote dependencies (google/protobuf/* is built into buf).
#
# Breaking changes are checked against the last released contract. There are no release tags yet, so
# the baseline is the contract on `main` that this branch started from:
#   BUF_AGAINST        a buf input to compare with, used as given (e.g. ".git#tag=v1.2.0,subdir=proto")
#   else the newest tag v*, when the repository has one reachable from HEAD
#   else on a branch: the merge-base of HEAD and BUF_BASE (default main, or origin/main), so a
#        change merged into main meanwhile is not reported as this branch deleting it
#   else on main itself: HEAD's first parent (main before the last merge)
# Each check is first shown a known-bad input, so a tool that accepts everything fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

BUF_VERSION=1.75.0
TOOLS=.tools/buf
BUF=$TOOLS/node_modules/.bin/buf
WORK=build/buf-check
export BUF_CACHE_DIR=$PWD/$TOOLS/cache

if [ "$(cat "$TOOLS/.version" 2>/dev/null)" != "$BUF_VERSION" ]; then
  command -v npm >/dev/null || { echo "buf-check: npm is needed once, to install @bufbuild/buf" >&2; exit 1; }
  rm -rf "$TOOLS" && mkdir -p "$TOOLS"
  echo '{"private": true}' > "$TOOLS/package.json"
  npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error "@bufbuild/buf@$BUF_VERSION" >/dev/null
  echo "$BUF_VERSION" > "$TOOLS/.version"
fi
[ "$("$BUF" --version)" = "$BUF_VERSION" ] || { echo "buf-check: $BUF is not buf $BUF_VERSION" >&2; exit 1; }

against=${BUF_AGAINST:-}
if [ -z "$against" ]; then
  tag=$(git describe --tags --abbrev=0 --match 'v*' HEAD 2>/dev/null || true)
  base_branch=${BUF_BASE:-main}
  base=$(git rev-parse -q --verify "$base_branch^{commit}" || git rev-parse -q --verify "origin/$base_branch^{commit}" || true)
  if [ -n "$tag" ]; then
    against=".git#tag=$tag,subdir=proto"
  elif [ -n "$base" ] && [ "$base" != "$(git rev-parse HEAD)" ]; then
    against=".git#ref=$(git merge-base HEAD "$base"),subdir=proto"
  elif git rev-parse -q --verify 'HEAD^1^{commit}' >/dev/null; then
    against=".git#ref=$(git rev-parse 'HEAD^1'),subdir=proto"
  else
    echo "buf-check: no baseline for buf breaking (no tag v*, no $base_branch, no parent commit); set BUF_AGAINST" >&2
    exit 1
  fi
fi

# Canaries: the same configuration must refuse a lint violation and a wire-breaking change.
rm -rf "$WORK" && mkdir -p "$WORK/lint/memvault/canary/v1" "$WORK/old/memvault/canary/v1" "$WORK/new/memvault/canary/v1"
for module in lint old new; do cp proto/buf.yaml "$WORK/$module/"; done
printf 'syntax = "proto3";\npackage memvault.canary.v1;\nmessage note { string Text = 1; }\n' \
  > "$WORK/lint/memvault/canary/v1/canary.proto"
printf 'syntax = "proto3";\npackage memvault.canary.v1;\nmessage Note {\n  string text = 1;\n}\n' \
  > "$WORK/old/memvault/canary/v1/canary.proto"
sed 's/string text = 1/int64 text = 1/' "$WORK/old/memvault/canary/v1/canary.proto" > "$WORK/new/memvault/canary/v1/canary.proto"
if "$BUF" lint "$WORK/lint" >/dev/null 2>&1; then echo "buf-check: buf lint accepted a bad proto" >&2; exit 1; fi
if "$BUF" breaking "$WORK/new" --against "$WORK/old" >/dev/null 2>&1; then
  echo "buf-check: buf breaking accepted a changed field type" >&2
  exit 1
fi

"$BUF" lint proto
"$BUF" breaking proto --against "$against"
echo "buf $BUF_VERSION: lint passed; no breaking change against $against"
