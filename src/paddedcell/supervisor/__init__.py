"""Run agents' commands under a PTY or pipes, redacted, bounded and contained.

Trio. :class:`Supervisor` admits and tracks sessions; :class:`Session` pumps one
command's output through one streaming redactor per stream into a bounded ring
buffer; :mod:`.procs` finds and ends a session's whole process tree;
:mod:`.secretflow` resolves ``pass_mgr get`` calls before anything runs.
"""

from .buffers import BudgetExhausted, BufferBudget, OutputBuffer
from .procs import become_subreaper
from .session import Outcome, Session
from .spawn import SandboxUnavailable, SpawnError
from .supervisor import LaunchSpec, LimitReached, Supervisor

__all__ = ["Supervisor", "LaunchSpec", "LimitReached", "Session", "Outcome", "SpawnError",
           "SandboxUnavailable", "BufferBudget", "OutputBuffer", "BudgetExhausted",
           "become_subreaper"]
