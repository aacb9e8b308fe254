"""The paired bootstrap's estimate and intervals for every simulated data set at once.

``analyse`` resamples every data set of a shape with the same indices (the registration's
seed), so the resampling is drawn once and applied to all data sets, and with complete
(unit, run) cells the bootstrap's computation reduces to closed forms. A departure from
the report's computation: it is run with ``min(registered draws, draws)`` resamples
(default 1,000): a percentile interval from 1,000 resamples has the same coverage as one
from 10,000 up to Monte Carlo noise far below the calibration's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_ppf, t_ppf
from prereg.stats.bootstrap import _blocks as _boot_blocks
from prereg.stats.bootstrap import _counts as _boot_counts
from prereg.stats.bootstrap import _multiplicities as _boot_multiplicities
from prereg.stats.calibration.outcome import Outcome
from prereg.stats.calibration.plans import PlannedTest
from prereg.stats.calibration_model import BoolArray, FloatArray, Population


def _run_effects_balanced(cells: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``_run_effects`` of :mod:`prereg.stats.bootstrap` for complete (unit, run) cells, per
    data set: cell means (data sets x units x runs) -> rescaled run effects and the ANOVA
    between-run variance. With every cell observed its backfitting converges to the closed
    form c_r = column mean - grand mean, m_p = row mean."""
    sims, units, runs = cells.shape
    if runs < 2:
        return np.zeros((sims, runs)), np.full(sims, math.nan)
    c = cells.mean(axis=1) - cells.mean(axis=(1, 2))[:, None]
    m = cells.mean(axis=2)
    resid = cells - m[:, :, None] - c[:, None, :]
    df = units * runs - units - runs + 1
    mse = (resid**2).sum(axis=(1, 2)) / df if df > 0 else np.zeros(sims)
    sc2 = (c**2).sum(axis=1) / (runs - 1)
    su2 = np.maximum(0.0, sc2 - mse / units)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(sc2 > 0, np.sqrt(su2 * runs / (runs - 1) / np.where(sc2 > 0, sc2, 1)), 0.0)
    return lam[:, None] * c, su2


def _quantiles(out: FloatArray, tail: float) -> tuple[FloatArray, FloatArray]:
    """``np.quantile(row, [tail, 1 - tail])`` (linear interpolation) of every row, by one
    partition at the four order statistics involved."""
    n = out.shape[1]
    pos = np.array([tail, 1.0 - tail]) * (n - 1)
    lo_i = np.floor(pos).astype(np.intp)
    hi_i = np.minimum(lo_i + 1, n - 1)
    part = np.partition(out, np.unique(np.concatenate([lo_i, hi_i])), axis=1)
    frac = pos - lo_i
    ends = part[:, lo_i] + (part[:, hi_i] - part[:, lo_i]) * frac
    return ends[:, 0], ends[:, 1]


