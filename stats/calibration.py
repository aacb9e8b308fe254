"""Calibration of a registered paired analysis by simulation: type I error, power, coverage.

:func:`calibrate` draws data sets from a :class:`~prereg.stats.calibration_model.Population`
(the registration's prompts, repeats and planning figures) and applies each registered
test to every data set as ``analyse`` applies it: the same aggregation of repeats, the same
resampling unit, the same decision rule and the same function of this package, reduced to
the sufficient statistic the function reads where that is exact (see each evaluator). It
returns, for each test, its rejection rate with no effect (type I error), its rejection
rate in the planned direction at the planned effect (power) and the coverage of the
interval the report prints beside it, each with its Monte Carlo standard error and a
verdict judged against that error.

Scenarios. ``null``: no treatment effect (the arms are exchangeable on every prompt, so
every registrable null hypothesis holds, while the run shifts of each arm still differ);
``planned effect``: the latent effect whose true difference of mean outcomes is the
planned effect, in the primary test's favoured direction. An equivalence test (TOST) is
judged the other way round: its type I error is the rate of declaring equivalence when its
own estimand sits on the margin (in the planned direction), its power the rate at no
effect. The stopping rule's type I error is the chance that the e-process ever crosses
its threshold with no effect (Ville's bound 1/threshold is its nominal), its power the
chance that it crosses in the planned direction.

The registered multiplicity family (``family``) gets one row: the chance, with no
effect on any member (the global null), that its rule rejects at least one member, which
is its family-wise error and, with every hypothesis null, its false discovery rate too;
nominal: the registered q.

Common random numbers: the same uniforms generate every scenario, so scenarios differ
only by the effect. Verdicts: a rate is ``inflated`` (type I error) or the interval
``under-covers`` when the estimate is more than two Monte Carlo standard errors worse
than nominal, the standard error taken at the nominal rate, sqrt(q (1 - q) / sims);
``conservative`` / ``over-covers`` the other way; ``below target`` for power under the
target by more than two standard errors; otherwise ``ok``. With many rows, about one in
forty ok rows is flagged by chance at this margin: read a flag with its MC SE.

Departures from the report's computation, each exact or documented:

* the paired bootstrap is run with ``min(registered draws, draws)`` resamples (default
  1,000): a percentile interval from 1,000 resamples has the same coverage as one from
  10,000 up to Monte Carlo noise far below the calibration's own;
* the two-sample permutation test is computed exactly (hypergeometric) for binary
  per-unit values, which is what the registered function computes by enumeration, or
  estimates by Monte Carlo above 10^6 relabelings; for other values by 999 random
  relabelings per data set, p = (1 + #) / 1000, which keeps the level (Phipson and Smyth
  2010) and loses a little power;
* the exact binary TOST decides by the rejection region of
  :func:`prereg.stats.paired.exact_equivalence_region`, and its interval covers a value
  when neither exact one-sided test rejects at it (the interval inverts those tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_ppf, t_cdf, t_ppf, t_sf
from prereg.stats._scipy import optimize
from prereg.stats._scipy import stats as sps
from prereg.stats.bootstrap import _blocks as _boot_blocks
from prereg.stats.bootstrap import _counts as _boot_counts
from prereg.stats.bootstrap import _multiplicities as _boot_multiplicities
from prereg.stats.calibration_model import (
    BoolArray,
    Draws,
    FloatArray,
    Population,
    aggregate,
    simulate,
    simulate_arms,
)
from prereg.stats.paired import (
    binomial_half_tails,
    exact_equivalence_region,
    upper_region,
)
from prereg.stats.permutation import sign_flip_test
from prereg.stats.sequential import _log_evalue, beta_mixture_evalue

__all__ = [
    "PlannedTest",
    "MonitorPlan",
    "FamilyPlan",
    "family_levels",
    "CalibrationRow",
    "CalibrationResult",
    "calibrate",
    "verdict",
    "BINARY_AGGREGATES",
]

BINARY_AGGREGATES = ("majority", "all", "any", "first")
#: random relabelings per data set for the permutation test on non-binary values
PERMUTATIONS = 999
#: data sets simulated at once (bounded so that a block holds about 4 million outcomes)
_BLOCK_CELLS = 4_000_000
#: a rate is judged against nominal +- this many Monte Carlo standard errors
MC_Z = 2.0

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PlannedTest:
    """A registered test as the simulation applies it (the report's conventions).

    ``units`` codes each task's resampling unit (0..G-1 in order of first appearance);
    None resamples tasks. ``level`` is the registered interval level (None: 1 - alpha
    two-sided, 1 - 2 alpha one-sided). ``seed`` is the analysis seed (the registration's
    design seed, as ``analyse`` uses it).
    """

    label: str
    test: str
    alpha: float = 0.05
    sides: str = "two-sided"
    aggregate: str = "majority"
    margin: float | None = None
    level: float | None = None
    draws: int = 10_000
    units: NDArray[np.intp] | None = field(default=None, compare=False)
    unit_name: str = "task"
    seed: int = 0
    prior: tuple[float, float] = (1.0, 1.0)
    #: the tasks (indices into the population's prompts) the test sees; None: all of them
    subset: NDArray[np.intp] | None = field(default=None, compare=False)
    #: a test of a registered contrast: one weight per arm (cell) it combines; None: a
    #: comparison of two arms
    weights: tuple[float, ...] | None = None

    @property
    def interval_level(self) -> float:
        if self.level is not None:
            return self.level
        return 1.0 - self.alpha if self.sides == "two-sided" else 1.0 - 2.0 * self.alpha

    @property
    def decision_level(self) -> float:
        return 1.0 - self.alpha if self.sides == "two-sided" else 1.0 - 2.0 * self.alpha

    @property
    def binary_aggregate(self) -> str:
        return self.aggregate if self.aggregate in BINARY_AGGREGATES else "majority"


@dataclass(frozen=True)
class MonitorPlan:
    """A registered stopping rule: the beta-mixture e-process over the tasks in order."""

    label: str = "stopping"
    threshold: float = 20.0
    min_prompts: int = 40
    prior: tuple[float, float] = (1.0, 1.0)
    aggregate: str = "majority"
    subset: NDArray[np.intp] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class FamilyPlan:
    """The registered multiplicity family as the simulation applies it.

    ``members`` are the family's hypotheses, each tested as the report tests it; None
    for a member not simulated (counted in m, never rejecting; ``note`` says which).
    ``method`` is the registered rule (holm, bh, e-bh or none) at level ``q``.
    """

    label: str
    method: str
    q: float
    family: str
    members: tuple[PlannedTest | None, ...]
    note: str = ""


def family_levels(method: str, q: float, m: int) -> list[tuple[int, float]]:
    """(k, alpha_k): the family rejects something under the global null iff, for some
    listed k, at least k members reject at alpha_k. Holm rejects something iff the
    smallest p is at most q/m; Benjamini-Hochberg iff p_(k) <= k q / m for some k; e-BH
    iff e_(k) >= m / (k q) for some k (a member rejecting at alpha_k is e >= 1/alpha_k);
    ``none`` iff some p <= q."""
    if method == "none":
        return [(1, q)]
    if method == "holm":
        return [(1, q / m)]
    return [(k, k * q / m) for k in range(1, m + 1)]


@dataclass(frozen=True)
class CalibrationRow:
    """One calibrated figure: a test's type I error, power or interval coverage."""

    label: str
    test: str
    quantity: str  # "type I error", "power" or "coverage"
    scenario: str  # "null", "planned effect", "margin" or "equivalence"
    nominal: float | None
    estimate: float
    mc_se: float
    verdict: str
    sims: int
    truth: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "test": self.test,
            "quantity": self.quantity,
            "scenario": self.scenario,
            "nominal": self.nominal,
            "estimate": self.estimate,
            "mc_se": self.mc_se,
            "verdict": self.verdict,
            "sims": self.sims,
            "truth": self.truth,
            "note": self.note,
        }


