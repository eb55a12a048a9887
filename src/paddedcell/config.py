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


def _start_count(text: str) -> str | None:
    """``supervisor.sandbox_uid_range``: "" (the default range) or START:COUNT."""
    if not text.strip():
        return None
    first, sep, count = text.strip().partition(":")
    if not (sep and first.isascii() and first.isdigit() and count.isascii() and count.isdigit()):
        return 'must be START:COUNT (e.g. "1500000000:65536") or ""'
    if int(first) < 1000 or int(count) < 1:
        return "must start at 1000 or above and hold at least one uid"
    return None


#: The redactor's forms (the fields of ``redactor.Variants``; a test keeps them equal).
REDACTOR_FORMS = ("crlf base64 url json hex shell escapes entities doubling fragments wrapped "
                  "csi base32 unicode_escapes octal python_ascii caret normalized utf16 "
                  "mojibake folded runner_quote hexdump "
                  "hex_separated hex_escaped hex_prefixed decimal octal_bytes char_refs quoted_printable base85 uuencode")
#: ``supervisor.sandbox`` profiles and ``supervisor.sandbox_network`` modes (see below;
#: supervisor/spawn.py reads them from here).
SANDBOX_PROFILES = ("auto", "namespaces", "user", "none", "rlimits", "bwrap")
NETWORK_MODES = ("proxy", "none", "host")

