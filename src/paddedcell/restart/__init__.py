"""Fleet-wide safe gateway restarts: a pure state machine, its store, and the job.

``machine`` is pure (no I/O, no Trio); ``store`` writes files atomically;
``coordinator`` and ``job`` are the daemon side.
"""
