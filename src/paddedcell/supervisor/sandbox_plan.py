"""What an agent command's sandbox shows it: the one plan builder (docs/design.md §1).

Sessions (``Supervisor.start``) and restart rollbacks (``restart/job.py``) both
call :func:`prepare`, so both get the same settings. The plan is an allow-list:

- the system read-only (``SYSTEM_DIRS``; merged-``/usr`` links kept as links) and
  a minimal ``/dev`` (null, zero, full, random, urandom, tty, a fresh ``devpts``);
- the agent's workspace read-write, its ``.paddedcell`` covered by an empty tmpfs;
- a persistent per-agent home, ``PADDEDCELL_HOME/agents/<agent>/home``, as ``$HOME``
  (caches such as ``~/.npm`` and ``~/.cache/pip`` persist; the human's home, its
  ``.bashrc``, ``.ssh`` and ``PATH`` directories are not there);
- private ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``/run/user/UID`` per session
  (size-capped tmpfs, gone with the session: concurrent sessions of one agent do
  not see each other's scratch files or sockets; what must persist goes in the
  workspace or the home);
- PaddedCell's own installation read-only (interpreter, package, ``pass_mgr``);
- the session's channel socket; ``supervisor.sandbox_bind_ro`` / ``sandbox_bind_rw``.

``PADDEDCELL_HOME`` and every registered store are covered wherever they fall
under something bound. Under a root daemon the command runs as the agent's own
unprivileged uid (:func:`agent_ids`); the daemon hands it the home it made for it, and a
workspace only where nothing in it is anyone else's (:func:`hand_over_workspace`; any other
one the uid cannot write is refused: :func:`workspace_unusable`), and its
``/etc/passwd`` and ``/etc/group`` name that uid (:func:`agent_identity`).
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import socket
import stat
import sys
from dataclasses import dataclass
from typing import Callable, Mapping

from . import sandbox as ns
from .sandbox import log
from .spawn import Sandbox, SandboxUnavailable, SpawnError
from .settings import SupervisorSettings

#: Variables that point at the human's sockets or home: not there in the sandbox.
HOST_VARIABLES = ("SSH_AUTH_SOCK", "SSH_AGENT_PID", "DBUS_SESSION_BUS_ADDRESS", "TMUX",
                  "TMUX_PANE", "STY", "WINDOW", "XAUTHORITY", "DISPLAY", "WAYLAND_DISPLAY",
                  "GPG_AGENT_INFO", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
                  "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "TMPDIR", "OLDPWD")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
                   "all_proxy")
NO_PROXY = "localhost,127.0.0.1,::1"
#: The uid range for agents under a root daemon when neither the setting nor
#: /etc/subuid gives one.
DEFAULT_UID_RANGE = (1_500_000_000, 65536)


@dataclass
class Prepared:
    """One command's sandbox: the pre-exec step, its environment, and (proxy mode)
    the supervisor's end of the socketpair the proxy listener arrives on."""

    preexec: Callable[[], None] | None
    env: dict[str, str]
    #: The uid the command runs as outside (the agent's own under a root daemon).
    uid: int = -1
    gid: int = -1
    proxy: socket.socket | None = None
    #: The child's end: close it in the supervisor once the child is spawned.
    proxy_child: socket.socket | None = None
    #: The namespace sandbox's plan (a zygote spare runs it instead of ``preexec``).
    plan: ns.Plan | None = None

    def spawned(self) -> None:
        if self.proxy_child is not None:
            self.proxy_child.close()
            self.proxy_child = None

    def close(self) -> None:
        self.spawned()
        if self.proxy is not None:
            self.proxy.close()
            self.proxy = None


def agent_key(agent_id: str | None) -> str:
    """A directory name for ``agent_id`` (ids that are not plain names are hashed)."""
    if not agent_id:
        return "_local"
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", agent_id):
        return agent_id
    return "x-" + hashlib.sha256(agent_id.encode()).hexdigest()[:32]


