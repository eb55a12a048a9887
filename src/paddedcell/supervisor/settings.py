"""The supervisor's settings, typed once: ``SupervisorSettings.of(settings)``.

``config.load`` has checked every ``supervisor.*`` value from the file and the
environment against its declaration (``config.SETTINGS``); this is the same values as
attributes of the right type, built once per settings object, so the supervisor, its
sessions, the channel and the sandbox read ``limits.kill_grace_seconds`` (a float)
instead of casting ``settings["supervisor.kill_grace_seconds"]`` at each use. A test
keeps the fields equal to the declared keys.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

#: A list setting as written: a list of strings, or one string the reader splits.
Items = "tuple[str, ...] | str"


@dataclass(frozen=True, slots=True)
class SupervisorSettings:
    """Every ``supervisor.*`` setting (see config.SETTINGS for what each means)."""

    default_timeout_seconds: int
    default_yield_ms: int
    min_yield_ms: int
    max_yield_ms: int
    max_aggregated_chars: int
    ring_buffer_bytes: int
    global_buffer_bytes: int
    max_live_sessions: int
    max_concurrent_execs_per_agent: int
    kill_grace_seconds: float
    drain_seconds: float
    finished_session_ttl_seconds: float
    max_finished_sessions: int
    pty_columns: int
    pty_rows: int
    #: One of config.SANDBOX_PROFILES / config.NETWORK_MODES, in lower case.
    sandbox: str
    sandbox_network: str
    sandbox_proxy_allow: Items
    sandbox_proxy_deny: Items
    sandbox_allow_local: Items
    sandbox_bind_ro: Items
    sandbox_bind_rw: Items
    sandbox_user: str
    sandbox_uid_range: str
    sandbox_cpu_seconds: int
    sandbox_memory_bytes: int
    sandbox_address_space_bytes: int
    sandbox_file_size_bytes: int
    sandbox_open_files: int
    sandbox_processes: int
    sandbox_cpu_percent: int
    sandbox_tmp_bytes: int
    session_buffer_floor_bytes: int
    tail_chars: int
    pending_max_chars: int
    stream_update_ms: int
    scan_interval_seconds: float
    orphan_sweep_seconds: float
    filter_threads: int
    channel_max_connections: int
    channel_max_request_bytes: int
    channel_session_buffer_bytes: int
    channel_idle_seconds: float
    channel_parse_in_child_bytes: int
    channel_max_values: int
    accept_backoff_max_seconds: float

    @classmethod
    def from_settings(cls, settings: Any) -> "SupervisorSettings":
        values = {}
        for field in fields(cls):
            raw = settings[f"supervisor.{field.name}"]
            values[field.name] = _typed(field.type, raw)
        for name in ("sandbox", "sandbox_network"):  # enumerations read in lower case
            values[name] = values[name].lower()
        return cls(**values)

    @classmethod
    def of(cls, settings: Any) -> "SupervisorSettings":
        """The typed view of ``settings`` (a ``config.Settings``, or one of these
        already), built once per settings object."""
        if isinstance(settings, cls):
            return settings
        cached = getattr(settings, "_supervisor_settings", None)
        if cached is None:
            cached = cls.from_settings(settings)
            try:
                settings._supervisor_settings = cached
            except AttributeError:  # a settings object that takes no attributes
                pass
        return cached


def _typed(kind: str, raw: Any) -> Any:
    """``raw`` as the field's type, as each reader used to cast it (overrides passed by
    code are not checked by config.load: ``int("3")`` still reads, as it did)."""
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    if kind == "str":
        return str(raw).strip()
    return raw if isinstance(raw, str) else tuple(raw or ())  # Items
