"""The part of the settings every ``pass_mgr get`` reads: declared here, once.

:mod:`paddedcell.config` holds every setting (its docstring says where a value comes
from). A ``pass_mgr get`` reads 15 of them, and importing and loading the whole table
was ~0.8 ms of a cold get (this module and :func:`defaults_only`: ~0.5 ms). So the
type of a declaration (:class:`Setting`), the settings a get reads (:data:`EARLY`) and
the resolved :class:`Settings` live here, and ``config`` builds its table from them
(the same objects, not copies). With no ``config.toml`` and no ``PADDEDCELL_<SECTION>_...``
variable no setting can be bad, and :func:`defaults_only` answers from these
declarations alone; otherwise the caller loads ``config`` and every value is checked as
in every command line.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs pass_mgr get ~10 ms of start-up; annotations only
    from pathlib import Path
    from typing import Any, Callable, Mapping


class Setting:
    """One setting, declared once: its default and the values it accepts.

    The type follows the default: ``bool``, ``int``, ``float`` (an integer is taken
    too), ``str``, or a list of strings (a list, or one string the reader splits).
    ``choices``: the allowed strings (with ``each``, the allowed names of a comma-separated
    list); numbers are at least ``minimum`` (0 unless declared: no setting is negative)
    and, with ``positive``, more than 0. ``check``: a pure function that names what is
    wrong with a string of a set form, or returns None. :meth:`problem` says, from
    these alone, what is wrong with a value; every error about a setting comes from it.
    """

    __slots__ = ("default", "choices", "each", "minimum", "maximum", "positive", "check")

    def __init__(self, default: Any, *, choices: str = "", each: bool = False,
                 minimum: float = 0, maximum: float | None = None, positive: bool = False,
                 check: Callable[[str], str | None] | None = None):
        self.default, self.check = default, check
        self.choices, self.each = tuple(choices.split()), each  # what a string may be
        self.minimum, self.maximum, self.positive = minimum, maximum, positive  # a number

    @property
    def kind(self) -> type:
        return type(self.default)

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this setting ("must be ..."), or None."""
        kind = self.kind
        if kind is bool:
            return None if isinstance(value, bool) else "must be true or false"
        if kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return "must be a number" if kind is float else "must be an integer"
            if kind is int and not isinstance(value, int):
                return "must be an integer"
            if value != value or value in (float("inf"), float("-inf")):
                return "must be a finite number"
            if self.positive and value <= 0:
                return "must be more than 0"
            if value < self.minimum:
                return f"must be at least {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"must be at most {self.maximum}"
            return None
        if kind is list:
            if isinstance(value, str) or (isinstance(value, list)
                                          and all(isinstance(v, str) for v in value)):
                return None
            return "must be a list of strings (or one string)"
        if not isinstance(value, str):
            return "must be a string"
        if self.choices:
            names = [n.strip() for n in value.split(",") if n.strip()] if self.each \
                else [value.strip().lower()]
            for name in names:
                if name not in self.choices:
                    close = _nearest(name, self.choices, fallback=False)
                    near = f" (did you mean {close[15:-1]}?)" if close else ""
                    what = f"names {name!r}, not one of" if self.each else "must be one of"
                    return f"{what} {', '.join(self.choices)}{near}"
        return self.check(value) if self.check else None


#: Every section of :data:`paddedcell.config.SETTINGS`, in its order (``config`` refuses
#: to import if they differ): a variable ``PADDEDCELL_<SECTION>_...`` may set a setting.
SECTIONS = ("redactor", "vault", "supervisor", "egress", "audit", "daemon", "restart",
            "remote", "messages")

#: The settings ``pass_mgr get`` reads (the vault's, two of the redactor's, and the
#: daemon's socket and timeout for its answer), declared once: ``config.SETTINGS`` holds
#: these very objects, in their places in its sections. Keep a short reason beside
#: anything surprising, as there.
EARLY: dict[str, dict[str, Setting]] = {
    "vault": {
        "path_template": Setting("{AGENT_WORKSPACE}/.paddedcell/secrets/{AGENT_ID}"),
        "history_depth": Setting(5),
        "generate_length": Setting(32, minimum=1),
        # Argon2id for the admin password: RFC 9106's second recommended option
        # (t=3, p=4, m=64 MiB). Tests lower these; admin.json records what was used.
        "kdf_iterations": Setting(3, minimum=1),
        "kdf_lanes": Setting(4, minimum=1),
        "kdf_memory_kib": Setting(65536, minimum=8),  # Argon2's floor: 8 KiB per lane
        # Only where OpenSSL lacks Argon2 (< 3.2): scrypt N (r=8, p=1; 128 MiB).
        "scrypt_n": Setting(2**17, minimum=2),
        "admin_password_min_length": Setting(8, minimum=1),
        # `pass_mgr set` refuses shorter secrets unless --allow-short: a short value's
        # encoded forms are not masked (redactor.variant_min_length), and the mask
        # itself tells a guesser which of 10**4 PINs it is.
        "min_length": Setting(8, minimum=1),
        # Values removed by unset or rotated out of the history stay masked this long.
        "retired_mask_days": Setting(30),
        # A writer waits this long for another pass_mgr's lock before giving up.
        "lock_timeout_seconds": Setting(30.0),
        # check-leak texts longer than this run in a worker thread in the daemon.
        "leak_thread_threshold_bytes": Setting(64 * 1024),
    },
    "redactor": {
        "mask": Setting("######"),
        # Variants of short secrets (base64, hex, ...) match ordinary text.
        "variant_min_length": Setting(8, minimum=1),
    },
    "daemon": {
        "socket_name": Setting("paddedcell.sock", check=lambda name: None if name and "/" not in name
                               else "must be a file name (no '/', not empty)"),
        # A human's direct `pass_mgr get` waits this long for a running daemon's answer,
        # then reads the vault itself (cli/pass_mgr_get.py).
        "direct_get_timeout_seconds": Setting(5.0, positive=True),
    },
}


