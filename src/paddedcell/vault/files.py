"""Private files: permission checks, atomic replace, and locks on sentinel files.

Theory of operation: every file the vault writes is replaced whole. We write a
temp file in the same directory (``mkstemp``: 0600, ``O_EXCL``), fsync it,
``os.replace`` it over the old one and fsync the directory, so a crash at any
point leaves either the old or the new file. Read-modify-write cycles hold
``flock`` on a separate ``.lock`` file that is never replaced: a lock taken on
the data file itself would stay on the old inode after the replace, and a
second writer would happily lock the new one.

Paths are ``str`` or ``os.PathLike``; this module uses ``os.path`` only, because
``pathlib`` would cost every ``pass_mgr get`` a few milliseconds of imports.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

from .errors import Busy, UnsafePermissions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Union

    Path = Union[str, "os.PathLike[str]"]

TEMP_PREFIX = ".tmp-"


def check_private(path: Path, st: os.stat_result | None = None) -> None:
    """Refuse a file or directory that another user could read, write or own."""
    st = st or os.stat(path)
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    if st.st_uid != os.getuid():
        raise UnsafePermissions(f"refusing {kind} {path}: owned by uid {st.st_uid}, not you; "
                                f"fix with: chown {os.getuid()} {path}")
    if st.st_mode & 0o077:
        want = "700" if kind == "directory" else "600"
        raise UnsafePermissions(f"refusing {kind} {path}: mode {stat.S_IMODE(st.st_mode):03o} "
                                f"lets other users in; fix with: chmod {want} {path}")


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) 0700; refuse an existing loose one.

    Each directory made is fsynced into its parent, so a crash cannot lose a new
    folder (and the file written into it next) after we reported success.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _make_dirs(os.path.abspath(path))
        st = os.stat(path)
    check_private(path, st)
    return path


def _make_dirs(path: str) -> None:
    """``mkdir -p`` with mode 0700, fsyncing the parent of each directory it creates."""
    parent = os.path.dirname(path)
    if parent != path and not os.path.isdir(parent):
        _make_dirs(parent)
    old = os.umask(0o077)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    finally:
        os.umask(old)
    fsync_dir(parent)


def read_private(path: Path) -> bytes:
    """Read a whole file after checking that only we can reach it."""
    with open(path, "rb") as handle:
        check_private(path, os.fstat(handle.fileno()))
        return handle.read()


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers and crashes see old or new, never a mix."""
    import tempfile  # only writers pay for it

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def remove_stale_temps(directory: Path) -> None:
    """Delete temp files a killed writer left behind; call only under the exclusive lock."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(TEMP_PREFIX):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass


class FileLock:
    """``flock`` on a sentinel file, shared or exclusive, with a bounded wait.

    We poll with ``LOCK_NB`` and a short backoff rather than block, so a stuck
    holder turns into a clear :class:`Busy` error instead of a hang; the kernel
    drops the lock when its holder dies, so there are no stale locks to clean.
    """

    def __init__(self, path: Path, *, exclusive: bool, timeout: float):
        self.path = path
        self.exclusive = exclusive
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> "FileLock":
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if self.exclusive or exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            # A reader on a read-only workspace: writers replace files atomically,
            # so reading without the shared lock still sees a whole file.
            return self
        try:
            check_private(self.path, os.fstat(fd))
            mode = fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH
            deadline = time.monotonic() + self.timeout
            delay = 0.0005
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise Busy(f"{self.path} is held by another pass_mgr for over "
                                   f"{self.timeout:g} s; retry, or raise vault.lock_timeout_seconds")
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the description releases the flock
            self._fd = None
