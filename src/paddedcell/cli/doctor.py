"""``paddedcell doctor``: what this host gives PaddedCell, each line with its fix.

The checks read facts (sysctls, the sandbox probe, cgroups, the daemon) and turn them
into :class:`Check` rows; :func:`namespace_findings` is pure (the facts come in as a
reader), so every "why not" has a test without changing the host.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Callable

import click

from .. import config

OK, WARN, FAIL = "ok", "warn", "FAIL"


@dataclass(frozen=True)
class Check:
    check: str
    status: str
    detail: str
    fix: str = ""


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def namespace_findings(read: Callable[[str], str | None]) -> list[str]:
    """Why unprivileged user namespaces may be off, each with its fix (pure)."""
    found = []
    if read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        found.append("sysctl kernel.unprivileged_userns_clone is 0: sudo sysctl -w "
                     "kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d to keep it)")
    if read("/proc/sys/user/max_user_namespaces") == "0":
        found.append("sysctl user.max_user_namespaces is 0: sudo sysctl -w "
                     "user.max_user_namespaces=15000")
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        found.append("AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): install "
                     "an AppArmor profile granting 'userns,' to this Python interpreter (see "
                     "docs/security.md), or sudo sysctl -w "
                     "kernel.apparmor_restrict_unprivileged_userns=0")
    cgroup = read("/proc/1/cgroup") or ""
    if (read("/.dockerenv") is not None or read("/run/.containerenv") is not None
            or any(word in cgroup for word in ("docker", "kubepods", "containerd", "lxc"))):
        found.append("this runs in a container whose seccomp profile or capabilities may block "
                     "namespaces: run it with --security-opt seccomp=unconfined (Docker) or "
                     "as root inside (each agent then runs as its own uid)")
    return found


def gather() -> list[Check]:
    from ..supervisor import procs, sandbox
    from ..supervisor.spawn import Sandbox, SpawnError

    rows: list[Check] = []
    # A bad setting is one line and exit 2 here too (config.exit_on_bad_settings in main),
    # not a row: every other check reads the settings.
    settings = config.load()
    root = sandbox.host_root()
    ok, why = sandbox.available()
    if ok:
        kinds = "mount, PID and network" if root else "user, mount, PID and network"
        rows.append(Check("namespaces", OK, f"{kinds} namespaces work (the sandbox is built "
                          "for every agent command)"))
    else:
        findings = namespace_findings(_read)
        rows.append(Check("namespaces", WARN if root else FAIL, f"unavailable: {why}",
                          "; ".join(findings) or "enable unprivileged user namespaces"))
    try:
        mode = Sandbox.from_settings(settings).mode()
        detail = {"namespaces": "agent commands run in the namespace sandbox",
                  "user": "agent commands run as each agent's own uid, without namespaces",
                  "none": "agent commands run unprotected (supervisor.sandbox = \"none\")"
                  }.get(mode, f"profile {mode!r}")
        rows.append(Check("sandbox", OK if mode in ("namespaces", "user") else WARN, detail,
                          "" if mode in ("namespaces", "user") else
                          'set supervisor.sandbox = "auto"'))
    except SpawnError as exc:
        rows.append(Check("sandbox", FAIL, str(exc), "see the namespaces line"))
    else:
        if mode == "user":
            rows.append(_agent_reach_check(settings))
    network = str(settings["supervisor.sandbox_network"])
    try:
        import paddedcell.egress.connection  # noqa: F401  (h11 and the relay)
        proxy = True
    except ImportError:
        proxy = False
    rows.append(Check("network", OK if network != "host" and (proxy or network == "none")
                      else WARN, f"supervisor.sandbox_network = {network!r}"
                      + ("" if proxy else "; the egress proxy package is missing"),
                      "" if network != "host" else 'set supervisor.sandbox_network = "proxy"'))
    rows.append(_cgroup_check(procs.delegated_cgroup(), root))
    if root:
        from ..supervisor.sandbox_plan import uid_range

        try:
            first, count = uid_range(settings)
            rows.append(Check("root", OK, f"the daemon runs as root: each agent runs as its "
                              f"own uid from {first}:{count}, never as root"))
        except SpawnError as exc:
            rows.append(Check("root", FAIL, str(exc), "fix supervisor.sandbox_uid_range"))
    else:
        rows.append(Check("root", OK, f"the daemon runs as uid {os.geteuid()} (not the "
                          "host's root)"))
    from ..redactor import matcher

    engine = getattr(matcher.ENGINE, "name", matcher.ENGINE.__name__)
    fast = matcher.ENGINE is matcher.HyperscanMatcher
    rows.append(Check("redaction", OK if fast else WARN, f"engine: {engine}", "" if fast else
                      "pip install pyperscan (x86-64 with SSSE3, aarch64, macOS) for the fast engine"))
    from ..daemon.client import DaemonClient

    running = DaemonClient(settings, timeout=2.0).healthy()
    rows.append(Check("daemon", OK if running else WARN,
                      "reachable" if running else "not running (the CLIs start it on demand)",
                      "" if running else "paddedcell serve (or any pcexec starts it)"))
    rows.append(_guard_check(settings))
    rows.append(_plugin_check())
    return rows


def _cgroup_check(cgroup, root: bool) -> Check:
    """Which limits a session gets: cgroup v2 per session where delegated, else rlimits."""
    from ..supervisor.procs import LIMIT_CONTROLLERS

    fix = ("run the daemon in a delegated scope of its own: systemd-run "
           + ("" if root else "--user ") + "--scope -p Delegate=yes paddedcell serve")
    if cgroup is None:
        return Check("cgroups", WARN, "no delegated cgroup v2: limits are rlimits (per "
                     "process; processes per session)", fix)
    offered = (_read(str(cgroup / "cgroup.controllers")) or "").split()
    usable = [c for c in LIMIT_CONTROLLERS if c in offered]
    if not usable:
        return Check("cgroups", WARN, f"delegated cgroup v2 at {cgroup} offers none of "
                     f"{', '.join(LIMIT_CONTROLLERS)}: limits are rlimits; sessions are "
                     "still killed as one cgroup", fix)
    return Check("cgroups", OK if len(usable) == len(LIMIT_CONTROLLERS) else WARN,
                 f"cgroup v2 limits per session ({', '.join(usable)}) under {cgroup}, "
                 "rlimits beside them", "" if len(usable) == len(LIMIT_CONTROLLERS) else fix)


def _agent_reach_check(settings) -> Check:
    """Without namespaces the agents' own uids run pass_mgr from where it is installed."""
    import pwd

    from ..supervisor.sandbox_plan import agent_tools, uid_range, unreachable
    from ..supervisor.spawn import SpawnError

    user = str(settings["supervisor.sandbox_user"]).strip()
    try:
        if user:
            entry = pwd.getpwnam(user)
            uid, gid = entry.pw_uid, entry.pw_gid
        else:
            uid = gid = uid_range(settings)[0]
    except (KeyError, SpawnError) as exc:
        return Check("agent uids", FAIL, str(exc), "fix supervisor.sandbox_user / _uid_range")
    tools = agent_tools(os.environ.get("PATH") or os.defpath)
    why = unreachable(tools, uid, gid)
    if why:
        return Check("agent uids", FAIL, f"agent commands are refused: {why}",
                     "install PaddedCell (or dist/pass_mgr) where every user can read it")
    return Check("agent uids", OK, f"uid {uid} reaches " + (", ".join(tools) or
                                                             "no pass_mgr (none installed)"))