def uid_range(settings, subuid: str = "/etc/subuid") -> tuple[int, int]:
    """``(first, count)``: ``supervisor.sandbox_uid_range`` ("START:COUNT"), else
    root's range in /etc/subuid, else ``DEFAULT_UID_RANGE``."""
    text = SupervisorSettings.of(settings).sandbox_uid_range
    if not text:
        try:
            with open(subuid) as f:
                for line in f:
                    parts = line.strip().split(":")
                    if len(parts) == 3 and parts[0] in ("root", "0"):
                        text = f"{parts[1]}:{parts[2]}"
                        break
        except OSError:
            pass
    if not text:
        return DEFAULT_UID_RANGE
    try:
        first, count = (int(part) for part in text.split(":"))
    except ValueError:
        raise SandboxUnavailable(f"supervisor.sandbox_uid_range {text!r} is not START:COUNT; "
                                 "fix it (e.g. \"1500000000:65536\")") from None
    if first < 1000 or count < 1:
        raise SandboxUnavailable(f"supervisor.sandbox_uid_range {text!r} must start at 1000 or "
                                 "above and hold at least one uid")
    return first, count


def agent_ids(settings, agent_id: str | None) -> tuple[int, int]:
    """The unprivileged ``(uid, gid)`` an agent's commands run as under a root daemon:
    ``supervisor.sandbox_user`` for every agent if set, else one uid per agent from
    :func:`uid_range`, recorded under ``PADDEDCELL_HOME/agents`` (first come, first
    served; the same agent always gets the same uid)."""
    user = SupervisorSettings.of(settings).sandbox_user
    if user:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise SandboxUnavailable(f"supervisor.sandbox_user {user!r} does not exist; create "
                                     f"it (useradd --system {user}) or unset the setting") from None
        if entry.pw_uid == 0:
            raise SandboxUnavailable(f"supervisor.sandbox_user {user!r} is root; name an "
                                     "unprivileged user")
        return entry.pw_uid, entry.pw_gid
    first, count = uid_range(settings)
    agents = os.path.join(settings.home_text, "agents")
    record = os.path.join(agents, agent_key(agent_id), "uid")
    try:
        with open(record) as f:
            uid = int(f.read().strip())
        return uid, uid
    except (OSError, ValueError):
        pass
    os.makedirs(os.path.dirname(record), mode=0o700, exist_ok=True)
    taken = os.path.join(agents, ".uids")
    os.makedirs(taken, mode=0o700, exist_ok=True)
    for offset in range(count):
        uid = first + offset
        try:
            fd = os.open(os.path.join(taken, str(uid)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(agent_id or "")
        tmp = f"{record}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(str(uid))
        os.replace(tmp, record)
        return uid, uid
    raise SandboxUnavailable(f"every uid of supervisor.sandbox_uid_range ({first}:{count}) is "
                             "taken by an agent; widen the range")


def agent_home(settings, agent_id: str | None, owner: tuple[int, int] | None) -> str:
    """The agent's persistent home (made on first use; handed to ``owner`` if given)."""
    path = os.path.join(settings.home_text, "agents", agent_key(agent_id), "home")
    if not os.path.isdir(path):
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        os.makedirs(path, mode=0o700, exist_ok=True)
    if owner is not None and os.stat(path).st_uid != owner[0]:
        os.chown(path, *owner)
    return path


def user_name(agent_id: str | None, uid: int, taken: Mapping[str, int]) -> str:
    """A valid user name for an agent's uid: ``agent-<id>`` in lower case, other
    characters as ``-``, at most 32 characters (a longer id is hashed); ``agent-<uid>``
    if the host already has that name for another uid (``taken``: name -> uid)."""
    key = agent_key(agent_id).lower()
    name = "agent-" + re.sub(r"[^a-z0-9_-]", "-", key)
    if len(name) > 32:
        name = "agent-" + hashlib.sha256((agent_id or "").encode()).hexdigest()[:16]
    if taken.get(name, uid) != uid:
        name = f"agent-{uid}"
    return name


def _ids_of(text: str) -> dict[str, int]:
    """name -> id of a passwd or group file's text (lines that do not parse skipped)."""
    found = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[2].isdigit():
            found.setdefault(parts[0], int(parts[2]))
    return found


def identity_texts(passwd: str, group: str, *, agent_id: str | None, uid: int, gid: int,
                   home: str, shell: str = "/bin/sh") -> tuple[str, str | None, str | None]:
    """``(name, passwd, group)``: the host's files plus a line for ``uid`` / ``gid`` where
    the host has none, the uid's home set to ``home`` where it has one (None: the host's
    file will do), and the name the command's uid goes by. Pure: the host's lines are kept as they are (``ls -l`` still
    resolves the system users; the sandbox shows the host's ``/etc`` anyway)."""
    if any(c in home for c in ":\n"):  # would break (or add) a line: no home then
        home = "/nonexistent"
    users, groups = _ids_of(passwd), _ids_of(group)
    by_uid = {v: k for k, v in reversed(list(users.items()))}
    if uid in by_uid:
        name, new_passwd = by_uid[uid], _with_home(passwd, by_uid[uid], home)
    else:
        name = user_name(agent_id, uid, users)
        sep = "" if not passwd or passwd.endswith("\n") else "\n"
        new_passwd = f"{passwd}{sep}{name}:x:{uid}:{gid}:PaddedCell agent:{home}:{shell}\n"
    new_group = None
    if gid not in groups.values():
        group_name = name if name not in groups else f"agent-{gid}"
        sep = "" if not group or group.endswith("\n") else "\n"
        new_group = f"{group}{sep}{group_name}:x:{gid}:\n"
    return name, new_passwd, new_group


def _with_home(passwd: str, name: str, home: str) -> str | None:
    """``passwd`` with ``name``'s home set to ``home`` (None if it already is): ``ssh``
    and others look for ``~/.ssh`` there, not in ``$HOME``, and the host's is hidden."""
    lines = passwd.splitlines(keepends=True)
    for index, line in enumerate(lines):
        fields = line.rstrip("\n").split(":")
        if fields[0] == name and len(fields) == 7:
            if fields[5] == home:
                return None
            fields[5] = home
            lines[index] = ":".join(fields) + ("\n" if line.endswith("\n") else "")
            return "".join(lines)
    return None


def _write_if_changed(path: str, text: str) -> None:
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)  # a session that bound the old file keeps it


def agent_identity(settings, agent_id: str | None, uid: int, gid: int, home: str,
                   host_etc: str = "/etc") -> tuple[str, dict[str, str]]:
    """The name ``uid`` goes by in its sandbox and the files to bind over the host's
    ``/etc/passwd`` and ``/etc/group`` there (``{"/etc/passwd": path, ...}``, only where
    the host's file lacks the id). Without a line for its uid ``ssh``, ``whoami``,
    ``getpass.getuser()`` and Node's ``os.userInfo()`` refuse to run. Written per agent
    under ``PADDEDCELL_HOME/agents/<agent>/etc`` (hidden from every sandbox), only when
    the host's files changed; remembered per process while the host's files and the
    copies stay the same (a session start then costs four ``stat`` calls, not ~1 ms)."""
    try:
        host = tuple(_signature(os.path.join(host_etc, n)) for n in ("passwd", "group"))
    except OSError:
        host = None
    key = (settings.home_text, agent_id, uid, gid, home, host_etc)
    known = _IDENTITIES.get(key)
    if host is not None and known and known[0] == host:
        try:
            if all(_signature(path) == sig for path, sig in known[3]):
                return known[1], dict(known[2])
        except OSError:
            pass
    name, binds = _agent_identity(settings, agent_id, uid, gid, home, host_etc)
    if host is not None:
        try:
            copies = tuple((path, _signature(path)) for path in binds.values())
            _IDENTITIES[key] = (host, name, dict(binds), copies)
        except OSError:
            pass
    return name, binds


#: agent_identity's answers: key -> (host files' signature, name, binds, copies' signatures).
_IDENTITIES: dict = {}


def _signature(path: str) -> tuple[int, int, int, bool]:
    st = os.lstat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size, stat.S_ISLNK(st.st_mode)


def _agent_identity(settings, agent_id: str | None, uid: int, gid: int, home: str,
                    host_etc: str) -> tuple[str, dict[str, str]]:
    texts = []
    for name in ("passwd", "group"):
        path = os.path.join(host_etc, name)
        try:
            with open(path) as f:
                texts.append(f.read() if not os.path.islink(path) else None)
        except OSError:
            texts.append(None)
    if texts[0] is None or texts[1] is None:  # a link or no file: leave the host's
        return _known_name(uid), {}
    name, passwd, group = identity_texts(texts[0], texts[1], agent_id=agent_id, uid=uid,
                                         gid=gid, home=home)
    binds = {}
    if passwd is not None or group is not None:
        etc = os.path.join(settings.home_text, "agents", agent_key(agent_id), "etc")
        os.makedirs(etc, mode=0o755, exist_ok=True)
        for target, text in (("passwd", passwd), ("group", group)):
            if text is not None:
                path = os.path.join(etc, target)
                _write_if_changed(path, text)
                binds[f"/etc/{target}"] = path
    return name, binds


def _known_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


_within = ns.within


#: System trees a workspace never is, nor lies in: the daemon hands none of it to an agent.
SYSTEM_TREES = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
                "/proc", "/sys", "/dev", "/run", "/var", "/opt", "/snap")
