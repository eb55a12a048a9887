"""The PaddedCell daemon: one per host and user, HTTP+JSON on a Unix socket."""
