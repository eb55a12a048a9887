#!/usr/bin/env bash
# The suite's second pass, as an ordinary user (issue 17): every test that touches the
# sandbox, pcexec, pass_mgr, the daemon, the vault's files, the demo and the end-to-end
# suites runs again under an unprivileged account, so a root-only pass can never hide a
# product that is broken for most of the people it is for.
#
#   scripts/test-unprivileged.sh            # from `make test`, as root
#   scripts/test-unprivileged.sh -k sandbox # extra pytest arguments
#
# As root it creates the account (PADDEDCELL_TEST_USER, default paddedcell-test) if
# needed, copies this checkout's files (tracked and untracked, not ignored: what you are
# testing, not what was last committed) into the account's home, and runs there, with its
# own HOME, PADDEDCELL_HOME, venv (built from a Python the account can run), pass_mgr binary
# and Node/OpenClaw/MCP-client caches (installed from the registries, as a new user would).
# Run by an ordinary user it does nothing: `make test` already ran every test unprivileged.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "test-unprivileged: not root, so the main pass already ran as an ordinary user; nothing to add"
  exit 0
fi

USER_NAME="${PADDEDCELL_TEST_USER:-paddedcell-test}"
die() { echo "test-unprivileged: $*" >&2; exit 1; }

if ! id "$USER_NAME" >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash --user-group "$USER_NAME" ||
    die "cannot create the user $USER_NAME (useradd failed); set PADDEDCELL_TEST_USER to an existing ordinary user"
fi
[ "$(id -u "$USER_NAME")" != 0 ] || die "$USER_NAME is root; set PADDEDCELL_TEST_USER to an ordinary user"
USER_HOME="$(getent passwd "$USER_NAME" | cut -d: -f6)"
[ -d "$USER_HOME" ] || die "the home of $USER_NAME ($USER_HOME) does not exist"
# The machine's environment (registry mirrors, CA bundles, locale) as a user logging in
# here would have it, minus root's own: its home, paths under /root, any agent identity.
USER_PATH="$(printf %s "$PATH" | tr ':' '\n' | grep -vE '^/root(/|$)' | paste -sd: -)"
mapfile -t KEEP < <(env -0 | tr '\0' '\n' | grep -E '^[A-Za-z_][A-Za-z0-9_]*=' |
  grep -vE '^(HOME|USER|LOGNAME|MAIL|PWD|OLDPWD|SHELL|PATH|VIRTUAL_ENV|PYTHONPATH|PYENV[A-Z_]*|AGENT_[A-Z_]*|PADDEDCELL_[A-Z_]*|OPENCLAW_[A-Z_]*|MAKE[A-Z_]*|MFLAGS|XDG_[A-Z_]*|SUDO_[A-Z_]*|TMPDIR)=' |
  grep -v '=/root/' || true)
as_user() { runuser -u "$USER_NAME" -- env -i "${KEEP[@]}" HOME="$USER_HOME" USER="$USER_NAME" \
  LOGNAME="$USER_NAME" PATH="${USER_PATH:-/usr/local/bin:/usr/bin:/bin}" "$@"; }

# A Python the account can run: the one make used if it can, else the system's of the
# same version (pyenv interpreters under /root are not reachable by other users).
want="$(${PYTHON:-python3} -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
PY=""
for candidate in "$(command -v "${PYTHON:-python3}")" "/usr/bin/python$want" /usr/bin/python3; do
  if [ -n "$candidate" ] && as_user "$candidate" -c 'import venv, ensurepip' 2>/dev/null &&
     [ "$(as_user "$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$want" ]; then
    PY="$candidate"; break
  fi
done
[ -n "$PY" ] || die "no Python $want with venv that $USER_NAME can run (install python$want-venv)"

# A fresh copy of the checkout as it is now, owned by the account: what a new user who
# clones it gets (its venv, pass_mgr binary and caches are built by the project's files).
# One copy per run (two runs at once must not share a tree), removed at the end.
WORK="$(mktemp -d "$USER_HOME/checkout.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
git ls-files -z --cached --others --exclude-standard |
  tar --null -T - -cf - | (cd "$WORK" && tar -xf -)
chown -R "$USER_NAME:" "$WORK"

# The tests that touch identity, processes, files and the network. Left to the main pass:
# the pure cores (redactor, execspec, command scanner, grammars, state machine, protocol
# tables, import layers), and what runs the same for every uid because it never starts a
# session or opens the vault: the remote client (a WebSocket client with its own 0600 files,
# and its gateway e2e) and the egress policy and interception cores (in-process proxies).
# The end-to-end suites come last: the main pass starts with its own (pytest's order), and
# both are mostly Node's CPU, so side by side they would only wait for each other.
mapfile -t TESTS < <(cd "$WORK" && { ls tests/test_*.py; ls tests/e2e/test_*.py; } | grep -vE \
  '/test_(redactor|execspec|commands|agent_text|leak_spans|restart_machine|cli_redact|supervisor_buffers|config|session_protocol|pass_mgr_grammar|import_layers|remote|egress_policy|egress_intercept)')

start=$(date +%s)
as_user bash -c '
  set -euo pipefail
  cd "$1"; shift; py="$1"; shift
  # The README promise first: `make demo` from a fresh copy, as this user.
  make --no-print-directory demo PYTHON="$py" > "$HOME/make-demo.log" 2>&1 ||
    { cat "$HOME/make-demo.log" >&2; echo "test-unprivileged: make demo FAILED as $(id -un)" >&2; exit 1; }
  echo "test-unprivileged: make demo passed as $(id -un) from a fresh copy"
  make --no-print-directory binary PYTHON="$py" >/dev/null
  scripts/openclaw-env.sh >/dev/null
  scripts/mcp-clients-env.sh >/dev/null
  export PADDEDCELL_HOME="$HOME/.paddedcell-test-home"
  # A short temporary root: daemons listen on unix sockets below it (at most 107 bytes),
  # and /tmp/pytest-of-<this long user name>/pytest-NN/<test name>/ took some past that.
  base="$(mktemp -d /tmp/pcu.XXXXXX)"
  trap "rm -rf $base" EXIT
  .venv/bin/pytest -q -p no:cacheprovider --durations=25 --durations-min=10 --basetemp "$base/t" "$@"
' _ "$WORK" "$PY" "${TESTS[@]}" "$@"
echo "test-unprivileged: the unprivileged pass as $USER_NAME took $(( $(date +%s) - start )) s"
