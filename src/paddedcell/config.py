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

# The declaration type, the settings every `pass_mgr get` reads (EARLY: declared there,
# placed in SETTINGS below) and the resolved settings live in config_base; the names stay
# importable from here.
from .config_base import (_ENV_PREFIXES, EARLY, SECTIONS, Setting, Settings,  # noqa: F401
                          _is_file, _nearest, paddedcell_home, paddedcell_home_text, path_text)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping


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
#: least 0 unless declared otherwise; ``positive`` marks intervals and timeouts. The
#: settings a ``pass_mgr get`` reads are declared in config_base (``EARLY[...]`` here).
SETTINGS: dict[str, dict[str, Setting]] = {
    "redactor": {
        "mask": EARLY["redactor"]["mask"],
        "variants": Setting(True),
        "variant_min_length": EARLY["redactor"]["variant_min_length"],
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
    "vault": EARLY["vault"],  # every vault setting: config_base.py
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
        "socket_name": EARLY["daemon"]["socket_name"],
        "start_timeout_seconds": Setting(10.0, positive=True),
        # A request whose first byte arrived must be whole within this, else 408
        # and the connection closes (a stalled client must not hold an fd for ever).
        "request_timeout_seconds": Setting(30.0, positive=True),
        "direct_get_timeout_seconds": EARLY["daemon"]["direct_get_timeout_seconds"],
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

if tuple(SETTINGS) != SECTIONS or any(SETTINGS[section][key] is not setting for section, keys
                                      in EARLY.items() for key, setting in keys.items()):
    raise ImportError("config_base.SECTIONS and EARLY must match config.SETTINGS")

#: The defaults alone, read from :data:`SETTINGS`.
DEFAULTS: dict[str, dict[str, Any]] = {
    section: {key: setting.default for key, setting in keys.items()}
    for section, keys in SETTINGS.items()
}


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


def _env_name(section: str, key: str) -> str:
    return "PADDEDCELL_" + f"{section}_{key}".upper().replace(".", "_").replace("-", "_")


#: Every setting's environment name -> (section, key), built at the first environment
#: that holds a name starting with one of :data:`_ENV_PREFIXES` (most hold none: 118
#: names built and looked up at every load cost a `pass_mgr get` ~0.25 ms).
_ENV_SETTINGS: dict[str, tuple[str, str]] = {}
# (_ENV_PREFIXES, config_base's: one per section, as _env_name(section, "") makes them)


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
