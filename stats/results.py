"""Frozen result objects returned by :mod:`prereg.stats`.

They follow the style of ``scipy.stats`` results: plain attributes (``estimate``,
``statistic``, ``pvalue`` or ``evalue``, ``low``/``high``, ``level``, ``method``, ``n``)
and nothing else. Fields holding numpy arrays are excluded from equality and ``repr``
where they could be long.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test on the discordant counts ``b`` and ``c``.

    ``statistic`` is min(b, c), ``estimate`` is b / (b + c) (nan when there are no
    discordant pairs), ``n`` the number of discordant pairs.
    """

    statistic: float
    pvalue: float
    estimate: float
    b: int
    c: int
    n: int
    method: str


@dataclass(frozen=True)
class ProportionInterval:
    """A binomial proportion with an interval (scalars, or arrays when vectorised)."""

    estimate: float | FloatArray
    low: float | FloatArray
    high: float | FloatArray
    level: float
    successes: float | FloatArray
    trials: float | FloatArray
    deff: float | FloatArray
    effective_successes: float | FloatArray
    effective_trials: float | FloatArray
    method: str
    n: int


@dataclass(frozen=True, eq=False)
class MultipleTestResult:
    """Rejections of a multiple-testing procedure, in the input order.

    ``adjusted`` holds the adjusted p-values (BH, Holm) or, for e-BH, the BH-adjusted
    values of 1/e (the smallest level at which each hypothesis is rejected).
    ``threshold`` is the cut-off actually applied: the largest rejected p-value's bound
    for BH and Holm, or the e-value bound m / (k* q) for e-BH (inf when nothing is
    rejected).
    """

    reject: BoolArray
    adjusted: FloatArray
    level: float
    n: int
    n_rejected: int
    threshold: float
    method: str


@dataclass(frozen=True)
class EValueResult:
    """Beta-mixture e-value of the discordant pairs against p = 1/2."""

    evalue: float | FloatArray
    log_evalue: float | FloatArray
    pvalue: float | FloatArray
    estimate: float | FloatArray
    b: int | NDArray[np.int64]
    c: int | NDArray[np.int64]
    n: int | NDArray[np.int64]
    prior: tuple[float, float]
    method: str