#: ... except these, where anyone may make a directory of their own.
SYSTEM_TREE_EXCEPTIONS = ("/var/tmp",)


def hand_over_workspace(workspace: str, owner: tuple[int, int], settings) -> bool:
    """Give a root daemon's agent a workspace that is plainly for it: the tree is chowned
    to the agent's uid when nothing in it belongs to anyone but the daemon and that uid,
    and it is no system tree, holds no user's home, no ``PADDEDCELL_HOME`` and no part of
    PaddedCell. ``.paddedcell`` (the store) stays the daemon's, as does a file with more
    than one name (a hard link could be another file's); symlinks are chowned, never
    followed. Anything else keeps every owner (the caller then refuses the workspace if
    the uid cannot write it). A first-time root user's workspace (made by ``mkdir``, by
    the demo, by OpenClaw as root) works without a step; ``/srv/shared`` with a
    colleague's file in it is never given away. Returns whether it was handed over."""
    st = os.lstat(workspace)
    if st.st_uid == owner[0]:
        return True
    daemon_uid = os.geteuid()
    if st.st_uid != daemon_uid or not stat.S_ISDIR(st.st_mode) or workspace == "/":
        return False
    if any(_within(workspace, t) for t in SYSTEM_TREES) and not any(
            _within(workspace, t) for t in SYSTEM_TREE_EXCEPTIONS):
        return False
    home = os.path.realpath(settings.home_text)
    homes = {os.path.realpath(entry.pw_dir) for entry in pwd.getpwall() if entry.pw_dir}
    own = [os.path.realpath(p) for p in _installation()]
    if workspace in homes or any(_within(p, workspace) for p in [home, *homes, *own]):
        return False
    ours = (daemon_uid, owner[0])
    for path, _, name, entry in _entries_below(workspace):
        if entry.st_uid not in ours:
            log.warning("sandbox: the agent workspace %s holds %s, owned by uid %d: it is "
                        "not handed to the agent's uid %d", workspace, os.path.join(path, name),
                        entry.st_uid, owner[0])
            return False
    log.info("sandbox: handing the workspace %s to uid %d (agent commands run as it)",
             workspace, owner[0])
    for _, dir_fd, name, entry in _entries_below(workspace):
        if entry.st_uid != daemon_uid:
            continue  # the agent's already; or another uid's that appeared since the check: kept
        if stat.S_ISDIR(entry.st_mode) or stat.S_ISLNK(entry.st_mode) or (
                stat.S_ISREG(entry.st_mode) and entry.st_nlink == 1):
            os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
    os.lchown(workspace, *owner)
    return True


