"""The population a calibration simulates: paired binary outcomes with prompt heterogeneity,
repeat clustering and a between-run component, matched to a registration's planning figures.

Pure functions over numpy; used by :mod:`prereg.stats.calibration`. Every choice below is
one a calibration must make and the planning figures do not fix; each is documented here
and in docs/statistics.md ("prereg calibrate").

The model, for one prompt i of P, arm a (control c, treatment t) and repeat r of R (a
repeat is a replicate run of the arm over the prompts, as ``analyse`` and the feasibility
gate count it):

    theta_i ~ Beta(mu kappa, (1 - mu) kappa),   kappa = 1 / rho - 1
    pi_ic = theta_i
    pi_it = theta_i with probability lambda, else an independent draw from the same Beta
    pi_it <- pi_it + delta (1 - pi_it) / (1 - mu)   (delta >= 0; delta pi_it / mu below 0)
    u_ar  ~ N(0, s^2), one shift per arm and run, shared by every prompt of the run
           (with S replicate sessions, one shift per arm and session, shared by the
           R / S repeats of the session: ``sessions``)
    y_iar ~ Bernoulli(clip(pi_ia + u_ar, 0, 1))

* ``mu`` (base rate) is the mean success rate, ``rho`` the intraclass correlation of
  repeats of a prompt (Var(pi) = rho mu (1 - mu), the beta-binomial ICC).
* ``lambda`` (the share of prompts on which the arms have the same rate) is solved so
  that the SD over prompts of the per-prompt difference of arm means over R repeats is
  the planned sigma_d: sigma_d^2 = 2 mu (1 - mu) [rho (1 - lambda) + (1 - rho) / R]
  (tau^2 + omega^2 / R, with tau^2 the spread of the true per-prompt differences and
  omega^2 the within-prompt binomial variance, the decomposition of
  :class:`prereg.reports.planning.pilot.SigmaD`). Without a treatment effect the two arms are
  exchangeable on every prompt, so every registrable test's null hypothesis holds.
* ``rho`` defaults to 0.5, raised to the smallest value at which sigma_d can arise at
  all: the binomial variance of R repeats alone must not exceed sigma_d^2, and with
  lambda = 0 the spread must reach it. sigma_d above sqrt(2 mu (1 - mu)) cannot arise
  from binary outcomes with this mean (refused).
* The treatment effect moves each prompt's rate by a share of its headroom, so every
  rate stays in [0, 1] and the mean rate moves by exactly delta.
* The run shift is additive on the rate and clipped to [0, 1]; its SD ``s`` is solved so
  that the SD of a run's mean rate over prompts, E_theta clip(theta + u), is the planned
  sigma_run (the quantity :func:`prereg.stats.mde_paired` divides by the runs). Clipping
  keeps every rate a probability; near-deterministic prompts (rates at 0 or 1) move only
  one way.

True values (what a covering interval must contain) are expectations over prompts and
runs of the estimand each test reads: the difference of mean outcomes over every run
(the bootstrap), or of per-task aggregates over repeats (majority, all, any, first, mean).
They are computed by quadrature over theta (the treatment arm's marginal rate is the same
Beta as the control's, so a difference of expectations needs only the marginals) and, for
the binary aggregates under a run component, averaged over a fixed set of run shifts
(:data:`TRUTH_SHIFTS` vectors, the same for both arms and every effect).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import beta_ppf
from prereg.stats._scipy import optimize, special
from prereg.stats._scipy import stats as sps
from prereg.stats._validate import at_least, positive, probability

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: the intraclass correlation of repeats used when none is given (raised when the planned
#: sigma_d needs more)
DEFAULT_ICC = 0.5
#: rho is kept below this (rho = 1 is a point mass at 0 and 1: no within-prompt variance)
MAX_ICC = 0.999
#: quantile points of the Beta used by the quadratures
QUAD_POINTS = 2048
#: run-shift vectors averaged over, and Beta quantile points used, for the true values of
#: binary aggregates under a run component (a Monte Carlo average over the shifts)
TRUTH_SHIFTS = 512
TRUTH_POINTS = 128
#: Gauss-Hermite nodes for the SD of a run's mean rate
_HERMITE = 96
#: the seed of the fixed run shifts of the true values (not the calibration's seed, so that
#: the truth is the same whatever --seed is)
_TRUTH_SEED = 20_140_614
AGGREGATES = ("majority", "all", "any", "first", "mean")


@dataclass(frozen=True)
class Population:
    """The simulated population, resolved from the planning figures (see the module doc)."""

    prompts: int
    runs: int
    base_rate: float
    icc: float
    sigma_d: float
    sigma_run: float
    #: share of prompts on which the two arms have the same rate (lambda)
    shared: float
    #: SD of the additive run shift before clipping (s)
    run_shift_sd: float
    #: where rho came from: "given", "default" or "raised to make sigma_d reachable"
    icc_source: str
    #: Beta quantile points (for the quadratures; not part of equality)
    grid: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    #: fixed run shifts (TRUTH_SHIFTS x runs) for the true values of binary aggregates
    shifts: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    #: coarser Beta quantile points for the shift average
    coarse: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    #: replicate sessions (``design.sessions``, issue 41): with S >= 2 the run shift is
    #: one per session, shared by its R / S consecutive repeats; 1: one per repeat (every
    #: repeat its own run, as before sessions existed)
    sessions: int = 1

    def run_shifts(self, rng: np.random.Generator, lead: tuple[int, ...]) -> FloatArray:
        """Standard normal run shifts of shape ``lead + (runs,)``: one per repeat, or with
        sessions one per session repeated over its repeats (a session is a block of
        consecutive repeats, as ``registry.units.session_of`` numbers them). Unscaled. With
        one session (the default) the draws are exactly those made before sessions
        existed."""
        if self.sessions <= 1:
            return rng.standard_normal((*lead, self.runs))
        per = self.runs // self.sessions
        return np.repeat(rng.standard_normal((*lead, self.sessions)), per, axis=-1)

    @property
    def beta_params(self) -> tuple[float, float]:
        kappa = 1.0 / self.icc - 1.0
        return self.base_rate * kappa, (1.0 - self.base_rate) * kappa

    def describe(self) -> dict[str, Any]:
        """The resolved figures, for a report."""
        return {
            "prompts": self.prompts,
            "runs_per_arm": self.runs,
            "base_rate": self.base_rate,
            "icc": self.icc,
            "icc_source": self.icc_source,
            "sigma_d": self.sigma_d,
            "sigma_run": self.sigma_run,
            "shared_rate_share": self.shared,
            "run_shift_sd": self.run_shift_sd,
            # only with sessions: a design without them describes itself as before
            **({"sessions": self.sessions} if self.sessions > 1 else {}),
        }

    # ---- effects and true values ------------------------------------------------------

    def max_shift(self, sign: int) -> float:
        """The largest latent effect in direction ``sign`` (every rate moved to 0 or 1)."""
        return (1.0 - self.base_rate) if sign > 0 else self.base_rate

    def shifted(self, rates: Any, delta: float) -> Any:
        """Rates moved by a latent effect ``delta`` (a share of each rate's headroom)."""
        if delta >= 0:
            return rates + delta * (1.0 - rates) / (1.0 - self.base_rate)
        return rates + delta * rates / self.base_rate

    def expected(self, aggregate: str, delta: float) -> float:
        """E[the per-task aggregate of one arm] whose latent effect is ``delta``."""
        averaged = self.run_shift_sd > 0.0 and aggregate not in ("mean", "first")
        x = self.shifted(self.coarse if averaged else self.grid, delta)
        values = _aggregate_probability(x, aggregate, self.runs, self.run_shift_sd, self.shifts)
        return float(np.mean(values))

    def truth(self, aggregate: str, delta: float) -> float:
        """Treatment minus control of the expected aggregate: the value an interval of that
        estimand must cover when the treatment's latent effect is ``delta`` (exactly 0 at
        delta = 0: the arms are exchangeable)."""
        if delta == 0.0:
            return 0.0
        return self.expected(aggregate, delta) - self.expected(aggregate, 0.0)

    def latent_effect(self, aggregate: str, target: float) -> float:
        """The latent delta whose true difference of ``aggregate`` is ``target``.

        ValueError when no effect reaches it (beyond what moving every rate to 0 or 1
        gives)."""
        if target == 0.0:
            return 0.0
        sign = 1 if target > 0 else -1
        end = sign * self.max_shift(sign) * (1.0 - 1e-9)
        reach = self.truth(aggregate, end)
        if abs(reach) < abs(target):
            raise ValueError(
                f"an effect of {target:+.4g} on the {aggregate} scale is beyond what this "
                f"population can show (at most {reach:+.4g} with base rate {self.base_rate:g})"
            )
        if self.run_shift_sd == 0.0 and aggregate in ("mean", "first"):
            return target  # the headroom shift moves the mean rate by exactly delta
        lo, hi = min(0.0, end), max(0.0, end)
        solved = optimize.brentq(
            lambda d: self.truth(aggregate, d) - target, lo, hi, xtol=1e-7, rtol=1e-9
        )
        return float(solved)


def _poisson_binomial_above(rates: FloatArray, threshold: int) -> FloatArray:
    """P(more than ``threshold`` successes) of independent Bernoullis along the last axis."""
    runs = rates.shape[-1]
    dist = np.zeros((*rates.shape[:-1], runs + 1))
    dist[..., 0] = 1.0
    for r in range(runs):
        p = rates[..., r : r + 1]
        new = dist * (1.0 - p)
        new[..., 1:] += dist[..., :-1] * p
        dist = new
    out: FloatArray = dist[..., threshold + 1 :].sum(axis=-1)
    return out


def _aggregate_probability(
    x: FloatArray, aggregate: str, runs: int, s: float, shifts: FloatArray
) -> FloatArray:
    """E[aggregate | latent rate x] over the run shifts (exact when s = 0)."""
    if aggregate in ("mean", "first"):  # the expected outcome of one run
        if s == 0.0:
            return x
        return _clipped_mean(x, s)
    if s == 0.0:
        if aggregate == "all":
            out: FloatArray = x**runs
            return out
        if aggregate == "any":
            return 1.0 - (1.0 - x) ** runs
        return np.asarray(sps.binom.sf(runs // 2, runs, x), dtype=np.float64)
    # run shifts: average over the fixed shift vectors, in blocks of the grid
    result = np.empty(x.size)
    block = max(1, 4_000_000 // max(1, shifts.shape[0] * (runs + 1)))
    for lo in range(0, x.size, block):
        rates = np.clip(x[lo : lo + block, None, None] + shifts[None, :, :], 0.0, 1.0)
        if aggregate == "all":
            values = rates.prod(axis=-1)
        elif aggregate == "any":
            values = 1.0 - (1.0 - rates).prod(axis=-1)
        else:
            values = _poisson_binomial_above(rates, runs // 2)
        result[lo : lo + block] = values.mean(axis=1)
    return result


def _clipped_mean(x: FloatArray, s: float) -> FloatArray:
    """E[clip(x + U, 0, 1)], U ~ N(0, s^2): E[max(0, x + U)] - E[max(0, x + U - 1)] with
    E[max(0, y + U)] = y Phi(y / s) + s phi(y / s)."""

    def positive_part(y: FloatArray) -> FloatArray:
        z = y / s
        out: FloatArray = y * special.ndtr(z) + s * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        return out

    return positive_part(x) - positive_part(x - 1.0)


_HERMITE_RULE: list[tuple[FloatArray, FloatArray]] = []


def _hermite() -> tuple[FloatArray, FloatArray]:
    """Gauss-Hermite nodes and normalised weights for E over a standard normal (computed
    once)."""
    if not _HERMITE_RULE:
        nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE)
        _HERMITE_RULE.append((nodes, weights / weights.sum()))
    return _HERMITE_RULE[0]


def _run_mean_sd(grid: FloatArray, s: float) -> float:
    """SD over u ~ N(0, s^2) of the run's mean rate E_theta clip(theta + u) (Gauss-Hermite)."""
    if s == 0.0:
        return 0.0
    nodes, weights = _hermite()
    means = np.clip(grid[None, :] + s * nodes[:, None], 0.0, 1.0).mean(axis=1)
    centre = float(weights @ means)
    return math.sqrt(max(0.0, float(weights @ (means - centre) ** 2)))


def _icc_floor(sigma_d: float, base_rate: float, runs: int) -> float:
    """The smallest rho at which sigma_d can arise (see the module docstring)."""
    spread = 2.0 * base_rate * (1.0 - base_rate)
    ratio = sigma_d**2 / spread
    floor = 1.0 - runs * ratio  # within-prompt binomial variance at most sigma_d^2
    if runs > 1:
        floor = max(floor, (ratio - 1.0 / runs) / (1.0 - 1.0 / runs))  # reachable at lambda 0
    elif ratio > 1.0:
        floor = math.inf
    return max(floor, 0.0)


def population(
    prompts: int,
    runs: int,
    sigma_d: float,
    sigma_run: float = 0.0,
    base_rate: float = 0.5,
    icc: float | None = None,
    sessions: int = 1,
) -> Population:
    """The simulated population matched to the planning figures (see the module docstring).

    ``prompts`` tasks, ``runs`` repeats (replicate runs) per arm, ``sigma_d`` the SD over
    prompts of the per-prompt difference of arm means over ``runs`` repeats, ``sigma_run``
    the SD of a run's mean rate, ``base_rate`` the mean success rate, ``icc`` the
    intraclass correlation of repeats (default 0.5, raised as needed), ``sessions`` the
    replicate sessions the repeats are split into (``sigma_run`` is then the SD of a
    session's mean rate, one shift per session). ValueError naming the argument when the
    figures cannot arise from binary outcomes.
    """
    prompts = at_least(prompts, "prompts", 1)
    runs = at_least(runs, "runs", 1)
    sessions = at_least(sessions, "sessions", 1)
    if runs % sessions:
        raise ValueError(f"sessions {sessions} must divide the {runs} repeat(s)")
    sigma_d = positive(sigma_d, "sigma_d")
    sigma_run = positive(sigma_run, "sigma_run", allow_zero=True)
    base_rate = probability(base_rate, "base_rate")
    spread = 2.0 * base_rate * (1.0 - base_rate)
    if sigma_d**2 >= spread:
        raise ValueError(
            f"sigma_d {sigma_d:g} cannot arise from binary outcomes with base rate "
            f"{base_rate:g} (it must be below {math.sqrt(spread):.3f})"
        )
    floor = _icc_floor(sigma_d, base_rate, runs)
    if icc is None:
        rho = max(DEFAULT_ICC, floor)
        source = "default" if rho == DEFAULT_ICC else "raised to make sigma_d reachable"
        rho = min(rho, MAX_ICC)
    else:
        rho = probability(icc, "icc")
        if rho < floor - 1e-12 or rho > MAX_ICC:
            raise ValueError(
                f"icc {rho:g} cannot give sigma_d {sigma_d:g} with {runs} repeat(s) at base "
                f"rate {base_rate:g}: it must be in [{floor:.3f}, {MAX_ICC}]"
            )
        source = "given"
    within = spread * (1.0 - rho) / runs
    shared = 1.0 - (sigma_d**2 - within) / (spread * rho)
    shared = min(1.0, max(0.0, shared))
    kappa = 1.0 / rho - 1.0
    a, b = base_rate * kappa, (1.0 - base_rate) * kappa
    grid = _quantiles(a, b, QUAD_POINTS, base_rate)
    s = 0.0
    if sigma_run > 0.0:
        top = _run_mean_sd(grid, 50.0)
        if sigma_run >= top:
            raise ValueError(
                f"sigma_run {sigma_run:g} cannot arise: a run's mean rate varies by at most "
                f"{top:.3f} here"
            )
        s = float(
            optimize.brentq(
                lambda v: _run_mean_sd(grid, v) - sigma_run, 1e-12, 50.0, xtol=1e-12, rtol=1e-10
            )
        )
    shifts = np.zeros((1, runs))
    if s > 0.0:
        rng = np.random.default_rng(_TRUTH_SEED)
        per = runs // sessions if sessions > 1 else 1
        shifts = s * np.repeat(rng.standard_normal((TRUTH_SHIFTS, runs // per)), per, axis=1)
    return Population(
        prompts=prompts,
        runs=runs,
        base_rate=base_rate,
        icc=rho,
        sigma_d=sigma_d,
        sigma_run=sigma_run,
        shared=shared,
        run_shift_sd=s,
        icc_source=source,
        grid=grid,
        shifts=shifts,
        coarse=_quantiles(a, b, TRUTH_POINTS, base_rate),
        sessions=sessions,
    )


def _quantiles(a: float, b: float, points: int, mean: float) -> FloatArray:
    """Midpoint quantiles of Beta(a, b): the nodes of an equal-weight quadrature."""
    grid = np.asarray(beta_ppf((np.arange(points) + 0.5) / points, a, b), dtype=np.float64)
    return np.clip(np.nan_to_num(grid, nan=mean), 0.0, 1.0)


@dataclass(frozen=True)
class Draws:
    """One block of simulated data sets: outcomes per (data set, prompt, repeat) and arm.

    The control arm is the same in every scenario; each treatment effect reuses the same
    uniforms (common random numbers), so scenarios differ only by the effect.
    """

    control: BoolArray
    treatment: dict[float, BoolArray]


def simulate(pop: Population, effects: list[float], sims: int, rng: np.random.Generator) -> Draws:
    """``sims`` data sets of the population under each latent effect in ``effects``."""
    p, r = pop.prompts, pop.runs
    a, b = pop.beta_params
    theta = rng.beta(a, b, (sims, p)) if np.isfinite(a) else np.full((sims, p), pop.base_rate)
    other = rng.beta(a, b, (sims, p)) if np.isfinite(a) else theta
    same = rng.random((sims, p)) < pop.shared
    base_t = np.where(same, theta, other)
    s = pop.run_shift_sd
    shift_c = s * pop.run_shifts(rng, (sims, 1))
    shift_t = s * pop.run_shifts(rng, (sims, 1))
    u_c = rng.random((sims, p, r))
    u_t = rng.random((sims, p, r))
    control = u_c < np.clip(theta[:, :, None] + shift_c, 0.0, 1.0)
    treatment = {
        float(d): u_t < np.clip(pop.shifted(base_t, d)[:, :, None] + shift_t, 0.0, 1.0)
        for d in effects
    }
    return Draws(control=control, treatment=treatment)


def simulate_arms(
    pop: Population, effects: list[tuple[float, ...]], sims: int, rng: np.random.Generator
) -> list[BoolArray]:
    """``sims`` data sets of K arms (K x data sets x prompts x repeats), one array per
    vector of latent effects in ``effects`` (one effect per arm; common random numbers).

    The arms are exchangeable without an effect: each takes the prompt's shared rate with
    probability sqrt(lambda), else an independent draw, so every two arms share a rate
    with probability lambda and their per-prompt differences have the spread sigma_d of
    the two-arm population."""
    k, p, r = len(effects[0]), pop.prompts, pop.runs
    a, b = pop.beta_params
    theta = rng.beta(a, b, (sims, p))
    own = rng.beta(a, b, (k, sims, p))
    same = rng.random((k, sims, p)) < math.sqrt(pop.shared)
    base = np.where(same, theta[None], own)
    shifts = pop.run_shift_sd * pop.run_shifts(rng, (k, sims, 1))
    u = rng.random((k, sims, p, r))
    out = []
    for deltas in effects:
        rates = np.stack([pop.shifted(base[j], d) for j, d in enumerate(deltas)])
        out.append(u < np.clip(rates[..., None] + shifts, 0.0, 1.0))
    return out


def aggregate(y: BoolArray, how: str) -> FloatArray:
    """Per-task values from repeats (data sets x prompts x repeats), as ``analyse``
    aggregates them (:func:`prereg.reports.pairs.aggregate`: a majority is strictly more
    than half; a tie fails)."""
    runs = y.shape[-1]
    if how == "majority":
        out = 2 * np.sum(y, axis=-1) > runs
    elif how == "all":
        out = np.all(y, axis=-1)
    elif how == "any":
        out = np.any(y, axis=-1)
    elif how == "first":
        out = y[..., 0]
    elif how == "mean":
        out = np.mean(y, axis=-1)
    else:
        raise ValueError(f"unknown aggregate {how!r}")
    return np.asarray(out, dtype=np.float64)
