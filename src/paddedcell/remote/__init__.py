"""A client for remote OpenClaw gateways: the library under ``paddedcell remote``.

- :mod:`.protocol` — pure: frames, the signed connect, connect errors in words, chat pieces;
- :mod:`.identity` — the Ed25519 device identity;
- :mod:`.store` — ``PADDEDCELL_HOME/remote.db`` (SQLite, WAL, secrets sealed under the host key);
- :mod:`.connection` — one authenticated WebSocket (trio-websocket), and the reconnect loop;
- :mod:`.client` — what the commands do (pair, chat, approvals, status), as events.

Another front end can sit on :class:`.client.RemoteClient` as the CLI does.
"""