@dataclass(frozen=True)
class CalibrationResult:
    rows: tuple[CalibrationRow, ...]
    population: Population
    effect: float
    effects: dict[str, float]
    sims: int
    seed: int | None
    draws: int
    method: str
    notes: tuple[str, ...] = ()


def verdict(quantity: str, estimate: float, nominal: float | None, sims: int) -> str:
    """ok, or how the estimate departs from nominal by more than MC_Z standard errors
    (taken at the nominal rate; see the module docstring)."""
    if nominal is None or not math.isfinite(estimate):
        return "-"
    se = math.sqrt(nominal * (1.0 - nominal) / sims) if 0.0 < nominal < 1.0 else 0.0
    tolerance = MC_Z * se + 1e-12
    if quantity == "type I error":
        if estimate > nominal + tolerance:
            return "inflated"
        if estimate < nominal - tolerance:
            return "conservative"
        return "ok"
    if quantity == "coverage":
        if estimate < nominal - tolerance:
            return "under-covers"
        if estimate > nominal + tolerance:
            return "over-covers"
        return "ok"
    if quantity == "power":
        return "below target" if estimate < nominal - tolerance else "ok"
    return "-"


# ---------------------------------------------------------------------------
# per-test evaluators: (control, treatment outcomes) -> per data set decisions
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """Per data set: rejected, the sign of the estimate, and whether the interval covered
    the truth (None for a test without an interval)."""

    reject: BoolArray
    direction: NDArray[np.int64]
    covered: BoolArray | None = None
    undefined: int = 0


