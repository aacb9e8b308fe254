"""The paired bootstrap's estimate and intervals for every simulated data set at once.

``analyse`` resamples every data set of a shape with the same indices (the registration's
seed), so the resampling is drawn once and applied to all data sets, and with complete
(unit, run) cells the bootstrap's computation reduces to closed forms: each part of the
draws (the resampled units' mean difference, each arm's resampled run effects) is a
linear function of the resampling multiplicities, so its variance over the draws, which
the interval reads (:func:`prereg.stats.paired_bootstrap`: estimate -+ the t-scaled
bootstrap standard errors of the parts, then the bound to the outcomes' range), is a
quadratic form in the multiplicities' covariance, computed once per shape. A departure
from the report's computation: it is run with ``min(registered draws, draws)`` resamples
(default 1,000): the variance of 1,000 draws estimates the bootstrap variance within
about sqrt(2 / 1000) = 4.5% (the half-width within 2.2%, biased by -0.03%), so the
simulated decisions and coverage differ from the report's by far less than the
calibration's own Monte Carlo error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_ppf, t_ppf
from prereg.stats._validate import draw_count, probability
from prereg.stats.bootstrap import _blocks as _boot_blocks
from prereg.stats.bootstrap import _counts as _boot_counts
from prereg.stats.bootstrap import _multiplicities as _boot_multiplicities
from prereg.stats.calibration.contrast import _outcomes
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


def _critical(tail: float, df: int | None) -> float:
    """The upper ``tail`` critical value, as :func:`prereg.stats.bootstrap._critical`
    (t_{df}, normal when df is None)."""
    return -float(norm_ppf(tail) if df is None else t_ppf(tail, df))


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
        self.units, self.runs = units, runs
        #: (units + 2 runs) x draws: prompt multiplicities, treatment and control run ones
        basis = np.concatenate([self.prompt_counts, self.wt, self.wc], axis=1).T
        #: their covariance over the draws (ddof 1, as the function's variance of its
        #: draws; 0 for one draw, as there): the variance of a part a @ basis is a' C a
        k = basis.shape[0]
        self.cov = np.atleast_2d(np.cov(basis)) if draws > 1 else np.zeros((k, k))

    def _part_variance(self, coef: FloatArray, lo: int, hi: int) -> FloatArray:
        """Per data set, the variance over the draws of coef @ basis[lo:hi]."""
        block = self.cov[lo:hi, lo:hi]
        out: FloatArray = np.maximum(0.0, np.einsum("sk,kl,sl->s", coef, block, coef))
        return out

    def interval(
        self,
        diff: FloatArray,
        ec: FloatArray,
        et: FloatArray,
        level: float,
        span: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """:func:`prereg.stats.paired_bootstrap`'s default interval per data set (data sets
        x units differences, each arm's run effects, the range max(y) - min(y) of each
        data set's outcomes): estimate -+ sqrt(n/(n-1) t_{n-1}^2 V_P + t_{R-1}^2 (V_T +
        V_C)), each V the variance over the draws of that part, then intersected with
        [-span, span] (and reaching the estimate)."""
        tail = (1.0 - level) / 2.0
        units, runs = self.units, self.runs
        estimate = diff.mean(axis=1)
        v_p = self._part_variance(diff / units, 0, units)
        prompt_df = units - 1 if units > 1 else None
        mult = units / (units - 1) if units > 1 else 1.0
        total = mult * _critical(tail, prompt_df) ** 2 * v_p
        if runs > 1:  # run parts (corrected scheme, small-runs t factor), t_{R-1}
            v_t = self._part_variance(et / runs, units, units + runs)
            v_c = self._part_variance(ec / runs, units + runs, units + 2 * runs)
            total = total + _critical(tail, runs - 1) ** 2 * (v_t + v_c)
        half = np.sqrt(total)
        low = np.minimum(np.maximum(estimate - half, -span), estimate)
        high = np.maximum(np.minimum(estimate + half, span), estimate)
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
    """:func:`paired_bootstrap`'s estimate and default intervals (corrected scheme,
    small-runs t factor, bootstrap-SE interval with Student t critical values, bounded by
    the outcomes' range) for every data set (data sets x tasks x repeats), as ``analyse``
    calls it: every run's rows, the resampling unit ``units`` (codes per task; None:
    tasks), each repeat a replicate run of its arm, the seed ``seed``, ``draws``
    resamples. The simulated cells are complete, so the function's computation reduces to
    the closed forms used here; tests/calibration checks the two agree data set by data
    set. ValueError naming the argument for arrays of different or non-3-d shapes or
    holding other values than 0 and 1 (NaN), unit codes that are not one per task, a
    non-positive draw count or a level outside (0, 1).
    """
    cache = {} if cache is None else cache
    if np.size(yc) == 0 or np.size(yt) == 0:
        raise ValueError("yc and yt must be non-empty (data sets x tasks x repeats) arrays")
    yc, yt = _outcomes(yc, "yc"), _outcomes(yt, "yt")
    if yc.ndim != 3 or yc.shape != yt.shape:
        raise ValueError(
            f"yc and yt must be non-empty (data sets x tasks x repeats) arrays of one shape, "
            f"got {yc.shape} and {yt.shape}"
        )
    draws = draw_count(draws)
    levels = [probability(level, "levels") for level in levels]
    sims, p, r = yc.shape
    if units is not None and (np.shape(units) != (p,) or int(np.min(units)) < 0):
        raise ValueError(f"units must hold one non-negative code per task ({p})")
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
    # the range of a difference of the outcomes: 1 when both values occur, else 0
    both = (yc.any(axis=(1, 2)) | yt.any(axis=(1, 2))) & ~(
        yc.all(axis=(1, 2)) & yt.all(axis=(1, 2))
    )
    span: FloatArray = np.asarray(both, dtype=np.float64)
    return diff.mean(axis=1), [boot.interval(diff, ec, et, level, span) for level in levels]


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
