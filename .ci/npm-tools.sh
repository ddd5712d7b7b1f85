#!/usr/bin/env bash
# Install the npm tools the tests drive (MCP Inspector, the reference memory server, the host CLIs)
# at the versions the end-to-end tests are pinned to, into a cache folder outside the clone; a second
# run with the same versions installs nothing.
#
#   bash .ci/npm-tools.sh [CACHE]          the pinned versions (default CACHE: $RETAINED_NPM_CACHE,
#                                          else ~/.cache/retained-ci/npm)
#   bash .ci/npm-tools.sh --latest [CACHE] the newest versions npm serves (default CACHE: …/npm-latest);
#                                          then RETAINED_NPM_CACHE=CACHE runs the tests against them
#
# Without npm, or when npm cannot install, it says so and exits 0: the tests that need a tool then
# skip, each with the reason.
set -euo pipefail
pins=(
  "@modelcontextprotocol/inspector@0.15.0"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "@google/gemini-cli@0.61.0"
  "opencode-ai@1.18.33"
)
latest=0
if [ "${1:-}" = "--latest" ]; then latest=1; shift; fi
default="${HOME:-/tmp}/.cache/retained-ci/npm"
if [ $latest -eq 1 ]; then cache="${1:-$default-latest}"; else cache="${1:-${RETAINED_NPM_CACHE:-$default}}"; fi
mkdir -p "$cache"
cd "$cache"
missing=()
for pin in "${pins[@]}"; do
  pkg="${pin%@*}" version="${pin##*@}"
  if [ $latest -eq 1 ]; then
    missing+=("$pkg@latest")
    continue
  fi
  have=""
  [ -f "node_modules/$pkg/package.json" ] && command -v node >/dev/null &&
    have="$(node -p "require('./node_modules/$pkg/package.json').version" 2>/dev/null || true)"
  [ "$have" = "$version" ] || missing+=("$pin")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "npm tools: the pinned versions are in $cache" >&2
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "npm tools: npm not found; install Node.js (with npm) to run the host end-to-end tests, which skip meanwhile" >&2
  exit 0
fi
[ -f package.json ] || echo '{"private": true}' > package.json
if ! timeout 900 npm install --no-audit --no-fund --loglevel=error --save-exact "${missing[@]}" >&2; then
  echo "npm tools: npm install failed; the host end-to-end tests skip (run bash .ci/npm-tools.sh again)" >&2
  exit 0
fi
for pin in "${pins[@]}"; do
  pkg="${pin%@*}"
  echo "npm tools: $pkg $(node -p "require('./node_modules/$pkg/package.json').version") in $cache" >&2
done
