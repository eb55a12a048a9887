"""The supervisor's typed settings (supervisor/settings.py): one frozen object per
settings object, its fields the declared supervisor.* keys, read by the supervisor,
its sessions, the channel and the sandbox instead of the mapping."""

from __future__ import annotations

import dataclasses

import pytest

from paddedcell import config
from paddedcell.supervisor.settings import SupervisorSettings


def test_the_fields_are_the_declared_supervisor_settings_with_their_types():
    declared = config.SETTINGS["supervisor"]
    fields = {f.name: f.type for f in dataclasses.fields(SupervisorSettings)}
    assert sorted(fields) == sorted(declared)
    kinds = {"int": int, "float": float, "str": str, "Items": list}
    for name, kind in fields.items():
        assert kinds[kind] is declared[name].kind or (kind == "float" and declared[name].kind is int), name


def test_built_once_frozen_and_typed_from_file_and_environment(tmp_path):
    (tmp_path / "config.toml").write_text('[supervisor]\nkill_grace_seconds = 1\nsandbox = "None"\n'
                                          'sandbox_bind_ro = ["/opt", "/srv"]\n')
    settings = config.load({"PADDEDCELL_HOME": str(tmp_path),
                            "PADDEDCELL_SUPERVISOR_MAX_LIVE_SESSIONS": "7",
                            "PADDEDCELL_SUPERVISOR_SANDBOX_BIND_RW": "/a:/b"})
    typed = SupervisorSettings.of(settings)
    assert SupervisorSettings.of(settings) is typed and SupervisorSettings.of(typed) is typed
    assert typed.kill_grace_seconds == 1.0 and isinstance(typed.kill_grace_seconds, float)
    assert typed.max_live_sessions == 7
    assert typed.sandbox == "none"
    assert typed.sandbox_bind_ro == ("/opt", "/srv") and typed.sandbox_bind_rw == "/a:/b"
    with pytest.raises(dataclasses.FrozenInstanceError):
        typed.max_live_sessions = 1  # type: ignore[misc]
    other = config.load({"PADDEDCELL_HOME": str(tmp_path)}, {"supervisor.max_live_sessions": 2})
    assert SupervisorSettings.of(other).max_live_sessions == 2


def test_the_supervisor_code_reads_no_supervisor_setting_by_name():
    """Below the daemon only the layers under supervisor (execspec, session) and the
    daemon's generic HTTP edge still read a supervisor.* name from the mapping."""
    from pathlib import Path

    root = Path(config.__file__).parent / "supervisor"
    for path in set(root.glob("*.py")) - {root / "settings.py"}:  # its docstring names one
        text = path.read_text()
        assert 'settings["supervisor.' not in text and "settings['supervisor." not in text, path
