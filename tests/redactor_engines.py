"""The engines the redactor tests run on: both where Hyperscan (pyperscan) is installed,
the portable one alone where it is not (an install without the fast engine)."""

import pytest

from paddedcell.redactor import matcher

NEEDS_HYPERSCAN = pytest.mark.skipif(
    matcher.HYPERSCAN_PROBLEM is not None,
    reason=f"pyperscan (Hyperscan) unavailable here ({matcher.HYPERSCAN_PROBLEM}): the portable engine runs these")

HYPERSCAN = pytest.param(matcher.HyperscanMatcher, id="hyperscan", marks=NEEDS_HYPERSCAN)
PORTABLE = pytest.param(matcher.AhoMatcher, id="portable")
BOTH = [HYPERSCAN, PORTABLE]


@pytest.fixture(autouse=True, scope="module", params=BOTH)
def engine(request):
    """Every test of a module that imports this runs on each engine in turn."""
    saved = matcher.ENGINE
    matcher.ENGINE = request.param
    yield request.param
    matcher.ENGINE = saved


def assert_exact_under_every_split(text: bytes, secret: bytes, expected: bytes) -> None:
    """``text`` redacts to ``expected`` whole, under every single split, and byte by byte
    with the held tail equal to the oracle's after every byte."""
    from paddedcell.redactor import StreamRedactor, redact
    from paddedcell.redactor.oracle import naive_held, patterns_for

    patterns = patterns_for([secret])
    assert redact(text, [secret]) == expected
    for cut in range(1, len(text)):
        r = StreamRedactor([secret])
        assert r.feed(text[:cut]) + r.feed(text[cut:]) + r.flush() == expected, cut
    r, seen, out = StreamRedactor([secret]), b"", b""
    for i in range(len(text)):
        out += r.feed(text[i:i + 1])
        seen += text[i:i + 1]
        assert r.held == naive_held(seen, patterns), seen
    assert out + r.flush() == expected


def assert_chunked_equals_oracle(secrets: list[bytes], data: bytes, cuts: list[int]) -> None:
    """``data`` fed in pieces cut at ``cuts``: held == the oracle's after each piece,
    and the output (and one-shot redaction) == the oracle's."""
    from paddedcell.redactor import StreamRedactor, redact
    from paddedcell.redactor.oracle import naive_held, naive_redact, patterns_for

    patterns = patterns_for(secrets)
    expected = naive_redact(data, patterns)
    r = StreamRedactor(secrets)
    bounds = [0, *cuts, len(data)]
    out, seen = [], b""
    for a, b in zip(bounds, bounds[1:]):
        out.append(r.feed(data[a:b]))
        seen += data[a:b]
        assert r.held == naive_held(seen, patterns), seen
    assert b"".join(out) + r.flush() == expected
    assert redact(data, secrets) == expected