def _entries_below(workspace: str):
    """``(directory path, its fd, name, its lstat)`` of everything below ``workspace`` but its
    ``.paddedcell``, walked and named through directory descriptors (``os.fwalk``): a
    directory the agent's uid swaps for a symlink meanwhile is never followed, so a
    chown meant for the workspace cannot land on ``/etc``."""
    for top, dirs, files, fd in os.fwalk(workspace):
        if top == workspace and ".paddedcell" in dirs:
            dirs.remove(".paddedcell")
        for name in dirs + files:
            try:
                yield top, fd, name, os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue  # gone meanwhile


def workspace_unusable(workspace: str, uid: int, gid: int,
                       stat_of: Callable[[str], os.stat_result] = os.stat) -> str | None:
    """Why ``uid``/``gid`` (no other groups) cannot work in ``workspace``, or None.

    Asked where :func:`hand_over_workspace` would not give the workspace away (issue 19: a
    config or a path an agent got accepted could name ``/etc`` or another user's tree): the
    workspace must already let the uid list, enter and write it (``rwx`` by its owner, group or other
    bits; ACLs are not read). The directories above it do not count: inside namespaces
    the sandbox's own root leads to it, and without them the command starts in it. Pure
    but for ``stat_of``; said as the one-line fix an operator needs."""
    st = stat_of(workspace)
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    if (st.st_mode >> shift) & 0o7 == 0o7:
        return None
    return (f"the agent's uid {uid} cannot write its workspace {workspace} (mode "
            f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}) and the daemon gives an agent "
            f"no system tree nor one holding other users' files: give the agent that directory "
            f"(chown {uid}:{gid} {workspace}; -R for files it must change) or name a workspace it owns")


