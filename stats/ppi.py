"""Prediction-powered inference for judged completion rates and their differences.

A model judge scores every run; a small gold set of runs also carries a human label.
The judge's rate alone is biased by its errors; the gold labels alone are few. PPI
(Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, Science 382:669-674, 2023) uses the
gold set to measure the judge's bias (the rectifier) and the unlabelled runs to pin down
the rest:

    theta_hat = mean(f~_1..N) + mean(Y_i - f_i, i = 1..n),

with a CLT interval theta_hat +- z sqrt(s^2(f~) / N + s^2(Y - f) / n). It is valid
whatever the judge's error rate (a biased judge is corrected, a poor one only widens the
interval) and narrower than the gold-only interval when the judge agrees with the gold.
PPI++ (Angelopoulos, Duchi and Zrnic, "PPI++: efficient prediction-powered inference",
arXiv:2311.01453, 2023) scales the judge by a power-tuning lambda in [0, 1],

    theta_hat = lambda mean(f~) + mean(Y - lambda f),

with lambda = Cov(Y, f) / ((1 + n / N) Var(f)) estimated from the data and clipped to
[0, 1]: never wider than the gold-only interval asymptotically (lambda = 0 is it), equal
to PPI at lambda = 1.

Assumptions, said once here and in every result's ``method``:

- The gold runs are a simple random sample of the judged runs (drawn by a registered
  seed, not picked after reading verdicts), and the unlabelled runs are the remaining
  judged runs: both sets come from one population, and the judge is the same on both.
  Pass one value per independent unit: with repeated runs of a task, pass per-task
  means (floats in [0, 1]), since the CLT below treats values as independent.
- The interval is asymptotic (a CLT in both n and N). With a small gold set the sample
  variance of the rectifier is unreliable, and with a good judge it is often exactly 0
  (no disagreement among 20 gold runs happens with probability 0.36 at a 5% error
  rate), which would leave an interval as narrow as if the judge were perfect.
- Small gold sets: refused, and floored. Fewer than ``min_gold`` (default 100) gold
  units raise a ValueError naming the argument. ``bench/ppi_coverage.py`` (1,000
  replications a row, 95% level, N = 1,000, judge error rates 2%-20%) finds every
  row within 1.7 points of nominal from 100 gold units (PPI 0.933-0.960, PPI++
  0.937-0.957), but at 50 units a judge that misses 10% of completions and never errs
  the other way covers 0.92, at 30 units (20% missed) 0.89: the rectifier is then a
  rare Bernoulli, and its Wald-type interval fails as it does for rare proportions.
  At 20-30 units even the gold-only interval covers 0.90-0.95. Below 100 pass
  ``min_gold`` deliberately (and say so) or show the judge's rate as uncalibrated.
  The rectifier's variance is floored at 1 / n (PPI; (1 + lambda)^2 / 4n for PPI++),
  the variance of a gold set showing exactly one disagreement: a gold set with none
  would otherwise give an interval as narrow as a perfect judge's. The
  floor binds only when almost no disagreement is seen (it makes a near-perfect judge's
  interval conservative on small gold sets: 0.98-1.00 at 20-50 units, e = 2%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prereg.stats._dist import norm_ppf
from prereg.stats._validate import count, probability, same_length, vector

__all__ = ["PPIResult", "ppi_mean", "ppi_difference", "PPI_MIN_GOLD"]

#: the default smallest gold set (units) accepted; see the module docstring
PPI_MIN_GOLD = 100

PPIMethod = Literal["ppi", "ppi++"]


@dataclass(frozen=True)
class PPIResult:
    """A prediction-powered estimate (a rate, or a difference treatment - control).

    ``estimate``, ``low``, ``high``, ``se``: the PPI (or PPI++) estimate and its CLT
    interval. ``judge_rate``: the raw judge-only figure over every judged unit (gold and
    unlabelled), an uncalibrated number shown beside the corrected one, never instead
    of it. ``gold_rate``, ``gold_low``, ``gold_high``: the classical estimate and CLT
    interval from the gold labels alone (variance floored at 1/4n), for comparison.
    ``rectifier``: the judge's bias as the gold set measures it, mean(Y) - mean(f) on
    the gold units (positive: the judge under-counts).
    ``lam``: the power-tuning factor(s): one for a rate or a paired difference, two
    (control, treatment) for an unpaired difference. ``n_gold``/``n_unlabelled``: units
    (per arm for an unpaired difference, summed). ``paired`` is None for a single rate.
    """

    estimate: float
    low: float
    high: float
    level: float
    se: float
    judge_rate: float
    gold_rate: float
    gold_low: float
    gold_high: float
    rectifier: float
    lam: tuple[float, ...]
    n_gold: int
    n_unlabelled: int
    paired: bool | None
    method: str


@dataclass(frozen=True)
class _Part:
    """One PPI fit: estimate, its variance, lambda and the figures shown beside it."""

    estimate: float
    var: float
    lam: float
    judge: float
    gold: float
    gold_var: float
    rectifier: float
    n: int
    big_n: int


def _floored_var(values: NDArray[np.float64], half_range: float) -> float:
    """Sample variance (ddof 1), floored at half_range^2 / n.

    For the rectifier Y - f the floor is 1 / n, the variance of n values of which one
    is a disagreement (+-1) and the rest agree: a gold set that shows none is treated as
    if it had shown one, so the interval never claims a perfect judge.
    """
    n = values.size
    return max(float(np.var(values, ddof=1)), half_range**2 / n)


def _lambda(y: NDArray[np.float64], f: NDArray[np.float64], f_all: NDArray[np.float64]) -> float:
    """PPI++ power tuning for a mean: Cov(Y, f) / ((1 + n / N) Var(f)), clipped to [0, 1].

    Var(f) over all predictions (gold and unlabelled), as Angelopoulos, Duchi and Zrnic
    (2023) derive it for a mean and their ppi_py package computes it; 0 when the judge
    never varies.
    """
    n, big_n = y.size, f_all.size - y.size
    var_f = float(np.var(f_all, ddof=1))
    if var_f <= 0.0 or n < 2:
        return 0.0
    cov = float(np.cov(y, f, ddof=1)[0, 1])
    return float(np.clip(cov / ((1.0 + n / big_n) * var_f), 0.0, 1.0))


def _fit(
    y: NDArray[np.float64],
    f: NDArray[np.float64],
    ft: NDArray[np.float64],
    method: PPIMethod,
    half_range: float,
) -> _Part:
    """PPI on one set of values (labels and predictions alike) of range 2 ``half_range``.

    The floors: the rectifier's at one single-arm disagreement, (1 + lambda)^2 / 4 n
    (1 / n for PPI); the unlabelled and gold-only variances' at half the values' range
    squared over the size.
    """
    f_all = np.concatenate([f, ft])
    lam = 1.0 if method == "ppi" else _lambda(y, f, f_all)
    rect = y - lam * f
    var_rect = _floored_var(rect, (1.0 + lam) / 2.0)
    var_unl = lam**2 * _floored_var(ft, half_range)
    n, big_n = y.size, ft.size
    return _Part(
        estimate=lam * float(ft.mean()) + float(rect.mean()),
        var=var_rect / n + var_unl / big_n,
        lam=lam,
        judge=float(f_all.mean()),
        gold=float(y.mean()),
        gold_var=_floored_var(y, half_range) / n,
        rectifier=float(y.mean() - f.mean()),
        n=n,
        big_n=big_n,
    )


def _check_method(method: str) -> PPIMethod:
    if method == "ppi":
        return "ppi"
    if method == "ppi++":
        return "ppi++"
    raise ValueError(f"method must be 'ppi' or 'ppi++', got {method!r}")


def _arm(
    labels: ArrayLike,
    predictions: ArrayLike,
    unlabelled: ArrayLike,
    names: tuple[str, str, str],
    min_gold: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Validated gold labels, gold predictions and unlabelled predictions in [0, 1]."""
    y = vector(labels, names[0])
    f = vector(predictions, names[1])
    ft = vector(unlabelled, names[2])
    for arr, name in ((y, names[0]), (f, names[1]), (ft, names[2])):
        if np.any(arr < 0.0) or np.any(arr > 1.0):
            raise ValueError(f"{name} must hold values in [0, 1] (0/1 labels or rates)")
    same_length(y, names[0], f, names[1])  # one prediction per gold label
    if ft.size < 2:
        raise ValueError(
            f"{names[2]}: {ft.size} unlabelled unit, fewer than two: its variance (and "
            "so the interval) is undefined"
        )
    if y.size < min_gold:
        raise ValueError(
            f"{names[0]}: {y.size} gold units, fewer than min_gold = {min_gold}; the PPI "
            "interval is asymptotic in the gold set and under-covers below it"
        )
    return y, f, ft


