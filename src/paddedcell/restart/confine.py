"""The files a restart job from an agent session may touch: the agent's own, as the agent.

The guarantee: a path a session hands the daemon (``job.log``, ``job.rollback``
of ``POST /query-restart``) reaches only a regular file inside that agent's
workspace, never under ``PADDEDCELL_HOME`` or any store directory, and the
daemon opens it with no more rights than the session has. The daemon appends
to ``job.log`` for minutes after the request, so one check at request time is
not enough: the agent could swap a directory for a symlink in between.
Every open therefore walks the path again, one component at a time with
``openat(O_NOFOLLOW)`` from ``/`` (no symlink is followed anywhere, not even
in the workspace's own path; the daemon walks to the workspace, the session's
uid from there on), compares every directory it passes with the
forbidden ones by device and inode (bind mounts and renames do not help), and
takes the final file only when it is a regular file with one link owned by
the session's uid (a hard link to the host key is refused, a FIFO cannot
block the daemon).

When the daemon is root and the session runs as another uid (a per-agent
uid), the walk inside the workspace runs in a forked child that drops to the
session's uid and gid first, starting at the workspace descriptor the daemon
opened (so a 0700 directory above the workspace, e.g. ``/root``, is no
obstacle), and hands the descriptor back over a socket pair (``SCM_RIGHTS``):
the file is created as the session's uid and permission checks inside the
workspace are the session's, not root's.

Options weighed: ``realpath`` then ``open`` (a race), ``openat2(RESOLVE_BENEATH
| RESOLVE_NO_SYMLINKS)`` (one call, but Linux ≥ 5.6 and not in Python's
``os``), a helper binary run as the agent (an exec per log line). The walk is
portable to every kernel we run on and costs microseconds, so we do the walk.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from dataclasses import dataclass
from typing import Any, Callable

from ..session.protocol import SESSION_JOB_FIELD as SESSION_FIELD  # bound by session.bind

#: ``open`` flags of the two uses: the job log (append, create) and the rollback (read).
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT
READ = os.O_RDONLY


class ConfinementError(ValueError):
    """A path a session gave is not its own to give; ``str()`` is one line (HTTP 403)."""


@dataclass(frozen=True, slots=True)
class Confinement:
    """Where a session's job files may be, and as whom they are opened."""

    #: The agent's workspace with every symlink resolved (when the job was accepted).
    workspace: str
    uid: int
    gid: int
    #: Directories no file of the job may be under: PADDEDCELL_HOME and the stores.
    forbidden: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"workspace": self.workspace, "uid": self.uid, "gid": self.gid,
                "forbidden": list(self.forbidden)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Confinement":
        return cls(str(data["workspace"]), int(data["uid"]), int(data["gid"]),
                   tuple(str(p) for p in data.get("forbidden", ())))


def for_session(settings: Any, agent_id: str, workspace: str, uid: int,
                gid: int) -> Confinement:
    """The confinement of ``agent_id``'s session: its workspace, minus the home and stores."""
    from ..vault import admin
    from ..vault.settings import VaultSettings
    from ..vault.store import locate

    if not workspace or not os.path.isabs(workspace):
        raise ConfinementError("this session has no agent workspace, so a restart job from it "
                               "may name no files; run safe-restart outside the session")
    forbidden = {settings.home_text, os.path.realpath(settings.home_text)}
    stores = [str(p) for p in admin.known_stores(admin.AdminPaths(settings.home_text))]
    try:
        stores.append(locate(VaultSettings.of(settings).path_template, agent_id,
                             workspace).directory)
    except Exception:  # an agent id the vault refuses has no store to protect
        pass
    for store in stores:
        forbidden.update((os.path.normpath(store), os.path.realpath(store)))
    return Confinement(os.path.realpath(workspace), uid, gid, tuple(sorted(forbidden)))


