"""Run agents' commands under a PTY or pipes, redacted, bounded and contained.

Trio. :class:`Supervisor` admits and tracks sessions; :class:`Session` pumps one
command's output through one streaming redactor per stream into a bounded ring
buffer; :mod:`.procs` finds and ends a session's whole process tree;
:mod:`.secretflow` resolves ``pass_mgr get`` calls before anything runs.

The names below load with their module at first use, so that importing one module
of the package (``pcexec`` starts :mod:`.sandbox`'s probe before it imports Trio)
does not import them all.
"""

from __future__ import annotations

import importlib

_HOMES = {"BudgetExhausted": "buffers", "BufferBudget": "buffers", "OutputBuffer": "buffers",
          "become_subreaper": "procs", "Outcome": "session", "Session": "session",
          "SandboxUnavailable": "spawn", "SpawnError": "spawn", "LaunchSpec": "supervisor",
          "LimitReached": "supervisor", "Supervisor": "supervisor"}

__all__ = ["Supervisor", "LaunchSpec", "LimitReached", "Session", "Outcome", "SpawnError",
           "SandboxUnavailable", "BufferBudget", "OutputBuffer", "BudgetExhausted",
           "become_subreaper"]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value