def _result(
    part: _Part, level: float, lam: tuple[float, ...], paired: bool | None, method: str
) -> PPIResult:
    """The result of a fit: z intervals for the PPI and the gold-only estimates."""
    z = float(norm_ppf(0.5 + level / 2.0))
    se = math.sqrt(part.var)
    gse = math.sqrt(part.gold_var)
    return PPIResult(
        estimate=part.estimate,
        low=part.estimate - z * se,
        high=part.estimate + z * se,
        level=level,
        se=se,
        judge_rate=part.judge,
        gold_rate=part.gold,
        gold_low=part.gold - z * gse,
        gold_high=part.gold + z * gse,
        rectifier=part.rectifier,
        lam=lam,
        n_gold=part.n,
        n_unlabelled=part.big_n,
        paired=paired,
        method=method,
    )


def _describe(method: PPIMethod, what: str) -> str:
    name = (
        "PPI (Angelopoulos et al. 2023)"
        if method == "ppi"
        else "PPI++ power-tuned (Angelopoulos, Duchi and Zrnic 2023)"
    )
    return (
        f"{name}, {what}: CLT interval, rectifier variance floored at one disagreement "
        "in the gold set; assumes the gold units are a random sample of the judged units"
    )


def ppi_mean(
    gold_labels: ArrayLike,
    gold_predictions: ArrayLike,
    unlabelled_predictions: ArrayLike,
    *,
    level: float = 0.95,
    method: str = "ppi",
    min_gold: int = PPI_MIN_GOLD,
) -> PPIResult:
    """Prediction-powered estimate and CLT interval of a rate (e.g. completion).

    ``gold_labels[i]`` and ``gold_predictions[i]`` are the true label and the judge's
    verdict on the same gold unit; ``unlabelled_predictions`` the judge's verdicts on the
    other units (not the gold ones). Values are 0/1 or rates in [0, 1]. ``method`` is
    "ppi" (lambda = 1) or "ppi++" (power-tuned lambda). Fewer than ``min_gold`` gold
    units are refused, and so are NaN, infinite or out-of-range values, empty arrays,
    fewer than two unlabelled units and a prediction count other than the labels'
    (ValueError naming the argument). See the module docstring for the formula and
    assumptions.
    """
    level = probability(level, "level")
    min_gold = max(2, count(min_gold, "min_gold"))
    m = _check_method(method)
    y, f, ft = _arm(
        gold_labels,
        gold_predictions,
        unlabelled_predictions,
        ("gold_labels", "gold_predictions", "unlabelled_predictions"),
        min_gold,
    )
    part = _fit(y, f, ft, m, 0.5)
    return _result(part, level, (part.lam,), None, _describe(m, "mean"))