@dataclass(frozen=True, eq=False)
class MonitorResult:
    """Outcome of the sequential (anytime-valid) monitor over a stream of pairs.

    ``n``, ``b``, ``c``, ``evalue`` and ``pvalue`` describe the decision point: the
    prompt at which the monitor stopped, or the end of the stream if it never did.
    ``evalues`` is the whole e-process path, one value per prompt of the stream.
    """

    stopped: bool
    stop_at: int | None
    evalue: float
    max_evalue: float
    pvalue: float
    estimate: float
    b: int
    c: int
    n: int
    n_stream: int
    threshold: float
    min_prompts: int
    prior: tuple[float, float]
    method: str
    evalues: FloatArray = field(repr=False)


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Paired bootstrap of a mean difference (treatment minus control).

    ``truncated`` is True when an end of the interval was moved in to the range a
    difference of the outcomes can take (``[-1, 1]`` for binary outcomes); ``note`` says
    which bound applied and any other adjustment of the interval (empty otherwise).
    """

    estimate: float
    low: float
    high: float
    level: float
    se: float
    pvalue: float
    n: int
    n_obs: int
    runs_control: int
    runs_treatment: int
    draws: int
    seed: int | None
    weighting: str
    sigma_run_control: float
    sigma_run_treatment: float
    method: str
    distribution: FloatArray = field(repr=False)
    truncated: bool = False
    note: str = ""


@dataclass(frozen=True)
class TOSTResult:
    """Two one-sided tests of equivalence within (-margin, +margin).

    ``low``/``high`` is the (1 - 2 alpha) interval the TOST decision is equivalent to;
    ``min_margin`` the smallest symmetric margin at which the TOST would reject.
    ``note`` explains degenerate inputs (it is empty otherwise).
    """

    estimate: float
    low: float
    high: float
    level: float
    margin: float
    alpha: float
    statistic_lower: float
    statistic_upper: float
    pvalue_lower: float
    pvalue_upper: float
    pvalue: float
    equivalent: bool
    min_margin: float
    n: int
    b: int | None
    c: int | None
    method: str
    note: str


@dataclass(frozen=True)
class DifferenceInterval:
    """An interval for a difference of paired proportions (Tango's score interval)."""

    estimate: float
    low: float
    high: float
    level: float
    b: int
    c: int
    n: int
    method: str


@dataclass(frozen=True)
class PermutationResult:
    """Exact (or, above a documented size, Monte Carlo) permutation / sign-flip test."""

    statistic: float
    pvalue: float
    estimate: float
    alternative: str
    n: int
    n_resamples: int
    exact: bool
    method: str


@dataclass(frozen=True)
class MonitorSimulation:
    """Operating characteristics of the sequential monitor, by simulation.

    ``rejection_rate`` is the type I error when ``p01 == p10`` and the power otherwise.
    ``expected_prompts`` is E[min(stopping time, max_prompts)].
    """

    rejection_rate: float
    rejection_se: float
    expected_prompts: float
    expected_prompts_se: float
    median_prompts: float
    p01: float
    p10: float
    max_prompts: int
    threshold: float
    min_prompts: int
    prior: tuple[float, float]
    sims: int
    seed: int | None
    method: str


@dataclass(frozen=True)
class MonitorExact:
    """Operating characteristics of the sequential monitor, exactly (no simulation).

    ``rejection_rate`` is P(the monitor stops by ``max_prompts``): the type I error
    when ``p01 == p10``, the power otherwise. ``expected_prompts`` is
    E[min(stopping time, max_prompts)].
    """

    rejection_rate: float
    expected_prompts: float
    p01: float
    p10: float
    max_prompts: int
    threshold: float
    min_prompts: int
    method: str = "exact dynamic programme over discordant counts (b, c)"


@dataclass(frozen=True, eq=False)
class ContrastResult:
    """Cluster bootstrap of a contrast of cell means over resampling units.

    ``n`` is the number of resampling units, ``n_rows`` the rows of the input matrix;
    ``weights`` the checked cell weights; ``unit_contrasts`` the per-unit contrasts
    d_u (their mean is ``estimate``); ``pvalue`` the two-sided p of the interval's method
    (the t test on n - 1 df by default, the centred bootstrap p for the percentile
    interval). ``truncated`` is True when an end of the interval was moved in to the
    contrast's support; ``note`` says to which range, and any other remark on the
    interval (zero width; a percentile interval missing the estimate), else empty.
    """

    estimate: float
    low: float
    high: float
    level: float
    se: float
    pvalue: float
    n: int
    n_rows: int
    draws: int
    seed: int | None
    weights: tuple[float, ...]
    method: str
    unit_contrasts: FloatArray = field(repr=False)
    distribution: FloatArray = field(repr=False)
    truncated: bool = False
    note: str = ""


@dataclass(frozen=True)
class BetaPrior:
    """The shared Beta(mu kappa, (1 - mu) kappa) prior of one funnel stage.

    ``method`` says how it was obtained (marginal ML, the method of moments, or
    Jeffreys Beta(1/2, 1/2), in which case mu = 1/2 and kappa = 1); ``loglik`` is the
    beta-binomial marginal log-likelihood at the estimate (nan for Jeffreys).
    """

    mu: float
    kappa: float
    method: str
    converged: bool
    loglik: float
    cells_with_trials: int

    @property
    def alpha(self) -> float:
        return self.mu * self.kappa

    @property
    def beta(self) -> float:
        return (1.0 - self.mu) * self.kappa


@dataclass(frozen=True, eq=False)
class FunnelStage:
    """One stage of the InvokeRank funnel, per intent cell (arrays indexed by cell).

    ``successes``/``trials`` are the sequential counts (runs reaching the stage among
    those reaching its parent); ``rho_source`` per cell is ``cell``, ``pooled`` or
    ``default``; ``prior_alpha``/``prior_beta`` are after capPrior (``capped`` where it
    bound); the posterior is Beta(``posterior_alpha``, ``posterior_beta``).
    """

    stage: str
    successes: NDArray[np.int64]
    trials: NDArray[np.int64]
    rho: FloatArray
    rho_source: tuple[str, ...]
    pooled_rho: float
    deff: FloatArray
    effective_successes: FloatArray
    effective_trials: FloatArray
    prior: BetaPrior
    prior_alpha: FloatArray
    prior_beta: FloatArray
    capped: BoolArray
    posterior_alpha: FloatArray
    posterior_beta: FloatArray

    @property
    def posterior_mean(self) -> FloatArray:
        total = self.posterior_alpha + self.posterior_beta
        return np.asarray(self.posterior_alpha / total)


@dataclass(frozen=True, eq=False)
class InvokeRankResult:
    """The InvokeRank score of one arm: Q per intent cell and the weighted roll-up.

    ``q`` is the mean of the Q draws per cell (InvokeRank = 100 q), ``q_exact`` the
    product of the stage posterior means; ``q_low``/``q_high`` and
    ``rollup_low``/``rollup_high`` map each level to equal-tailed bounds;
    ``posterior_means`` and ``loss_shares`` are cells x stages.
    """

    stages: tuple[str, ...]
    cells: int
    weights: FloatArray
    q: FloatArray
    q_exact: FloatArray
    q_low: dict[float, FloatArray]
    q_high: dict[float, FloatArray]
    rollup: float
    rollup_low: dict[float, float]
    rollup_high: dict[float, float]
    posterior_means: FloatArray
    loss_shares: FloatArray
    fits: tuple[FunnelStage, ...]
    draws: int
    seed: int | None
    capped_prior: bool
    method: str
    q_draws: FloatArray = field(repr=False)
    rollup_draws: FloatArray = field(repr=False)
