"""Strict input validation (issue 14, item 5): a ValueError naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from prereg.stats import (
    design_effect,
    icc_binary,
    jeffreys_interval,
    loss_shares,
    mcnemar_exact,
    mde_paired,
    pass_hat_k,
    sign_flip_test,
    tango_interval,
    tost_paired,
)


@pytest.mark.parametrize("rho", [-0.1, 1.5, float("nan"), [0.2, -0.01], "0.3"])
def test_design_effect_refuses_rho_outside_0_1(rho: object) -> None:
    with pytest.raises(ValueError, match="rho"):
        design_effect([3, 3, 4], rho)


@pytest.mark.parametrize("sizes", [[3, -1, 4], [], ["3", "4"], "34"])
def test_design_effect_refuses_bad_sizes(sizes: object) -> None:
    with pytest.raises(ValueError, match="cluster_sizes"):
        design_effect(sizes, 0.1)


def test_design_effect_edges_still_accepted() -> None:
    assert design_effect([2, 2], 0.0) == 1.0
    assert design_effect([2, 2], 1.0) == 2.0  # Kish: 1 + (Kbar - 1) rho
    assert np.allclose(design_effect([3, 3], np.array([0.0, 0.5])), [1.0, 2.0])


@pytest.mark.parametrize("k", [2.5, -1, "3", True, float("nan")])
def test_pass_hat_k_refuses_non_integer_k(k: object) -> None:
    with pytest.raises(ValueError, match="k must"):
        pass_hat_k(3, 5, k)  # type: ignore[arg-type]


def test_pass_hat_k_integral_k_and_counts() -> None:
    assert pass_hat_k(3, 5, 2) == pytest.approx(3 * 2 / (5 * 4))
    assert pass_hat_k(3, 5, np.int64(2)) == pass_hat_k(3, 5, 2.0)
    with pytest.raises(ValueError, match="c must"):
        pass_hat_k("3", 5, 2)
    with pytest.raises(ValueError, match="n must"):
        pass_hat_k(3, ["5"], 2)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: mcnemar_exact("4", 1), "b"),
        (lambda: mcnemar_exact(4, b"1"), "c"),
        (lambda: mcnemar_exact(True, 1), "b"),
        (lambda: tango_interval(3, 1, "20"), "n"),
        (lambda: jeffreys_interval("3", 10), "successes"),
        (lambda: jeffreys_interval(3, np.array(["10"])), "trials"),
        (lambda: sign_flip_test(["1", "2"]), "differences"),
        (lambda: sign_flip_test(np.array([1, "2"], dtype=object)), "differences"),
        (lambda: tost_paired([0.0, 1.0], "0.1"), "margin"),
        (lambda: tost_paired([0.0, 1.0], 0.1, alpha="0.05"), "alpha"),
        (lambda: mde_paired("0.3", 50), "sigma_d"),
        (lambda: mde_paired(0.3, "50"), "prompts"),
        (lambda: icc_binary(["1", "0"], [1, 1]), "outcomes"),
        (lambda: loss_shares(["0.5", "0.9"]), "rates"),
    ],
)
def test_text_is_refused_naming_the_argument(call: object, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()  # type: ignore[operator]
