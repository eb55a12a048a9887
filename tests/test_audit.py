"""The audit log: one JSON line per record, one write, 0600, no interleaving."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path
from unittest import mock

import pytest

from paddedcell import config
from paddedcell.audit import AUDIT_FILE_NAME, AuditLog


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_record_is_one_json_line(tmp_path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record("exec.started", agent="a1", session="s1", command="echo 'multi\nline'", pid=42)
    log.record("exec.finished", agent="a1", session="s1", exitCode=0, durationMs=5)
    raw = (tmp_path / "audit.jsonl").read_bytes()
    assert raw.count(b"\n") == 2 and raw.endswith(b"\n")
    first, second = read_lines(tmp_path / "audit.jsonl")
    assert first["event"] == "exec.started" and first["command"] == "echo 'multi\nline'"
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert list(first)[:2] == ["time", "event"]
    assert second["exitCode"] == 0


def test_file_is_private(tmp_path) -> None:
    path = tmp_path / "sub" / "audit.jsonl"
    AuditLog(path).record("x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.chmod(0o644)
    AuditLog(path).record("y")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_one_write_per_record(tmp_path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    real_write = os.write
    with mock.patch("paddedcell.audit.os.write", side_effect=real_write) as write:
        log.record("exec.denied", reason="refused: pass_mgr set", command="x" * 3000)
    assert write.call_count == 1
    data = write.call_args.args[1]
    assert data.endswith(b"\n") and data.count(b"\n") == 1


def test_appends_with_o_append(tmp_path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    real_open = os.open
    with mock.patch("paddedcell.audit.os.open", side_effect=real_open) as opened:
        log.record("x")
    flags = opened.call_args.args[1]
    assert flags & os.O_APPEND and flags & os.O_CREAT and flags & os.O_NOFOLLOW


def test_refuses_a_symlink(tmp_path) -> None:
    """Adversarial: a symlink planted at the log path must not redirect writes."""
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "audit.jsonl").symlink_to(target)
    with pytest.raises(OSError):
        AuditLog(tmp_path / "audit.jsonl").record("x")
    assert target.read_text() == ""


def test_long_fields_are_cut(tmp_path) -> None:
    log = AuditLog(tmp_path / "a.jsonl", max_field_chars=10)
    log.record("x", command="y" * 50, nested={"k": ["z" * 50]}, n=12345678901234)
    (rec,) = read_lines(tmp_path / "a.jsonl")
    assert rec["command"] == "y" * 10 + "…[truncated]"
    assert rec["nested"] == {"k": ["z" * 10 + "…[truncated]"]}
    assert rec["n"] == 12345678901234


def test_reserved_field_names(tmp_path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        AuditLog(tmp_path / "a.jsonl").record("x", time="now")


def test_non_json_values_are_stringified(tmp_path) -> None:
    AuditLog(tmp_path / "a.jsonl").record("x", path=tmp_path, data=b"raw")
    (rec,) = read_lines(tmp_path / "a.jsonl")
    assert rec["path"] == str(tmp_path)


def test_for_settings_uses_home(tmp_path) -> None:
    settings = config.load(environ={"PADDEDCELL_HOME": str(tmp_path)})
    log = AuditLog.for_settings(settings)
    assert log.path == tmp_path / AUDIT_FILE_NAME
    log.record("daemon.started")
    assert read_lines(tmp_path / AUDIT_FILE_NAME)[0]["event"] == "daemon.started"


def _writer(path: str, worker: int, count: int, size: int) -> None:
    log = AuditLog(path, max_field_chars=size + 10)
    for i in range(count):
        log.record("exec.finished", worker=worker, i=i, blob=chr(ord("a") + worker) * size)


@pytest.mark.parametrize("size", [100, 6000])
def test_concurrent_writers_never_interleave(tmp_path, size) -> None:
    path = str(tmp_path / "audit.jsonl")
    workers, count = 4, 150
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w, count, size)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records = read_lines(Path(path))  # every line parses: no torn or merged lines
    assert len(records) == workers * count
    for rec in records:
        assert rec["blob"] == chr(ord("a") + rec["worker"]) * size
    for w in range(workers):
        assert [r["i"] for r in records if r["worker"] == w] == list(range(count))