def _installation() -> list[str]:
    """PaddedCell's own files: the interpreter's prefixes, the package, ``pass_mgr``."""
    import paddedcell

    paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(paddedcell.__file__))]
    found = shutil.which("pass_mgr") or os.path.join(os.path.dirname(sys.executable), "pass_mgr")
    if os.path.exists(found):
        paths.append(os.path.dirname(os.path.realpath(found)))
    return paths


def unreachable(paths, uid: int, gid: int, stat_of: Callable[[str], os.stat_result] = os.stat
                ) -> str | None:
    """Why ``uid``/``gid`` (no other groups) cannot use one of ``paths``, or None.

    Every directory on the way must let it pass (``x``); a directory at the end must
    also be listable (``r``), a file readable, and an owner-executable file executable.
    Pure but for ``stat_of``. Said as the one-line fix an operator needs."""
    for path in paths:
        parts = [p for p in os.path.normpath(path).split("/") if p]
        for depth in range(len(parts) + 1):
            step = "/" + "/".join(parts[:depth])
            try:
                st = stat_of(step)
            except OSError:
                break  # gone: nothing to reach
            shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
            rights = (st.st_mode >> shift) & 0o7
            last = depth == len(parts)
            if stat.S_ISDIR(st.st_mode):
                need = 0o5 if last else 0o1
            else:
                need = 0o4 | (0o1 if st.st_mode & stat.S_IXUSR else 0)
            if rights & need != need:
                return (f"the agents' uid {uid} cannot reach {path}: {step} is mode "
                        f"{stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}; install "
                        "PaddedCell where every user can read it (e.g. a virtualenv under "
                        f"/opt) or open that directory to them (chmod o+rx {step})")
    return None


def agent_tools(environ_path: str) -> list[str]:
    """What an agent's command runs of PaddedCell outside a sandbox: the ``pass_mgr`` its
    PATH finds (else the one beside this interpreter) and, for a script, its interpreter."""
    found = shutil.which("pass_mgr", path=environ_path) or os.path.join(
        os.path.dirname(sys.executable), "pass_mgr")
    if not os.path.exists(found):
        return []
    tools = [os.path.realpath(found)]
    try:
        with open(tools[0], "rb") as f:
            first = f.readline(4096)
    except OSError:
        return tools
    if first.startswith(b"#!"):
        words = first[2:].decode(errors="replace").split()
        if words and words[0].startswith("/"):
            tools.append(os.path.realpath(words[0]))
    return tools


def _paths(setting) -> list[str]:
    if isinstance(setting, str):
        items = [p for p in setting.split(":")]
    else:
        items = list(setting or ())
    return [os.path.normpath(os.path.abspath(os.path.expanduser(p))) for p in items if p]


