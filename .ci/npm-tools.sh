#!/usr/bin/env bash
# Install the npm tools the tests drive (MCP Inspector, the reference memory server, the host CLIs)
# into a cache folder outside the clone; a second run with the same versions installs nothing.
set -euo pipefail
cache="$1"
mkdir -p "$cache"
cd "$cache"
want=(
  "@modelcontextprotocol/inspector"
  "@modelcontextprotocol/server-memory"
  "@anthropic-ai/claude-code"
  "@openai/codex"
  "@google/gemini-cli"
  "opencode-ai"
)
missing=()
for pkg in "${want[@]}"; do
  [ -d "node_modules/$pkg" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "ci: npm tools already in $cache" >&2
  exit 0
fi
command -v npm >/dev/null || { echo "ci: npm not found" >&2; exit 1; }
[ -f package.json ] || echo '{"private": true}' > package.json
timeout 900 npm install --no-audit --no-fund --loglevel=error "${missing[@]}" >&2
