"""The exec contract: OpenClaw's exec/process requests and results, pure.

- :mod:`.request` — parse and check exec requests and process actions
  (fields, defaults, clamps, the host environment guard);
- :mod:`.results` — build exec and process results in OpenClaw's exact shapes
  (``results/shared.py``, ``results/exec.py``, ``results/process.py``);
- :mod:`.keys` — ``send-keys``/``paste``/``submit`` bytes (OpenClaw's pty-keys);
- :mod:`.bash_lexer` — the simple commands of a shell text, as bash reads them;
- :mod:`.commands` — find ``pass_mgr`` calls in those commands (by pass_mgr's one
  grammar, :mod:`paddedcell.pass_mgr_grammar`), refuse the dangerous ones.

Nothing here does I/O or imports Trio: the supervisor and daemon build on it.
"""

from .commands import CommandRefused, PassMgrCall, check_command, find_pass_mgr_calls
from .keys import SUBMIT, decode_hex, encode_keys, encode_paste
from .request import (
    ExecRequest,
    ProcessAction,
    RequestError,
    check_env,
    parse_exec_request,
    parse_process_action,
)
from .results import SessionView, slice_lines

__all__ = [
    "SUBMIT",
    "CommandRefused",
    "ExecRequest",
    "PassMgrCall",
    "ProcessAction",
    "RequestError",
    "SessionView",
    "check_command",
    "check_env",
    "decode_hex",
    "encode_keys",
    "encode_paste",
    "find_pass_mgr_calls",
    "parse_exec_request",
    "parse_process_action",
    "slice_lines",
]