def _depth(path: str) -> int:
    return 0 if path == "/" else path.rstrip("/").count("/")


def mounts(*, workspace: str | None, home: str | None, channel: str | None, runtime_uid: int,
           tmp_options: str, hidden: tuple[str, ...] = (), extra_ro: list[str] = (),
           extra_rw: list[str] = ()) -> tuple[ns.Mount, ...]:
    """Every entry of the new root, parents before what they hold."""
    entries = list(ns.base_mounts(runtime_uid, tmp_options))
    bound = [e.target for e in entries if e.kind in ("ro", "rw")]

    def bind(path: str, kind: str) -> None:
        path = os.path.normpath(path)
        if any(e.target == path for e in entries) or not os.path.exists(path):
            return
        entries.append(ns.Mount(path, kind, path))
        bound.append(path)

    for path in _installation():
        if not any(_within(path, b) for b in bound):
            bind(path, "ro")
    for path in extra_ro:
        bind(path, "ro")
    for path in [p for p in (workspace, home) if p] + list(extra_rw):
        bind(path, "rw")
    covered = list(hidden)
    if workspace and os.path.isdir(os.path.join(workspace, ".paddedcell")):
        covered.append(os.path.join(workspace, ".paddedcell"))
    for path in covered:
        inside_another = any(other != path and _within(path, other) for other in covered)
        if os.path.isdir(path) and any(_within(path, b) for b in bound) and not inside_another:
            entries.append(ns.Mount(path, "tmpfs", "mode=0700,size=64k"))
    if channel:
        entries.append(ns.Mount(channel, "rw", channel))
    return tuple(sorted(entries, key=lambda e: _depth(e.target)))


def session_environment(env: Mapping[str, str], *, home: str | None, runtime_uid: int,
                        network: str) -> dict[str, str]:
    """The command's environment inside: its own home, scratch and runtime dirs, no
    pointers to the human's sockets, and the session proxy in proxy mode."""
    out = {k: v for k, v in env.items() if k not in HOST_VARIABLES}
    if home:
        out["HOME"] = home
    out["TMPDIR"] = "/tmp"
    out["XDG_RUNTIME_DIR"] = f"/run/user/{runtime_uid}"
    if network != "host":
        for name in PROXY_VARIABLES + ("NO_PROXY", "no_proxy"):
            out.pop(name, None)
    if network == "proxy":
        url = f"http://127.0.0.1:{ns.PROXY_PORT}"
        for name in PROXY_VARIABLES:
            out[name] = url
        out["NO_PROXY"] = out["no_proxy"] = NO_PROXY
    return out


def refuse_outside(workdir: str, visible: list[str], workspace: str) -> None:
    """A work directory must be something the sandbox shows (or its empty ``/tmp``)."""
    if workdir != "/tmp" and not any(_within(workdir, v) for v in visible):
        raise SpawnError(f"workdir {workdir} is outside the sandbox, which shows the agent "
                         f"workspace {workspace}; run the command there (or add the path to "
                         "supervisor.sandbox_bind_ro / supervisor.sandbox_bind_rw)")


