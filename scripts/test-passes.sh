#!/usr/bin/env bash
# make test's passes, side by side: as root, the unprivileged pass (scripts/test-unprivileged.sh,
# the same tests again as an ordinary user, in a fresh copy) runs beside the main pass (pytest,
# the plugin's node tests, the portable-engine check). Most of the suite waits on processes,
# sockets and a real gateway rather than on a core, so the two passes share the machine well;
# in sequence they took 51 min in CI. Each pass's output stays whole: the unprivileged pass
# writes to a log that is printed when it ends. Any failure in either pass fails the run.
#
#   scripts/test-passes.sh      # what make test runs, after installing what the tests need
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
PY=${PYTHON:-python3}

unprivileged_pid=""
if [ "$(id -u)" = 0 ]; then
  log=$(mktemp "${TMPDIR:-/tmp}/paddedcell-unprivileged-XXXXXX.log")
  # Its own session, so an interrupted run stops the whole pass (runuser, pytest, gateways).
  PYTHON="$PY" setsid scripts/test-unprivileged.sh >"$log" 2>&1 </dev/null &
  unprivileged_pid=$!
  trap 'kill -TERM -- "-$unprivileged_pid" 2>/dev/null; exit 130' INT TERM
  echo "make test: the unprivileged pass runs beside this one; its output follows this pass's ($log)"
fi

failed=()
start=$(date +%s)
"$BIN/pytest" -q --durations=25 --durations-min=10 || failed+=("pytest")
(eval "$(scripts/openclaw-env.sh)" && node --test 'openclaw-plugin/test/*.test.js') || failed+=("the plugin's node tests")
scripts/portable-engine-check.sh "$PY" || failed+=("the portable-engine check")
echo "make test: the main pass took $(( $(date +%s) - start )) s"

if [ -n "$unprivileged_pid" ]; then
  wait "$unprivileged_pid"; unprivileged_rc=$?
  echo "----- the unprivileged pass (scripts/test-unprivileged.sh) -----"
  cat "$log"
  rm -f "$log"
  [ "$unprivileged_rc" = 0 ] || failed+=("the unprivileged pass")
  echo "make test: both passes took $(( $(date +%s) - start )) s"
fi

if [ "${#failed[@]}" -gt 0 ]; then
  printf 'make test: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "make test: every pass passed"
