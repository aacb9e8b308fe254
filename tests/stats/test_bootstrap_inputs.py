"""Bad input to the bootstrap, contrast and enumeration functions (issue 39, item 8).

Each case must raise ValueError naming the argument: NaN, infinity, empty input, negative
or non-integral counts, mismatched lengths, non-positive draw counts, levels outside
(0, 1), missing labels (numpy would merge every NaN label into one resampled unit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from prereg.stats import (
    bootstrap_multiset_count,
    bootstrap_multisets,
    check_weights,
    contrast_bootstrap,
    contrast_sign_flip,
    draws_for_mc_se,
    factorial_weights,
    holm_mc_se,
    mc_standard_error,
    paired_bootstrap,
    resampled_contrast,
)

Y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
Z = np.array([1.0, 1.0, 0.0, 1.0, 1.0])
P = np.arange(5)
V = np.random.default_rng(0).random((6, 2))
W = [-1.0, 1.0]
CELLS = [{"a": a, "b": b} for a in ("lo", "hi") for b in ("lo", "hi")]

CASES: list[tuple[str, Callable[[], Any], str]] = [
    # paired_bootstrap
    ("nan prompt labels", lambda: paired_bootstrap(Y, Z, [0, 1, np.nan, np.nan, 2]), "prompts"),
    (
        "missing prompt label",
        lambda: paired_bootstrap(Y, Z, np.array(["a", "b", None, "c", "d"], dtype=object)),
        "prompts",
    ),
    (
        "nan run label",
        lambda: paired_bootstrap(Y, Z, P, [0, 1, np.nan, 0, 1], [0, 1, 0, 1, 0]),
        "runs_control",
    ),
    ("infinite outcome", lambda: paired_bootstrap([0, math.inf, 1, 0, 1], Z, P), "control"),
    ("nan outcome", lambda: paired_bootstrap(Y, [0, math.nan, 1, 0, 1], P), "treatment"),
    ("empty", lambda: paired_bootstrap([], [], []), "control"),
    ("mismatched arms", lambda: paired_bootstrap(Y, Z[:4], P), "control and treatment"),
    ("mismatched labels", lambda: paired_bootstrap(Y, Z, P[:4]), "prompts"),
    ("zero draws", lambda: paired_bootstrap(Y, Z, P, draws=0), "draws"),
    ("infinite draws", lambda: paired_bootstrap(Y, Z, P, draws=math.inf), "draws"),
    ("nan draws", lambda: paired_bootstrap(Y, Z, P, draws=math.nan), "draws"),
    ("fractional draws", lambda: paired_bootstrap(Y, Z, P, draws=1.5), "draws"),
    ("negative seed", lambda: paired_bootstrap(Y, Z, P, seed=-1), "seed"),
    ("fractional seed", lambda: paired_bootstrap(Y, Z, P, seed=1.5), "seed"),  # type: ignore[arg-type]
    ("level 1", lambda: paired_bootstrap(Y, Z, P, level=1.0), "level"),
    ("nan level", lambda: paired_bootstrap(Y, Z, P, level=math.nan), "level"),
    # contrast_bootstrap and contrast_sign_flip
    ("nan cell", lambda: contrast_bootstrap(np.array([[1, np.nan], [0, 1]]), W), "values"),
    ("infinite cell", lambda: contrast_bootstrap(np.array([[1, np.inf], [0, 1]]), W), "values"),
    ("no row", lambda: contrast_bootstrap(np.zeros((0, 2)), W), "values"),
    ("text cells", lambda: contrast_bootstrap([["1", "0"], ["0", "1"]], W), "values"),
    ("text weights", lambda: contrast_bootstrap(V, ["-1", "1"]), "weights"),
    ("nan weight", lambda: contrast_bootstrap(V, [math.nan, 1.0]), "weights"),
    ("weights per cell", lambda: contrast_bootstrap(V, [-1.0, 0.5, 0.5]), "weights"),
    (
        "nan unit labels",
        lambda: contrast_bootstrap(V, W, units=[0, 0, 1, 1, np.nan, np.nan]),
        "units",
    ),
    ("unit labels per row", lambda: contrast_bootstrap(V, W, units=[0, 1]), "units"),
    ("zero draws (contrast)", lambda: contrast_bootstrap(V, W, draws=0), "draws"),
    ("negative draws", lambda: contrast_bootstrap(V, W, draws=-5), "draws"),
    ("level 0", lambda: contrast_bootstrap(V, W, level=0.0), "level"),
    ("level above 1", lambda: contrast_bootstrap(V, W, level=1.2), "level"),
    ("negative seed (contrast)", lambda: contrast_bootstrap(V, W, seed=-3), "seed"),
    ("unknown interval", lambda: contrast_bootstrap(V, W, small_clusters="bca"), "small_clusters"),  # type: ignore[arg-type]
    ("zero draws (sign flip)", lambda: contrast_sign_flip(V, W, draws=0), "draws"),
    (
        "nan units (sign flip)",
        lambda: contrast_sign_flip(V, W, units=[0, 0, 1, 1, 2, np.nan]),
        "units",
    ),
    ("nan sum", lambda: check_weights(W, sum_to=math.nan), "sum_to"),
    ("nan cell count", lambda: check_weights(W, n_cells=math.nan), "n_cells"),  # type: ignore[arg-type]
    ("negative cell count", lambda: check_weights(W, n_cells=-1), "n_cells"),
    ("no factor", lambda: factorial_weights(CELLS, "a", {}), "low_high"),
    # enumeration
    ("zero draws (resampled)", lambda: resampled_contrast(V, W, draws=0), "draws"),
    (
        "zero enumeration limit",
        lambda: resampled_contrast(V, W, max_enumerated=0),
        "max_enumerated",
    ),
    ("level 1 (resampled)", lambda: resampled_contrast(V, W, level=1.0), "level"),
    ("no units", lambda: bootstrap_multiset_count(0), "units"),
    ("fractional units", lambda: bootstrap_multiset_count(2.5), "units"),  # type: ignore[arg-type]
    ("nan units", lambda: bootstrap_multisets(math.nan), "units"),  # type: ignore[arg-type]
    ("nan p", lambda: mc_standard_error(math.nan, 100), "pvalue"),
    ("p above 1", lambda: mc_standard_error(1.5, 100), "pvalue"),
    ("zero draws (MC SE)", lambda: mc_standard_error(0.05, 0), "draws"),
    ("negative draws (MC SE)", lambda: mc_standard_error(0.05, -1), "draws"),
    ("no test", lambda: draws_for_mc_se(0.05, 0), "tests"),
    ("zero target", lambda: draws_for_mc_se(0.05, 1, 0.0), "target"),
    ("alpha 1", lambda: draws_for_mc_se(1.0, 1), "alpha"),
    ("no p", lambda: holm_mc_se([], []), "pvalues"),
    ("mismatched errors", lambda: holm_mc_se([0.1, 0.2], [0.01]), "mc_ses"),
    ("nan p (Holm)", lambda: holm_mc_se([0.1, math.nan], [0.01, 0.01]), "pvalues"),
    ("negative error", lambda: holm_mc_se([0.1, 0.2], [0.01, -0.01]), "mc_ses"),
    ("p above 1 (Holm)", lambda: holm_mc_se([0.1, 1.2], [0.01, 0.01]), "pvalues"),
]


@pytest.mark.parametrize(("case", "call", "name"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_value_error_naming_the_argument(
    case: str, call: Callable[[], Any], name: str
) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def test_valid_edges_still_work() -> None:
    # integral floats and numpy integers are counts; a seed above 2^53 is kept exactly
    a = paired_bootstrap(Y, Z, P, draws=np.int64(50), seed=2**60 + 1)
    b = paired_bootstrap(Y, Z, P, draws=50.0, seed=2**60 + 1)
    assert np.array_equal(a.distribution, b.distribution)
    assert not np.array_equal(
        a.distribution, paired_bootstrap(Y, Z, P, draws=50, seed=2**60).distribution
    )
    # string labels (not missing) are labels
    labels = np.array(["a", "b", "b", "c", "d"], dtype=object)
    assert paired_bootstrap(Y, Z, labels, draws=20).n == 4
    assert mc_standard_error(0.0, 10) == 0.0 and mc_standard_error(1.0, 10) == 0.0
