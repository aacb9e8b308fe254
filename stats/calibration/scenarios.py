"""The scenarios each test is judged in, and what realises them in the population.

Scenarios. ``null``: no treatment effect (the arms are exchangeable on every prompt, so
every registrable null hypothesis holds, while the run shifts of each arm still differ);
``planned effect``: the latent effect whose true difference of mean outcomes is the
planned effect, in the primary test's favoured direction. An equivalence test (TOST) is
judged the other way round: its type I error is the rate of declaring equivalence when its
own estimand sits on the margin (in the planned direction), its power the rate at no
effect. The stopping rule's type I error is the chance that the e-process ever crosses
its threshold with no effect (Ville's bound 1/threshold is its nominal), its power the
chance that it crosses in the planned direction.

This module names the scenarios, the estimand whose true value a test's interval is
judged against, and the per-arm latent effects that make a registered contrast show the
planned effect (the population itself: :mod:`prereg.stats.calibration_model`).
"""

from __future__ import annotations

import numpy as np

from prereg.stats._scipy import optimize
from prereg.stats.calibration.plans import PlannedTest
from prereg.stats.calibration_model import Population


def _effect_sign(effect: float) -> int:
    return 1 if effect >= 0 else -1


def estimand(plan: PlannedTest) -> str:
    """The per-task aggregate whose difference the test's interval estimates."""
    if plan.test == "paired_bootstrap":
        return "mean"  # every run's rows
    if plan.test in ("tost_paired", "sign_flip_test", "exact_permutation_test"):
        return plan.aggregate
    return plan.binary_aggregate


def _scenarios(plan: PlannedTest) -> list[tuple[str, str]]:
    """(key of the effect, scenario name) pairs a test is judged in."""
    if plan.test == "tost_paired":
        return [(_margin_key(plan), "margin"), ("null", "equivalence")]
    return [("null", "null"), ("planned effect", "planned effect")]


def _margin_key(plan: PlannedTest) -> str:
    return f"margin {plan.aggregate} {plan.margin!r}"


def _contrast_deltas(
    pop: Population, weights: tuple[float, ...], effect: float
) -> tuple[tuple[float, ...], float, str]:
    """Per-arm latent effects c w_k whose contrast of mean outcomes is ``effect`` (c by
    root-finding), the contrast's true value, and a note when the effect had to be capped
    at 0.9 of the largest the population can show."""
    w = np.asarray(weights, dtype=np.float64)

    def value(c: float) -> float:
        return float(sum(wk * pop.truth("mean", c * wk) for wk in w if wk != 0.0))

    sign = 1.0 if effect >= 0 else -1.0
    limits = [pop.max_shift(int(np.sign(sign * wk))) / abs(wk) for wk in w if wk != 0.0]
    c_max = sign * min(limits) * (1.0 - 1e-9)
    reach = value(c_max)
    note = ""
    target = effect
    if abs(effect) >= abs(reach) * 0.999:
        target = 0.9 * reach
        note = (
            f"the planned effect {abs(effect):.3f} is beyond what the contrast can show "
            f"(at most {abs(reach):.3f}); taken as {abs(target):.3f}"
        )
    lo, hi = sorted((0.0, c_max))
    c = float(optimize.brentq(lambda x: value(x) - target, lo, hi, xtol=1e-10, rtol=1e-10))
    return tuple(float(c * wk) for wk in w), value(c), note