def ppi_difference(
    control_labels: ArrayLike,
    control_predictions: ArrayLike,
    control_unlabelled: ArrayLike,
    treatment_labels: ArrayLike,
    treatment_predictions: ArrayLike,
    treatment_unlabelled: ArrayLike,
    *,
    paired: bool = False,
    level: float = 0.95,
    method: str = "ppi",
    min_gold: int = PPI_MIN_GOLD,
) -> PPIResult:
    """Prediction-powered estimate and interval of treatment rate - control rate.

    Each arm gives its gold labels, the judge's verdicts on those gold units, and the
    judge's verdicts on its other units (values 0/1 or rates in [0, 1]).

    ``paired=True`` (the design pairs arms by task): position i of the two arms' gold
    arrays is the same task, labelled in both arms, and likewise for the unlabelled
    arrays. PPI is then applied to the per-task differences Y_t - Y_c and f_t - f_c
    (values in [-1, 1]), which keeps the covariance the pairing induces; one lambda.
    ``paired=False``: the arms are independent samples, each arm is fitted on its own
    (its own lambda under PPI++) and the variances add.
    """
    level = probability(level, "level")
    min_gold = max(2, count(min_gold, "min_gold"))
    m = _check_method(method)
    if not isinstance(paired, (bool, np.bool_)):
        raise ValueError(f"paired must be True or False, got {paired!r}")
    yc, fc, ftc = _arm(
        control_labels,
        control_predictions,
        control_unlabelled,
        ("control_labels", "control_predictions", "control_unlabelled"),
        min_gold,
    )
    yt, ft_, ftt = _arm(
        treatment_labels,
        treatment_predictions,
        treatment_unlabelled,
        ("treatment_labels", "treatment_predictions", "treatment_unlabelled"),
        min_gold,
    )
    if paired:  # the same tasks in both arms
        same_length(yc, "control_labels", yt, "treatment_labels")
        same_length(ftc, "control_unlabelled", ftt, "treatment_unlabelled")
        part = _fit(yt - yc, ft_ - fc, ftt - ftc, m, 1.0)
        what = "paired difference of means (per-task differences)"
        return _result(part, level, (part.lam,), True, _describe(m, what))
    c = _fit(yc, fc, ftc, m, 0.5)
    t = _fit(yt, ft_, ftt, m, 0.5)
    both = _Part(
        estimate=t.estimate - c.estimate,
        var=t.var + c.var,
        lam=math.nan,
        judge=t.judge - c.judge,
        gold=t.gold - c.gold,
        gold_var=t.gold_var + c.gold_var,
        rectifier=t.rectifier - c.rectifier,
        n=c.n + t.n,
        big_n=c.big_n + t.big_n,
    )
    what = "difference of independent means"
    return _result(both, level, (c.lam, t.lam), False, _describe(m, what))