def _guard_check(settings) -> Check:
    """The admin-password guard (vault/guard.py): armed, and kept on tmpfs for daemons that
    start later — or waiting for a human, or memory only here (and why)."""
    from ..vault.admin import AdminPaths, status

    if status(AdminPaths(settings.home_text)) == "uninitialized":
        return Check("guard", WARN, "no admin password yet", "pass_mgr admin init")
    from .pass_mgr_click import guard_report

    lasting, line = guard_report(settings)
    return Check("guard", OK if lasting else WARN, f"admin-password guard: {line}",
                 "" if lasting else "pass_mgr admin guard (after every reboot); where it is "
                 "memory only, give this uid a tmpfs $XDG_RUNTIME_DIR or /dev/shm")


def _plugin_check() -> Check:
    path = os.environ.get("OPENCLAW_CONFIG_PATH") or os.path.expanduser("~/.openclaw/openclaw.json")
    text = _read(path)
    fix = ("openclaw plugins install --link <paddedcell>/openclaw-plugin --force "
           "--accept-capabilities (docs/openclaw.md)")
    if text is None:
        return Check("openclaw", WARN, f"no OpenClaw configuration at {path}", fix)
    try:
        plugins = json.loads(text).get("plugins", {})
        found = "paddedcell" in json.dumps(plugins)
    except (ValueError, AttributeError):
        found = '"paddedcell"' in text
    return Check("openclaw", OK if found else WARN,
                 "the paddedcell plugin is installed" if found
                 else f"the paddedcell plugin is not in {path}", "" if found else fix)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON list of the checks.")
def doctor(as_json: bool) -> None:
    """Tell what this host gives PaddedCell (namespaces, cgroups, root, the redaction
    engine, the daemon, the OpenClaw plugin), each line with its fix."""
    rows = gather()
    if as_json:
        click.echo(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        for row in rows:
            line = f"{row.status:4}  {row.check}: {row.detail}"
            if row.fix:
                line += f"\n      fix: {row.fix}"
            click.echo(line)
    sys.exit(1 if any(row.status == FAIL for row in rows) else 0)
