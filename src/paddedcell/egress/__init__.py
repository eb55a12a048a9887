"""Secretless egress: the session's HTTP(S) proxy, its policy, and (for bound secrets)
placeholders swapped for real values only on the way to the secret's own hosts.

``policy`` is pure; ``proxy`` is the trio edge. See docs/design.md §6.
"""

MODES = ("auto", "always", "off")


def egress_wanted(settings, bindings) -> bool:
    """Whether a session of an agent with these ``bindings`` gets placeholders and the
    intercepting proxy (``egress.mode``: "auto" = when it has a bound secret). Cheap: no
    import of the proxy, the CA or cryptography."""
    mode = settings["egress.mode"]
    if mode not in MODES:
        raise ValueError(f"egress.mode must be auto, always or off, not {mode!r}")
    return mode == "always" or (mode == "auto" and bool(bindings))
