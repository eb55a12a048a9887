"""Placeholders: what a session holds instead of a bound secret's value. Pure.

A placeholder looks like the value to the client that checks its format (Codex's lesson:
``gh`` refuses a token without ``ghp_``, the AWS SDK one whose length is wrong): the same
length, the same public prefix (``ghp_``, ``github_pat_``, ``sk-ant-``, ``xoxb-``, ``AKIA``…),
and at every other position a random character of the same class (upper, lower, digit),
punctuation kept where it was (``xoxb-1-2-abc`` keeps its dashes). It is drawn fresh for
each session from the OS CSPRNG and is never equal to any real value of the store, so the
proxy can tell it apart and nothing that learns it learns the value.
"""

from __future__ import annotations

import secrets
import string

#: Public prefixes a format check looks for, longest first (so ``sk-ant-`` beats ``sk-``).
KNOWN_PREFIXES = tuple(sorted((
    "github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "sk-ant-api03-", "sk-ant-admin01-", "sk-ant-", "sk-proj-", "sk-svcacct-", "sk-", "rk_live_",
    "sk_live_", "sk_test_", "pk_live_", "pk_test_",
    "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xapp-",
    "AKIA", "ASIA", "AIza", "glpat-", "npm_", "pypi-", "hf_", "SG.", "dop_v1_", "shpat_",
    "lin_api_", "pat-",
), key=len, reverse=True))

#: Fewer random positions than this and a placeholder could be guessed to collide with
#: text the client sends anyway; such a value cannot be bound usefully.
MIN_RANDOM_POSITIONS = 8

_CLASSES = (string.ascii_uppercase, string.ascii_lowercase, string.digits)


class PlaceholderError(ValueError):
    """The value has too few positions to randomise; ``str()`` says what to do."""


def public_prefix(value: str) -> str:
    return next((p for p in KNOWN_PREFIXES if value.startswith(p)), "")


def make_placeholder(value: str, avoid: frozenset[str] | set[str] = frozenset(), *,
                     choice=secrets.choice) -> str:
    """A fresh placeholder shaped like ``value``, equal to none of ``avoid`` (the store's
    values) nor to ``value``; ``choice`` is the randomness seam for tests."""
    prefix = public_prefix(value)
    rest = value[len(prefix):]
    random_positions = sum(1 for c in rest if _class_of(c) is not None)
    if random_positions < MIN_RANDOM_POSITIONS:
        raise PlaceholderError(
            f"the value has only {random_positions} letters and digits after its prefix; "
            f"a bound secret needs at least {MIN_RANDOM_POSITIONS} (pass_mgr bind --unbind, "
            "or set a longer value)")
    for _ in range(100):
        drawn = prefix + "".join(choice(_class_of(c)) if _class_of(c) is not None else c
                                 for c in rest)
        if drawn != value and drawn not in avoid:
            return drawn
    raise PlaceholderError("could not draw a placeholder unlike the store's values")


def _class_of(char: str) -> str | None:
    return next((chars for chars in _CLASSES if char in chars), None)


def same_shape(a: str, b: str) -> bool:
    """Same length, prefix and character class at every position (the tests' oracle)."""
    return (len(a) == len(b) and public_prefix(a) == public_prefix(b)
            and all(_class_of(x) == _class_of(y) and (_class_of(x) is not None or x == y)
                    for x, y in zip(a, b)))
