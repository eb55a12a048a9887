#!/usr/bin/env bash
# Install the MCP clients the MCP end-to-end tests drive into a cache directory
# (idempotent), then print the PATH line that puts Node 24 and their bin dir first.
#
#   eval "$(scripts/mcp-clients-env.sh)"   # sets PATH (and PADDEDCELL_MCP_CLIENTS for the SDK)
#   scripts/mcp-clients-env.sh --check     # exit 0 only when everything is installed
#
# Node 24 comes from scripts/openclaw-env.sh's cache (installed there when absent).
# Cache: $PADDEDCELL_MCP_CLIENTS_CACHE (default ~/.cache/paddedcell-mcp-clients).
# Versions: $PADDEDCELL_MCP_SDK_VERSION (1.32.2), $PADDEDCELL_CODEX_VERSION (0.171.0),
# $PADDEDCELL_CLAUDE_CODE_VERSION (2.1.332).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${PADDEDCELL_MCP_CLIENTS_CACHE:-$HOME/.cache/paddedcell-mcp-clients}"
SDK_VERSION="${PADDEDCELL_MCP_SDK_VERSION:-1.32.2}"
CODEX_VERSION="${PADDEDCELL_CODEX_VERSION:-0.171.0}"
CLAUDE_VERSION="${PADDEDCELL_CLAUDE_CODE_VERSION:-2.1.332}"
BIN="$CACHE/node_modules/.bin"

die() { echo "mcp-clients-env: $*" >&2; exit 1; }

# Node 24 (and npm) from the OpenClaw cache; openclaw-env.sh installs it when absent.
if [ "${1:-}" = "--check" ]; then
  "$HERE/openclaw-env.sh" --check || exit 1
fi
node_path_line="$("$HERE/openclaw-env.sh" | tail -n 1)" || die "scripts/openclaw-env.sh failed (see above)"
eval "$node_path_line"

installed_version() {  # package name -> version in the cache, or nothing
  local pj="$CACHE/node_modules/$1/package.json"
  [ -f "$pj" ] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj" 2>/dev/null || true
}
have_all() {
  [ "$(installed_version @modelcontextprotocol/sdk)" = "$SDK_VERSION" ] &&
    [ "$(installed_version @openai/codex)" = "$CODEX_VERSION" ] &&
    [ "$(installed_version @anthropic-ai/claude-code)" = "$CLAUDE_VERSION" ] &&
    [ -x "$BIN/codex" ] && [ -x "$BIN/claude" ]
}

if [ "${1:-}" = "--check" ]; then
  have_all
  exit $?
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.install.lock"
flock 9

if ! have_all; then
  echo "mcp-clients-env: installing @modelcontextprotocol/sdk@$SDK_VERSION @openai/codex@$CODEX_VERSION @anthropic-ai/claude-code@$CLAUDE_VERSION into $CACHE" >&2
  [ -f "$CACHE/package.json" ] || echo '{"private": true}' > "$CACHE/package.json"
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/sdk@$SDK_VERSION" "@openai/codex@$CODEX_VERSION" \
      "@anthropic-ai/claude-code@$CLAUDE_VERSION" >&2) ||
    die "npm install of the MCP clients failed (network or registry?)"
  have_all || die "the MCP clients installed but are not all usable in $CACHE"
fi

echo "export PADDEDCELL_MCP_CLIENTS=\"$CACHE\""
echo "$node_path_line" | sed "s|export PATH=\"|export PATH=\"$BIN:|"
