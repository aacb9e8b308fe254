"""Planning inputs estimated from an exploratory registration's pilot runs.

``prereg plan --from-runs ID`` plans the next experiment from what the pilot measured,
rather than from a guessed spread. Three quantities decide a paired design's power:

1. ``sigma_d``, the SD across prompts of the per-prompt paired difference of the arm
   means (treatment minus control), the planning quantity of
   :func:`prereg.stats.mde_paired`;
2. the intraclass correlation ``rho`` of repeats of a prompt, which says how much a
   further repeat adds: K repeats of a prompt carry the information of
   K / (1 + (K - 1) rho) independent runs (the design effect is 1 + (K - 1) rho);
3. the between-run SD ``sigma_run``: a shift shared by every prompt of one run (a
   session, a day, a batch) that no number of prompts averages away.

Everything here is a pure function over numpy arrays of binary outcomes, laid out as one
matrix per arm with a row per prompt and a column per repeat (nan where no outcome was
recorded), plus a thin loader over the run store at the bottom. Statistics proper (the
ICC, the design effect) come from :mod:`prereg.stats`; what lives here is the estimation
specific to a pilot's layout, documented estimator by estimator below.

Repeats as replicate runs: prereg runs each arm over the whole split once per repeat, so
repeat r of an arm is a replicate run of an identical arm (same registration digest,
prompts, surface and host). When repeats of a prompt are executed back to back in one
session rather than as separate passes, session-level drift is shared between them and
the between-run estimate is a lower bound on what separate sessions would show.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.core.errors import BadInput, IntegrityError
from prereg.reports.observations import from_record
from prereg.runners.store.choose import StoreLocation, open_store
from prereg.stats import design_effect, icc_binary

FloatArray = NDArray[np.float64]

#: Monte Carlo size of the within-prompt permutation test of excess run variance.
DEFAULT_PERMUTATIONS = 4999
#: Upper bound on B x prompts x runs elements held at once by the permutation test.
_CHUNK_ELEMENTS = 2_000_000


# ---- sigma_d ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SigmaD:
    """Spread of per-prompt paired differences, and how it changes with the repeats.

    ``sigma_d`` is the SD (ddof 1) over prompts of d_i = mean_r T_ir - mean_r C_ir at the
    pilot's repeats. Averaging K repeats shrinks only the within-prompt part of it:

        Var(d_i) = tau^2 + omega^2 / K,

    where tau^2 is the variance over prompts of the true per-prompt difference and
    omega^2 the mean within-prompt variance of a repeat-matched difference
    T_ir - C_ir. ``omega2`` is estimated by the mean over prompts of the sample
    variance (ddof 1) of the repeat-matched differences; ``repeats`` is K_h, the
    harmonic mean of the matched repeats per prompt. :meth:`at` gives sigma_d for a
    design with K runs per arm by the moment combination

        sigma_d(K)^2 = sigma_d^2 + omega2 (1/K - 1/K_h),

    unbiased for tau^2 + omega^2 / K and equal to the observed sigma_d at the pilot's
    own K (falling back to omega2 / K in the rare case it is not positive). ``tau2`` =
    max(0, sigma_d^2 - omega2 / K_h) is reported for information. With one repeat in the
    pilot omega2 cannot be separated and :meth:`at` returns ``sigma_d`` unchanged.
    """

    sigma_d: float
    mean_difference: float
    prompts: int
    repeats: float
    omega2: float
    tau2: float
    method: str = (
        "SD (ddof 1) over prompts of the difference of per-prompt arm means; "
        "rescaled to K runs by sigma_d^2 + omega^2 (1/K - 1/K_pilot)"
    )

    def at(self, runs_per_arm: int) -> float:
        """sigma_d of per-prompt differences of means over ``runs_per_arm`` repeats."""
        if not math.isfinite(self.omega2):
            return self.sigma_d
        k = max(1, int(runs_per_arm))
        value = self.sigma_d**2 + self.omega2 * (1.0 / k - 1.0 / self.repeats)
        return math.sqrt(value if value > 0 else self.omega2 / k)


def _binary_matrix(values: Any, name: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a prompts x repeats matrix, got shape {arr.shape}")
    seen = arr[~np.isnan(arr)]
    if not np.all((seen == 0.0) | (seen == 1.0)):
        raise ValueError(f"{name} must hold binary outcomes (0/1) or nan for missing")
    return arr


def _row_means(m: FloatArray) -> FloatArray:
    counts = np.sum(~np.isnan(m), axis=1)
    sums = np.nansum(m, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def paired_sigma_d(control: Any, treatment: Any) -> SigmaD:
    """Estimate sigma_d from two prompts x repeats outcome matrices (rows aligned).

    Prompts without an outcome in both arms are dropped. Needs two prompts; with fewer,
    every field is nan.
    """
    c = _binary_matrix(control, "control")
    t = _binary_matrix(treatment, "treatment")
    if c.shape[0] != t.shape[0]:
        raise ValueError(f"control and treatment differ in prompts: {c.shape[0]} vs {t.shape[0]}")
    d = _row_means(t) - _row_means(c)
    keep = ~np.isnan(d)
    d = d[keep]
    n = int(d.size)
    if n < 2:
        return SigmaD(
            math.nan, math.nan if n == 0 else float(d[0]), n, math.nan, math.nan, math.nan
        )
    sigma = float(np.std(d, ddof=1))
    # repeat-matched differences (repeat r of one arm with repeat r of the other)
    width = min(c.shape[1], t.shape[1])
    matched = t[keep, :width] - c[keep, :width]
    k_i = np.sum(~np.isnan(matched), axis=1)
    multi = k_i >= 2
    k_h = float(k_i[k_i > 0].size / np.sum(1.0 / k_i[k_i > 0])) if np.any(k_i > 0) else math.nan
    if not np.any(multi):
        return SigmaD(sigma, float(np.mean(d)), n, k_h, math.nan, math.nan)
    omega2 = float(np.mean(np.nanvar(matched[multi], axis=1, ddof=1)))
    tau2 = max(0.0, sigma * sigma - omega2 / k_h)
    return SigmaD(sigma, float(np.mean(d)), n, k_h, omega2, tau2)


# ---- intraclass correlation of repeats ------------------------------------------------


@dataclass(frozen=True)
class RepeatICC:
    """Intraclass correlation of repeats of a prompt, and what K repeats are worth.

    ``rho`` is :func:`prereg.stats.icc_binary` with one group per (arm, prompt), so the
    arm difference is not counted as prompt clustering; ``by_arm`` gives each arm's own
    estimate. ``design_effect`` is 1 + (K - 1) rho at the pilot's K repeats (Kish, via
    :func:`prereg.stats.design_effect` over the observed cluster sizes) and
    ``effective_runs`` = K / design_effect is the number of independent runs a prompt
    repeated K times is worth. Use :meth:`effective` for another K. ``rho`` is nan when
    it cannot be estimated (one repeat, or no variation); callers fall back to a pooled
    or published value.
    """

    rho: float
    by_arm: dict[str, float]
    repeats: int
    design_effect: float
    effective_runs: float
    method: str = "one-way ANOVA ICC of binary outcomes, one group per (arm, prompt)"

    def effective(self, repeats: int) -> float:
        """Independent-run equivalents of ``repeats`` repeats: K / (1 + (K - 1) rho)."""

        if not math.isfinite(self.rho):
            return math.nan
        return repeats / float(design_effect([repeats], self.rho))


def repeat_icc(matrices: Mapping[str, Any]) -> RepeatICC:
    """ICC of repeats, pooled over arms (one group per arm and prompt) and per arm."""

    outcomes: list[FloatArray] = []
    groups: list[NDArray[np.int64]] = []
    sizes: list[NDArray[np.int64]] = []
    by_arm: dict[str, float] = {}
    offset = 0
    repeats = 0
    for arm, values in matrices.items():
        m = _binary_matrix(values, arm)
        rows, cols = np.nonzero(~np.isnan(m))
        # an arm without a recorded outcome has no ICC (icc_binary refuses empty input)
        by_arm[arm] = icc_binary(m[rows, cols], rows) if rows.size else math.nan
        outcomes.append(m[rows, cols])
        groups.append(rows + offset)
        offset += m.shape[0]
        per_prompt = np.sum(~np.isnan(m), axis=1)
        sizes.append(per_prompt[per_prompt > 0])
        repeats = max(repeats, int(per_prompt.max()) if per_prompt.size else 0)
    y = np.concatenate(outcomes) if outcomes else np.zeros(0)
    g = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    rho = icc_binary(y, g) if y.size else math.nan
    cluster = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
    if math.isfinite(rho) and cluster.size and cluster.sum() > 0:
        deff = float(design_effect(cluster, rho))
        kbar = float(np.sum(cluster * cluster) / np.sum(cluster))
        eff = kbar / deff
    else:
        deff, eff = math.nan, math.nan
    return RepeatICC(
        rho=rho, by_arm=by_arm, repeats=repeats, design_effect=deff, effective_runs=eff
    )


# ---- between-run variance --------------------------------------------------------------


@dataclass(frozen=True)
class RunVariance:
    """Excess variance of replicate runs of one arm over within-run binomial sampling.

    With the prompts fixed (the ``prompts`` observed in every one of the ``runs``
    runs), run r's rate is pbar_r = mean_i Y_ir. If runs are exchangeable within each
    prompt, Var(pbar_r) = W = sum_i p_i (1 - p_i) / N^2. A shift u_r shared by every
    prompt of run r, with SD sigma_run, adds sigma_run^2 (1 - 1/N) (the covariance of
    two prompts of one run, summed over the N (N - 1) pairs). Method of moments:

        s^2        = sample variance (ddof 1) of the run rates,
        W_hat      = sum_i v_i / N^2,   v_i = sample variance (ddof 1) of prompt i
                     over runs, unbiased for p_i (1 - p_i) whether or not runs shift,
        sigma_run^2 = max(0, (s^2 - W_hat) / (1 - 1/N)).

    ``variance_ratio`` is s^2 / W_hat (nan when W_hat = 0). ``pvalue`` is the
    within-prompt permutation test of InvokeRank section 7.3: each prompt's outcomes
    are permuted across runs independently (which keeps every prompt's successes, so
    W_hat is fixed and s^2 is the statistic); p = (1 + #{s^2* >= s^2}) / (1 + B) over B
    random permutations, a valid Monte Carlo test of exchangeability.
    """

    arm: str
    runs: int
    prompts: int
    run_rates: list[float]
    observed_sd: float
    within_sd: float
    variance_ratio: float
    sigma_run: float
    pvalue: float
    permutations: int


@dataclass(frozen=True)
class BetweenRun:
    """Between-run SD pooled over the arms with variance, with each arm's own estimate.

    ``sigma_run`` pools the arms' moment estimates with weights (runs - 1):
    sigma_run^2 = max(0, sum_a (R_a - 1) (s_a^2 - W_a) / (1 - 1/N_a) / sum_a (R_a - 1)).
    ``pvalue`` is the permutation test of the pooled statistic sum_a (R_a - 1) s_a^2,
    permuting within prompt within arm. Both are nan when no arm has variance.

    An arm *without variance* is left out of both and listed in ``ignored`` (arm, runs,
    prompts, reason): one with fewer than two runs sharing two prompts, or whose runs are
    identical (every prompt the same outcome in every run, so W_a = 0 and s_a^2 = 0).
    Its moment estimate is 0 - 0, the absence of an estimate rather than an estimate of
    zero; pooled in with weight R_a - 1 it would pull the SD of the arms that vary towards
    0 (two arms of three runs, one of them deterministic: by a factor 1/sqrt(2)).
    """

    sigma_run: float
    pvalue: float
    variance_ratio: float
    by_arm: list[RunVariance]
    permutations: int
    seed: int | None
    #: arms left out of the pooled figures: {"arm", "runs", "prompts", "reason"}
    ignored: list[dict[str, Any]] = field(default_factory=list)
    method: str = (
        "method of moments over replicate runs (repeats) of each arm, pooled over the "
        "arms with variance (an arm with one run or identical runs is left out); "
        "within-prompt permutation test of excess variance (InvokeRank 7.3)"
    )


def _complete_runs(m: FloatArray) -> FloatArray:
    """Columns (runs) with any outcome, then rows (prompts) observed in all of them."""
    cols = np.any(~np.isnan(m), axis=0)
    m = m[:, cols]
    rows = np.all(~np.isnan(m), axis=1) if m.shape[1] else np.zeros(m.shape[0], bool)
    return m[rows]


def _run_rate_variance(perm: FloatArray) -> FloatArray:
    """Sample variance (ddof 1) over runs of the run rates; perm is (..., N, R)."""
    variance: FloatArray = np.var(perm.mean(axis=-2), axis=-1, ddof=1)
    return variance


def _permutation_statistics(
    mats: Sequence[FloatArray],
    weights: Sequence[float],
    permutations: int,
    rng: np.random.Generator,
) -> FloatArray:
    """Pooled statistic sum_a w_a s_a^2 under B within-prompt permutations."""
    out = np.zeros(permutations)
    for m, w in zip(mats, weights, strict=True):
        n, r = m.shape
        chunk = max(1, _CHUNK_ELEMENTS // max(1, n * r))
        for start in range(0, permutations, chunk):
            stop = min(permutations, start + chunk)
            keys = rng.random((stop - start, n, r))
            order = np.argsort(keys, axis=-1)
            perm = np.take_along_axis(np.broadcast_to(m, keys.shape), order, axis=-1)
            out[start:stop] += w * _run_rate_variance(perm)
    return out


def _moments(m: FloatArray) -> tuple[float, float, float]:
    """(s^2, W_hat, sigma_run^2 unclipped) for one arm's complete prompts x runs matrix."""
    n, _ = m.shape
    s2 = float(_run_rate_variance(m))
    w = float(np.sum(np.var(m, axis=1, ddof=1)) / (n * n))
    excess = (s2 - w) / (1.0 - 1.0 / n) if n > 1 else math.nan
    return s2, w, excess


def without_variance(runs: int, prompts: int, identical: bool, unit: str = "run") -> str | None:
    """Why an arm's runs carry no between-run variance to pool, or None when they do:
    fewer than two runs (or prompts) to compare, or runs identical outcome by outcome.
    ``unit`` names the replicate run ("session" for a pilot with replicate sessions)."""
    if runs < 2:
        if unit != "run":
            return (
                f"one {unit} with outcomes: the between-run component is not estimable"
                if runs
                else f"no {unit} with outcomes"
            )
        return "one run: no variance between runs" if runs else "no run with outcomes"
    if prompts < 2:
        return f"{prompts} prompt(s) observed in all of its {runs} {unit}s: nothing to compare"
    if identical:
        what = "outcome in every run" if unit == "run" else f"success rate in every {unit}"
        return (
            f"its {runs} {unit}s are identical (every one of its {prompts} prompts has the same "
            f"{what}): no variance, so no estimate, not an estimate of zero"
        )
    return None


def between_run(
    matrices: Mapping[str, Any], permutations: int = DEFAULT_PERMUTATIONS, seed: int | None = 0
) -> BetweenRun:
    """Between-run SD of replicate runs (columns) of each arm, and its permutation test.

    An arm contributes when at least two runs share at least two prompts and its runs
    are not identical (:func:`without_variance`); the others are listed in ``ignored``.
    """
    mats = {arm: _complete_runs(_binary_matrix(values, arm)) for arm, values in matrices.items()}
    return _pooled_between(mats, permutations, seed)


def _pooled_between(
    mats: Mapping[str, FloatArray],
    permutations: int,
    seed: int | None,
    unit: str = "run",
    method: str | None = None,
) -> BetweenRun:
    """:func:`between_run` over complete prompts x runs matrices (binary outcomes, or a
    session's success rate per cell: :func:`between_sessions`)."""
    if int(permutations) < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations!r}")
    rng = np.random.default_rng(seed)
    arms: list[RunVariance] = []
    ignored: list[dict[str, Any]] = []
    used: list[FloatArray] = []
    weights: list[float] = []
    num = 0.0
    den = 0.0
    s2_pooled = 0.0
    w_pooled = 0.0
    for arm, m in mats.items():
        n, r = m.shape
        why = without_variance(r, n, bool(np.all(m == m[:, :1])) if m.size else False, unit)
        if why is not None:
            ignored.append({"arm": arm, "runs": r, "prompts": n, "reason": why})
            continue
        s2, w, excess = _moments(m)
        stat = _permutation_statistics([m], [1.0], int(permutations), rng)
        p = float((1 + np.sum(stat >= s2 - 1e-12)) / (1 + int(permutations)))
        arms.append(
            RunVariance(
                arm=arm,
                runs=r,
                prompts=n,
                run_rates=[float(x) for x in m.mean(axis=0)],
                observed_sd=math.sqrt(s2),
                within_sd=math.sqrt(w),
                variance_ratio=s2 / w if w > 0 else math.nan,
                sigma_run=math.sqrt(max(0.0, excess)),
                pvalue=p,
                permutations=int(permutations),
            )
        )
        used.append(m)
        weights.append(float(r - 1))
        num += (r - 1) * excess
        den += r - 1
        s2_pooled += (r - 1) * s2
        w_pooled += (r - 1) * w
    extra = {} if method is None else {"method": method}
    if not used:
        return BetweenRun(
            math.nan, math.nan, math.nan, [], int(permutations), seed, ignored, **extra
        )
    pooled = _permutation_statistics(used, weights, int(permutations), rng)
    p = float((1 + np.sum(pooled >= s2_pooled - 1e-12)) / (1 + int(permutations)))
    return BetweenRun(
        sigma_run=math.sqrt(max(0.0, num / den)),
        pvalue=p,
        variance_ratio=s2_pooled / w_pooled if w_pooled > 0 else math.nan,
        by_arm=arms,
        permutations=int(permutations),
        seed=seed,
        ignored=ignored,
        **extra,
    )


