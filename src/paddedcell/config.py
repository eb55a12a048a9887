"""Every limit and default of PaddedCell, in one place.

A setting is addressed as ``section.key``. Its value comes from, in order of
precedence: the environment variable ``PADDEDCELL_<SECTION>_<KEY>`` (upper case,
dots and dashes become underscores), ``PADDEDCELL_HOME/config.toml``, then the
default below. Values from the environment are parsed to the default's type, so
``PADDEDCELL_SUPERVISOR_MAX_SESSIONS=10`` is the integer 10.

This module does no I/O at import time; ``load()`` reads the file once per call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs pass_mgr get ~10 ms of start-up; annotations only
    from pathlib import Path
    from typing import Any, Callable, Mapping

#: The one table of defaults. Keep a short reason beside anything surprising.
DEFAULTS: dict[str, dict[str, Any]] = {
    "redactor": {
        "mask": "######",
        "variants": True,
        # Variants of short secrets (base64, hex, ...) match ordinary text.
        "variant_min_length": 8,
        # Secrets shorter than this are masked but produce a warning.
        "warn_below_length": 6,
        # Any run of this many bytes of a secret of 16+ bytes is masked too
        # (distinctive runs only: see redactor/variants.py). At least 8.
        "fragment_min": 12,
        # Forms to leave unmasked, comma-separated names of redactor.Variants
        # fields (crlf, base64, url, json, hex, shell, escapes, entities,
        # doubling, fragments, wrapped); "" = every form.
        "forms_off": "",
    },
    "vault": {
        "path_template": "{AGENT_WORKSPACE}/.paddedcell/secrets/{AGENT_ID}",
        "history_depth": 5,
        "generate_length": 32,
        # Argon2id for the admin password: RFC 9106's second recommended option
        # (t=3, p=4, m=64 MiB). Tests lower these; admin.json records what was used.
        "kdf_iterations": 3,
        "kdf_lanes": 4,
        "kdf_memory_kib": 65536,
        # Only where OpenSSL lacks Argon2 (< 3.2): scrypt N (r=8, p=1; 128 MiB).
        "scrypt_n": 2**17,
        "admin_password_min_length": 8,
        # `pass_mgr set` refuses shorter secrets unless --allow-short: a short value's
        # encoded forms are not masked (redactor.variant_min_length), and the mask
        # itself tells a guesser which of 10**4 PINs it is.
        "min_length": 8,
        # Values removed by unset or rotated out of the history stay masked this long.
        "retired_mask_days": 30,
        # A writer waits this long for another pass_mgr's lock before giving up.
        "lock_timeout_seconds": 30.0,
        # check-leak texts longer than this run in a worker thread in the daemon.
        "leak_thread_threshold_bytes": 64 * 1024,
    },
    "supervisor": {
        "default_timeout_seconds": 1800,
        "default_yield_ms": 10000,
        "min_yield_ms": 10,
        "max_yield_ms": 120000,
        # OpenClaw's exec keeps the tail of this many characters.
        "max_aggregated_chars": 200_000,
        "ring_buffer_bytes": 2 * 1024 * 1024,
        "global_buffer_bytes": 64 * 1024 * 1024,
        "max_live_sessions": 64,
        "max_concurrent_execs_per_agent": 8,
        "kill_grace_seconds": 2.0,
        # A grandchild may keep the output fd open after the shell exits.
        "drain_seconds": 2.0,
        "finished_session_ttl_seconds": 30 * 60,
        "max_finished_sessions": 50,
        "pty_columns": 120,
        "pty_rows": 40,
        # "auto": every agent command in the namespace sandbox where the host
        # allows it (an allow-list root: system read-only, the workspace, a per-agent
        # home, private /tmp; docs/design.md §1), else under a root daemon as the agent's own
        # uid ("user"), else agent commands are refused with the fix. "namespaces" /
        # "user" (that or refuse), "none" (explicit opt-out: no sandbox, no limits),
        # "rlimits", "bwrap".
        "sandbox": "auto",
        # "proxy": own network namespace, loopback plus the session's HTTP(S) proxy
        # (HTTP_PROXY and friends set); "none": loopback only; "host": the host's.
        "sandbox_network": "proxy",
        # The proxy's policy (paddedcell/egress): host patterns allowed / denied
        # (empty allow = every public address), and host[:port] patterns let through
        # to loopback, private and link-local addresses (never by default).
        "sandbox_proxy_allow": [],
        "sandbox_proxy_deny": [],
        "sandbox_allow_local": [],
        # Extra host paths bound into the sandbox at the same path (a list, or one
        # string of paths separated by ':').
        "sandbox_bind_ro": [],
        "sandbox_bind_rw": [],
        # Under a root daemon: one user for every agent's commands ("" = one uid per
        # agent from sandbox_uid_range, "START:COUNT"; "" = root's /etc/subuid range,
        # else 1500000000:65536).
        "sandbox_user": "",
        "sandbox_uid_range": "",
        # Limits, on for every profile but "none"; 0 = leave as is. Per process:
        # CPU seconds, private memory (RLIMIT_DATA), address space, file size, open
        # files; processes per session (per agent uid under a root daemon).
        "sandbox_cpu_seconds": 3600,
        "sandbox_memory_bytes": 4 * 1024 * 1024 * 1024,
        "sandbox_address_space_bytes": 0,
        "sandbox_file_size_bytes": 1024 * 1024 * 1024,
        "sandbox_open_files": 4096,
        "sandbox_processes": 512,
        # Size of each private tmpfs of a session (/tmp, /var/tmp, /dev/shm, /run/user).
        "sandbox_tmp_bytes": 512 * 1024 * 1024,
        # Reserved per session at admission (enough for the 200,000-char tail);
        # a buffer grows toward ring_buffer_bytes only while the budget has room.
        "session_buffer_floor_bytes": 512 * 1024,
        # OpenClaw: tail of a running session, and unpolled output per poll.
        "tail_chars": 2000,
        "pending_max_chars": 30_000,
        # How often /exec with "stream": true sends a tail update.
        "stream_update_ms": 250,
        # How often live sessions' process trees are rescanned (orphans, reaping).
        "scan_interval_seconds": 1.0,
        # Zombies reparented to the daemon that no one waits for (a restart
        # command's daemonised children) are reaped after two sweeps.
        "orphan_sweep_seconds": 5.0,
        # Worker threads that sanitize and redact output off the event loop
        # (all sessions share them; the engine's scans run in parallel).
        "filter_threads": 2,
        # Each session's channel ($PADDEDCELL_CHANNEL): connections served at once
        # (more are closed on accept), one request line (an exec with a long command),
        # all unfinished lines of one session together, and how long a line may take.
        # A flooding session so holds at most 8 MiB and 16 descriptors of the daemon.
        "channel_max_connections": 16,
        "channel_max_request_bytes": 4 * 1024 * 1024,
        "channel_session_buffer_bytes": 8 * 1024 * 1024,
        "channel_idle_seconds": 30.0,
        # accept() out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
        # retry after 10 ms, doubling up to this (channels and the daemon socket).
        "accept_backoff_max_seconds": 1.0,
    },
    "egress": {
        # "auto": a session whose agent has a bound secret gets placeholders and the
        # intercepting proxy (where network namespaces allow it); "always"; "off".
        "mode": "auto",
        # The session proxy's bounds: resolving + connecting upstream, the request head,
        # silence on a tunnel or exchange, connections served at once (the rest wait in
        # the listener's backlog), one request head, one read of a splice.
        "connect_timeout_seconds": 10.0,
        "request_timeout_seconds": 30.0,
        "idle_timeout_seconds": 300.0,
        "max_connections": 64,
        "max_header_bytes": 64 * 1024,
        "chunk_bytes": 256 * 1024,
        # Tests only: a CA file upstream servers may also be signed by (besides the
        # system's trust), so loopback TLS servers can stand in for api.github.com.
        "extra_upstream_ca_file": "",
    },
    "audit": {
        # Each string field of an audit record is cut to this many characters,
        # so a record stays one small write (commands can be 200 KB heredocs).
        "max_field_chars": 4096,
    },
    "daemon": {
        "socket_name": "paddedcell.sock",
        "start_timeout_seconds": 10.0,
        # A request whose first byte arrived must be whole within this, else 408
        # and the connection closes (a stalled client must not hold an fd for ever).
        "request_timeout_seconds": 30.0,
        # A daemon started on demand stops after this long with no session, no
        # restart job and no request (0 = never); any daemon stops once its home
        # or socket is gone. Checked every hygiene_check_seconds.
        "idle_exit_minutes": 30.0,
        "hygiene_check_seconds": 5.0,
    },
    "restart": {
        "interval_seconds": 5.0,
        "delay_seconds": 60.0,
        "recover_timeout_seconds": 5.0,
        "restart_cmd": "openclaw gateway restart",
        # --require-rpc: "exit non-zero if [the read probe] fails" (OpenClaw
        # docs/cli/gateway/query.md); the plain command reports, it does not judge.
        "status_cmd": "openclaw gateway status --require-rpc",
        # Pause between two status checks inside the recovery window.
        "status_interval_seconds": 1.0,
        "command_timeout_seconds": 300.0,
        "rollback_timeout_seconds": 300.0,
        # A waiting requester that stops polling this long abandons its restart.
        "abandon_seconds": 30.0,
        "watchdog_seconds": 5.0,
        # Upper bound of GET /notifications?wait=...
        "max_poll_seconds": 60.0,
        # query-restart waits this long at most for a "tidy up before the restart"
        # notice to reach its agent (the gateway plugin delivers it).
        "prepare_wait_seconds": 120.0,
        # Agent records survive a daemon crash without fsync (see restart/store.py).
        "fsync_agents": False,
        # A freeze older than this is released with a log line, so no agent
        # stays frozen for ever after a crash.
        "max_freeze_seconds": 3600.0,
    },
    "remote": {
        # `paddedcell remote` (docs/remote.md). The seed's timeouts, OpenClaw's client constants.
        "connect_timeout_seconds": 10.0,      # opening the socket (TCP + TLS + upgrade)
        "handshake_timeout_seconds": 15.0,    # the whole handshake, hello-ok included
        # Wait this long for connect.challenge before a legacy (v1, no nonce) connect:
        # only gateways older than the challenge stay silent.
        "challenge_wait_seconds": 5.0,
        "request_timeout_seconds": 30.0,      # one RPC
        "max_frame_bytes": 25 * 1024 * 1024,  # OpenClaw's MAX_PAYLOAD_BYTES
        "message_queue": 64,                  # frames buffered before the reader waits
        "backoff_initial_seconds": 1.0,
        "backoff_max_seconds": 30.0,
        "max_reconnect_attempts": 10,
        "pairing_timeout_seconds": 300.0,     # `remote pair` waits 5:00
        "pairing_poll_seconds": 5.0,
        "approval_timeout_seconds": 70.0,     # an unanswered approval is rejected
        "chat_timeout_seconds": 600.0,        # one chat turn, start to final
    },
    "messages": {
        "busy_reply": "在忙，无法应答",
        "restart_done": "restart 结束了，我们继续",
        "restart_failed": "restart 失败，已经 rollback，请参考 log 调查。",
        "prepare_agent": "整理工作进度准备重启后继续",
        "prepare_session": "准备重启，重启后继续",
        # Reply to a message that arrives while its agent is frozen for a restart.
        "frozen_reply": "正在准备重启，重启后再继续",
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


class ConfigError(ValueError):
    """A setting has a value of the wrong type or an unknown name; ``str()`` is one line
    naming the file or variable, the setting, and the nearest valid name."""

    #: Every CLI and the daemon exit with this (a usage error: fix the named setting).
    exit_code = 2


def exit_on_bad_settings(prog: str, run: Callable[[], Any]) -> Any:
    """``run()``; a :class:`ConfigError` from it becomes one stderr line and exit 2 (the
    entry point of every command line and of the daemon, instead of a traceback)."""
    try:
        return run()
    except ConfigError as exc:
        import sys

        sys.stderr.write(f"{prog}: {exc}\n")
        sys.stderr.flush()
        raise SystemExit(ConfigError.exit_code) from None


def _nearest(word: str, names) -> str:
    """"; did you mean X?" for the valid name closest to a misspelt one, else the list."""
    import difflib

    names = sorted(names)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; valid names: {', '.join(names)}"


def _env_name(section: str, key: str) -> str:
    return "PADDEDCELL_" + f"{section}_{key}".upper().replace(".", "_").replace("-", "_")


def _coerce(raw: str, default: Any, name: str) -> Any:
    try:
        if isinstance(default, bool):
            lowered = raw.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a valid {type(default).__name__}; fix or unset it"
        ) from None
    return raw


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


def load(
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then ``config.toml``, then the environment, then ``overrides``."""
    env = os.environ if environ is None else environ
    home = paddedcell_home_text(env)
    values = {section: dict(keys) for section, keys in DEFAULTS.items()}

    config_file = path_text(os.path.join(home, "config.toml"))
    if _is_file(config_file):
        import tomllib  # here, not at the top: it costs pass_mgr get ~10 ms of start-up

        try:
            with open(config_file, encoding="utf-8") as handle:
                from_file = tomllib.loads(handle.read())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{config_file}: {exc}; fix the file") from None
        for section, keys in from_file.items():
            if section not in values or not isinstance(keys, dict):
                near = _nearest(section, values).replace("mean ", "mean [").replace("?", "]?")
                raise ConfigError(f"{config_file}: unknown section [{section}]{near}")
            for key, value in keys.items():
                if key not in values[section]:
                    near = _nearest(f"{section}.{key}", (f"{section}.{k}" for k in values[section]))
                    raise ConfigError(f"{config_file}: unknown setting {section}.{key}{near}")
                values[section][key] = value

    for section, keys in values.items():
        for key, default in list(keys.items()):
            name = _env_name(section, key)
            if name in env:
                keys[key] = _coerce(env[name], DEFAULTS[section][key], name)

    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if section not in values or key not in values[section]:
            near = _nearest(dotted, (f"{s}.{k}" for s, keys in values.items() for k in keys))
            raise ConfigError(f"unknown setting {dotted!r}{near}")
        values[section][key] = value
    return Settings(values, home)