def prepare(settings, sandbox: Sandbox, *, agent_id: str | None, workspace: str | None,
            workdir: str, argv: list[str], env: Mapping[str, str],
            channel: str | None = None, run_as: tuple[int, int] | None = None,
            ca_bundle: str | None = None) -> Prepared:
    """The sandbox of one agent command, as ``sandbox`` (from the settings) says.

    ``run_as``: under a root daemon, these ids instead of the agent's (a restart
    rollback runs as its script's owner). Raises ``SandboxUnavailable`` (one line with
    the fix) where the settings ask for a sandbox this host cannot give, ``SpawnError``
    for a work directory outside it.
    """
    mode = sandbox.mode()
    if mode not in ("namespaces", "user"):
        return Prepared(None, dict(env))
    root = ns.host_root()
    owner = (run_as or agent_ids(settings, agent_id)) if root else None
    workdir = os.path.normpath(os.path.abspath(workdir))
    if owner is not None and run_as is None and workspace and os.path.isdir(workspace):
        workspace = os.path.normpath(os.path.abspath(workspace))
        why = (None if hand_over_workspace(workspace, owner, settings)
               else workspace_unusable(workspace, *owner))
        if why:
            raise SandboxUnavailable(f"agent commands refused: {why}")
    workspace = os.path.normpath(os.path.abspath(workspace or workdir))
    home = agent_home(settings, agent_id, owner if run_as is None else None)
    if channel and owner is not None:
        os.chown(channel, *owner)
    if mode == "user":
        uid, gid = owner
        why = unreachable(agent_tools(env.get("PATH") or os.defpath), uid, gid)
        if why:
            raise SandboxUnavailable(f"agent commands refused: {why}")
        _open_channel_path(settings)
        name, identity = agent_identity(settings, agent_id, uid, gid, home)
        out = session_environment(env, home=home, runtime_uid=uid, network="host")
        out.pop("XDG_RUNTIME_DIR", None)  # no private /run/user without namespaces
        out["USER"] = out["LOGNAME"] = name
        binds = tuple(identity.items())
        return Prepared(lambda: ns.enter_as_user(uid, gid, sandbox.processes, binds),
                        out, uid, gid)
    uid, gid = owner if owner is not None else (os.getuid(), os.getgid())
    name, identity = agent_identity(settings, agent_id, uid, gid, home)
    limits = SupervisorSettings.of(settings)
    extra_ro, extra_rw = _paths(limits.sandbox_bind_ro), _paths(limits.sandbox_bind_rw)
    refuse_outside(workdir, [workspace, home, *extra_ro, *extra_rw, *ns.SYSTEM_DIRS],
                   workspace)
    tmp_options = f"size={limits.sandbox_tmp_bytes}"
    if owner is not None:
        tmp_options += f",uid={uid},gid={gid}"
    home_dir = settings.home_text
    entries = mounts(workspace=workspace, home=home, channel=channel, runtime_uid=uid,
                     tmp_options=tmp_options,
                     hidden=(home_dir, *ns.hidden_directories(home_dir)),
                     extra_ro=extra_ro, extra_rw=extra_rw)
    proxy = proxy_child = None
    if sandbox.network == "proxy":
        proxy, proxy_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if "/etc" in [e.target for e in entries if e.kind == "ro"]:
        entries = tuple(sorted((*entries, *(ns.Mount(t, "ro", p) for t, p in identity.items())),
                               key=lambda e: _depth(e.target)))
    out = session_environment(env, home=home, runtime_uid=uid, network=sandbox.network)
    if owner is not None or identity:
        out["USER"] = out["LOGNAME"] = name
    if ca_bundle and sandbox.network == "proxy":
        # The session's egress CA bundle (docs/design.md §6.7): read-only at its own
        # path, named by the CA variables.
        from ..egress.session import ca_environment

        entries = tuple(sorted((*entries, ns.Mount(ca_bundle, "ro", ca_bundle)),
                               key=lambda e: _depth(e.target)))
        out.update(ca_environment(ca_bundle))
    own = [p for p in (workspace, home, channel, ca_bundle) if p]
    shared = ns.shareable(e for e in entries if e.target not in identity
                          and not any(_within(e.target, p) for p in own))
    plan = ns.Plan(mounts=entries, workdir=workdir, network=sandbox.network,
                   proxy_fd=proxy_child.fileno() if proxy_child else None, uid=uid, gid=gid,
                   switch_user=owner is not None, max_processes=sandbox.processes,
                   argv=tuple(argv), env=out, shared=shared)
    return Prepared(lambda: ns.enter(plan), out, uid, gid, proxy, proxy_child, plan)


def _open_channel_path(settings) -> None:
    """Without namespaces the agent's uid reaches its channel socket through the home:
    let it traverse (not list) ``PADDEDCELL_HOME``, ``run`` and ``run/sessions``."""
    home = settings.home_text
    for path in (home, os.path.join(home, "run"), os.path.join(home, "run", "sessions")):
        try:
            mode = os.stat(path).st_mode & 0o777
            if mode & 0o011 != 0o011:
                os.chmod(path, mode | 0o011)
        except OSError:
            pass