# ---- replicate sessions (design.sessions, issue 41) ------------------------------------------


def session_means(values: Any, per_session: int, name: str = "outcomes") -> FloatArray:
    """prompts x sessions matrix of a prompt's success rate in each session.

    ``values`` is a prompts x repeats matrix whose column j is repeat j, session
    j // ``per_session`` (the registration's layout: session s holds repeats s K .. s K +
    K - 1). A cell is nan unless all K repeats of the session were recorded, so every
    rate is a mean of K outcomes."""
    m = _binary_matrix(values, name)
    k = int(per_session)
    if k < 1 or m.shape[1] % k:
        raise ValueError(f"{name}: {m.shape[1]} repeats are not whole sessions of {k}")
    cube = m.reshape(m.shape[0], m.shape[1] // k, k)
    complete = np.all(~np.isnan(cube), axis=2)
    means: FloatArray = np.where(
        complete, np.nanmean(np.where(complete[..., None], cube, 0.0), axis=2), np.nan
    )
    return means


SESSIONS_METHOD = (
    "method of moments over replicate sessions: each prompt's success rate in each session "
    "(the mean of its K within-session repeats, whose agreement is the repeat clustering), "
    "s^2 the variance of the session rates, W the mean over prompts of the variance of a "
    "prompt's session rates over N, sigma_run^2 = (s^2 - W) / (1 - 1/N) (the balanced "
    "prompt x session ANOVA estimate of the session variance component), pooled over the "
    "arms with variance; within-prompt permutation test of the session rates (InvokeRank 7.3)"
)


def between_sessions(
    matrices: Mapping[str, Any],
    per_session: int,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = 0,
) -> BetweenRun:
    """Between-run SD with replicate sessions as the runs (``design.sessions``, issue 41).

    The unit is a session's rate per prompt (:func:`session_means`), so the K repeats of
    a prompt inside one session, however strongly they agree, enter only through that
    rate's variance, which W measures directly from the spread of a prompt's session rates
    (unbiased whatever the within-session clustering; pooling all repeats as independent
    trials would understate it, slightly, by about sigma_ps^2 (1 - 1/K) / N for a prompt x
    session variance sigma_ps^2). Algebraically the
    estimate is the two-way (prompt x session) ANOVA's (MS_session - MS_residual) / N.
    An arm with fewer than two sessions observed in full is left out with the reason
    (one session: the component is not estimable, withheld, never printed as 0)."""
    mats = {
        arm: _complete_runs(session_means(values, per_session, arm))
        for arm, values in matrices.items()
    }
    return _pooled_between(mats, permutations, seed, unit="session", method=SESSIONS_METHOD)


def session_sigma_d(control: Any, treatment: Any, per_session: int) -> SigmaD:
    """sigma_d of a pilot with replicate sessions of K = ``per_session`` repeats.

    d_i is the difference of arm means over the sessions both arms completed (the mean of
    the session rates D_is = T_is - C_is); ``sigma_d`` its SD (ddof 1) over prompts, from
    which the session shifts, shared by every prompt, are absent. The within-prompt part
    is that of a session's difference net of the shifts: with e_is = D_is - mean_i D_is,
    omega_s^2 = mean_i var_s(e_is) / (1 - 1/N) (the prompts x sessions table's residual
    mean square; the shift difference cancels within a session). The result is in the
    repeats' units :meth:`SigmaD.at` reads: ``repeats`` = S K and ``omega2`` = K
    omega_s^2, so ``at(S' K)`` = sqrt(sigma_d^2 + omega_s^2 (1/S' - 1/S)) for S' planned
    sessions of the pilot's K repeats (any other count of repeats R reads as R / K
    sessions of K)."""
    k = int(per_session)
    c = session_means(control, k, "control")
    t = session_means(treatment, k, "treatment")
    both = ~np.isnan(c) & ~np.isnan(t)
    cols = np.any(both, axis=0)
    rows = np.all(both[:, cols], axis=1) if np.any(cols) else np.zeros(c.shape[0], bool)
    diff = (t - c)[rows][:, cols]
    n, s = diff.shape
    if n < 2 or s < 1:
        mean = float(diff.mean()) if n == 1 and s else math.nan
        return SigmaD(math.nan, mean, n, float(s * k), math.nan, math.nan, method=_SESSIONS_SD)
    d = diff.mean(axis=1)
    sigma = float(np.std(d, ddof=1))
    if s < 2:
        return SigmaD(sigma, float(np.mean(d)), n, float(k), math.nan, math.nan, _SESSIONS_SD)
    e = diff - diff.mean(axis=0, keepdims=True)
    omega_s2 = float(np.mean(np.var(e, axis=1, ddof=1)) / (1.0 - 1.0 / n))
    tau2 = max(0.0, sigma * sigma - omega_s2 / s)
    return SigmaD(sigma, float(np.mean(d)), n, float(s * k), k * omega_s2, tau2, _SESSIONS_SD)


_SESSIONS_SD = (
    "SD (ddof 1) over prompts of the difference of per-prompt arm means over the sessions "
    "both arms completed; rescaled to S sessions of the pilot's K repeats by sigma_d^2 + "
    "omega_s^2 (1/S - 1/S_pilot), omega_s^2 the within-prompt variance of a session's "
    "difference net of the session shifts (omega2 = K omega_s^2, repeats = S_pilot K)"
)


def session_icc(matrices: Mapping[str, Any], per_session: int) -> RepeatICC:
    """ICC of the repeats inside one session (the repeat clustering): :func:`repeat_icc`
    with one group per (arm, prompt, session), so neither the arm difference nor the
    session shifts count as agreement of repeats."""
    grouped = {}
    for arm, values in matrices.items():
        m = _binary_matrix(values, arm)
        k = int(per_session)
        grouped[arm] = m.reshape(m.shape[0] * (m.shape[1] // k), k)
    return repeat_icc(grouped)


# ---- discordance -------------------------------------------------------------------------


@dataclass(frozen=True)
class Discordance:
    """Discordance rates of repeat-matched pairs (control repeat r with treatment repeat r).

    ``p01`` is the share of pairs where only the treatment succeeded, ``p10`` where only
    the control did; these are the single-pair rates McNemar's test and the sequential
    monitor work with.
    """

    p01: float
    p10: float
    b01: int
    b10: int
    pairs: int


def discordance(control: Any, treatment: Any) -> Discordance:
    c = _binary_matrix(control, "control")
    t = _binary_matrix(treatment, "treatment")
    width = min(c.shape[1], t.shape[1])
    c, t = c[:, :width], t[:, :width]
    both = ~np.isnan(c) & ~np.isnan(t)
    pairs = int(both.sum())
    b01 = int(np.sum(both & (c == 0) & (t == 1)))
    b10 = int(np.sum(both & (c == 1) & (t == 0)))
    if pairs == 0:
        return Discordance(math.nan, math.nan, 0, 0, 0)
    return Discordance(b01 / pairs, b10 / pairs, b01, b10, pairs)


# ---- the whole pilot -----------------------------------------------------------------------


@dataclass(frozen=True)
class PilotData:
    """Outcomes of a pilot laid out for estimation: arm -> prompts x repeats matrix."""

    prompts: list[str]
    repeats: list[int]
    matrices: dict[str, FloatArray] = field(repr=False)
    records: int = 0
    excluded: int = 0


@dataclass(frozen=True)
class PilotEstimate:
    control: str
    treatment: str
    prompts: int
    repeats: int
    records: int
    excluded: int
    rates: dict[str, float]
    sigma_d: SigmaD
    icc: RepeatICC
    between_run: BetweenRun
    discordance: Discordance
    #: replicate sessions (``design.sessions``) and repeats in each; 1 and 1 without
    sessions: int = 1
    per_session: int = 1

    def to_json(self) -> dict[str, Any]:
        # the session keys only with sessions: a pilot without them reads as before
        extra = (
            {"sessions": self.sessions, "per_session": self.per_session}
            if self.sessions > 1
            else {}
        )
        return {
            **extra,
            "control": self.control,
            "treatment": self.treatment,
            "prompts": self.prompts,
            "repeats": self.repeats,
            "records": self.records,
            "excluded": self.excluded,
            "rates": self.rates,
            "sigma_d": asdict(self.sigma_d),
            "icc": asdict(self.icc),
            "between_run": asdict(self.between_run),
            "discordance": asdict(self.discordance),
        }


def estimate_pilot(
    data: PilotData,
    control: str,
    treatment: str,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int | None = 0,
    sessions: int = 1,
    per_session: int = 1,
) -> PilotEstimate:
    """All planning estimates for the comparison (control, treatment) of a pilot.

    With ``sessions`` >= 2 (a registration's ``design.sessions``, each of
    ``per_session`` repeats) the replicate unit is the session: the between-run SD is
    :func:`between_sessions`, sigma_d is :func:`session_sigma_d` (rescaled in sessions)
    and rho is the agreement of repeats inside a session (:func:`session_icc`)."""
    for arm in (control, treatment):
        if arm not in data.matrices:
            raise ValueError(f"the pilot has no outcomes for arm '{arm}'")
    c, t = data.matrices[control], data.matrices[treatment]
    if sessions > 1:
        return _estimate_sessions(
            data, control, treatment, sessions, per_session, permutations, seed
        )
    pair = {control: c, treatment: t}
    return PilotEstimate(
        control=control,
        treatment=treatment,
        prompts=_paired_prompts(c, t),
        repeats=len(data.repeats),
        records=data.records,
        excluded=data.excluded,
        rates=_rates(data),
        sigma_d=paired_sigma_d(c, t),
        icc=repeat_icc(pair),
        between_run=between_run(pair, permutations=permutations, seed=seed),
        discordance=discordance(c, t),
    )


def _rates(data: PilotData) -> dict[str, float]:
    """Each arm's success rate over every recorded outcome (nan: none)."""
    return {
        arm: float(np.nanmean(m)) if np.any(~np.isnan(m)) else math.nan
        for arm, m in data.matrices.items()
    }


def _paired_prompts(c: FloatArray, t: FloatArray) -> int:
    """The prompts with an outcome in both arms."""
    return int(np.sum(np.any(~np.isnan(c), axis=1) & np.any(~np.isnan(t), axis=1)))


def _by_repeat(data: PilotData, arm: str, repeats: int) -> FloatArray:
    """An arm's prompts x repeats matrix with column j the registration's repeat j (nan
    where repeat j has no outcome), whatever repeats the pilot recorded."""
    out = np.full((len(data.prompts), repeats), np.nan)
    for j, rep in enumerate(data.repeats):
        if 0 <= rep < repeats:
            out[:, rep] = data.matrices[arm][:, j]
    return out


def _estimate_sessions(
    data: PilotData,
    control: str,
    treatment: str,
    sessions: int,
    per_session: int,
    permutations: int,
    seed: int | None,
) -> PilotEstimate:
    """:func:`estimate_pilot` of a pilot with replicate sessions."""
    width = sessions * per_session
    pair = {arm: _by_repeat(data, arm, width) for arm in (control, treatment)}
    c, t = pair[control], pair[treatment]
    return PilotEstimate(
        control=control,
        treatment=treatment,
        prompts=_paired_prompts(c, t),
        repeats=len(data.repeats),
        records=data.records,
        excluded=data.excluded,
        rates=_rates(data),
        sigma_d=session_sigma_d(c, t, per_session),
        icc=session_icc(pair, per_session),
        between_run=between_sessions(pair, per_session, permutations=permutations, seed=seed),
        discordance=discordance(c, t),
        sessions=sessions,
        per_session=per_session,
    )


# ---- loading from the run store ------------------------------------------------------------


def pilot_data(
    records: Iterable[Any], arms: Sequence[str], digest: str | None = None, outcome: str = "success"
) -> PilotData:
    """Lay run records (models or mappings) out as one prompts x repeats matrix per arm.

    Each record is read through :func:`prereg.reports.observations.from_record`, so the
    outcome definitions (infrastructure failures carry no outcome; funnel stages count
    on positive tasks only; a stage not measured is left out, never imputed) are the
    analysis's own. Records of another digest are refused (runs of different digests are
    never combined: DESIGN invariant 3); records without a counted outcome are tallied
    in ``excluded``. When a unit (arm, task, repeat) has several outcomes the last wins.
    """

    wanted = set(arms)
    kept: list[tuple[str, str, int, bool]] = []
    excluded = 0
    total = 0
    foreign: list[str] = []
    for rec in records:
        total += 1
        obs = from_record(rec)
        if digest is not None and obs.digest and obs.digest != digest:
            foreign.append(obs.label())
            continue
        if obs.arm not in wanted:
            continue
        value = obs.outcome(outcome)
        if value is None:
            excluded += 1
            continue
        kept.append((obs.arm, obs.task_id, obs.repeat, value))
    if foreign:
        raise IntegrityError(
            f"{len(foreign)} run record(s) carry a digest other than the registration's "
            f"{digest}; runs of different digests are never combined",
            details=foreign[:20],
        )
    prompts = sorted({task for _, task, _, _ in kept})
    repeats = sorted({rep for _, _, rep, _ in kept})
    p_index = {p: i for i, p in enumerate(prompts)}
    r_index = {r: j for j, r in enumerate(repeats)}
    matrices = {arm: np.full((len(prompts), len(repeats)), np.nan) for arm in arms}
    for arm, task, rep, value in kept:
        matrices[arm][p_index[task], r_index[rep]] = 1.0 if value else 0.0
    return PilotData(
        prompts=prompts, repeats=repeats, matrices=matrices, records=total, excluded=excluded
    )


def load_pilot(
    runs: StoreLocation,
    registration_id: str,
    arms: Sequence[str],
    digest: str | None = None,
    outcome: str = "success",
) -> PilotData:
    """Read a registration's run records from the run store at ``runs`` (SQLite or
    PostgreSQL)."""

    with open_store(runs) as store:
        records = store.records(registration_id=registration_id)
    data = pilot_data(records, arms, digest, outcome)
    if not data.prompts:
        raise BadInput(
            f"registration '{registration_id}' has no completed runs with a "
            f"measured '{outcome}' in arms {', '.join(arms)}; run the pilot "
            "first (`prereg run ID`)",
            field="--from-runs",
        )
    return data
