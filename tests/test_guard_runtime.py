"""The armed admin-password guard outlives daemon restarts, never on disk (issue 20).

A human's ``admin init`` (or any authentication) leaves the detector's filter in a sealed
runtime file on tmpfs (vault/guard_runtime.py); a daemon started later — on demand, by
``pcexec`` — loads it, so a session's ``cat`` of a file holding the admin password (and its
base64 and ``xxd`` forms) is masked without anyone running ``pass_mgr admin guard``. A
reboot (the file gone) brings the waiting guard back. Sessions never reach the file: their
sandbox has its own ``/dev/shm`` and ``/run/user/UID``; an agent of its own Unix user meets
0700/0600. Only the daemon's own uid outside every session borrows the filter.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from paddedcell import config
from paddedcell.supervisor import sandbox
from paddedcell.vault import admin, crypto, guard, guard_runtime, guard_state, init_admin
from paddedcell.vault.leak import LeakDetector
from supervisor_helpers import (BIN, PASS_MGR_DIR, Daemon, base_env, give_workspace, init_vault,
                                pass_mgr_closed_to_others, world_for_other_uids)

PW = "runtime-guarded-admin-pw-7"
FAST_KDF = {"vault.kdf_iterations": 1, "vault.kdf_memory_kib": 64, "vault.kdf_lanes": 1}
FAST_KDF_ENV = {"PADDEDCELL_" + key.upper().replace(".", "_"): str(value)
                for key, value in FAST_KDF.items()}


def cli(home: Path, name: str, *args: str, cwd: Path | None = None, input: str | None = None,
        **env: str):
    return subprocess.run([str(BIN / name), *args], env=base_env(home, **env), cwd=cwd,
                          input=input, capture_output=True, text=True, timeout=120)


def daemon_pid(home: Path) -> int | None:
    try:
        return int((home / "run" / "paddedcell.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def stop_daemon(home: Path, sig: int = signal.SIGTERM) -> None:
    """Stop the daemon pcexec started on demand in ``home`` (by its own pid file)."""
    pid = daemon_pid(home)
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    (home / "run" / "paddedcell.sock").unlink(missing_ok=True)


#: Outside the sandbox it prints the file; inside, every road to it must come back empty.
PROBE = r"""
d={dir}; f={file}; daemon={pid}
named() {{ grep -E '(^|/)paddedcell(-[0-9]+)?(/|$)|\.guard$'; }}
test -e "$f" && echo "VISIBLE exact path"
cat "/proc/$daemon/root$f" 2>/dev/null && echo "VISIBLE via the daemon's root"
for fd in /proc/$daemon/fd/*; do readlink "$fd"; done 2>/dev/null | named && echo "VISIBLE daemon fd"
test -e "$d" && echo "VISIBLE directory"
ls -a /dev/shm /run/user/* 2>/dev/null | named && echo "VISIBLE listing"
cat "$f" 2>&1
for p in /proc/[0-9]*; do
  cat "$p/root$f" 2>/dev/null && echo "VISIBLE via $p/root"
  for fd in "$p"/fd/*; do readlink "$fd"; done 2>/dev/null | named && echo "VISIBLE fd of $p"
done
find /dev /run /tmp /var/tmp -name '*.guard' 2>/dev/null | sed 's/^/VISIBLE found /'
echo PROBE-DONE
"""


def test_admin_init_arms_on_demand_daemons_across_restarts_until_reboot(tmp_path):
    """Black box, no ``admin guard``: init → pcexec (a daemon on demand): a session cannot
    reach the runtime file, and ``cat`` of the password, its base64 and xxd forms is masked
    (and locks); SIGKILL, a new on-demand daemon → it still finds every form; the file gone
    (a reboot) → the next daemon waits for a human, and ``admin status`` says so."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    give_workspace(home, "a1", ws)
    # The admin KDF's cost is kept in admin.json: a cheap one, as every hit the daemon's
    # filter finds is confirmed by it.
    init = cli(home, "pass_mgr", "admin", "init", "--password-stdin", input=PW + "\n",
               **FAST_KDF_ENV)
    assert init.returncode == 0, init.stderr
    (ws / "history").write_text(f"pass_mgr set a1 /ws db v {PW}\n")
    forms = "cat history; base64 -w0 history; echo; xxd history"
    kept = guard_runtime.stamp(str(home))
    assert kept is not None, "no tmpfs runtime directory on this host"
    directory, path = kept[0][0], os.path.join(kept[0][0], guard_runtime.file_name(str(home)))
    agent = {"AGENT_ID": "a1", "AGENT_WORKSPACE": str(ws)}

    def pcexec(command: str) -> subprocess.CompletedProcess:
        return cli(home, "pcexec", "--yield-ms", "20000", command, cwd=ws, **agent)

    def check_leak(text: str) -> int:
        return cli(home, "pass_mgr", "admin", "check-leak", input=text).returncode

    def guard_line() -> str:
        return cli(home, "pass_mgr", "admin", "status").stderr

    try:
        # The session's sandbox (or Unix user) hides the file; outside it is right there.
        assert pcexec("true").returncode == 0  # starts the daemon on demand
        probe = PROBE.format(dir=directory, file=path, pid=daemon_pid(home))
        outside = subprocess.run(["sh", "-c", probe.split("for p in")[0]], capture_output=True,
                                 text=True)
        assert "VISIBLE exact path" in outside.stdout and "paddedcell-guard-1" in outside.stdout
        inside = pcexec(probe).stdout
        assert "PROBE-DONE" in inside and "VISIBLE" not in inside, inside
        assert "paddedcell-guard-1" not in inside and '"nonce"' not in inside, inside
        out = pcexec(forms).stdout
        encoded = base64.b64encode((ws / "history").read_bytes()).decode()
        dump = subprocess.run(["xxd", str(ws / "history")], capture_output=True, text=True).stdout
        assert PW not in out and encoded not in out and "######" in out, out
        assert not set(dump.splitlines()[1:3]) & set(out.splitlines()), out
        stop_daemon(home, signal.SIGKILL)
        # A new on-demand daemon (its exec refused: the vault is locked) holds the guard.
        assert pcexec("true").returncode == 3 and daemon_pid(home) is not None
        assert "admin-password guard: on" in guard_line()
        for text in (encoded, dump):
            assert check_leak(f"log: {text}\n") == 10
        stop_daemon(home)
        # A reboot empties tmpfs: the next daemon waits for a human, and says so.
        os.unlink(path)
        assert "one that starts waits for a human" in guard_line()
        doctor = json.loads(cli(home, "paddedcell", "doctor", "--json").stdout)
        row = next(row for row in doctor if row["check"] == "guard")
        assert row["status"] == "warn" and "waits for a human" in row["detail"], row
        pcexec("true")
        assert daemon_pid(home) is not None
        assert "waiting for a human to authenticate" in guard_line()
        assert check_leak(f"log: {PW}\n") == 3  # not checked: nothing could find it
    finally:
        stop_daemon(home)


@pytest.mark.skipif(not sandbox.host_root(), reason="agents of their own uid need a root daemon")
def test_an_agent_of_its_own_unix_user_cannot_read_the_runtime_file(tmp_path):
    """``supervisor.sandbox = "user"`` (no namespaces: the real /dev/shm): 0700 and 0600
    keep the agent's uid out of the directory and the file."""
    closed = pass_mgr_closed_to_others()
    if closed:
        pytest.skip(f"user mode needs dist/pass_mgr where other users reach it ({closed})")
    with world_for_other_uids("pc-guard-user-", 0o755) as (home, ws):
        init_vault(home, PW)
        give_workspace(home, "a1", ws)
        directory = guard_runtime.stamp(str(home))[0][0]
        path = os.path.join(directory, guard_runtime.file_name(str(home)))
        with Daemon(home, PADDEDCELL_SUPERVISOR_SANDBOX="user",
                    PATH=f"{PASS_MGR_DIR}:/usr/bin:/bin") as daemon:
            out = daemon.call("/exec", {"command": f"id -u; cat {path}; ls {directory}; "
                                                   f"cat /proc/{daemon.pid}/root{path}; "
                                                   f"ls /proc/{daemon.pid}/fd; echo DONE",
                                        "agentId": "a1", "agentWorkspace": str(ws),
                                        "awaitResults": True, "timeoutSeconds": 60}
                              )["content"][0]["text"]
        assert int(out.split()[0]) != 0 and "DONE" in out, out
        assert out.count("Permission denied") == 4 and "paddedcell-guard-1" not in out, out


# -- the runtime file itself (a private tmpfs directory per test) ------------------------


@pytest.fixture
def rt(tmp_path, monkeypatch):
    """A vault whose runtime directory lives in a fresh 0700 directory on /dev/shm."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this host")
    base = tempfile.mkdtemp(prefix="pc-guard-test-", dir="/dev/shm")
    directory = os.path.join(base, "paddedcell")
    monkeypatch.setattr(guard_runtime, "candidates", lambda environ=None: [(base, directory, True)])
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)
    init_admin(PW, settings)
    yield settings, directory
    guard.forget()
    shutil.rmtree(base, ignore_errors=True)


def test_the_file_is_private_sealed_bound_and_holds_only_a_filter(rt, tmp_path):
    settings, directory = rt
    home = settings.home_text
    path = os.path.join(directory, guard_runtime.file_name(home))
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    raw = Path(path).read_bytes()
    for marker in (b'"classes"', b'"forms"', b'"verifier"', PW.encode()):
        assert marker not in raw
    paths = admin.AdminPaths(home)
    host, doc = admin.read_host_key(paths), admin.load_admin(paths, admin.read_host_key(paths))
    verifier = crypto.b64d(doc["verifier"])
    lent = guard_runtime.load(home, host, verifier)
    # What it holds is the filter a daemon lends: no window sums, 16-bit digests.
    assert set(lent["weights"]) == {0} and all(len(f[2]) == 4 for f in lent["forms"])
    assert LeakDetector.from_json(lent).contains(f"x {PW} y")  # a filter: no confirm here
    assert guard_runtime.load(home, os.urandom(96), verifier) is None  # another host key
    assert guard_runtime.load(home, host, os.urandom(32)) is None  # another admin.json
    other = tmp_path / "other-home"  # the same bytes under another home's name: refused
    shutil.copy(path, os.path.join(directory, guard_runtime.file_name(str(other))))
    assert guard_runtime.load(str(other), host, verifier) is None
    guard.forget()  # a fresh process: armed from the file, hits confirmed by the KDF
    assert guard_state(settings) == "armed"
    assert guard.detector().contains(f"x {PW} y") and guard.detector().confirm is not None


@pytest.mark.parametrize("spoil", ["symlink", "mode", "file-mode", "hard-link", "owner"])
def test_a_spoiled_directory_or_file_is_refused(rt, tmp_path, spoil):
    settings, directory = rt
    home = settings.home_text
    path = os.path.join(directory, guard_runtime.file_name(home))
    paths = admin.AdminPaths(home)
    host = admin.read_host_key(paths)
    verifier = crypto.b64d(admin.load_admin(paths, host)["verifier"])
    assert guard_runtime.load(home, host, verifier) is not None
    if spoil == "symlink":  # the directory swapped for a link to a copy elsewhere
        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(directory, elsewhere)
        shutil.rmtree(directory)
        os.symlink(elsewhere, directory)
    elif spoil == "mode":
        os.chmod(directory, 0o755)
    elif spoil == "file-mode":
        os.chmod(path, 0o644)
    elif spoil == "hard-link":
        os.link(path, os.path.join(directory, "second-name"))
    else:
        if os.geteuid() != 0:
            pytest.skip("another owner needs root")
        os.chown(directory, 65534, 65534)
    assert guard_runtime.load(home, host, verifier) is None
    guard.forget()
    assert guard_state(settings) == "waiting"
    if spoil in ("symlink", "mode", "owner"):
        with pytest.raises(guard_runtime.Unusable):
            guard_runtime.where()
        assert guard.kept_where(paths).startswith("memory only")


def test_without_tmpfs_the_guard_is_memory_only_and_says_so(tmp_path, monkeypatch):
    """A runtime base on a disk file system is never used: nothing is written anywhere."""
    disk = tmp_path / "disk-runtime"
    disk.mkdir(mode=0o700)
    monkeypatch.setattr(guard_runtime, "candidates",
                        lambda environ=None: [(str(disk), str(disk / "paddedcell"), True)])
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path / "home")}, FAST_KDF)
    try:
        init_admin(PW, settings)
        assert guard_state(settings) == "armed"  # this process, in memory
        assert list(disk.iterdir()) == []
        assert "is not tmpfs" in guard.kept_where(admin.AdminPaths(settings.home_text))
        guard.forget()
        assert guard_state(settings) == "waiting"
    finally:
        guard.forget()


def test_files_of_homes_that_are_gone_are_pruned(rt, tmp_path):
    settings, directory = rt
    gone = config.load({"PADDEDCELL_HOME": str(tmp_path / "gone")}, FAST_KDF)
    init_admin("another admin pw 42", gone)
    names = sorted(os.listdir(directory))
    assert len(names) == 2
    shutil.rmtree(tmp_path / "gone")
    init_admin(PW + "-next", settings, current_password=PW)  # any save prunes
    assert os.listdir(directory) == [guard_runtime.file_name(settings.home_text)]


async def test_the_filter_route_answers_only_its_own_uid_outside_sessions(tmp_path):
    """Past the socket's uid check: the route refuses a foreign or unverified peer, and
    with no session table to check against, everyone."""
    import trio

    from paddedcell.daemon.app import DaemonContext, build_router
    from paddedcell.daemon.http import Request
    from supervisor_helpers import make_settings

    settings = make_settings(tmp_path / "home", daemon__hygiene_check_seconds=3600,
                             supervisor__sandbox="none")
    async with trio.open_nursery() as nursery:
        ctx = DaemonContext(settings, nursery)
        router = build_router(ctx, time.time())
        for uid, pid in ((os.getuid() + 1, os.getpid()), (os.getuid(), None), (None, None)):
            status, answer = await router.dispatch(Request("GET", "/vault/guard/filter", {},
                                                           {}, uid, pid))
            assert status == 403 and "filter" not in answer, (uid, pid, answer)
        status, answer = await router.dispatch(Request("GET", "/vault/guard/filter", {}, {},
                                                       os.getuid(), os.getpid()))
        assert status == 200 and answer == {"guard": "uninitialized"}, answer
        supervisor = ctx.services.pop("supervisor")
        status, _ = await router.dispatch(Request("GET", "/vault/guard/filter", {}, {},
                                                  os.getuid(), os.getpid()))
        assert status == 403
        ctx.services["supervisor"] = supervisor
        nursery.cancel_scope.cancel()


async def test_a_reload_loads_the_runtime_file_without_the_kdf(rt, monkeypatch):
    """``pass_mgr set`` (or any authentication) with a daemon running: the daemon loads the
    file that process just wrote (``POST /vault/guard {reload: true}``) instead of paying
    the admin KDF a second time; without a file for this admin.json it says "waiting"."""
    import trio

    from paddedcell.daemon import routes_vault
    from paddedcell.daemon.app import DaemonContext, build_router
    from paddedcell.daemon.http import Request
    from supervisor_helpers import make_settings

    settings, _directory = rt
    home = settings.home_text
    paths = admin.AdminPaths(home)
    host = admin.read_host_key(paths)
    verifier = crypto.b64d(admin.load_admin(paths, host)["verifier"])
    lent = guard_runtime.load(home, host, verifier)
    monkeypatch.setattr(routes_vault, "arm_guard", lambda *a, **k: pytest.fail("the KDF ran"))
    served = make_settings(Path(home), daemon__hygiene_check_seconds=3600,
                           supervisor__sandbox="none", **{f"vault__{k[6:]}": v
                                                          for k, v in FAST_KDF.items()})
    reload = Request("POST", "/vault/guard", {}, {"reload": True}, os.getuid(), os.getpid())
    async with trio.open_nursery() as nursery:
        router = build_router(DaemonContext(served, nursery), time.time())
        guard_runtime.remove(home)
        guard.forget()  # a daemon started after a reboot
        assert await router.dispatch(reload) == (200, {"guard": "waiting"})
        guard_runtime.save(home, host, verifier, lent)  # what a human's pass_mgr writes
        assert await router.dispatch(reload) == (200, {"guard": "armed"})
        assert guard.detector().contains(f"x {PW} y")
        nursery.cancel_scope.cancel()
