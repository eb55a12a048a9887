"""The engines the redactor tests run on: both where Hyperscan is installed,
the portable one alone where it is not (an install without the fast engine)."""

import pytest

from paddedcell.redactor import matcher

NEEDS_HYPERSCAN = pytest.mark.skipif(
    matcher.HYPERSCAN_PROBLEM is not None,
    reason=f"hyperscan unavailable here ({matcher.HYPERSCAN_PROBLEM}): the portable engine runs these")

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
