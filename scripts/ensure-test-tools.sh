#!/bin/sh
# Installs the Debian packages the sandbox tests drive (tests/test_sandbox_attacks.py
# plays a human's tmux and screen servers, crontab and at, and uses git and a C
# compiler inside the sandbox). Idempotent; as root it uses apt-get, otherwise it
# only reports what is missing (an ordinary user's run needs them installed first).
set -eu
need=""
for pair in tmux:tmux screen:screen crontab:cron at:at git:git cc:gcc; do
    tool=${pair%%:*}
    package=${pair#*:}
    command -v "$tool" >/dev/null 2>&1 || need="$need $package"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-test-tools: missing Debian packages:$need (install them as root: apt-get install$need)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $need >/dev/null
