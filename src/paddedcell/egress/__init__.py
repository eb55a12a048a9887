"""Secretless egress: the session's HTTP(S) proxy, its policy, and (for bound secrets)
placeholders swapped for real values only on the way to the secret's own hosts.

``policy`` is pure; ``proxy`` is the trio edge. See docs/design.md §6.
"""
