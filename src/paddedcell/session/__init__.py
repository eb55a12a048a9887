"""An agent session's identity and its channel, one layer below everything that uses them.

A command inside an agent session reaches its supervisor over the session's
channel (a Unix socket, served by ``supervisor/channel.py``); the daemon also
meets session callers on its own socket (``daemon/routes_session.py``). Both
answer for the session's agent only, by the same rules, which live here:

- :mod:`.protocol`: the channel's wire format, the routes a session may use
  (:data:`~.protocol.SESSION_ROUTES`), the one refusal type whose exit code and
  HTTP status come from one table (:class:`~.protocol.Refusal`), and the pure
  :func:`~.protocol.bind` that decides "act as the session's agent";
- :mod:`.client`: the import-light client ``pass_mgr``, ``pcexec``,
  ``paddedcell process`` and the daemon client use inside a session.

``cli/``, ``supervisor/``, ``daemon/`` and ``mcp/`` import this package; it
imports none of them (``tests/test_import_layers.py``). Import-light: the
``pass_mgr`` binary bundles it, and ``pass_mgr get`` starts many times a command.
"""
