"""Tests of a registered contrast over several arms, per simulated data set.

``contrast_bootstrap`` and ``contrast_sign_flip`` as ``analyse`` runs them on the K-arm
data the driver simulates for each contrast, and the p values a family of contrasts
adjusts. The bootstrap's default interval needs no resampling here: its bootstrap
variance is computed exactly by the function (plug-in variance of the unit contrasts /
U), so it is the one-sample t interval of the unit contrasts, bounded by the contrast's
support, and its p the t test's; both are closed forms over the data sets.
"""

from __future__ import annotations

import numpy as np

from prereg.stats._dist import t_ppf, t_sf
from prereg.stats._validate import probability, refuse_text, vector
from prereg.stats.calibration.outcome import Outcome
from prereg.stats.calibration.plans import PlannedTest
from prereg.stats.calibration.reductions import _per_unit, _unique_rows
from prereg.stats.calibration_model import BoolArray, FloatArray
from prereg.stats.permutation import sign_flip_test


def _outcomes(values: object, name: str) -> BoolArray:
    """Simulated binary outcomes as a boolean array, or ValueError naming ``name`` (empty,
    or a value other than 0 and 1: NaN, infinity, a rate)."""
    arr = np.asarray(values)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype == np.bool_:
        return arr
    flat = arr.astype(np.float64)
    if not bool(np.all((flat == 0.0) | (flat == 1.0))):
        raise ValueError(f"{name} must hold binary outcomes (0 or 1; no nan or infinity)")
    out: BoolArray = flat.astype(bool)
    return out


def _contrasts_matrix(d: object) -> FloatArray:
    """Unit contrasts as a finite (data sets x units) matrix of at least two units, or
    ValueError naming ``d``."""
    refuse_text(d, "d")
    arr = np.asarray(d, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ValueError(f"d must be a (data sets x units) matrix of >= 2 units, got {arr.shape}")
    if not bool(np.all(np.isfinite(arr))):
        raise ValueError("d contains nan or infinite values")
    return arr


def _unit_contrasts(plan: PlannedTest, arms: BoolArray) -> FloatArray:
    """Per data set and unit, the contrast as ``analyse`` computes it: per task the
    weighted sum of the arms' mean outcomes over every repeat, per unit the mean over its
    tasks (arms: K x data sets x tasks x repeats)."""
    assert plan.weights is not None
    w = np.asarray(plan.weights, dtype=np.float64)
    per_task = np.einsum("k,ksp->sp", w, arms.mean(axis=-1))
    return _per_unit(per_task, plan.units)


def _spread(d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per data set the estimate and the exact bootstrap variance of the mean of the U
    resampled units, plug-in variance / U (0 when every unit has the same contrast), as
    :func:`prereg.stats.contrast_bootstrap` computes them."""
    units = d.shape[1]
    estimate = d.mean(axis=1)
    var = ((d - estimate[:, None]) ** 2).mean(axis=1) / units
    flat = np.ptp(d, axis=1) == 0.0
    return estimate, np.where(flat, 0.0, var)


def contrast_intervals(
    d: FloatArray, level: float, weights: tuple[float, ...]
) -> tuple[FloatArray, FloatArray]:
    """:func:`prereg.stats.contrast_bootstrap`'s default interval for every data set (data
    sets x units contrasts): estimate -+ sqrt(U/(U-1)) t_{U-1,q} sqrt(plug-in variance /
    U), intersected with [sum of the negative weights, sum of the positive weights] (the
    simulated cell means are rates in [0, 1]). ValueError naming the argument for contrasts
    that are not a finite matrix of at least two units, a level outside (0, 1), or weights
    that are empty or not finite."""
    d = _contrasts_matrix(d)
    level = probability(level, "level")
    w = vector(weights, "weights")
    units = d.shape[1]
    estimate, var = _spread(d)
    crit = -float(t_ppf((1.0 - level) / 2.0, units - 1))
    half = np.sqrt(units / (units - 1) * crit * crit * var)
    lo, hi = float(w[w < 0].sum()), float(w[w > 0].sum())
    low = np.minimum(np.maximum(estimate - half, lo), estimate)
    high = np.maximum(np.minimum(estimate + half, hi), estimate)
    return low, high


def contrast_pvalues(plan: PlannedTest, d: FloatArray) -> FloatArray:
    """The p value ``analyse`` reports for the contrast test in every data set (the one a
    family of contrasts adjusts): for ``paired_bootstrap`` the default
    ``contrast_bootstrap`` p, the two-sided t test on U - 1 df (1 at a zero estimate, 0
    when every unit has the same non-zero contrast), whatever the registered sides, as
    the report adjusts the function's two-sided p; for ``sign_flip_test`` the exact
    ``sign_flip_test`` p of the unit contrasts in the registered direction, computed once
    per distinct multiset of unit contrasts. ValueError naming ``d`` unless it is a finite
    (data sets x units) matrix of at least two units."""
    d = _contrasts_matrix(d)
    if plan.test == "sign_flip_test":
        keys = np.round(np.sort(d, axis=1) * 3_603_600).astype(np.int64)
        uniq, inverse = _unique_rows(keys)
        first = np.zeros(uniq.shape[0], dtype=np.intp)
        first[inverse[::-1]] = np.arange(inverse.size)[::-1]
        pvals = np.array([sign_flip_test(np.sort(d[i]), plan.sides).pvalue for i in first])
        out: FloatArray = pvals[inverse]
        return out
    units = d.shape[1]
    estimate, var = _spread(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.abs(estimate) / np.sqrt(units / (units - 1) * var)
    p = np.minimum(1.0, 2.0 * t_sf(np.where(var > 0.0, stat, 0.0), units - 1))
    p = np.where(var > 0.0, p, 0.0)
    return np.where(estimate == 0.0, 1.0, p)


def _contrast(plan: PlannedTest, arms: BoolArray, truth: float) -> Outcome:
    """A test of a registered contrast as ``analyse`` runs it (``reports.contrasts``):
    ``contrast_bootstrap`` decides by its interval at 1 - alpha (1 - 2 alpha one-sided), or
    ``contrast_sign_flip`` (``sign_flip_test`` of the unit contrasts) by its p; the
    bootstrap interval at the registered level is the one printed."""
    assert plan.weights is not None
    d = _unit_contrasts(plan, arms)
    low, high = contrast_intervals(d, plan.decision_level, plan.weights)
    if plan.test == "sign_flip_test":
        reject = contrast_pvalues(plan, d) <= plan.alpha
    elif plan.sides == "greater":
        reject = low > 0
    elif plan.sides == "less":
        reject = high < 0
    else:
        reject = (low > 0) | (high < 0)
    if abs(plan.interval_level - plan.decision_level) > 1e-12:
        low, high = contrast_intervals(d, plan.interval_level, plan.weights)
    covered = (low <= truth) & (truth <= high)
    return Outcome(reject, np.sign(d.mean(axis=1)).astype(np.int64), covered)
