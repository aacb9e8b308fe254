"""Bad input to every public function of ``prereg.stats.paired`` is a ValueError naming
the argument (issue 39, item 8): NaN, infinity, text, empty input, negative and
non-integer counts, levels and alphas outside (0, 1), a support that is not a range.

(No function here takes two arrays or a number of draws, so mismatched lengths and draw
counts have nothing to reach.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from prereg.stats import paired
from prereg.stats.paired import (
    binomial_half_tail,
    binomial_half_tails,
    equivalence_margin,
    exact_equivalence_region,
    mcnemar_exact,
    tango_interval,
    tost_paired,
    upper_region,
)

NAN, INF = math.nan, math.inf
BAD_COUNTS = [-1, -0.5, 1.5, NAN, INF, -INF, "3", True, None]
BAD_LEVELS = [0.0, 1.0, -0.1, 1.5, NAN, INF, "0.05"]
BAD_MARGINS = [0.0, -0.1, NAN, INF, -INF, "0.1"]
D = [1.0, 0.0, -1.0, 0.0, 1.0, 0.0]  # paired binary differences
T = [0.2, -0.1, 0.05, 0.3, 0.0]  # differences of means


def _raises(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """ValueError whose message names ``name`` (as a word)."""
    with pytest.raises(ValueError, match=rf"(?<![\w]){re.escape(name)}(?![\w])"):
        fn(*args, **kwargs)


def test_every_public_function_is_covered() -> None:
    public = {
        name
        for name, value in vars(paired).items()
        if callable(value)
        and not name.startswith("_")
        and getattr(value, "__module__", "") == paired.__name__
    }
    covered = {
        "binomial_half_tail",
        "binomial_half_tails",
        "mcnemar_exact",
        "tango_interval",
        "tost_paired",
        "equivalence_margin",
        "exact_equivalence_region",
        "upper_region",
    }
    assert public == covered


# --------------------------------------------------------------------------- counts


@pytest.mark.parametrize("bad", BAD_COUNTS)
def test_mcnemar_counts(bad: Any) -> None:
    _raises("b", mcnemar_exact, bad, 3)
    _raises("c", mcnemar_exact, 3, bad)


@pytest.mark.parametrize("bad", BAD_COUNTS)
def test_tango_interval_counts(bad: Any) -> None:
    _raises("b", tango_interval, bad, 1, 10)
    _raises("c", tango_interval, 1, bad, 10)
    _raises("n", tango_interval, 1, 1, bad)


def test_tango_interval_impossible_tables() -> None:
    _raises("n", tango_interval, 0, 0, 0)
    _raises("n", tango_interval, 4, 3, 6)  # b + c > n


@pytest.mark.parametrize("bad", BAD_LEVELS)
def test_tango_interval_level(bad: Any) -> None:
    _raises("level", tango_interval, 2, 1, 10, bad)


@pytest.mark.parametrize("bad", BAD_COUNTS)
def test_binomial_half_tails_counts(bad: Any) -> None:
    _raises("k", binomial_half_tail, bad, 5)
    _raises("m", binomial_half_tail, 2, bad)
    _raises("m", binomial_half_tails, bad)
    if bad is not None:  # None is the default of up_to: every k
        _raises("up_to", binomial_half_tails, 5, bad)


def test_binomial_half_tail_k_above_m() -> None:
    # was an IndexError (k > m) and, for k = -1, the p value at k = 0
    _raises("k", binomial_half_tail, 6, 5)
    _raises("k", binomial_half_tail, 30_001, 30_000)  # beyond the exact sums


# --------------------------------------------------------------------------- TOST


@pytest.mark.parametrize(
    "bad",
    [[], [NAN, 0.0], [INF, 1.0], [1.0, -INF], [[1.0, 0.0], [0.0, 1.0]], ["1", "0"], "1"],
)
def test_tost_and_equivalence_margin_differences(bad: Any) -> None:
    _raises("differences", tost_paired, bad, 0.1)
    _raises("differences", equivalence_margin, bad)


@pytest.mark.parametrize("bad", BAD_MARGINS)
def test_tost_margin(bad: Any) -> None:
    _raises("margin", tost_paired, D, bad)
    _raises("margin", tost_paired, T, bad)


@pytest.mark.parametrize("bad", [*BAD_LEVELS, 0.5, 0.7])
def test_tost_and_equivalence_margin_alpha(bad: Any) -> None:
    # a TOST at alpha >= 0.5 would give a (1 - 2 alpha) interval of no width or less
    _raises("alpha", tost_paired, D, 0.1, bad)
    _raises("alpha", tost_paired, T, 0.1, bad)
    _raises("alpha", equivalence_margin, D, bad)
    _raises("alpha", equivalence_margin, T, bad)


@pytest.mark.parametrize("bad", ["bogus", "", None, "EXACT"])
def test_tost_method(bad: Any) -> None:
    _raises("method", tost_paired, D, 0.1, method=bad)
    _raises("method", equivalence_margin, D, method=bad)


def test_tost_binary_methods_refuse_other_differences() -> None:
    _raises("method", tost_paired, T, 0.1, method="exact")
    _raises("method", equivalence_margin, T, method="tango")


@pytest.mark.parametrize(
    "bad",
    [
        (1.0, -1.0),  # reversed
        (0.5, 0.5),  # empty
        (NAN, 1.0),
        (-1.0, INF),
        (-INF, INF),
        (-1.0,),
        (-1.0, 0.0, 1.0),
        1.0,
        "ab",
        ("-1", "1"),
    ],
)
def test_tost_support(bad: Any) -> None:
    _raises("support", tost_paired, T, 0.1, support=bad)
    _raises("support", tost_paired, D, 0.1, support=bad)


def test_tost_differences_outside_the_support() -> None:
    # the mean of n copies of a difference is that difference: all must lie in the range
    _raises("support", tost_paired, [0.2, 1.4, -0.3], 0.1, support=(-1.0, 1.0))
    _raises("support", tost_paired, D, 0.1, support=(0.0, 1.0))


# --------------------------------------------------------------------------- regions


@pytest.mark.parametrize("bad", [*BAD_COUNTS, 0])
def test_region_sizes(bad: Any) -> None:
    _raises("n", exact_equivalence_region, bad, 0.2)
    _raises("n", upper_region, bad, 0.2)


@pytest.mark.parametrize("bad", [*BAD_MARGINS, 1.0, 1.5])
def test_equivalence_region_margin(bad: Any) -> None:
    _raises("margin", exact_equivalence_region, 10, bad)


@pytest.mark.parametrize("bad", [NAN, INF, -INF, 1.5, -1.01, "0.1", None])
def test_upper_region_delta0(bad: Any) -> None:
    _raises("delta0", upper_region, 10, bad)


@pytest.mark.parametrize("bad", BAD_LEVELS)
def test_region_alpha(bad: Any) -> None:
    _raises("alpha", exact_equivalence_region, 10, 0.2, bad)
    _raises("alpha", upper_region, 10, 0.2, bad)


def test_good_input_at_the_edges_still_answers() -> None:
    # the checks refuse only what is wrong: numpy integers, integral floats, the ends
    # of [-1, 1] for delta0, a one-pair TOST, up_to past m
    three: Any = np.int64(3)
    four: Any = 4.0
    assert mcnemar_exact(three, four).n == 7
    assert binomial_half_tails(4, 10) == binomial_half_tails(4)
    assert binomial_half_tail(0, 0) == 1.0
    assert not upper_region(5, -1.0).any()  # H0: delta >= -1 is everything
    assert upper_region(5, 1.0).sum() == 20  # all but b = n (21 outcomes)
    res = tost_paired([0.5], 0.1)
    assert math.isnan(res.pvalue) and not res.equivalent
    as_array: Any = np.array([-1.0, 1.0])
    assert tost_paired(D, 0.1, support=as_array).note == ""
