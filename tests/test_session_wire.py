"""The session channel's client: ``json``'s answers without ``json``'s start-up (issue 21).

``pass_mgr get`` inside a session is one short exchange in a fresh interpreter, so
its client speaks the wire through ``_json`` and ``_socket`` (``session/wire.py``).
What it writes and reads must be exactly what ``json`` writes and reads, and a real
in-session ``pass_mgr get`` must not import the heavy modules again.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paddedcell.session.wire import decode_line, encode_line
from supervisor_helpers import BIN, base_env, give_workspace, init_vault, set_secret

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(),
                    st.text(), st.floats(allow_nan=False))
DOCUMENTS = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), st.one_of(SCALARS, DOCUMENTS), max_size=5))
def test_a_request_line_is_what_json_writes(message):
    try:
        expected = json.dumps(message, ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: neither path can send it
        with pytest.raises(UnicodeEncodeError):
            encode_line(message)
        return
    assert encode_line(message) == expected


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS, st.sampled_from(["", " ", "\n", "\r\n", "\t "]))
def test_an_answer_line_reads_as_json_reads_it(document, blanks):
    raw = (blanks + json.dumps(document, ensure_ascii=bool(len(blanks) % 2)) + blanks
           + "\n").encode("utf-8", "surrogatepass")
    try:
        expected = json.loads(raw)
    except ValueError:
        with pytest.raises(ValueError):
            decode_line(raw)
        return
    assert decode_line(raw) == expected


@pytest.mark.parametrize("raw", [b"", b"\n", b"{", b'{"ok": true}{}', b'{"ok": tru}',
                                 b"\xff\n", b'{"a": 1} x', b"[1,]", b'"\x01"'])
def test_what_json_refuses_the_wire_refuses(raw):
    with pytest.raises(ValueError):
        json.loads(raw)
    with pytest.raises(ValueError):
        decode_line(raw)


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and "imported package" not in line}


def test_pass_mgr_get_in_a_session_imports_no_json_socket_vault_or_config(tmp_path):
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(mode=0o700)
    ws.mkdir(mode=0o700)
    admin = "admin-pw-for-wire-tests-1"
    init_vault(home, admin)
    set_secret(home, "a1", ws, "db", "wire-test-value-0123456789", admin)
    give_workspace(home, "a1", ws)
    # The script lives in the workspace: the sandbox shows the session nothing else.
    (ws / "probe.sh").write_text(
        "PYTHONPROFILEIMPORTTIME=1 python3 -c pass 2>base.txt\n"
        "K=db; PYTHONPROFILEIMPORTTIME=1 pass_mgr get $K 2>get.txt >value.txt; echo rc=$?\n"
        "K=nope; pass_mgr get $K; echo rc=$?\n")
    env = base_env(home, AGENT_ID="a1", AGENT_WORKSPACE=str(ws))
    out = subprocess.run([str(BIN / "pcexec"), "bash probe.sh"], env=env, cwd=str(ws),
                         capture_output=True, text=True, timeout=120)
    assert "rc=0" in out.stdout and "rc=4" in out.stdout, out.stdout + out.stderr
    assert "no secret named 'nope'" in out.stdout + out.stderr
    assert (ws / "value.txt").read_text() == "wire-test-value-0123456789\n"
    own = _imported((ws / "get.txt").read_text()) - _imported((ws / "base.txt").read_text())
    assert "paddedcell.session.wire" in own  # the channel answered, not the vault
    for heavy in ("json", "socket", "re", "enum", "selectors", "cryptography",
                  "paddedcell.vault", "paddedcell.config", "click"):
        assert not {m for m in own if m == heavy or m.startswith(heavy + ".")}, (heavy, own)