def paddedcell_home(environ: Mapping[str, str] | None = None) -> Path:
    """``PADDEDCELL_HOME``, default ``~/.paddedcell``."""
    from pathlib import Path

    env = os.environ if environ is None else environ
    raw = env.get("PADDEDCELL_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".paddedcell"


def path_text(path: str) -> str:
    """``str(pathlib.PurePosixPath(path))`` without importing pathlib.

    ``pathlib`` (with the ``re``, ``fnmatch`` and ``urllib`` it imports) costs
    ``pass_mgr get`` several milliseconds of start-up, so its path handles text.
    """
    rest = path.lstrip("/")
    slashes = len(path) - len(rest)
    root = "//" if slashes == 2 else "/" if slashes else ""  # POSIX keeps exactly two
    parts = [part for part in rest.split("/") if part and part != "."]
    return root + "/".join(parts) if (root or parts) else "."


def paddedcell_home_text(environ: Mapping[str, str] | None = None) -> str:
    """``str(paddedcell_home(environ))``, without importing pathlib in the usual cases."""
    env = os.environ if environ is None else environ
    raw = env.get("PADDEDCELL_HOME")
    if raw and not raw.startswith("~"):
        return path_text(raw)
    if not raw:
        home = os.path.expanduser("~")
        if not home.startswith("~"):
            return path_text(home + "/.paddedcell")
    return str(paddedcell_home(env))  # "~user/...", or no home directory: pathlib decides


def _nearest(word: str, names, fallback: bool = True) -> str:
    """"; did you mean X?" for the valid name closest to a misspelt one, else the list
    (or nothing, without ``fallback``: the caller has listed the names already)."""
    import difflib

    names = sorted(names)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; valid names: {', '.join(names)}" if fallback else ""


def _is_file(path: str) -> bool:
    """``pathlib.Path(path).is_file()``: False when absent, other errors raise."""
    import errno
    import stat

    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise
    except ValueError:  # an embedded NUL
        return False
    return stat.S_ISREG(st.st_mode)


class Settings:
    """Resolved settings: ``settings["supervisor.max_live_sessions"]``.

    ``home`` is a ``Path``, made on first use; ``home_text`` is the same path as a
    string, for ``pass_mgr get``, which must not pay for importing pathlib.
    """

    def __init__(self, values: dict[str, dict[str, Any]], home: Path | str):
        self._values = values
        self.home = home

    @property
    def home(self) -> Path:
        if isinstance(self._home, str):
            from pathlib import Path

            self._home = Path(self._home)
        return self._home

    @home.setter
    def home(self, value: Path | str) -> None:
        self._home = value

    @property
    def home_text(self) -> str:
        return self._home if isinstance(self._home, str) else str(self._home)

    def __getitem__(self, dotted: str) -> Any:
        section, _, key = dotted.partition(".")
        try:
            return self._values[section][key]
        except KeyError:
            raise KeyError(f"unknown setting {dotted!r}") from None

    def section(self, name: str) -> dict[str, Any]:
        return dict(self._values[name])

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {name: dict(values) for name, values in self._values.items()}


#: ``PADDEDCELL_<SECTION>_``: the start of every setting's variable (``config._env_name``).
_ENV_PREFIXES = tuple(f"PADDEDCELL_{section.upper()}_" for section in SECTIONS)


def defaults_only(environ: Mapping[str, str] | None = None) -> Settings | None:
    """The :data:`EARLY` settings at their defaults, when nothing can set any setting: no
    ``PADDEDCELL_HOME/config.toml`` and no variable named ``PADDEDCELL_<SECTION>_...``.
    Otherwise None: ``config.load()`` then reads and checks every setting (a bad one is
    exit 2 in every command line, ``pass_mgr get`` included).

    The :class:`Settings` holds only :data:`EARLY`; reading another setting is a KeyError.
    """
    env = os.environ if environ is None else environ
    if any(name.startswith(_ENV_PREFIXES) for name in env):
        return None
    home = paddedcell_home_text(env)
    try:
        if _is_file(path_text(os.path.join(home, "config.toml"))):
            return None
    except OSError:
        return None  # config.load() meets the same error
    return Settings({section: {key: setting.default for key, setting in keys.items()}
                     for section, keys in EARLY.items()}, home)
