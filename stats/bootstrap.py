"""The paired prompt-and-run bootstrap of a mean difference."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_ppf, t_ppf
from prereg.stats._validate import probability, vector
from prereg.stats.results import BootstrapResult

#: Below this many resampled clusters (prompts, or the registered unit) the percentile
#: interval is known to under-cover (e.g. Cameron, Gelbach and Miller 2008): the report
#: cautions beside it, the gate warns at register and such a test cannot decide.
FEW_CLUSTERS = 20

__all__ = ["paired_bootstrap"]

#: draws are generated in blocks of about this many prompt indices (bounds memory)
_BLOCK_CELLS = 1_000_000


def _codes(labels: Any, n: int, name: str) -> tuple[NDArray[np.intp], int]:
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size != n:
        raise ValueError(f"{name} must be one-dimensional with one label per row ({n})")
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

    Few runs (``small_runs="t"``, the default, corrected scheme only): each arm's
    between-run variance rests on R - 1 degrees of freedom, so a normal-theory spread
    for its part is too narrow (coverage 0.89 at 3 runs per arm and 0.92 at 5 for a
    nominal 0.95 with a between-run SD of 5 points). Each arm's resampled run part is
    multiplied by t_{R-1, q} / z_q, q = (1 + level) / 2 (2.19 at 3 runs, 1.42 at 5, 1.09
    at 20): the t-type calibration of a variance component estimated on R - 1 degrees
    of freedom (Satterthwaite 1946; the small-sample t interval for a mean of R run
    effects), applied to the run part alone so the prompt part, estimated on many
    prompts, is not widened. bench/stats_calibration.py: coverage 0.95-0.96 at 3 and
    5 runs per arm with a dominant run component, unchanged without run effects.
    ``small_runs="none"`` gives the uncorrected draws.

    Interval: percentile, (1 -+ level)/2 quantiles of the draws (linear interpolation).
    ``pvalue`` inverts it: 2 min(#{d <= 0} + 1, #{d >= 0} + 1) / (draws + 1), capped at
    1 (resolution 2 / (draws + 1)). ``se`` is the SD of the draws; ``sigma_run_*`` the
    estimated between-run SDs (nan without runs). Draws are vectorised and seeded with
    ``numpy.random.default_rng(seed)``: run multiplicities first (control, then
    treatment), then prompts. References: Efron and Tibshirani (1993); Davison and
    Hinkley (1997), 3.8; Field and Welsh (2007), JRSS B 69:369-390; Owen (2007), Ann
    Appl Stat 1:183-206; Carpenter et al. (2003), JRSS C 52:431-443.
    """
    yc = vector(control, "control")
    yt = vector(treatment, "treatment")
    if yc.size != yt.size:
        raise ValueError(f"control and treatment differ in length: {yc.size} vs {yt.size}")
    if run_resampling not in ("corrected", "raw"):
        raise ValueError(f"run_resampling must be 'corrected' or 'raw', got {run_resampling!r}")
    n_obs = int(yc.size)
    level = probability(level, "level")
    draws = int(draws)
    if draws < 1:
        raise ValueError("draws must be at least 1")
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
    if small_runs not in ("t", "none"):
        raise ValueError(f"small_runs must be 't' or 'none', got {small_runs!r}")
    if run_resampling == "corrected":
        q = 0.5 + level / 2.0
        kc = kt = 1.0
        if small_runs == "t":
            z = float(norm_ppf(q))
            kc = float(t_ppf(q, n_rc - 1)) / z if n_rc > 1 else 1.0
            kt = float(t_ppf(q, n_rt - 1)) / z if n_rt > 1 else 1.0
        out = _prompt_draws(rng, diff_p, draws) + kt * (wt @ et) / n_rt - kc * (wc @ ec) / n_rc
    elif bool(np.all(nc == nc[:, :1]) and np.all(nt == nt[:, :1])):
        # every run of an arm has the same rows for a given prompt: the resampled arm
        # mean is (cell sums @ run multiplicities) / (rows of the prompt)
        contrib = np.concatenate([st / rows_t[:, None], -sc / rows_c[:, None]], axis=1)
        out = _balanced_draws(rng, contrib, np.concatenate([wt, wc], axis=1)) / n_prompts
    else:
        out = _general_draws(rng, sc, nc, st, nt, wc, wt)

    finite = out[np.isfinite(out)]
    tail = (1.0 - level) / 2.0
    if finite.size:
        low, high = (float(v) for v in np.quantile(finite, [tail, 1.0 - tail]))
        se = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
        below = int(np.count_nonzero(finite <= 0.0))
        above = int(np.count_nonzero(finite >= 0.0))
        pvalue = min(1.0, 2.0 * (min(below, above) + 1) / (finite.size + 1))
    else:
        low = high = se = pvalue = math.nan
    with_runs = runs_control is not None or runs_treatment is not None
    resampled = f"prompts and each arm's runs ({run_resampling})" if with_runs else "prompts"
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
        method=f"paired bootstrap resampling {resampled}, percentile interval",
        distribution=out,
    )
