"""Tests of a registered contrast over several arms, per simulated data set.

``contrast_bootstrap`` and ``contrast_sign_flip`` as ``analyse`` runs them on the K-arm
data the driver simulates for each contrast (the bootstrap's draws shared with
:mod:`prereg.stats.calibration.bootstrap`).
"""

from __future__ import annotations

import numpy as np

from prereg.stats.calibration.bootstrap import _BootstrapDraws
from prereg.stats.calibration.outcome import Outcome
from prereg.stats.calibration.plans import PlannedTest
from prereg.stats.calibration.reductions import _per_unit, _unique_rows
from prereg.stats.calibration_model import BoolArray
from prereg.stats.permutation import sign_flip_test


def _contrast(
    plan: PlannedTest,
    arms: BoolArray,
    truth: float,
    cache: dict[tuple[int, int, int, int], _BootstrapDraws],
    draws: int,
) -> Outcome:
    """A test of a registered contrast as ``analyse`` runs it (``reports.contrasts``): per
    task the contrast of the arms' mean outcomes over every repeat, per unit the mean over
    its tasks; ``contrast_bootstrap`` (the units resampled with the registration's seed, so
    every data set with the same indices, drawn once: the paired bootstrap's prompt draws
    with one run) decides by its interval at 1 - alpha (1 - 2 alpha one-sided), or
    ``contrast_sign_flip`` (``sign_flip_test`` of the unit contrasts) by its p; the
    bootstrap interval at the registered level is the one printed."""
    assert plan.weights is not None
    w = np.asarray(plan.weights, dtype=np.float64)
    per_task = np.einsum("k,ksp->sp", w, arms.mean(axis=-1))
    d = _per_unit(per_task, plan.units)
    sims, units = d.shape
    key = (units, 1, min(plan.draws, draws), plan.seed)
    if key not in cache:
        cache[key] = _BootstrapDraws(units, 1, key[2], plan.seed)
    boot = cache[key]
    none = np.zeros((sims, 1))
    low, high = boot.interval(d, none, none, plan.decision_level)
    if plan.test == "sign_flip_test":
        keys = np.round(np.sort(d, axis=1) * 3_603_600).astype(np.int64)
        uniq, inverse = _unique_rows(keys)
        first = np.zeros(uniq.shape[0], dtype=np.intp)
        first[inverse[::-1]] = np.arange(inverse.size)[::-1]
        pvals = np.array([sign_flip_test(np.sort(d[i]), plan.sides).pvalue for i in first])
        reject = pvals[inverse] <= plan.alpha
    elif plan.sides == "greater":
        reject = low > 0
    elif plan.sides == "less":
        reject = high < 0
    else:
        reject = (low > 0) | (high < 0)
    if abs(plan.interval_level - plan.decision_level) > 1e-12:
        low, high = boot.interval(d, none, none, plan.interval_level)
    covered = (low <= truth) & (truth <= high)
    return Outcome(reject, np.sign(d.mean(axis=1)).astype(np.int64), covered)