#: Each setting, once. Keep a short reason beside anything surprising. Numbers are at
#: least 0 unless declared otherwise; ``positive`` marks intervals and timeouts.
SETTINGS: dict[str, dict[str, Setting]] = {
    "redactor": {
        "mask": Setting("######"),
        "variants": Setting(True),
        # Variants of short secrets (base64, hex, ...) match ordinary text.
        "variant_min_length": Setting(8, minimum=1),
        # Secrets shorter than this are masked but produce a warning.
        "warn_below_length": Setting(6),
        # Any run of this many bytes of a secret of 16+ bytes is masked too
        # (distinctive runs only: see redactor/variants.py). At least 8.
        "fragment_min": Setting(12, minimum=8),
        # Forms to leave unmasked, comma-separated names of redactor.Variants
        # fields (crlf, base64, url, json, hex, shell, escapes, entities,
        # doubling, fragments, wrapped); "" = every form.
        "forms_off": Setting("", choices=REDACTOR_FORMS, each=True),
    },
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
    "supervisor": {
        "default_timeout_seconds": Setting(1800),
        "default_yield_ms": Setting(10000),
        "min_yield_ms": Setting(10),
        "max_yield_ms": Setting(120000),
        # OpenClaw's exec keeps the tail of this many characters.
        "max_aggregated_chars": Setting(200_000, minimum=1),
        "ring_buffer_bytes": Setting(2 * 1024 * 1024, minimum=1),
        "global_buffer_bytes": Setting(64 * 1024 * 1024, minimum=1),
        "max_live_sessions": Setting(64, minimum=1),
        "max_concurrent_execs_per_agent": Setting(8, minimum=1),
        "kill_grace_seconds": Setting(2.0),
        # A grandchild may keep the output fd open after the shell exits.
        "drain_seconds": Setting(2.0),
        "finished_session_ttl_seconds": Setting(30 * 60),
        "max_finished_sessions": Setting(50),
        # A terminal's size is two 16-bit numbers (struct winsize).
        "pty_columns": Setting(120, minimum=1, maximum=65535),
        "pty_rows": Setting(40, minimum=1, maximum=65535),
        # "auto": every agent command in the namespace sandbox where the host
        # allows it (an allow-list root: system read-only, the workspace, a per-agent
        # home, private /tmp; docs/design.md §1), else under a root daemon as the agent's own
        # uid ("user"), else agent commands are refused with the fix. "namespaces" /
        # "user" (that or refuse), "none" (explicit opt-out: no sandbox, no limits),
        # "rlimits", "bwrap".
        "sandbox": Setting("auto", choices=" ".join(SANDBOX_PROFILES)),
        # "proxy": own network namespace, loopback plus the session's HTTP(S) proxy
        # (HTTP_PROXY and friends set); "none": loopback only; "host": the host's.
        "sandbox_network": Setting("proxy", choices=" ".join(NETWORK_MODES)),
        # The proxy's policy (paddedcell/egress): host patterns allowed / denied
        # (empty allow = every public address), and host[:port] patterns let through
        # to loopback, private and link-local addresses (never by default). A list,
        # or one comma-separated string.
        "sandbox_proxy_allow": Setting([]),
        "sandbox_proxy_deny": Setting([]),
        "sandbox_allow_local": Setting([]),
        # Extra host paths bound into the sandbox at the same path (a list, or one
        # string of paths separated by ':').
        "sandbox_bind_ro": Setting([]),
        "sandbox_bind_rw": Setting([]),
        # Under a root daemon: one user for every agent's commands ("" = one uid per
        # agent from sandbox_uid_range, "START:COUNT"; "" = root's /etc/subuid range,
        # else 1500000000:65536).
        "sandbox_user": Setting(""),
        "sandbox_uid_range": Setting("", check=_start_count),
        # Limits, on for every profile but "none"; 0 = leave as is. Per process:
        # CPU seconds, private memory (RLIMIT_DATA), address space, file size, open
        # files; processes per session (per agent uid under a root daemon).
        "sandbox_cpu_seconds": Setting(3600),
        "sandbox_memory_bytes": Setting(4 * 1024 * 1024 * 1024),
        "sandbox_address_space_bytes": Setting(0),
        "sandbox_file_size_bytes": Setting(1024 * 1024 * 1024),
        "sandbox_open_files": Setting(4096),
        "sandbox_processes": Setting(512),
        # cgroup v2 cpu.max of one session, in percent of one CPU (0 = no cap); used where
        # a delegated cgroup v2 offers the cpu controller.
        "sandbox_cpu_percent": Setting(0),
        # Size of each private tmpfs of a session (/tmp, /var/tmp, /dev/shm, /run/user).
        "sandbox_tmp_bytes": Setting(512 * 1024 * 1024, minimum=1),
        # Reserved per session at admission (enough for the 200,000-char tail);
        # a buffer grows toward ring_buffer_bytes only while the budget has room.
        "session_buffer_floor_bytes": Setting(512 * 1024),
        # OpenClaw: tail of a running session, and unpolled output per poll.
        "tail_chars": Setting(2000),
        "pending_max_chars": Setting(30_000, minimum=1),
        # How often /exec with "stream": true sends a tail update.
        "stream_update_ms": Setting(250, minimum=1),
        # How often live sessions' process trees are rescanned (orphans, reaping).
        "scan_interval_seconds": Setting(1.0, positive=True),
        # Zombies reparented to the daemon that no one waits for (a restart
        # command's daemonised children) are reaped after two sweeps.
        "orphan_sweep_seconds": Setting(5.0, positive=True),
        # Worker threads that sanitize and redact output off the event loop
        # (all sessions share them; the engine's scans run in parallel).
        "filter_threads": Setting(2, minimum=1),
        # Each session's channel ($PADDEDCELL_CHANNEL): connections served at once
        # (more are closed on accept), one request line (an exec with a long command),
        # all unfinished lines of one session together, and how long a line may take.
        # A flooding session so holds at most 8 MiB and 16 descriptors of the daemon.
        "channel_max_connections": Setting(16, minimum=1),
        "channel_max_request_bytes": Setting(4 * 1024 * 1024, minimum=1),
        "channel_session_buffer_bytes": Setting(8 * 1024 * 1024, minimum=1),
        "channel_idle_seconds": Setting(30.0, positive=True),
        # A request line longer than this is parsed in a child process (json.loads holds
        # the GIL: 4 MiB of "[0,0,..." is 0.6 s of a stalled daemon), and no line may hold
        # more JSON values than channel_max_values (what the daemon then walks).
        "channel_parse_in_child_bytes": Setting(64 * 1024, minimum=1),
        "channel_max_values": Setting(20000, minimum=1),
        # accept() out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
        # retry after 10 ms, doubling up to this (channels and the daemon socket).
        "accept_backoff_max_seconds": Setting(1.0, positive=True),
    },
    "egress": {
        # "auto": a session whose agent has a bound secret gets placeholders and the
        # intercepting proxy (where network namespaces allow it); "always"; "off".
        "mode": Setting("auto", choices="auto always off"),
        # The session proxy's bounds: resolving + connecting upstream, the request head,
        # silence on a tunnel or exchange, connections served at once (the rest wait in
        # the listener's backlog), one request head, one read of a relayed stream.
        "connect_timeout_seconds": Setting(10.0, positive=True),
        "request_timeout_seconds": Setting(30.0, positive=True),
        "idle_timeout_seconds": Setting(300.0, positive=True),
        "max_connections": Setting(64, minimum=1),
        "max_header_bytes": Setting(64 * 1024, minimum=1),
        "chunk_bytes": Setting(256 * 1024, minimum=1),
        # The pipe of a blind tunnel's splice(2) loop, per direction: one call moves at
        # most this much (capped by fs.pipe-max-size; the 64 KiB default pipe past the
        # user's pipe pages). 1 MiB: ~25% less proxy CPU per GiB tunnelled than 256 KiB.
        "tunnel_pipe_bytes": Setting(1024 * 1024, minimum=4096),
        # A request body with a Content-Encoding (gzip, deflate) is decoded whole to look
        # for placeholders in a session that holds one; past this many decoded bytes it
        # is refused (413), never passed unseen.
        "max_decoded_body_bytes": Setting(32 * 1024 * 1024, minimum=1),
        # Tests only: a CA file upstream servers may also be signed by (besides the
        # system's trust), so loopback TLS servers can stand in for api.github.com.
        "extra_upstream_ca_file": Setting(""),
    },
    "audit": {
        # Each string field of an audit record is cut to this many characters,
        # so a record stays one small write (commands can be 200 KB heredocs).
        "max_field_chars": Setting(4096, minimum=1),
    },
    "daemon": {
        "socket_name": Setting("paddedcell.sock", check=lambda name: None if name and "/" not in name
                               else "must be a file name (no '/', not empty)"),
        "start_timeout_seconds": Setting(10.0, positive=True),
        # A request whose first byte arrived must be whole within this, else 408
        # and the connection closes (a stalled client must not hold an fd for ever).
        "request_timeout_seconds": Setting(30.0, positive=True),
        # A human's direct `pass_mgr get` waits this long for a running daemon's answer,
        # then reads the vault itself (cli/pass_mgr_get.py).
        "direct_get_timeout_seconds": Setting(5.0, positive=True),
        # Connections the daemon socket holds at once, in all (at most half the soft
        # file limit) and from one process (at most half of that); more are closed on
        # accept, so one runaway client cannot take every descriptor or slot.
        "max_connections": Setting(1024, minimum=2),
        "max_connections_per_peer": Setting(256, minimum=1),
        # A daemon started on demand stops after this long with no session, no
        # restart job and no request (0 = never); any daemon stops once its home
        # or socket is gone. Checked every hygiene_check_seconds.
        "idle_exit_minutes": Setting(30.0),
        "hygiene_check_seconds": Setting(5.0, positive=True),
    },
    "restart": {
        "interval_seconds": Setting(5.0, positive=True),
        "delay_seconds": Setting(60.0),
        "recover_timeout_seconds": Setting(5.0),
        "restart_cmd": Setting("openclaw gateway restart"),
        # --require-rpc: "exit non-zero if [the read probe] fails" (OpenClaw
        # docs/cli/gateway/query.md); the plain command reports, it does not judge.
        "status_cmd": Setting("openclaw gateway status --require-rpc"),
        # Pause between two status checks inside the recovery window.
        "status_interval_seconds": Setting(1.0, positive=True),
        "command_timeout_seconds": Setting(300.0, positive=True),
        "rollback_timeout_seconds": Setting(300.0, positive=True),
        # The daemon appends a job's log lines in batches, off its event loop: at most
        # one batch a log_flush_seconds, at most log_buffer_bytes waiting (more are
        # dropped and counted in the log): a rollback's output is the agent's to choose.
        "log_flush_seconds": Setting(0.2, positive=True),
        "log_buffer_bytes": Setting(1048576, positive=True),
        # A waiting requester that stops polling this long abandons its restart.
        "abandon_seconds": Setting(30.0, positive=True),
        "watchdog_seconds": Setting(5.0, positive=True),
        # Upper bound of GET /notifications?wait=...
        "max_poll_seconds": Setting(60.0),
        # query-restart waits this long at most for a "tidy up before the restart"
        # notice to reach its agent (the gateway plugin delivers it).
        "prepare_wait_seconds": Setting(120.0),
        # Agent records survive a daemon crash without fsync (see restart/store.py).
        "fsync_agents": Setting(False),
        # A freeze older than this is released with a log line, so no agent
        # stays frozen for ever after a crash.
        "max_freeze_seconds": Setting(3600.0, positive=True),
    },
    "remote": {
        # `paddedcell remote` (docs/remote.md). The seed's timeouts, OpenClaw's client constants.
        "connect_timeout_seconds": Setting(10.0, positive=True),  # TCP + TLS + upgrade
        "handshake_timeout_seconds": Setting(15.0, positive=True),  # hello-ok included
        # Wait this long for connect.challenge before a legacy (v1, no nonce) connect:
        # only gateways older than the challenge stay silent.
        "challenge_wait_seconds": Setting(5.0),
        "request_timeout_seconds": Setting(30.0, positive=True),  # one RPC
        "max_frame_bytes": Setting(25 * 1024 * 1024, minimum=1),  # OpenClaw's MAX_PAYLOAD_BYTES
        "message_queue": Setting(64, minimum=1),  # frames buffered before the reader waits
        "backoff_initial_seconds": Setting(1.0),
        "backoff_max_seconds": Setting(30.0),
        "max_reconnect_attempts": Setting(10),
        "pairing_timeout_seconds": Setting(300.0, positive=True),  # `remote pair` waits 5:00
        "pairing_poll_seconds": Setting(5.0, positive=True),
        "approval_timeout_seconds": Setting(70.0, positive=True),  # unanswered: rejected
        "chat_timeout_seconds": Setting(600.0, positive=True),  # one chat turn, start to final
    },
    "messages": {
        "busy_reply": Setting("在忙，无法应答"),
        "restart_done": Setting("restart 结束了，我们继续"),
        "restart_failed": Setting("restart 失败，已经 rollback，请参考 log 调查。"),
        "prepare_agent": Setting("整理工作进度准备重启后继续"),
        "prepare_session": Setting("准备重启，重启后继续"),
        # Reply to a message that arrives while its agent is frozen for a restart.
        "frozen_reply": Setting("正在准备重启，重启后再继续"),
    },
}

