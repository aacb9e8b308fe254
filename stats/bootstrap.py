"""The paired prompt-and-run bootstrap of a mean difference."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_ppf, norm_sf, t_ppf, t_sf
from prereg.stats._validate import draw_count, probability, rng_seed, vector
from prereg.stats._validate import labels as missing_refused
from prereg.stats.results import BootstrapResult

#: The fewest resampled clusters (prompts, or the registered unit) at which the interval
#: keeps its level: below it the report cautions beside the interval, the gate warns at
#: register and such a test cannot decide ("too few clusters"). 10, from the bench
#: (bench/cluster_coverage.py --few --small: 4 binary tasks a cluster, 27 designs, 400
#: data sets each, nominal 0.95): from 10 clusters up the mean coverage is at nominal
#: (0.949 at 10) and the worst design within 2.5 points (0.925 at 10, 0.930 at 20); below,
#: the mean stays near nominal but the worst design falls (0.905 at 8, 0.865 at 6, 0.873
#: at 5), few clusters giving few distinct resampled means and a t_{n-1} factor resting on
#: a noisy variance. It was 20 for the percentile interval, which under-covers up to about
#: 40 clusters (0.907 at 10, 0.930 at 20, 0.944 at 40; Cameron, Gelbach and Miller 2008).
FEW_CLUSTERS = 10

__all__ = ["paired_bootstrap"]

#: draws are generated in blocks of about this many prompt indices (bounds memory)
_BLOCK_CELLS = 1_000_000


def _codes(labels: Any, n: int, name: str) -> tuple[NDArray[np.intp], int]:
    """Integer codes 0..k-1 of the labels (one per row) and k, or ValueError naming
    ``name``. A missing label (None, nan, infinity) is refused: numpy would merge every
    nan into one label, pooling unrelated rows into one resampled unit."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name} must be one-dimensional with one label per row ({n})")
    arr = missing_refused(arr, name)
    _, codes = np.unique(arr, return_inverse=True)
    return codes.astype(np.intp).ravel(), int(codes.max()) + 1 if n else 0