def components(path: str, confinement: Confinement, workspace_as_given: str = "") -> list[str]:
    """The names from ``/`` to the file (workspace realpath, then the path inside it);
    raises ConfinementError for a path outside the workspace or under a forbidden one.
    Pure: no file is touched."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ConfinementError(f"{path!r} is not an absolute path")
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts) or "\0" in path:
        raise ConfinementError(f"{path} has '.' or '..' in it; give the plain path")
    for root in {confinement.workspace, workspace_as_given} - {""}:
        root_parts = [p for p in root.split("/") if p]
        if parts[:len(root_parts)] == root_parts and len(parts) > len(root_parts):
            inside = parts[len(root_parts):]
            break
    else:
        raise ConfinementError(f"{path} is outside the agent's workspace "
                               f"({workspace_as_given or confinement.workspace}); a restart job "
                               "from a session may name only files inside it")
    full = [p for p in confinement.workspace.split("/") if p] + inside
    for banned in confinement.forbidden:
        banned_parts = [p for p in banned.split("/") if p]
        if full[:len(banned_parts)] == banned_parts:
            raise ConfinementError(f"{path} is under {banned}, which no session may write or "
                                   "run; name a file elsewhere in the workspace")
    return full


def open_confined(path: str, confinement: Confinement, flags: int,
                  workspace_as_given: str = "") -> int:
    """A descriptor for ``path`` under ``confinement`` (see the module doc); the caller
    closes it. Raises ConfinementError for a refused path, OSError for a missing one."""
    names = components(path, confinement, workspace_as_given)
    banned = _forbidden_ids(confinement)
    depth = len([p for p in confinement.workspace.split("/") if p])
    # The way to the workspace is walked by the daemon (a root daemon's agent may not
    # search a 0700 directory above its workspace, e.g. /root), inside it as the session.
    workspace = _descend(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC),
                         names[:depth], banned)
    try:
        def walk() -> int:
            directory = _descend(os.dup(workspace), names[depth:-1], banned)
            try:
                return _open_file(directory, names, flags, confinement)
            finally:
                os.close(directory)

        if os.geteuid() == 0 and (confinement.uid, confinement.gid) != (0, 0):
            return _as_user(confinement.uid, confinement.gid, walk)
        return walk()
    finally:
        os.close(workspace)


def _forbidden_ids(confinement: Confinement) -> set[tuple[int, int]]:
    ids = set()
    for banned in confinement.forbidden:
        try:
            st = os.stat(banned)
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    return ids


def _descend(directory: int, names: list[str], banned: set[tuple[int, int]]) -> int:
    """From ``directory`` (taken over) down ``names`` by ``openat(O_NOFOLLOW)``; the last
    directory's O_PATH descriptor. None of them may be a forbidden directory."""
    try:
        for name in names:
            try:
                following = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
                                    | os.O_CLOEXEC, dir_fd=directory)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ConfinementError(f"{name} on the way to the file is a symlink or not a "
                                           "directory; a restart job's files are opened without "
                                           "following symlinks") from None
                raise
            os.close(directory)
            directory = following
            st = os.fstat(directory)
            if (st.st_dev, st.st_ino) in banned:
                raise ConfinementError("the file is under PADDEDCELL_HOME or a store "
                                       "directory, which no session may write or run")
    except BaseException:
        os.close(directory)
        raise
    return directory


def _open_file(directory: int, names: list[str], flags: int, confinement: Confinement) -> int:
    """``names[-1]`` in ``directory``, kept only if it is a regular file with one link
    owned by the session's uid."""
    try:
        fd = os.open(names[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                     | os.O_CLOEXEC, 0o600, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfinementError(f"{names[-1]} is a symlink; a restart job's files are "
                                   "opened without following symlinks") from None
        raise
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_nlink != 1:
        problem = "has other hard links"
    elif st.st_uid != confinement.uid:
        problem = f"belongs to uid {st.st_uid}, not the session's {confinement.uid}"
    if problem:
        os.close(fd)
        raise ConfinementError(f"{'/'.join([''] + names)} {problem}; a restart job may only "
                               "use the agent's own regular files")
    return fd


def _as_user(uid: int, gid: int, walk: Callable[[], int]) -> int:
    """``walk()`` in a forked child running as ``uid``/``gid``; its descriptor comes back."""
    from .. import orphans

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        pid = os.fork()
        if pid == 0:  # the child: syscalls only, then _exit
            code = 1
            try:
                ours.close()
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
                try:
                    fd = walk()
                except ConfinementError as exc:
                    theirs.send(b"C" + str(exc).encode("utf-8", "replace")[:4000])
                except OSError as exc:
                    theirs.send(b"O" + str(exc.errno or 0).encode() + b" "
                                + (exc.strerror or "error").encode("utf-8", "replace")[:4000])
                else:
                    socket.send_fds(theirs, [b"F"], [fd])
                code = 0
            finally:
                os._exit(code)
        orphans.claim(pid)
        theirs.close()
        try:
            message, fds, _flags, _addr = socket.recv_fds(ours, 8192, 1)
        finally:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            orphans.release(pid)
    finally:
        ours.close()
        try:
            theirs.close()
        except OSError:
            pass
    if message[:1] == b"F" and fds:
        return fds[0]
    for fd in fds:
        os.close(fd)
    if message[:1] == b"C":
        raise ConfinementError(message[1:].decode("utf-8", "replace"))
    if message[:1] == b"O":
        number, _, text = message[1:].decode("utf-8", "replace").partition(" ")
        raise OSError(int(number) if number.isdigit() else 0, text)
    raise OSError(errno.EIO, "the helper that opens the file as the session's user failed")