#: The defaults alone, read from :data:`SETTINGS`.
DEFAULTS: dict[str, dict[str, Any]] = {
    section: {key: setting.default for key, setting in keys.items()}
    for section, keys in SETTINGS.items()
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


def _nearest(word: str, names, fallback: bool = True) -> str:
    """"; did you mean X?" for the valid name closest to a misspelt one, else the list
    (or nothing, without ``fallback``: the caller has listed the names already)."""
    import difflib

    names = sorted(names)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; valid names: {', '.join(names)}" if fallback else ""


def _env_name(section: str, key: str) -> str:
    return "PADDEDCELL_" + f"{section}_{key}".upper().replace(".", "_").replace("-", "_")


#: Every setting's environment name -> (section, key), built at the first environment
#: that holds a name starting with one of :data:`_ENV_PREFIXES` (most hold none: 118
#: names built and looked up at every load cost a `pass_mgr get` ~0.25 ms).
_ENV_SETTINGS: dict[str, tuple[str, str]] = {}
_ENV_PREFIXES = tuple(_env_name(section, "") for section in SETTINGS)


def _env_settings(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(section, key, variable) of each setting ``env`` sets, in :data:`SETTINGS` order
    (the first bad one is the one reported, whatever the environment's order)."""
    names = {name for name in env if name.startswith(_ENV_PREFIXES)}
    if not names:
        return []
    if not _ENV_SETTINGS:  # (in SETTINGS order: a dict keeps it)
        _ENV_SETTINGS.update({_env_name(section, key): (section, key)
                              for section, keys in SETTINGS.items() for key in keys})
    return [(section, key, name) for name, (section, key) in _ENV_SETTINGS.items() if name in names]


def _from_text(raw: str, kind: type) -> Any:
    """An environment variable's text as ``kind``; the text itself where it does not
    read as one (:meth:`Setting.problem` then names what it must be)."""
    text = raw.strip()
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        return raw
    try:
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        return raw
    return raw


def _shown(value: Any) -> str:
    """A value as TOML writes it (strings in double quotes), for one error line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def checked(section: str, key: str, value: Any, where: str) -> Any:
    """``value`` for setting ``section.key`` as the declaration accepts it (an enumerated
    string in lower case), or :class:`ConfigError`, one line: ``where`` (the file or
    the variable), the setting, the value and what it must be."""
    setting = SETTINGS[section][key]
    problem = setting.problem(value)
    if problem:
        raise ConfigError(f"{where}{section}.{key} = {_shown(value)} {problem}; "
                          "fix or unset it")
    if setting.choices and not setting.each:
        return value.strip().lower()
    return value


def _unknown_section(config_file: str, section: str, value: Any) -> ConfigError:
    if not isinstance(value, dict):  # a key outside any table
        homes = [s for s, keys in SETTINGS.items() if section in keys]
        where = f"; did you mean {homes[0]}.{section} (under [{homes[0]}])?" if homes else \
            _nearest(section, SETTINGS).replace("mean ", "mean [").replace("?", "]?")
        return ConfigError(f"{config_file}: {section} = {_shown(value)} is outside any "
                           f"[section]{where}")
    near = _nearest(section, SETTINGS).replace("mean ", "mean [").replace("?", "]?")
    return ConfigError(f"{config_file}: unknown section [{section}]{near}")


def _unknown_key(config_file: str, section: str, key: str) -> ConfigError:
    homes = [s for s, keys in SETTINGS.items() if key in keys]  # the right key, wrong table
    near = f"; did you mean {homes[0]}.{key}?" if homes else \
        _nearest(f"{section}.{key}", (f"{section}.{k}" for k in SETTINGS[section]))
    return ConfigError(f"{config_file}: unknown setting {section}.{key}{near}")


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


def _read_toml(config_file: str) -> dict[str, Any]:
    import tomllib  # here, not at the top: it costs pass_mgr get ~10 ms of start-up

    try:
        with open(config_file, "rb") as handle:
            return tomllib.loads(handle.read().decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"{config_file}: not valid TOML ({reason}); fix the file") from None
    except OSError as exc:
        raise ConfigError(f"{config_file}: cannot read it ({exc.strerror}); fix its "
                          "permissions or remove it") from None


def load(
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then ``config.toml``, then the environment, then ``overrides``.

    Every value from the file or the environment is checked against its declaration
    in :data:`SETTINGS` (:func:`checked`); ``overrides`` come from code (tests, a
    CLI's options), which passes them typed, so only their names are checked.
    """
    env = os.environ if environ is None else environ
    home = paddedcell_home_text(env)
    values = {section: dict(keys) for section, keys in DEFAULTS.items()}

    config_file = path_text(os.path.join(home, "config.toml"))
    if _is_file(config_file):
        for section, keys in _read_toml(config_file).items():
            if section not in values or not isinstance(keys, dict):
                raise _unknown_section(config_file, section, keys)
            for key, value in keys.items():
                if key not in values[section]:
                    raise _unknown_key(config_file, section, key)
                values[section][key] = checked(section, key, value, f"{config_file}: ")

    for section, key, name in _env_settings(env):
        raw = _from_text(env[name], SETTINGS[section][key].kind)
        values[section][key] = checked(section, key, raw, f"{name}: ")

    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if section not in values or key not in values[section]:
            near = _nearest(dotted, (f"{s}.{k}" for s, keys in values.items() for k in keys))
            raise ConfigError(f"unknown setting {dotted!r}{near}")
        values[section][key] = value
    return Settings(values, home)