def _unique_rows(keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    return uniq, np.asarray(inverse).ravel()


def _discordant(ctl: FloatArray, trt: FloatArray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(b, c) per data set: tasks where only the control / only the treatment succeeded."""
    b = np.sum((ctl == 1.0) & (trt == 0.0), axis=1)
    c = np.sum((ctl == 0.0) & (trt == 1.0), axis=1)
    return b.astype(np.int64), c.astype(np.int64)


def _tango_z(b: FloatArray, c: FloatArray, n: int, delta0: float) -> FloatArray:
    """Tango's score statistic (``prereg.stats.paired._tango_z``), vectorised over (b, c)."""
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta0
    c_ = -c * delta0 * (1.0 - delta0)
    disc = np.maximum(b_ * b_ - 4.0 * a_ * c_, 0.0)
    q21 = np.minimum(np.maximum((np.sqrt(disc) - b_) / (2.0 * a_), max(0.0, -delta0)), 1.0)
    var = n * (2.0 * q21 + delta0 * (1.0 - delta0))
    num = b - c - n * delta0
    with np.errstate(divide="ignore", invalid="ignore"):
        z: FloatArray = np.where(
            var > 0.0,
            num / np.sqrt(np.where(var > 0.0, var, 1.0)),
            np.where(num == 0.0, 0.0, np.sign(num) * np.inf),
        )
    return z


def _tango_cover(
    b: NDArray[np.int64], c: NDArray[np.int64], n: int, level: float, truth: float
) -> BoolArray:
    """Whether Tango's interval as the report prints it (``tango_interval(c, b, n)``,
    treatment minus control) covers ``truth``: the interval is {delta0 : |Z(delta0)| <= z},
    so it covers the truth when Tango's score test at the truth does not reject."""
    z = float(norm_ppf(0.5 + level / 2.0))
    stat = _tango_z(c.astype(np.float64), b.astype(np.float64), n, truth)
    out: BoolArray = np.abs(stat) <= z
    return out


def _mcnemar_p(b: NDArray[np.int64], c: NDArray[np.int64]) -> FloatArray:
    """:func:`mcnemar_exact`'s p value, vectorised: min(1, 2 P(Bin(b + c, 1/2) <= min(b, c))),
    1 without discordant pairs."""
    m = b + c
    k = np.minimum(b, c)
    out: FloatArray = np.ones(m.shape, dtype=np.float64)
    for size in np.unique(m[m > 0]):
        at = m == size
        out[at] = np.asarray(binomial_half_tails(int(size), int(k[at].max())))[k[at]]
    return out


def _per_unit(values: FloatArray, units: NDArray[np.intp] | None) -> FloatArray:
    """Per-unit means of per-task values (every task once within its unit), as
    :meth:`prereg.reports.pairs.PairData.per_unit`."""
    if units is None:
        return values
    g = int(units.max()) + 1
    onehot = np.zeros((units.size, g))
    onehot[np.arange(units.size), units] = 1.0
    out: FloatArray = np.einsum("sp,pg->sg", values, onehot) / onehot.sum(axis=0)
    return out


def _mcnemar(
    plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float, pop: Population
) -> Outcome:
    """McNemar's exact test as ``analyse`` runs it: binary aggregate per task (``mean`` read
    as majority), two-sided by :func:`mcnemar_exact`, one-sided by the exact sign-flip test
    of the paired binary differences; Tango's interval. Computed once per distinct (b, c)."""
    agg = plan.binary_aggregate
    ctl, trt = aggregate(yc, agg), aggregate(yt, agg)
    n = ctl.shape[1]
    b, c = _discordant(ctl, trt)
    if plan.sides == "two-sided":
        reject = _mcnemar_p(b, c) <= plan.alpha
    else:
        uniq, inverse = _unique_rows(np.stack([b, c], axis=1))
        pvals = np.empty(uniq.shape[0])
        for k, (bb, cc) in enumerate(uniq):
            diffs = np.concatenate([np.ones(int(cc)), -np.ones(int(bb)), np.zeros(n - bb - cc)])
            pvals[k] = sign_flip_test(diffs, alternative=plan.sides).pvalue
        reject = pvals[inverse] <= plan.alpha
    covered = _tango_cover(b, c, n, plan.interval_level, truth)
    return Outcome(reject, np.sign(c - b), covered)


def _beta_mixture(
    plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float, pop: Population
) -> Outcome:
    """The beta-mixture e-value without a stopping rule: rejects when E >= 1 / alpha
    (vectorised :func:`beta_mixture_evalue`); Tango's interval."""
    agg = plan.binary_aggregate
    ctl, trt = aggregate(yc, agg), aggregate(yt, agg)
    b, c = _discordant(ctl, trt)
    e = np.atleast_1d(beta_mixture_evalue(b, c, prior=plan.prior).evalue)
    reject = e >= 1.0 / plan.alpha
    covered = _tango_cover(b, c, ctl.shape[1], plan.interval_level, truth)
    return Outcome(reject, np.sign(c - b), covered)


def _sign_flip(
    plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float, pop: Population
) -> Outcome:
    """The exact sign-flip test of the per-unit differences (registered aggregate), by
    :func:`sign_flip_test` once per distinct sorted vector of differences (its p value
    depends on nothing else); Tango's interval for per-task binary differences."""
    ctl = _per_unit(aggregate(yc, plan.aggregate), plan.units)
    trt = _per_unit(aggregate(yt, plan.aggregate), plan.units)
    d = trt - ctl
    keys = np.round(np.sort(d, axis=1) * 3_603_600).astype(np.int64)  # exact on k/R lattices
    uniq, inverse = _unique_rows(keys)
    first = np.zeros(uniq.shape[0], dtype=np.intp)
    first[inverse[::-1]] = np.arange(inverse.size)[::-1]
    pvals = np.array([sign_flip_test(np.sort(d[i]), alternative=plan.sides).pvalue for i in first])
    reject = pvals[inverse] <= plan.alpha
    covered = None
    if plan.aggregate in BINARY_AGGREGATES and plan.units is None:
        b = np.sum(d < 0, axis=1).astype(np.int64)
        c = np.sum(d > 0, axis=1).astype(np.int64)
        covered = _tango_cover(b, c, d.shape[1], plan.interval_level, truth)
    return Outcome(reject, np.sign(d.mean(axis=1)).astype(np.int64), covered)


def _hypergeometric_p(
    s: NDArray[np.int64], total: NDArray[np.int64], g: int, sides: str
) -> FloatArray:
    """Exact permutation p value of mean(x) - mean(y) for binary values, groups of g each:
    X ~ Hypergeometric(2g, total, g) successes fall in the first group."""
    k = np.arange(g + 1)[None, :]
    pmf = sps.hypergeom.pmf(k, 2 * g, total[:, None], g)
    stat = 2 * k - total[:, None]
    obs = (2 * s - total)[:, None]
    if sides == "greater":
        tail = stat >= obs
    elif sides == "less":
        tail = stat <= obs
    else:
        tail = np.abs(stat) >= np.abs(obs)
    out: FloatArray = np.minimum(1.0, np.sum(pmf * tail, axis=1))
    return out


def _permutation(
    plan: PlannedTest,
    yc: BoolArray,
    yt: BoolArray,
    truth: float,
    pop: Population,
    relabel: Callable[[int], NDArray[np.intp]],
) -> Outcome:
    """The two-sample permutation test of per-unit means (treatment vs control, unpaired,
    as registered): exact (hypergeometric) for binary values; otherwise 999 random
    relabelings, the same for every data set (the registered function, seeded with the
    registration's seed, also relabels every data set of a size alike), p = (1 + #) / 1000.
    Ties within 1e-10 of the pooled values' total magnitude count as extreme."""
    ctl = _per_unit(aggregate(yc, plan.aggregate), plan.units)
    trt = _per_unit(aggregate(yt, plan.aggregate), plan.units)
    g = ctl.shape[1]
    direction = np.sign(trt.mean(axis=1) - ctl.mean(axis=1)).astype(np.int64)
    binary = np.all((ctl == 0.0) | (ctl == 1.0), axis=1) & np.all(
        (trt == 0.0) | (trt == 1.0), axis=1
    )
    pvals = np.ones(ctl.shape[0])
    if binary.any():
        s = trt[binary].sum(axis=1).astype(np.int64)
        total = s + ctl[binary].sum(axis=1).astype(np.int64)
        pvals[binary] = _hypergeometric_p(s, total, g, plan.sides)
    rest = np.flatnonzero(~binary)
    if rest.size:
        first = relabel(g)  # PERMUTATIONS x g indices into the pooled values
        pooled = np.concatenate([trt[rest], ctl[rest]], axis=1)
        half = 0.5 * pooled.sum(axis=1)
        obs = trt[rest].sum(axis=1) - half
        tol = 1e-10 * np.maximum(np.abs(pooled).sum(axis=1), 1e-300)
        for lo in range(0, rest.size, 64):
            sl = slice(lo, lo + 64)
            stat = pooled[sl][:, first].sum(axis=2) - half[sl, None]
            o, t = obs[sl, None], tol[sl, None]
            if plan.sides == "greater":
                extreme = stat >= o - t
            elif plan.sides == "less":
                extreme = stat <= o + t
            else:
                extreme = np.abs(stat) >= np.abs(o) - t
            pvals[rest[sl]] = (1.0 + extreme.sum(axis=1)) / (1.0 + PERMUTATIONS)
    return Outcome(pvals <= plan.alpha, direction, None)


class _Regions:
    """Exact TOST regions, computed once per (n, margin or value, alpha)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int, float, float], BoolArray] = {}

    def equivalence(self, n: int, margin: float, alpha: float) -> BoolArray:
        key = ("eq", n, margin, alpha)
        if key not in self.cache:
            self.cache[key] = exact_equivalence_region(n, margin, alpha)
        return self.cache[key]

    def upper(self, n: int, delta0: float, alpha: float) -> BoolArray:
        key = ("up", n, round(delta0, 12), alpha)
        if key not in self.cache:
            self.cache[key] = upper_region(n, delta0, alpha)
        return self.cache[key]


def _tost(
    plan: PlannedTest,
    yc: BoolArray,
    yt: BoolArray,
    truth: float,
    pop: Population,
    regions: _Regions | None = None,
) -> Outcome:
    """TOST as ``tost_paired`` (method auto) decides it per data set: exact unconditional on
    paired binary per-unit differences, paired t otherwise (undefined with zero spread:
    not equivalent, no interval). ``reject`` is "equivalence declared"."""
    regions = regions or _Regions()
    ctl = _per_unit(aggregate(yc, plan.aggregate), plan.units)
    trt = _per_unit(aggregate(yt, plan.aggregate), plan.units)
    d = trt - ctl
    sims, n = d.shape
    margin, alpha = float(plan.margin or 0.0), plan.alpha
    binary = np.all((d == -1.0) | (d == 0.0) | (d == 1.0), axis=1)
    equivalent = np.zeros(sims, dtype=bool)
    covered = np.zeros(sims, dtype=bool)
    undefined = 0
    if binary.any():
        b = np.sum(d[binary] == 1.0, axis=1)
        c = np.sum(d[binary] == -1.0, axis=1)
        equivalent[binary] = regions.equivalence(n, margin, alpha)[b, c]
        high_ok = ~regions.upper(n, truth, alpha)[b, c]
        low_ok = ~regions.upper(n, -truth, alpha)[c, b]
        covered[binary] = high_ok & low_ok
    rest = ~binary
    if rest.any():
        dr = d[rest]
        est = dr.mean(axis=1)
        sd = dr.std(axis=1, ddof=1) if n >= 2 else np.zeros(dr.shape[0])
        ok = sd > 0
        undefined = int(np.sum(~ok))
        se = np.where(ok, sd, 1.0) / math.sqrt(n)
        df = max(n - 1, 1)
        pl = t_sf((est + margin) / se, df)
        pu = t_cdf((est - margin) / se, df)
        tcrit = float(t_ppf(1.0 - alpha, df))
        equivalent[rest] = ok & (np.maximum(pl, pu) <= alpha)
        covered[rest] = ok & (est - tcrit * se <= truth) & (truth <= est + tcrit * se)
    direction = np.sign(d.mean(axis=1)).astype(np.int64)
    return Outcome(equivalent, direction, covered, undefined)


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


def _monitor(
    monitor: MonitorPlan, yc: BoolArray, yt: BoolArray
) -> tuple[BoolArray, NDArray[np.int64], FloatArray]:
    """The registered e-process over the tasks in order (``sequential_monitor``, vectorised):
    crossed, the sign of c - b at the crossing, and the prompts used."""
    agg = monitor.aggregate if monitor.aggregate in BINARY_AGGREGATES else "majority"
    first, second = aggregate(yc, agg) == 1.0, aggregate(yt, agg) == 1.0
    bpath = np.cumsum(first & ~second, axis=1)
    cpath = np.cumsum(~first & second, axis=1)
    a, b0 = monitor.prior
    loge = _log_evalue(bpath, cpath, a, b0)
    t = np.arange(1, first.shape[1] + 1)[None, :]
    hit = (t >= monitor.min_prompts) & (loge >= math.log(monitor.threshold) - 1e-12)
    crossed = hit.any(axis=1)
    at = np.where(crossed, np.argmax(hit, axis=1), first.shape[1] - 1)
    rows = np.arange(first.shape[0])
    direction = np.sign(cpath[rows, at] - bpath[rows, at]).astype(np.int64)
    used = np.where(crossed, at + 1, first.shape[1]).astype(np.float64)
    return crossed, direction, used


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------


@dataclass
class _Acc:
    """Per data set results of one (test, scenario), concatenated over blocks."""

    reject: list[BoolArray] = field(default_factory=list)
    direction: list[NDArray[np.int64]] = field(default_factory=list)
    covered: list[BoolArray] = field(default_factory=list)
    undefined: int = 0
    used: list[FloatArray] = field(default_factory=list)

    def add(self, out: Outcome) -> None:
        self.reject.append(out.reject)
        self.direction.append(out.direction)
        if out.covered is not None:
            self.covered.append(out.covered)
        self.undefined += out.undefined


def _rate(parts: list[BoolArray]) -> tuple[float, float, int]:
    x = np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    est = float(x.mean())
    return est, math.sqrt(est * (1.0 - est) / n), n


def _row(
    label: str,
    test: str,
    quantity: str,
    scenario: str,
    nominal: float | None,
    parts: list[BoolArray],
    truth: float | None = None,
    note: str = "",
) -> CalibrationRow:
    est, se, n = _rate(parts)
    return CalibrationRow(
        label=label,
        test=test,
        quantity=quantity,
        scenario=scenario,
        nominal=nominal,
        estimate=est,
        mc_se=se,
        verdict=verdict(quantity, est, nominal, n),
        sims=n,
        truth=truth,
        note=note,
    )


def _subset(y: BoolArray, subset: NDArray[np.intp] | None) -> BoolArray:
    return y if subset is None else y[:, subset, :]


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


class _Simulation:
    """The state of one calibration: effects, true values, cached resampling, results."""

    def __init__(
        self,
        pop: Population,
        tests: Sequence[PlannedTest],
        monitor: MonitorPlan | None,
        effect: float,
        draws: int,
        rng: np.random.Generator,
        family: FamilyPlan | None = None,
    ) -> None:
        self.pop, self.tests, self.monitor, self.draws = pop, list(tests), monitor, draws
        self.family, self.fam = family, _Acc()
        self.sign = _effect_sign(effect)
        self.effects: dict[str, float] = {
            "null": 0.0,
            "planned effect": pop.latent_effect("mean", effect),
        }
        for plan in tests:
            if plan.test == "tost_paired" and _margin_key(plan) not in self.effects:
                target = self.sign * float(plan.margin or 0.0)
                self.effects[_margin_key(plan)] = pop.latent_effect(plan.aggregate, target)
        self.truths: dict[tuple[str, float], float] = {}
        self.notes: list[str] = []
        # tests of contrasts: per-arm effects, true value, and a stream of K-arm data each
        self.contrasts: dict[int, tuple[tuple[float, ...], float]] = {}
        self.arm_streams: dict[int, np.random.Generator] = {}
        arm_seed = int(rng.integers(2**63))
        for index, plan in enumerate(tests):
            if plan.weights is not None:
                deltas, value, note = _contrast_deltas(pop, plan.weights, effect)
                self.contrasts[index] = (deltas, value)
                self.arm_streams[index] = np.random.default_rng([arm_seed, index])
                if note:
                    self.notes.append(f"{plan.label}: {note}")
        self.side_seed = int(rng.integers(2**63))  # the permutation relabelings, not data
        self.relabelings: dict[int, NDArray[np.intp]] = {}
        self.regions = _Regions()
        self.boot: dict[tuple[int, int, int, int], _BootstrapDraws] = {}
        self.acc: dict[tuple[int, str], _Acc] = {}
        self.mon: dict[str, _Acc] = {"null": _Acc(), "planned effect": _Acc()}

    @property
    def latent(self) -> list[float]:
        return sorted(set(self.effects.values()))

    def truth(self, plan: PlannedTest, key: str) -> float:
        if plan.weights is not None:  # a contrast: 0 without an effect (weights sum to 0)
            index = self.tests.index(plan)
            return 0.0 if key == "null" else self.contrasts[index][1]
        agg, delta = estimand(plan), self.effects[key]
        if (agg, delta) not in self.truths:
            self.truths[(agg, delta)] = self.pop.truth(agg, delta)
        return self.truths[(agg, delta)]

    def relabel(self, g: int) -> NDArray[np.intp]:
        if g not in self.relabelings:
            keys = np.random.default_rng(self.side_seed).random((PERMUTATIONS, 2 * g))
            self.relabelings[g] = np.argpartition(keys, g - 1, axis=1)[:, :g]
        return self.relabelings[g]

    def evaluate(self, plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float) -> Outcome:
        if plan.test == "paired_bootstrap":
            return _bootstrap(plan, yc, yt, truth, self.pop, self.draws, self.boot)
        if plan.test == "tost_paired":
            return _tost(plan, yc, yt, truth, self.pop, self.regions)
        if plan.test == "exact_permutation_test":
            return _permutation(plan, yc, yt, truth, self.pop, self.relabel)
        return EVALUATORS[plan.test](plan, yc, yt, truth, self.pop)

    def block(self, data: Draws) -> None:
        """Apply every test (and the stopping rule) to one block of data sets."""
        size = data.control.shape[0]
        for index, plan in enumerate(self.tests):
            if plan.weights is not None:
                self._contrast_block(index, plan, size)
                continue
            yc = _subset(data.control, plan.subset)
            for key, _ in _scenarios(plan):
                yt = _subset(data.treatment[self.effects[key]], plan.subset)
                out = self.evaluate(plan, yc, yt, self.truth(plan, key))
                self.acc.setdefault((index, key), _Acc()).add(out)
        if self.family is not None:
            self._family_block(self.family, data)
        if self.monitor is not None:
            yc = _subset(data.control, self.monitor.subset)
            for key in ("null", "planned effect"):
                yt = _subset(data.treatment[self.effects[key]], self.monitor.subset)
                crossed, direction, used = _monitor(self.monitor, yc, yt)
                self.mon[key].add(Outcome(crossed, direction))
                self.mon[key].used.append(used)

    def _family_block(self, fam: FamilyPlan, data: Draws) -> None:
        """Whether the registered rule rejects any member under the global null (every
        member's null holds: no effect), per data set: the family-wise error, which is
        also the false discovery rate when every hypothesis is null (V = R)."""
        levels = family_levels(fam.method, fam.q, len(fam.members))
        counts = np.zeros((len(levels), data.control.shape[0]), dtype=np.int64)
        null = data.treatment[self.effects["null"]]
        for member in fam.members:
            if member is None:
                continue
            yc, yt = _subset(data.control, member.subset), _subset(null, member.subset)
            truth = self.truth(member, "null")
            for j, (_, alpha) in enumerate(levels):
                counts[j] += self.evaluate(replace(member, alpha=alpha), yc, yt, truth).reject
        needed = np.array([k for k, _ in levels], dtype=np.int64)[:, None]
        rejects: BoolArray = np.asarray((counts >= needed).any(axis=0), dtype=bool)
        self.fam.add(Outcome(rejects, np.zeros(rejects.size, dtype=np.int64)))

    def _contrast_block(self, index: int, plan: PlannedTest, size: int) -> None:
        deltas = self.contrasts[index][0]
        null = tuple(0.0 for _ in deltas)
        data = simulate_arms(self.pop, [null, deltas], size, self.arm_streams[index])
        for (key, _), arms in zip(_scenarios(plan), data, strict=True):
            arms = arms if plan.subset is None else arms[:, :, plan.subset, :]
            out = _contrast(plan, arms, self.truth(plan, key), self.boot, self.draws)
            self.acc.setdefault((index, key), _Acc()).add(out)

    def rows(self, power_target: float | None) -> list[CalibrationRow]:
        rows: list[CalibrationRow] = []
        for index, plan in enumerate(self.tests):
            values = {key: self.truth(plan, key) for key, _ in _scenarios(plan)}
            rows.extend(_rows_of(plan, index, self.acc, values, self.sign, power_target))
        if self.monitor is not None:
            rows.extend(_monitor_rows(self.monitor, self.mon, self.sign, power_target))
        if self.family is not None:
            rows.append(_family_row(self.family, self.fam))
        return rows


def calibrate(
    pop: Population,
    tests: Sequence[PlannedTest],
    *,
    effect: float,
    power_target: float | None = 0.8,
    monitor: MonitorPlan | None = None,
    sims: int = 1000,
    seed: int | None = 0,
    draws: int = 1000,
    progress: Progress | None = None,
    family: FamilyPlan | None = None,
) -> CalibrationResult:
    """Simulate the registered analysis ``sims`` times per scenario (see the module doc).

    ``effect`` is the planned effect as a difference of mean outcomes, treatment minus
    control (its sign is the planned direction); ``power_target`` the planned power (the
    nominal of the power rows; None: no verdict). ``progress(done, total)`` is called as
    blocks of data sets are analysed. Seeded with ``numpy.random.default_rng(seed)``; the
    same seed gives the same table. ``family``: the registered multiplicity family, whose
    error rate under the global null gets one row (:class:`FamilyPlan`).
    """
    if isinstance(sims, bool) or int(sims) != sims or sims < 1:
        raise ValueError(f"sims must be a positive integer, got {sims!r}")
    if isinstance(draws, bool) or int(draws) != draws or draws < 1:
        raise ValueError(f"draws must be a positive integer, got {draws!r}")
    sims, draws = int(sims), int(draws)
    rng = np.random.default_rng(seed)
    run = _Simulation(pop, tests, monitor, effect, draws, rng, family)
    block = max(1, _BLOCK_CELLS // (pop.prompts * pop.runs))
    if progress is not None:
        progress(0, sims)
    done = 0
    while done < sims:
        size = min(block, sims - done)
        run.block(simulate(pop, run.latent, size, rng))
        done += size
        if progress is not None:
            progress(done, sims)
    return CalibrationResult(
        rows=tuple(run.rows(power_target)),
        population=pop,
        effect=effect,
        effects=run.effects,
        sims=sims,
        seed=seed,
        draws=draws,
        method=(
            "simulation of the registered analysis: beta-binomial prompts matched to sigma_d, "
            "clipped additive run shifts matched to sigma_run, common random numbers"
        ),
        notes=tuple(run.notes),
    )


def _rows_of(
    plan: PlannedTest,
    index: int,
    acc: dict[tuple[int, str], _Acc],
    truths: dict[str, float],
    sign: int,
    power_target: float | None,
) -> list[CalibrationRow]:
    rows: list[CalibrationRow] = []
    level = 1.0 - 2.0 * plan.alpha if plan.test == "tost_paired" else plan.interval_level
    either = "rejections in either direction" if plan.sides == "two-sided" else ""
    for key, scenario in _scenarios(plan):
        a, truth = acc[(index, key)], truths[key]
        if scenario == "null":
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "type I error",
                    scenario,
                    plan.alpha,
                    a.reject,
                    None,
                    either,
                )
            )
        elif scenario == "margin":
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "type I error",
                    scenario,
                    plan.alpha,
                    a.reject,
                    truth,
                    "equivalence declared with the true difference on the margin",
                )
            )
        elif scenario == "equivalence":
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "power",
                    scenario,
                    None,
                    a.reject,
                    truth,
                    "equivalence declared with no difference",
                )
            )
        else:
            hits = [
                r & (d == sign) if plan.sides == "two-sided" else r
                for r, d in zip(a.reject, a.direction, strict=True)
            ]
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "power",
                    scenario,
                    power_target,
                    hits,
                    truth,
                    "rejections in the planned direction",
                )
            )
        if a.covered:
            note = (
                f"{a.undefined} data set(s) without an interval count as misses"
                if a.undefined
                else ""
            )
            rows.append(
                _row(plan.label, plan.test, "coverage", scenario, level, a.covered, truth, note)
            )
    return rows


def _monitor_rows(
    monitor: MonitorPlan, mon: dict[str, _Acc], sign: int, power_target: float | None
) -> list[CalibrationRow]:
    null, alt = mon["null"], mon["planned effect"]
    used_null, used = np.concatenate(null.used), np.concatenate(alt.used)
    hits = [r & (d == sign) for r, d in zip(alt.reject, alt.direction, strict=True)]
    name = "beta-mixture e-process"
    return [
        _row(
            monitor.label,
            name,
            "type I error",
            "null",
            1.0 / monitor.threshold,
            null.reject,
            None,
            f"crossing in either direction; nominal: Ville's bound 1/{monitor.threshold:g}; "
            f"mean prompts used {float(used_null.mean()):.1f}",
        ),
        _row(
            monitor.label,
            name,
            "power",
            "planned effect",
            power_target,
            hits,
            None,
            f"crossing in the planned direction; mean prompts used {float(used.mean()):.1f}",
        ),
    ]


def _family_row(fam: FamilyPlan, acc: _Acc) -> CalibrationRow:
    est, se, n = _rate(acc.reject)
    fdr = fam.method in ("bh", "e-bh")
    quantity = "false discovery rate" if fdr else "family-wise error"
    simulated = sum(member is not None for member in fam.members)
    note = (
        f"global null (no effect on any member): any rejection by {fam.method} at q "
        f"{fam.q:g} over {len(fam.members)} member(s), {simulated} simulated"
        + ("; FDR = FWER when every hypothesis is null" if fdr else "")
        + (f"; {fam.note}" if fam.note else "")
    )
    return CalibrationRow(
        label=fam.label,
        test=f"{fam.method} over {fam.family}",
        quantity=quantity,
        scenario="global null",
        nominal=fam.q,
        estimate=est,
        mc_se=se,
        verdict=verdict("type I error", est, fam.q, n),
        sims=n,
        note=note,
    )


EVALUATORS: dict[str, Callable[[PlannedTest, BoolArray, BoolArray, float, Population], Outcome]] = {
    "mcnemar_exact": _mcnemar,
    "beta_mixture": _beta_mixture,
    "sign_flip_test": _sign_flip,
}