class _BootstrapDraws:
    """The resampling of :func:`paired_bootstrap` for one (units, runs, draws, seed).

    ``analyse`` calls the bootstrap with the registration's seed for every data set, so
    every data set of the same shape is resampled with the same indices: drawn once here,
    in the function's order (control run multiplicities, treatment run multiplicities,
    then prompt indices in the function's blocks), and applied to all data sets at once.
    """

    def __init__(self, units: int, runs: int, draws: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.wc = _boot_counts(rng, draws, runs)
        self.wt = _boot_counts(rng, draws, runs)
        blocks = [
            _boot_multiplicities(rng.integers(0, units, size=(hi - lo, units)), units)
            for lo, hi in _boot_blocks(draws, units)
        ]
        self.prompt_counts = np.concatenate(blocks)  # draws x units: each unit's multiplicity
        self.runs = runs
        #: (units + 2 runs) x draws: prompt multiplicities, treatment and control run ones
        self.basis = np.ascontiguousarray(
            np.concatenate([self.prompt_counts, self.wt, self.wc], axis=1).T
        )

    def interval(
        self, diff: FloatArray, ec: FloatArray, et: FloatArray, level: float
    ) -> tuple[FloatArray, FloatArray]:
        """Percentile interval per data set (data sets x units differences, run effects)."""
        q = 0.5 + level / 2.0
        kc = kt = 1.0
        if self.runs > 1:
            z = float(norm_ppf(q))
            kc = kt = float(t_ppf(q, self.runs - 1)) / z
        units = diff.shape[1]
        weights = np.concatenate(
            [diff / units, (kt / self.runs) * et, (-kc / self.runs) * ec], axis=1
        )
        # data sets x draws, one product (einsum's own loop: a multithreaded BLAS call on
        # such thin matrices is many times slower on a busy machine)
        out = np.einsum("sk,kd->sd", weights, self.basis)
        tail = (1.0 - level) / 2.0
        low, high = _quantiles(out, tail)
        return low, high


def _unit_means(y: BoolArray, weights: FloatArray) -> FloatArray:
    """(data sets x tasks x runs) -> (data sets x units x runs): each unit's mean."""
    sims, p, r = y.shape
    flat = y.transpose(0, 2, 1).reshape(sims * r, p).astype(np.float64)
    out: FloatArray = np.einsum("np,pg->ng", flat, weights).reshape(sims, r, -1)
    return out.transpose(0, 2, 1)


def bootstrap_intervals(
    yc: BoolArray,
    yt: BoolArray,
    units: NDArray[np.intp] | None,
    draws: int,
    seed: int,
    levels: Sequence[float],
    cache: dict[tuple[int, int, int, int], _BootstrapDraws] | None = None,
) -> tuple[FloatArray, list[tuple[FloatArray, FloatArray]]]:
    """:func:`paired_bootstrap`'s estimate and percentile intervals (corrected scheme,
    small-runs t factor) for every data set (data sets x tasks x repeats), as ``analyse``
    calls it: every run's rows, the resampling unit ``units`` (codes per task; None:
    tasks), each repeat a replicate run of its arm, the seed ``seed``, ``draws``
    resamples. The simulated cells are complete, so the function's computation reduces to
    the closed forms used here; tests/calibration checks the two agree draw for draw."""
    cache = {} if cache is None else cache
    sims, p, r = yc.shape
    codes = units if units is not None else np.arange(p)
    g = int(codes.max()) + 1
    # cell means per (unit, run): the unit's tasks' outcomes in that run
    if units is None:
        cc, ct = yc.astype(np.float64), yt.astype(np.float64)
    else:
        onehot = np.zeros((p, g))
        onehot[np.arange(p), codes] = 1.0
        onehot /= onehot.sum(axis=0)
        cc, ct = _unit_means(yc, onehot), _unit_means(yt, onehot)
    diff = ct.mean(axis=2) - cc.mean(axis=2)
    ec, _ = _run_effects_balanced(cc)
    et, _ = _run_effects_balanced(ct)
    key = (g, r, draws, seed)
    if key not in cache:
        cache[key] = _BootstrapDraws(g, r, draws, seed)
    boot = cache[key]
    return diff.mean(axis=1), [boot.interval(diff, ec, et, level) for level in levels]


def _bootstrap(
    plan: PlannedTest,
    yc: BoolArray,
    yt: BoolArray,
    truth: float,
    pop: Population,
    draws: int,
    cache: dict[tuple[int, int, int, int], _BootstrapDraws],
) -> Outcome:
    """The paired bootstrap as ``analyse`` decides with it (:func:`bootstrap_intervals`):
    the interval at 1 - alpha (1 - 2 alpha one-sided) decides, the one at the registered
    level is printed (and judged for coverage)."""
    levels = [plan.decision_level]
    if abs(plan.interval_level - plan.decision_level) > 1e-12:
        levels.append(plan.interval_level)
    estimate, intervals = bootstrap_intervals(
        yc, yt, plan.units, min(plan.draws, draws), plan.seed, levels, cache
    )
    low, high = intervals[0]
    if plan.sides == "greater":
        reject = low > 0
    elif plan.sides == "less":
        reject = high < 0
    else:
        reject = (low > 0) | (high < 0)
    low, high = intervals[-1]
    covered = (low <= truth) & (truth <= high)
    return Outcome(reject, np.sign(estimate).astype(np.int64), covered)
