"""Where the armed admin-password guard waits between daemon starts: a sealed file on tmpfs.

The guard lives in memory (``vault/guard.py``); a daemon that restarts — an on-demand one
stops when idle — would hold nothing until a human authenticates again. So every process a
human gives the password to also leaves the detector's *filter* (``LeakDetector.filter_json``:
``L + 16`` bits per form; a hit is confirmed by the admin KDF, as in a foreground
``pcexec``) in one runtime file, which a daemon loads at start.

Nothing offline: the file is on tmpfs (gone at reboot and, for ``/run/user/UID``, at
logout), never under ``PADDEDCELL_HOME`` nor in its backups. The directory is, in order,
``$XDG_RUNTIME_DIR/paddedcell`` and ``/run/user/UID/paddedcell`` where that base is ours and
tmpfs (the kernel's type of its mount, not the path), else ``/dev/shm/paddedcell-UID``; 0700, owned by the
uid, opened without following links (a squatted, linked or widened one is refused, and the
guard stays memory-only, said by ``admin status``). One file per home, named by a hash of
its real path, 0600, written by rename; sealed (AES-GCM) under a key derived from the host
key with its own label and bound to the home's path; it names admin.json's verifier, and a
filter for another password is dropped. Sessions never see it: their sandbox mounts private
``/dev/shm``, ``/tmp`` and ``/run/user/UID`` and no ``/run``; an agent of its own Unix user
meets 0700/0600. A same-uid process outside every sandbox that reads it live holds the host
key too, and could as well read a daemon's memory: it gains a filter, never a full test.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import stat

from . import crypto
from .errors import VaultError

#: The file systems that live in memory only (``statfs`` magics 0x01021994, 0x858458f6).
IN_MEMORY = ("tmpfs", "ramfs")
_FORMAT = "paddedcell-guard-1"
_LABEL = b"paddedcell guard runtime file v1"
_SUFFIX = ".guard"
_MAX_FILE_BYTES = 1 << 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Unusable(VaultError):
    """No runtime directory can hold the file: the guard stays in memory only (why)."""


def _fs_type(fd: int) -> str:
    """The file system type of ``fd``'s mount, from the kernel: its ``mnt_id``
    (``/proc/self/fdinfo``) looked up in ``/proc/self/mountinfo`` — the superblock's type,
    as ``statfs``'s magic says it, not a guess from the path (``os.statvfs`` has no type,
    and ctypes is not bundled in pass_mgr: its bootstrap would import it at every start)."""
    with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
        mount = next((line.split()[1] for line in info if line.startswith(b"mnt_id:")), None)
    if mount is None:
        return "unknown"
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            fields = line.split()
            if fields[:1] == [mount] and b"-" in fields:
                return fields[fields.index(b"-", 6) + 1].decode("ascii", "replace")
    return "unknown"


def _in_memory(fd: int) -> bool:
    return _fs_type(fd) in IN_MEMORY


def candidates(environ=None) -> list[tuple[str, str, bool]]:
    """(base, directory, base must be ours) in the order tried."""
    environ = os.environ if environ is None else environ
    uid = os.geteuid()
    found: list[tuple[str, str, bool]] = []
    for base in (environ.get("XDG_RUNTIME_DIR") or "", f"/run/user/{uid}"):
        if base.startswith("/") and all(os.path.normpath(base) != b for b, _, _ in found):
            base = os.path.normpath(base)
            found.append((base, os.path.join(base, "paddedcell"), True))
    found.append(("/dev/shm", f"/dev/shm/paddedcell-{uid}", False))
    return found


def _checked(fd: int, what: str, check) -> int:
    """``fd`` once ``check(os.fstat(fd))`` passed and it is on tmpfs; closed otherwise."""
    try:
        check(os.fstat(fd))
        if not _in_memory(fd):
            raise Unusable(f"{what} is not tmpfs")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_base(base: str, own: bool) -> int:
    def check(st: os.stat_result) -> None:
        if own and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
            raise Unusable(f"{base} is not a private directory of uid {os.geteuid()}")
        if not own and not st.st_mode & stat.S_ISVTX and st.st_mode & 0o022:
            raise Unusable(f"{base} is writable by others without the sticky bit")

    return _checked(os.open(base, _DIR_FLAGS), base, check)


def _open_dir(base: str, directory: str, own: bool, *, create: bool) -> int:
    """Our 0700 directory under ``base``, opened: never through a link, never one another
    uid made or widened."""
    base_fd = _open_base(base, own)
    name = os.path.basename(directory)
    try:
        made = False
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=base_fd)
                made = True
            except FileExistsError:
                pass
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=base_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP or exc.errno == errno.ENOTDIR:
                raise Unusable(f"{directory} is not a directory (a link?): remove it") from None
            raise
    finally:
        os.close(base_fd)

    def check(st: os.stat_result) -> None:
        if st.st_uid != os.geteuid():
            raise Unusable(f"{directory} is owned by uid {st.st_uid}, not {os.geteuid()}: "
                           "remove it")
        if made and stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # a umask that took the owner's bits
        elif stat.S_IMODE(st.st_mode) != 0o700:
            raise Unusable(f"{directory} has mode {stat.S_IMODE(st.st_mode):o}, not 700: "
                           "remove it")

    return _checked(fd, directory, check)


def file_name(home: str) -> str:
    """One file per ``PADDEDCELL_HOME``, named by a hash of its real path."""
    return hashlib.sha256(os.path.realpath(home).encode("utf-8", "surrogateescape")
                          ).hexdigest()[:32] + _SUFFIX


def _key(host_key: bytes) -> bytes:
    return hmac.new(host_key, _LABEL, hashlib.sha256).digest()


def _aad(home: str) -> bytes:
    return crypto.aad("guard-runtime", hashlib.sha256(
        os.path.realpath(home).encode("utf-8", "surrogateescape")).hexdigest())


def where(environ=None) -> str:
    """The directory a save would use (for ``admin status``); Unusable says why none."""
    reasons = []
    for base, directory, own in candidates(environ):
        try:
            os.close(_open_dir(base, directory, own, create=False))
            return directory
        except FileNotFoundError:
            try:
                os.close(_open_base(base, own))
                return directory  # made at the first save
            except FileNotFoundError:
                continue
            except (OSError, Unusable) as exc:
                reasons.append(str(exc))
        except (OSError, Unusable) as exc:
            reasons.append(str(exc))
    raise Unusable("; ".join(reasons) or "no tmpfs runtime directory")


def save(home: str, host_key: bytes, verifier: bytes, filter_json: dict) -> str:
    """Seal the filter for ``home`` into the first usable directory; its path."""
    body = json.dumps({"verifier": crypto.b64e(verifier), "filter": filter_json},
                      separators=(",", ":")).encode("ascii")
    head = json.dumps({"format": _FORMAT, "home": os.path.realpath(home)}).encode() + b"\n"
    data = head + json.dumps(crypto.seal(_key(host_key), body, _aad(home))).encode("ascii")
    reasons = []
    for base, directory, own in candidates():
        try:
            fd = _open_dir(base, directory, own, create=True)
        except FileNotFoundError:
            continue
        except (OSError, Unusable) as exc:
            reasons.append(str(exc))
            continue
        try:
            _prune(fd)
            name = file_name(home)
            temp = f".{name}.{os.getpid()}.tmp"
            out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o600, dir_fd=fd)
            try:
                os.write(out, data)
            finally:
                os.close(out)
            os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
            return os.path.join(directory, name)
        except OSError as exc:
            reasons.append(f"{directory}: {exc.strerror or exc}")
        finally:
            os.close(fd)
    raise Unusable("; ".join(reasons) or "no tmpfs runtime directory")


def _prune(dir_fd: int) -> None:
    """Remove the files of homes that no longer have an admin.json (a deleted home, a
    test's): a home's file is rewritten at every authentication, so few are ever kept."""
    for name in os.listdir(dir_fd):
        if not name.endswith(_SUFFIX) and not name.endswith(".tmp"):
            continue
        try:
            if name.startswith("."):  # a writer's temp: gone when the writer is
                pid = name.rsplit(".", 2)[-2]
                gone = not pid.isdigit() or not os.path.exists(f"/proc/{pid}")
            else:
                head = _read(dir_fd, name).split(b"\n", 1)[0]
                home = json.loads(head).get("home")
                gone = not isinstance(home, str) or not os.path.lexists(
                    os.path.join(home, "vault", "admin.json"))
            if gone:
                os.unlink(name, dir_fd=dir_fd)
        except (OSError, ValueError, AttributeError, Unusable):
            continue


def _read(dir_fd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                 dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1
                or st.st_mode & 0o077 or st.st_size > _MAX_FILE_BYTES):
            raise Unusable(f"{name} is not a private file of uid {os.geteuid()}")
        return os.read(fd, _MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)


def stamp(home: str) -> tuple | None:
    """What changes when any home's file is written or removed (a cheap check before
    ``load``): (path, inode, mtime, size) of each present file."""
    name, seen = file_name(home), []
    for _base, directory, _own in candidates():
        try:
            st = os.lstat(os.path.join(directory, name))
        except OSError:
            continue
        seen.append((directory, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(seen) or None


def _existing_dirs():
    """Each runtime directory that exists and passes the checks, opened (closed after its
    turn, also when the caller stops early)."""
    for base, directory, own in candidates():
        try:
            fd = _open_dir(base, directory, own, create=False)
        except (OSError, Unusable):
            continue
        try:
            yield fd
        finally:
            os.close(fd)


def load(home: str, host_key: bytes, verifier: bytes) -> dict | None:
    """The filter saved for ``home`` and this verifier, or None (no file, another
    password's, or one that does not open: each tried directory in order)."""
    name = file_name(home)
    for fd in _existing_dirs():
        try:
            raw = _read(fd, name)
            head, _, sealed = raw.partition(b"\n")
            if json.loads(head).get("format") != _FORMAT:
                continue
            body = json.loads(crypto.unseal(_key(host_key), json.loads(sealed), _aad(home),
                                            "the guard's runtime file"))
            if hmac.compare_digest(crypto.b64d(body.get("verifier")), verifier):
                return body["filter"]
        except (OSError, ValueError, AttributeError, KeyError, TypeError, VaultError):
            continue
    return None


def remove(home: str) -> None:
    """Remove ``home``'s file from every directory (what a reboot does)."""
    name = file_name(home)
    for fd in _existing_dirs():
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            pass