def _cells(
    values: NDArray[np.float64],
    prompt: NDArray[np.intp],
    run: NDArray[np.intp],
    n_prompts: int,
    n_runs: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Sum and count of the outcomes in each (prompt, run) cell."""
    flat = prompt * n_runs + run
    size = n_prompts * n_runs
    sums = np.bincount(flat, weights=values, minlength=size).astype(np.float64)
    sums = sums.reshape(n_prompts, n_runs)
    cnts = np.bincount(flat, minlength=size).astype(np.float64).reshape(n_prompts, n_runs)
    return sums, cnts


def _multiplicities(idx: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    """Row-wise counts of each of k items in an index matrix (rows x draws of size k)."""
    rows = idx.shape[0]
    flat = (idx + (np.arange(rows) * k)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * k).reshape(rows, k).astype(np.float64)


def _counts(rng: np.random.Generator, rows: int, k: int) -> NDArray[np.float64]:
    """Multiplicities of k items in ``rows`` independent resamples of size k."""
    if k == 1:
        return np.ones((rows, 1))
    return _multiplicities(rng.integers(0, k, size=(rows, k)), k)


def _blocks(total: int, n_prompts: int) -> list[tuple[int, int]]:
    step = max(1, _BLOCK_CELLS // max(n_prompts, 1))
    return [(i, min(i + step, total)) for i in range(0, total, step)]


def _balanced_draws(
    rng: np.random.Generator, contrib: NDArray[np.float64], weights: NDArray[np.float64]
) -> NDArray[np.float64]:
    """For each draw, the sum over resampled prompts of contrib[prompt] @ weights[draw].

    Few runs give few distinct run-weight vectors (10 per arm for 3 runs), so draws
    are grouped by their weight vector, the per-prompt differences are tabulated once
    per group, and each group's prompt resamples are a plain gather-and-sum, as cheap
    as a one-level bootstrap. With many distinct vectors, prompt multiplicities are
    counted and multiplied through instead.
    """
    n_prompts = contrib.shape[0]
    draws = weights.shape[0]
    out = np.empty(draws)
    uniq, inv = np.unique(weights, axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    if uniq.shape[0] <= max(1, draws // 20):
        table = uniq @ contrib.T  # distinct weight vectors x prompts
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(uniq.shape[0] + 1))
        for g in range(uniq.shape[0]):
            rows = order[bounds[g] : bounds[g + 1]]
            for lo, hi in _blocks(rows.size, n_prompts):
                idx = rng.integers(0, n_prompts, size=(hi - lo, n_prompts))
                out[rows[lo:hi]] = table[g][idx].sum(axis=1)
        return out
    for lo, hi in _blocks(draws, n_prompts):
        v = _multiplicities(rng.integers(0, n_prompts, size=(hi - lo, n_prompts)), n_prompts)
        out[lo:hi] = np.einsum("dr,dr->d", v @ contrib, weights[lo:hi])
    return out


def _general_draws(
    rng: np.random.Generator,
    sc: NDArray[np.float64],
    nc: NDArray[np.float64],
    st: NDArray[np.float64],
    nt: NDArray[np.float64],
    wc: NDArray[np.float64],
    wt: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Draws when prompts have unequal rows across runs (missing or extra cells)."""
    n_prompts = sc.shape[0]
    draws = wc.shape[0]
    out = np.empty(draws)
    for lo, hi in _blocks(draws, n_prompts):
        v = _multiplicities(rng.integers(0, n_prompts, size=(hi - lo, n_prompts)), n_prompts)
        with np.errstate(invalid="ignore", divide="ignore"):
            mc = (sc @ wc[lo:hi].T) / (nc @ wc[lo:hi].T)
            mt = (st @ wt[lo:hi].T) / (nt @ wt[lo:hi].T)
        dmat = mt - mc  # prompts x draws; nan where a resampled arm has no rows
        ok = np.isfinite(dmat)
        num = np.einsum("dp,pd->d", v, np.where(ok, dmat, 0.0))
        den = np.einsum("dp,pd->d", v, ok.astype(np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[lo:hi] = num / den
    return out


def _run_effects(
    sums: NDArray[np.float64],
    cnts: NDArray[np.float64],
) -> tuple[NDArray[np.float64], float]:
    """Run effects of one arm, rescaled to the between-run variance, and that variance.

    Fits the additive two-way model cell_mean[p, r] = m_p + c_r + e_pr to the observed
    (prompt, run) cell means by backfitting (closed form when no cell is missing), then
    estimates the between-run variance by the two-way ANOVA method of moments,
    sigma_run^2 = max(0, S_c^2 - MS_e * mean_r(1 / P_r)), S_c^2 = sum c_r^2 / (R - 1),
    MS_e the residual mean square and P_r the prompts observed in run r. The effects are
    scaled by lambda = sqrt(sigma_run^2 R / ((R - 1) S_c^2)) so that the mean of R
    effects resampled with replacement has variance sigma_run^2 / R.
    """
    n_prompts, n_runs = sums.shape
    if n_runs < 2:
        return np.zeros(n_runs), math.nan
    obs = cnts > 0
    w = obs.astype(np.float64)
    y = np.where(obs, sums / np.where(obs, cnts, 1.0), 0.0)
    per_prompt = w.sum(axis=1)
    per_run = w.sum(axis=0)
    c = np.zeros(n_runs)
    m = np.zeros(n_prompts)
    for _ in range(200):
        m = (w * (y - c[None, :])).sum(axis=1) / per_prompt
        c_new = (w * (y - m[:, None])).sum(axis=0) / np.where(per_run > 0, per_run, 1.0)
        c_new -= c_new.mean()
        converged = float(np.max(np.abs(c_new - c))) <= 1e-14
        c = c_new
        if converged:
            break
    resid = w * (y - m[:, None] - c[None, :])
    df = float(w.sum()) - n_prompts - n_runs + 1
    mse = float((resid**2).sum()) / df if df > 0 else 0.0
    sc2 = float((c**2).sum()) / (n_runs - 1)
    inv_p = float(np.mean(1.0 / np.where(per_run > 0, per_run, np.inf)))
    su2 = max(0.0, sc2 - mse * inv_p)
    lam = math.sqrt(su2 * n_runs / (n_runs - 1) / sc2) if sc2 > 0 else 0.0
    return lam * c, su2


def _prompt_draws(
    rng: np.random.Generator,
    diff: NDArray[np.float64],
    draws: int,
) -> NDArray[np.float64]:
    """Means of ``diff`` over prompts resampled with replacement, ``draws`` times."""
    n_prompts = diff.size
    out = np.empty(draws)
    for lo, hi in _blocks(draws, n_prompts):
        idx = rng.integers(0, n_prompts, size=(hi - lo, n_prompts))
        out[lo:hi] = diff[idx].sum(axis=1) / n_prompts
    return out


#: One component of the interval's spread: (variance of its draws, degrees of freedom of
#: its Student t critical value or None for the normal one, variance multiplier).
_Part = tuple[float, int | None, float]


def _variance(x: NDArray[np.float64]) -> float:
    x = x[np.isfinite(x)]
    return float(np.var(x, ddof=1)) if x.size > 1 else 0.0


def _critical(tail: float, df: int | None) -> float:
    """The upper ``tail`` critical value: t_{df} (normal when df is None), from the lower
    tail so that it stays accurate for tiny tails."""
    value = t_ppf(tail, df) if df is not None else norm_ppf(tail)
    return -float(value)


def _half_width(parts: list[_Part], tail: float) -> float:
    """sqrt(sum of multiplier x critical(tail, df)^2 x variance) over the parts."""
    total = 0.0
    crit: dict[int | None, float] = {}
    for var, df, mult in parts:
        if var > 0.0:
            if df not in crit:
                crit[df] = _critical(tail, df)
            total += mult * crit[df] * crit[df] * var  # inf, not an error, for tiny tails
    return math.sqrt(total)


def _two_sided_tail(x: float, df: int | None) -> float:
    """2 P(T > x) for T ~ t_{df} (standard normal when df is None)."""
    return 2.0 * float(t_sf(x, df) if df is not None else norm_sf(x))


def _inverted_pvalue(estimate: float, parts: list[_Part]) -> float:
    """The smallest alpha at which the 1 - alpha interval estimate -+ half-width excludes
    0 (two-sided). The half-width falls as alpha grows, so the rejections form [p, 1].
    With one part of positive variance (no run labels, or no estimated run variance) p is
    the t test's, 2 P(T_df > |estimate| / sqrt(multiplier x variance)); otherwise it lies
    between the normal p and the t p at the fewest degrees of freedom (every critical
    value lies between those two) and is found by regula falsi on log(alpha), returning
    the end of the final bracket (width 1e-12) at which 0 is excluded."""
    if not math.isfinite(estimate):
        return math.nan
    if estimate == 0.0:
        return 1.0
    live = [part for part in parts if part[0] > 0.0]
    if not live:
        return 0.0  # a point interval at a non-zero estimate excludes 0 at every level
    total = sum(mult * var for var, _, mult in live)
    stat = abs(estimate) / math.sqrt(total)
    dfs = {df for _, df, _ in live}
    if len(dfs) == 1:
        return min(1.0, _two_sided_tail(stat, next(iter(dfs))))
    fewest = min((df for df in dfs if df is not None), default=None)
    lo, hi = _two_sided_tail(stat, None), min(1.0, _two_sided_tail(stat, fewest))
    if lo <= 0.0:
        return 0.0  # beyond floating point (a statistic above 37)
    log_target = math.log(abs(estimate))

    def gap(log_alpha: float) -> float:  # decreasing; negative where 0 is excluded
        half = _half_width(live, math.exp(log_alpha) / 2.0)
        return math.log(half) - log_target if half > 0.0 else -math.inf

    a, b = math.log(lo), math.log(hi)
    fa, fb = gap(a), gap(b)
    if fa < 0.0:  # rounding at the normal end
        return lo
    # Illinois (regula falsi) on log(alpha): a keeps 0 inside the interval, b excludes it
    side = 0
    for _ in range(100):
        if b - a <= 1e-12 or fb >= 0.0:
            break
        c = (a * fb - b * fa) / (fb - fa)
        if not a < c < b:
            c = (a + b) / 2.0
        fc = gap(c)
        if fc < 0.0:
            b, fb = c, fc
            if side == -1:
                fa /= 2.0
            side = -1
        else:
            a, fa = c, fc
            if side == 1:
                fb /= 2.0
            side = 1
    return min(1.0, math.exp(b))


def _interval(
    out: NDArray[np.float64],
    estimate: float,
    parts: list[_Part],
    level: float,
    small_clusters: str,
) -> tuple[float, float, float, float, list[str]]:
    """(low, high, se, pvalue, notes) of the draws ``out``: the t interval of the parts,
    or under ``small_clusters="none"`` the percentile interval (reaching the estimate)."""
    notes: list[str] = []
    tail = (1.0 - level) / 2.0
    finite = out[np.isfinite(out)]
    if not finite.size:
        return math.nan, math.nan, math.nan, math.nan, notes
    se = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
    if small_clusters == "t":
        half = _half_width(parts, tail)
        low, high = estimate - half, estimate + half
        pvalue = _inverted_pvalue(estimate, parts)
    else:
        low, high = (float(v) for v in np.quantile(finite, [tail, 1.0 - tail]))
        below = int(np.count_nonzero(finite <= 0.0))
        above = int(np.count_nonzero(finite >= 0.0))
        pvalue = min(1.0, 2.0 * (min(below, above) + 1) / (finite.size + 1))
        gap = max(low - estimate, estimate - high)
        low, high = min(low, estimate), max(high, estimate)
        if gap > 1e-12 * max(1.0, abs(estimate)):  # more than rounding
            notes.append("percentile interval extended to contain the estimate")
    if high - low <= 0.0:
        notes.append("zero width: every draw equals the estimate (no spread between clusters)")
    return low, high, se, pvalue, notes


def _bound(
    low: float,
    high: float,
    estimate: float,
    yc: NDArray[np.float64],
    yt: NDArray[np.float64],
    notes: list[str],
) -> tuple[float, float, bool]:
    """The interval intersected with [-span, span], span = max(y) - min(y) over both arms
    (the estimate stays inside, up to the rounding of its mean); notes the truncation."""
    span = float(max(yc.max(), yt.max()) - min(yc.min(), yt.min()))
    truncated = bool(low < -span or high > span)
    if truncated:
        low, high = min(max(low, -span), estimate), max(min(high, span), estimate)
        binary = bool(np.all((yc == 0) | (yc == 1)) and np.all((yt == 0) | (yt == 1)))
        what = "a difference of proportions" if binary else "a difference of the outcomes"
        notes.append(f"interval truncated to [{-span:g}, {span:g}], the range of {what}")
    return low, high, truncated


def paired_bootstrap(
    control: Any,
    treatment: Any,
    prompts: Any,
    runs_control: Any = None,
    runs_treatment: Any = None,
    draws: int = 10_000,
    level: float = 0.95,
    seed: int | None = 0,
    *,
    run_resampling: Literal["corrected", "raw"] = "corrected",
    small_runs: Literal["t", "none"] = "t",
    small_clusters: Literal["t", "none"] = "t",
) -> BootstrapResult:
    """Paired prompt-and-run bootstrap of mean(treatment) - mean(control).

    Data are in long form, one row per (prompt, replicate): ``control[i]`` and
    ``treatment[i]`` are the two arms' outcomes on prompt ``prompts[i]``;
    ``runs_control[i]`` and ``runs_treatment[i]`` (optional) name the replicate run of
    each arm that produced them (a run is one pass of an arm over the prompts; runs may
    carry session-, batch- or day-level effects shared by all their prompts).

    Estimate (prompt-weighted): the mean over prompts of the per-prompt difference of
    arm means, each arm mean taken over that prompt's rows. Every prompt counts once,
    whatever its number of rows; with equal rows per prompt this is the plain
    mean(treatment) - mean(control).

    The resampling unit is whatever ``prompts`` labels: task ids resample tasks; the
    paraphrase cluster (family) or intent of each row resamples those (no other argument
    is needed). A unit's rows then pool into one per-unit difference, every unit counts
    once, and rows weigh equally within a unit (give each task the same number of rows,
    or pre-average, to weight tasks equally). With run labels the run effects are fitted
    on (unit, run) cells, so a unit x run interaction stays in the residual that the
    correction below subtracts; fitting runs on task cells while resampling clusters
    would under-subtract it. When paraphrases share a cluster effect, resampling tasks
    under-covers (bench/cluster_coverage.py, tests/stats/test_cluster_resampling.py).

    Each draw resamples prompts with replacement and, when run labels are given, each
    arm's runs with replacement, independently per arm. Two schemes for the runs:

    * ``"corrected"`` (default): a draw is
      mean_{p in P*} d_p + mean_{r in R_t*} e^t_r - mean_{r in R_c*} e^c_r, with d_p the
      observed per-prompt differences and e_r each arm's run effects from the additive
      prompt + run model, rescaled so that resampling them reproduces the ANOVA estimate
      of the between-run variance (see ``_run_effects``; Davison and Hinkley 1997, 3.8,
      and Carpenter, Goldstein and Rasbash 2003, on rescaled effects). The prompt part
      already carries the within-cell noise; the rescaling keeps the run part from
      counting it again and undoes the (R - 1)/R shrinkage of resampling R runs.
    * ``"raw"``: Owen's (2007) pigeonhole bootstrap of the crossed prompts x runs layout,
      re-averaging each resampled prompt over the rows of the resampled runs. It counts
      the within-cell (binomial) noise two to three times, so with binary outcomes it is
      markedly conservative (about 99% coverage for a nominal 95% when there is no run
      effect; see bench/stats_calibration.py).

    Without run labels both reduce to the prompt (cluster) bootstrap, which under-covers
    when runs carry a between-run component.

    Interval (``small_clusters="t"``, the default): a bootstrap-standard-error interval
    with a Student t critical value for each resampled level,

        estimate -+ sqrt(n/(n-1) t_{n-1,q}^2 V_P + c_t^2 V_T + c_c^2 V_C),

    q = (1 + level) / 2, with V_P the variance of the draws' prompt part (the mean of the
    resampled prompt differences; n prompts, or clusters), V_T and V_C those of each
    arm's resampled run part, and c = t_{R-1,q} for an arm with R >= 2 runs
    (``small_runs="t"``, the default) or z_q (``small_runs="none"``). Why each factor:
    V_P is the plug-in variance of a mean of n clusters, short of the unbiased one by
    (n - 1)/n, and the variance rests on n - 1 degrees of freedom, hence t_{n-1}; without
    run labels the interval is therefore the one-sample t interval of the per-cluster
    differences, estimate -+ t_{n-1,q} s / sqrt(n), computed with the bootstrap variance
    in place of s^2 / n (the two agree as draws grow). Each arm's between-run variance
    rests on R - 1 degrees of freedom, hence t_{R-1} for its part (2.19 x z at 3 runs,
    1.42 x z at 5, 6.48 x z at 2; Satterthwaite 1946, applied per part so the prompt
    part is not widened by the runs' few degrees of freedom; bench/stats_calibration.py
    6a: coverage 0.96 at 3 and 5 runs per arm with a dominant run component, where the
    normal factor gives 0.90-0.93). Under the ``"raw"`` scheme
    prompt and run parts are not separable and the whole draw counts as the prompt part.

    Why this interval: bench/cluster_coverage.py (section 4, ``--few``) measured the
    candidates on clustered binary outcomes (4 tasks a cluster; base rate 0.2, 0.5, 0.8;
    ICC 0.1, 0.3, 0.5; no effect and effects of either sign: 27 designs, 400 data sets
    each). Mean coverage of the nominal 0.95 at 10 / 20 / 40 clusters: the percentile
    interval (``small_clusters="none"``) 0.907 / 0.930 / 0.944; the percentile with its
    deviations from the estimate scaled by sqrt(n/(n-1)) t_{n-1,q}/z_q 0.939 / 0.941 /
    0.949; Hesterberg's (2015) expanded percentile 0.944 / 0.950 / 0.952; this interval
    0.949 / 0.948 / 0.953 (worst design 0.925 / 0.930 / 0.920). At the nominal 0.90:
    0.855 / 0.880 / 0.895, 0.890 / 0.889 / 0.900, 0.903 / 0.903 / 0.908 and 0.900 /
    0.898 / 0.902 (worst 0.877 / 0.875 / 0.855). It is chosen over the expanded
    percentile, as good from 20 clusters up, because it holds better at 10 and fewer
    clusters (0.949 against its 0.937 at 8 and 0.907 at 5), its small-sample factors add per
    part (the expanded percentile would stretch the run part, already at t_{R-1}, again)
    and its p value is exact rather than read from far tails of the draws. The
    percentile's asymmetry did not help with bounded, discrete per-cluster differences.
    Below :data:`FEW_CLUSTERS` clusters a test reads "too few clusters" (see there).

    P value: the two-sided p is the smallest alpha at which the 1 - alpha interval
    excludes 0. The half-width falls as alpha grows (every critical value does), so the
    intervals are nested and ``pvalue <= alpha`` exactly when the 1 - alpha interval
    excludes 0 (to floating-point precision; the bounds below never change whether the
    interval contains 0, which every bound contains). With one part of positive
    variance (no run labels, or no estimated between-run variance) it is the t test's
    2 P(T_{n-1} > |estimate| / sqrt(n/(n-1) V_P)); with run parts it is found by regula
    falsi between the normal and the fewest-degrees-of-freedom t p values. It does not
    depend on ``level`` and is not limited by the number of draws; a zero estimate gives
    1, a non-zero estimate with no spread at all 0 (a point interval excluding 0 at every
    level).

    Bounds: the interval is intersected with the range a difference of the outcomes can
    take, [min(y) - max(y), max(y) - min(y)] over both arms' pooled outcomes. For binary
    outcomes (values in {0, 1}) this is [-1, 1], the parameter space of a difference of
    proportions: the true difference lies in it, so the intersection covers it exactly
    when the interval does (coverage is unchanged) and only values the parameter cannot
    take are removed. For other bounded outcomes it is the range the observed extremes
    allow, which is the parameter space when the observed extremes are the scale's ends
    (a 0-10 score with both ends observed). ``truncated`` records that an end was moved
    in, and ``note`` says to which bound (and, for an interval of zero width, that every
    draw equals the estimate). The interval is centred on the estimate, so it
    always contains it (no recentring is needed); under ``small_clusters="none"`` a
    percentile interval that misses the estimate (possible with asymmetric draws) is
    extended to reach it, and ``note`` says so when it moved by more than rounding.

    ``small_clusters="none"``: the previous method, the percentile interval ((1 -+
    level)/2 quantiles of the draws, linear interpolation) with p = 2 min(#{d <= 0} + 1,
    #{d >= 0} + 1) / (draws + 1), capped at 1 (only approximately the inversion of the
    interval), then the bounds above.

    ``distribution`` holds the draws (prompt part plus each arm's run part, the latter
    multiplied by c / z_q when ``small_runs="t"``); ``se`` is their SD, the bootstrap
    standard error (the interval's half-width is the t-based one above, not z_q se);
    ``sigma_run_*`` the estimated between-run SDs
    (nan without runs). Draws are vectorised and seeded with
    ``numpy.random.default_rng(seed)``: run multiplicities first (control, then
    treatment), then prompts; ``small_clusters`` does not change the draws. References:
    Efron and Tibshirani (1993), 12-13; Davison and Hinkley (1997), 3.8 and 5.2; Field
    and Welsh (2007), JRSS B 69:369-390; Owen (2007), Ann Appl Stat 1:183-206; Carpenter
    et al. (2003), JRSS C 52:431-443; Cameron, Gelbach and Miller (2008), REStat
    90:414-427; Hesterberg (2015), Am Stat 69:371-386.

    ValueError naming the argument for NaN or infinite outcomes, empty or mismatched
    inputs, a missing (None or NaN) prompt or run label (numpy would pool every NaN label
    into one resampled unit), ``draws`` that is not a positive integer, a negative or
    fractional ``seed``, a ``level`` outside (0, 1) and an unknown option.
    """
    yc = vector(control, "control")
    yt = vector(treatment, "treatment")
    if yc.size != yt.size:
        raise ValueError(f"control and treatment differ in length: {yc.size} vs {yt.size}")
    if run_resampling not in ("corrected", "raw"):
        raise ValueError(f"run_resampling must be 'corrected' or 'raw', got {run_resampling!r}")
    if small_runs not in ("t", "none"):
        raise ValueError(f"small_runs must be 't' or 'none', got {small_runs!r}")
    if small_clusters not in ("t", "none"):
        raise ValueError(f"small_clusters must be 't' or 'none', got {small_clusters!r}")
    n_obs = int(yc.size)
    level = probability(level, "level")
    draws = draw_count(draws)
    seed = rng_seed(seed)
    pcode, n_prompts = _codes(prompts, n_obs, "prompts")
    rc, n_rc = (
        (np.zeros(n_obs, np.intp), 1)
        if runs_control is None
        else _codes(runs_control, n_obs, "runs_control")
    )
    rt, n_rt = (
        (np.zeros(n_obs, np.intp), 1)
        if runs_treatment is None
        else _codes(runs_treatment, n_obs, "runs_treatment")
    )
    sc, nc = _cells(yc, pcode, rc, n_prompts, n_rc)
    st, nt = _cells(yt, pcode, rt, n_prompts, n_rt)

    rows_c = nc.sum(axis=1)
    rows_t = nt.sum(axis=1)
    diff_p = st.sum(axis=1) / rows_t - sc.sum(axis=1) / rows_c
    estimate = float(diff_p.mean())

    ec, su2_c = _run_effects(sc, nc)
    et, su2_t = _run_effects(st, nt)
    rng = np.random.default_rng(seed)
    wc = _counts(rng, draws, n_rc)
    wt = _counts(rng, draws, n_rt)
    q = 0.5 + level / 2.0
    z = float(norm_ppf(q))
    # the prompt part: t_{n-1} on the unbiased variance of a mean of n clusters
    prompt_df = n_prompts - 1 if n_prompts > 1 else None
    prompt_mult = n_prompts / (n_prompts - 1) if n_prompts > 1 else 1.0
    parts: list[_Part]
    if run_resampling == "corrected":
        kc = kt = 1.0
        if small_runs == "t":
            kc = float(t_ppf(q, n_rc - 1)) / z if n_rc > 1 else 1.0
            kt = float(t_ppf(q, n_rt - 1)) / z if n_rt > 1 else 1.0
        prompt_draws = _prompt_draws(rng, diff_p, draws)
        run_t = (wt @ et) / n_rt
        run_c = (wc @ ec) / n_rc
        out = prompt_draws + kt * run_t - kc * run_c
        parts = [
            (_variance(prompt_draws), prompt_df, prompt_mult),
            (_variance(run_t), n_rt - 1 if small_runs == "t" and n_rt > 1 else None, 1.0),
            (_variance(run_c), n_rc - 1 if small_runs == "t" and n_rc > 1 else None, 1.0),
        ]
    else:
        if bool(np.all(nc == nc[:, :1]) and np.all(nt == nt[:, :1])):
            # every run of an arm has the same rows for a given prompt: the resampled arm
            # mean is (cell sums @ run multiplicities) / (rows of the prompt)
            contrib = np.concatenate([st / rows_t[:, None], -sc / rows_c[:, None]], axis=1)
            out = _balanced_draws(rng, contrib, np.concatenate([wt, wc], axis=1)) / n_prompts
        else:
            out = _general_draws(rng, sc, nc, st, nt, wc, wt)
        parts = [(_variance(out), prompt_df, prompt_mult)]  # not separable: all prompt part

    low, high, se, pvalue, notes = _interval(out, estimate, parts, level, small_clusters)
    low, high, truncated = _bound(low, high, estimate, yc, yt, notes)
    with_runs = runs_control is not None or runs_treatment is not None
    resampled = f"prompts and each arm's runs ({run_resampling})" if with_runs else "prompts"
    if small_clusters == "t":
        dfs = [f"{n_prompts - 1} df for {n_prompts} clusters"] if n_prompts > 1 else []
        if run_resampling == "corrected" and small_runs == "t" and (n_rt > 1 or n_rc > 1):
            dfs.append(f"runs {n_rc - 1} and {n_rt - 1} df")
        shown = f" ({'; '.join(dfs)})" if dfs else ""
        interval = f"bootstrap-SE interval with Student t critical values{shown}"
    else:
        interval = "percentile interval"
    return BootstrapResult(
        estimate=estimate,
        low=low,
        high=high,
        level=level,
        se=se,
        pvalue=pvalue,
        n=n_prompts,
        n_obs=n_obs,
        runs_control=n_rc if runs_control is not None else 0,
        runs_treatment=n_rt if runs_treatment is not None else 0,
        draws=draws,
        seed=seed,
        weighting="prompt",
        sigma_run_control=math.sqrt(su2_c),
        sigma_run_treatment=math.sqrt(su2_t),
        method=f"paired bootstrap resampling {resampled}, {interval}",
        distribution=out,
        truncated=truncated,
        note="; ".join(notes),
    )
