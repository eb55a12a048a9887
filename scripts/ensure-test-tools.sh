#!/bin/sh
# Installs the Debian packages the sandbox tests drive (tests/test_sandbox_attacks.py
# plays a human's tmux and screen servers, crontab and at, a local sshd, and uses git
# and a C compiler inside the sandbox). Idempotent; as root it uses apt-get, otherwise it
# only reports what is missing (an ordinary user's run needs them installed first).
# The tests start their own sshd on a random port: the package's service is not started.
set -eu
need=""
for pair in tmux:tmux screen:screen crontab:cron at:at git:git cc:gcc sshd:openssh-server; do
    tool=${pair%%:*}
    package=${pair#*:}
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || need="$need $package"
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "ensure-test-tools: missing Debian packages:$need (install them as root: apt-get install$need)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# No service starts during the install (exit 101: "action forbidden by policy").
policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    policy=/usr/sbin/policy-rc.d
fi
trap '[ -z "$policy" ] || rm -f "$policy"' EXIT
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $need >/dev/null
