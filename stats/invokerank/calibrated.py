"""The calibrated interval of the score (7.5), the alternative to the published one.

The seed finds the published path's intervals under-cover; this is a bootstrap of the
plug-in score over prompts within intents, with the between-session variance added from
rescaled session effects and small-sample corrections on both parts (issue 39), made to
contain the displayed score.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_cdf, norm_ppf, t_ppf
from prereg.stats._validate import (
    array,
    at_least,
    count,
    counts,
    integer_labels,
    probability,
    same_length,
)
from prereg.stats._validate import levels as _levels
from prereg.stats.intervals import jeffreys_interval
from prereg.stats.invokerank.minimum import (
    MIN_PROMPTS,
    MIN_SESSIONS,
    too_few_prompts,
    too_few_sessions,
)
from prereg.stats.invokerank.model import LEVELS, FloatArray, _weights
from prereg.stats.invokerank.resample import _row_counts

# --- A calibrated interval: the prompt-and-session bootstrap of the plug-in score (7.5) --
#
# The seed's 7.5 finds the published intervals under-cover (most of all when intents
# look alike, where capPrior makes every intent's posterior nearly the pooled one and the
# roll-up still treats them as independent, and with a between-run component), while a
# bootstrap over prompts (and runs) restores nominal roll-up coverage. This is that
# bootstrap over the plug-in scoring path: Q_c = (runs of intent c reaching the last
# scored stage) / (its positive runs), the product of its pooled sequential stage rates by
# the chain rule, and the weighted roll-up; an interval for the population score. Each
# resample draws prompts with replacement within each intent and recomputes every Q_c
# from the weighted counts. docs/invokerank.md has the readings and the coverage table
# (bench/invokerank_coverage.py).
#
# Method "corrected" (the default; issue 39):
#
# - Prompt part: resampling P prompts shrinks a mean's variance by (P - 1) / P, so each
#   intent's bootstrap deviations are scaled by sqrt(P_c / (P_c - 1)). A prompt's runs are
#   pooled over sessions, so the run-level noise is counted once.
# - Session part (two or more sessions, i.e. replicate runs of the arm): the additive
#   prompt + session model per intent, fitted to the (prompt, session) cell rates weighted
#   by their runs; the between-session variance by the two-way ANOVA method of moments,
#   sigma^2 = max(0, S_e^2 - sigma_w^2 mean_s(1 / N_s)), S_e^2 the effects' variance
#   (ddof 1), sigma_w^2 the runs-weighted residual mean square, N_s the intent's runs in
#   session s; the roll-up's effects are the weighted sum of the intents' (sessions are
#   shared by the intents), rescaled so that the mean of S of them resampled with
#   replacement has variance sigma^2 / S (as stats.paired_bootstrap does for runs).
# - Small-sample multiplier: t_df / z, df by Welch-Satterthwaite over the two parts with
#   the prompt part taken as known, (V_p + V_s)^2 / (V_s^2 / (S - 1)): infinite without a
#   session part, t_{S-1} / z when it dominates.
# - Per-intent interval: Jeffreys on the effective counts (Korn and Graubard 1998):
#   n_eff = q (1 - q) / V, V = (V_p + V_s) (t_df / z)^2, at most the intent's runs; each
#   prompt counted once (rho = 1) where V says nothing (q at 0 or 1, or no variation).
# - Roll-up interval: percentiles, at Phi(t_df(tail)), of sum_c w_c B_c plus the resampled
#   session part, B_c drawn from intent c's Jeffreys posterior on its prompt-part
#   effective counts (independently across intents, as prompts are resampled within
#   intents): an intent whose prompts all reach (or all miss) the stage adds no variance
#   to a bootstrap resample, but its rate is uncertain, and its Jeffreys posterior says how.
#
# Method "v1" (before issue 39, kept for bench/invokerank_coverage.py): no small-sample
# correction, sessions resampled crossed with prompts and the draws shrunk by the
# interaction term (:func:`_uncross`), the per-intent Jeffreys on the bootstrap's n_eff and
# the roll-up's expanded percentile (Hesterberg 2015) at all prompts.
#
# Both: the intervals are made to contain ``centre`` (the displayed score, the published
# path's exact E[Q]; the plug-in when not given): a bound on the wrong side of it is moved
# to it. Recentring the interval on the displayed score instead (shifting it by the score
# minus the plug-in) under-covers where the empirical-Bayes score is shrunk: 1.8% for the
# lowest intent of the 8-prompt centre design. The levels nest (the wider interval is
# widened to contain the narrower one), and below the small-sample rule (:mod:`.minimum`)
# an interval is withheld: nan bounds and a reason.

BOOTSTRAP_RESAMPLES = 2000
CalibratedMethod = Literal["corrected", "v1"]


@dataclass(frozen=True)
class BootstrapScore:
    """The plug-in score per intent and rolled up, with the calibrated intervals: per
    intent Jeffreys on the bootstrap's effective counts, the roll-up a t-calibrated
    percentile; each contains ``centre`` (the displayed score). A withheld interval has
    nan bounds and its reason in ``q_reason`` / ``rollup_reason``."""

    q: FloatArray  # (C,)
    q_low: dict[float, FloatArray]
    q_high: dict[float, FloatArray]
    rollup: float
    rollup_low: dict[float, float]
    rollup_high: dict[float, float]
    sessions: int
    resamples: int
    method: str  # the roll-up's interval
    effective_runs: FloatArray  # (C,) n_eff per intent at the first level
    intent_method: str = ""  # the per-intent interval
    centre: FloatArray | None = None  # (C,) the score the intervals contain
    rollup_centre: float | None = None
    q_reason: tuple[str | None, ...] = ()  # per intent: why no interval (None: shown)
    rollup_reason: str | None = None
    session_sd: FloatArray = field(default_factory=lambda: np.zeros(0))  # (C,) sigma_session
    rollup_session_sd: float = 0.0
    rollup_df: float = math.nan  # the roll-up's t degrees of freedom


def bootstrap_score(
    runs: Any,
    reached: Any,
    cell: Any,
    *,
    prompt: Any = None,
    session: Any = None,
    weights: Any = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
    centre: Any = None,
    rollup_centre: float | None = None,
    min_prompts: int = MIN_PROMPTS,
    min_sessions: int = MIN_SESSIONS,
    method: CalibratedMethod = "corrected",
) -> BootstrapScore:
    """The calibrated interval of the score (comment above).

    One row per prompt and session: ``runs`` its positive runs, ``reached`` how many
    reached the last scored stage, ``cell`` its intent, ``prompt`` the prompt (default:
    each row its own), ``session`` the run/session it belongs to (default: one).
    ``centre`` (per intent) and ``rollup_centre``: the displayed score, which every
    interval contains (default: the plug-in score). ``min_prompts`` / ``min_sessions``:
    the small-sample rule (:mod:`prereg.stats.invokerank.minimum`; 0 turns it off).
    ValueError naming the argument for NaN, infinite or negative counts, no rows, reached
    above runs, lengths that differ, a missing or fractional prompt or session code,
    ``resamples`` below 1 (no resample would still print intervals), a level outside
    (0, 1) and a centre that is NaN or outside [0, 1].
    """
    n = array(runs, "runs", low=0.0).ravel()
    y = array(reached, "reached", low=0.0).ravel()
    c = counts(cell, "cell", allow_empty=False).ravel()
    same_length(n, "runs", y, "reached")
    same_length(n, "runs", c, "cell")
    if np.any(y > n):
        i = int(np.argmax(y > n))
        raise ValueError(f"reached: {y[i]:g} exceeds its runs ({n[i]:g}) in row {i}")
    if method not in ("corrected", "v1"):
        raise ValueError(f"method must be 'corrected' or 'v1', got {method!r}")
    resamples = at_least(resamples, "resamples", 1)
    levels = _levels(levels)
    min_prompts = count(min_prompts, "min_prompts")
    min_sessions = count(min_sessions, "min_sessions")
    p = np.arange(n.size) if prompt is None else integer_labels(np.ravel(prompt), "prompt")
    s = (
        np.zeros(n.size, np.int64)
        if session is None
        else integer_labels(np.ravel(session), "session")
    )
    same_length(n, "runs", p, "prompt")
    same_length(n, "runs", s, "session")
    cells = int(c.max()) + 1
    w = _weights(weights, cells)
    if centre is not None:
        centre = array(centre, "centre", low=0.0, high=1.0).ravel()
        if centre.size != cells:
            raise ValueError(
                f"mismatched lengths: centre has {centre.size} scores but cell names {cells} "
                "intents"
            )
    if rollup_centre is not None:
        rollup_centre = probability(rollup_centre, "rollup_centre", low_open=False, high_open=False)
    _, p_index = np.unique(p, return_inverse=True)
    p_index = np.asarray(p_index, np.int64).ravel()
    s_ids, s_index = np.unique(s, return_inverse=True)
    s_index = np.asarray(s_index, np.int64).ravel()
    n_sessions = int(s_ids.size)
    prompt_cell = np.zeros(int(p_index.max()) + 1, np.int64)
    prompt_cell[p_index] = c
    sizes = np.bincount(prompt_cell, minlength=cells).astype(np.float64)
    trials = np.bincount(c, weights=n, minlength=cells).astype(np.float64)
    rng = np.random.default_rng(seed)
    b = int(resamples)
    # prompt multiplicities, drawn within intents: (B, prompts)
    prompt_w = np.zeros((b, prompt_cell.size))
    for k in range(cells):
        members = np.flatnonzero(prompt_cell == k)
        if members.size:
            picks = rng.integers(0, members.size, size=(b, members.size))
            prompt_w[:, members] = _row_counts(picks, members.size)
    session_w = np.ones((b, n_sessions))
    if n_sessions > 1:
        session_w = _row_counts(rng.integers(0, n_sessions, size=(b, n_sessions)), n_sessions)
    crossed = method == "v1" and n_sessions > 1
    row_w = prompt_w[:, p_index] * (session_w[:, s_index] if crossed else 1.0)  # (B, rows)

    def per_cell(weight: FloatArray) -> FloatArray:
        num = np.stack([weight[..., c == k] @ y[c == k] for k in range(cells)], axis=-1)
        den = np.stack([weight[..., c == k] @ n[c == k] for k in range(cells)], axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(num / den)

    q = per_cell(np.ones(n.size))
    boot = per_cell(row_w)  # (B, C); nan where a resample drew no run of the intent
    plug_roll = float(np.sum(w * q))
    shown = q if centre is None else np.asarray(centre, dtype=np.float64).ravel()
    shown_roll = plug_roll if rollup_centre is None else float(rollup_centre)
    if method == "v1":
        parts = _v1(boot, q, w, sizes, trials, levels, n, y, c, p_index, s_index, n_sessions)
    else:
        parts = _corrected(
            boot, q, w, sizes, trials, levels, n, y, c, p_index, s_index, session_w, rng
        )
    q_low, q_high, r_low, r_high, effective, sd, roll_sd, df = parts
    q_low, q_high = _nested(*_containing(q_low, q_high, shown))
    r_low, r_high = _nested(*_containing(r_low, r_high, shown_roll))
    per, roll_reason = too_few_prompts(sizes.astype(np.int64), w, min_prompts)
    sessions_reason = too_few_sessions(n_sessions, min_sessions) if min_sessions else None
    if sessions_reason is not None:
        per, roll_reason = [sessions_reason] * cells, sessions_reason
    withheld = np.array([r is not None for r in per])
    for lv in levels:
        q_low[lv] = np.where(withheld, np.nan, q_low[lv])
        q_high[lv] = np.where(withheld, np.nan, q_high[lv])
        if roll_reason is not None:
            r_low[lv] = r_high[lv] = math.nan
    what = (
        ("sessions, then " if crossed else "")
        + "prompts within intents"
        + (
            f", plus {n_sessions} sessions' rescaled effects, t-calibrated"
            if method == "corrected" and n_sessions > 1
            else ""
        )
    )
    contains = "; widened where needed to contain the displayed score" if centre is not None else ""
    roll_method = (
        "percentile of the intents' Jeffreys draws on effective counts from a bootstrap of "
        f"the plug-in score ({b} resamples of {what}){contains}"
        if method == "corrected"
        else f"expanded percentile bootstrap of the plug-in score, {b} resamples of {what}"
        + contains
    )
    return BootstrapScore(
        q=q,
        q_low=q_low,
        q_high=q_high,
        rollup=plug_roll,
        rollup_low=r_low,
        rollup_high=r_high,
        sessions=n_sessions,
        resamples=b,
        method=roll_method,
        effective_runs=effective,
        intent_method=(
            "Jeffreys on effective counts of the plug-in score (design effect by a "
            f"bootstrap of {b} resamples of {what}){contains}"
        ),
        centre=None if centre is None else shown,
        rollup_centre=None if rollup_centre is None else shown_roll,
        q_reason=tuple(per),
        rollup_reason=roll_reason,
        session_sd=sd,
        rollup_session_sd=roll_sd,
        rollup_df=df,
    )


_Parts = tuple[
    dict[float, FloatArray],
    dict[float, FloatArray],
    dict[float, float],
    dict[float, float],
    FloatArray,
    FloatArray,
    float,
    float,
]


def _corrected(
    boot: FloatArray,
    q: FloatArray,
    w: FloatArray,
    sizes: FloatArray,
    trials: FloatArray,
    levels: Sequence[float],
    n: FloatArray,
    y: FloatArray,
    c: NDArray[np.int64],
    p_index: NDArray[np.int64],
    s_index: NDArray[np.int64],
    session_w: FloatArray,
    rng: np.random.Generator,
) -> _Parts:
    """The corrected method's intervals (comment above)."""
    cells, n_sessions = q.size, session_w.shape[1]
    dev = (boot - q) * np.sqrt(sizes / np.maximum(sizes - 1.0, 1.0))  # (B, C)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        var_p = np.nan_to_num(np.nanvar(dev, axis=0, ddof=1))
    sess_var, sd, roll_sess_var, roll_sd = np.zeros(cells), np.zeros(cells), 0.0, 0.0
    roll_sess = np.zeros(dev.shape[0])
    if n_sessions > 1:
        effects, noise = _session_effects(n, y, c, p_index, s_index, cells, n_sessions)
        _, variance = _rescaled(effects, noise)  # per intent: through its variance
        roll_effects, roll_var = _rescaled((w @ effects)[None, :], np.array([w**2 @ noise]))
        sess_var, sd = variance / n_sessions, np.sqrt(variance)
        roll_sess_var, roll_sd = float(roll_var[0]) / n_sessions, math.sqrt(roll_var[0])
        roll_sess = session_w @ roll_effects[0] / n_sessions
    # the roll-up's prompt part: each intent's Jeffreys posterior on its effective counts
    # (the prompt part alone), drawn independently across intents
    n_prompt = _effective(q, var_p, trials, sizes)
    x = np.where(np.isfinite(q), q, 0.0) * n_prompt
    scored = trials > 0
    jeffreys_draws = rng.beta(
        np.where(scored, x, 0.0) + 0.5,
        np.where(scored, n_prompt - x, 0.0) + 0.5,
        size=(dev.shape[0], cells),
    )
    roll_prompt = jeffreys_draws[:, scored] @ w[scored]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        roll_prompt_var = float(np.var(roll_prompt, ddof=1)) if roll_prompt.size > 1 else 0.0
    df_roll = _satterthwaite(roll_prompt_var, roll_sess_var, n_sessions)
    df_intent = _satterthwaite(var_p, sess_var, n_sessions)
    q_low: dict[float, FloatArray] = {}
    q_high: dict[float, FloatArray] = {}
    r_low: dict[float, float] = {}
    r_high: dict[float, float] = {}
    effective = np.zeros(cells)
    for i, lv in enumerate(levels):
        tail = (1.0 - lv) / 2.0
        expand = np.asarray(t_ppf(1.0 - tail, df_intent) / norm_ppf(1.0 - tail))
        n_eff = _effective(q, (var_p + sess_var) * expand**2, trials, sizes)
        if i == 0:
            effective = n_eff
        q_low[lv], q_high[lv] = _jeffreys(q, n_eff, trials, lv)
        at = float(norm_cdf(t_ppf(tail, df_roll)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = (float(v) for v in np.nanquantile(roll_prompt + roll_sess, [at, 1.0 - at]))
        r_low[lv], r_high[lv] = min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)
    return q_low, q_high, r_low, r_high, effective, sd, roll_sd, df_roll


def _satterthwaite(prompt_var: Any, session_var: Any, sessions: int) -> Any:
    """Welch-Satterthwaite degrees of freedom of prompt + session variance, the prompt
    part taken as known (its small-sample correction is in its scaling and in the
    Jeffreys interval), the session part on S - 1: (Vp + Vs)^2 / (Vs^2 / (S - 1));
    infinite without a session part."""
    vp = np.asarray(prompt_var, dtype=np.float64)
    vs = np.asarray(session_var, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(
            vs > 0, (vp + vs) ** 2 * max(sessions - 1, 1) / np.where(vs > 0, vs, 1.0) ** 2, np.inf
        )
    return df if df.ndim else float(df)


def _v1(
    boot: FloatArray,
    q: FloatArray,
    w: FloatArray,
    sizes: FloatArray,
    trials: FloatArray,
    levels: Sequence[float],
    n: FloatArray,
    y: FloatArray,
    c: NDArray[np.int64],
    p_index: NDArray[np.int64],
    s_index: NDArray[np.int64],
    n_sessions: int,
) -> _Parts:
    """The method before issue 39 (comment above), unchanged."""
    cells = q.size
    roll = np.nansum(boot * w, axis=1) / np.sum(np.where(np.isfinite(boot), w, 0.0), axis=1)
    if n_sessions > 1:
        boot, roll = _uncross(boot, roll, q, w, _interaction(n, y, c, p_index, s_index, q))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        variance = np.nan_to_num(np.nanvar(boot, axis=0, ddof=1))
    effective = _effective(q, variance, trials, sizes)
    q_low: dict[float, FloatArray] = {}
    q_high: dict[float, FloatArray] = {}
    r_low: dict[float, float] = {}
    r_high: dict[float, float] = {}
    for lv in levels:
        q_low[lv], q_high[lv] = _jeffreys(q, effective, trials, lv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            r_low[lv], r_high[lv] = (
                float(np.nanquantile(roll, _expanded(lv, int(sizes.sum()), hi)))
                for hi in (False, True)
            )
    return q_low, q_high, r_low, r_high, effective, np.zeros(cells), 0.0, math.nan


def _jeffreys(
    q: FloatArray, effective: FloatArray, trials: FloatArray, level: float
) -> tuple[FloatArray, FloatArray]:
    """Jeffreys on the effective counts (q n_eff of n_eff); nan where no runs."""
    scored = (trials > 0) & (effective > 0)  # a cell index with no runs gets no interval
    deff = np.where(scored, trials / np.where(scored, effective, 1.0), 1.0)
    got = jeffreys_interval(np.where(scored, q * trials, 0.0), trials, level=level, deff=deff)
    low = np.where(scored, np.atleast_1d(got.low), np.nan)
    high = np.where(scored, np.atleast_1d(got.high), np.nan)
    return np.asarray(low, np.float64), np.asarray(high, np.float64)


def _containing(
    low: dict[float, Any], high: dict[float, Any], centre: Any
) -> tuple[dict[float, Any], dict[float, Any]]:
    """Each interval moved out to contain ``centre`` where a bound is on its wrong side
    (nan bounds stay nan)."""

    def fix(bound: Any, pick: Any) -> Any:
        value = np.where(np.isnan(bound), bound, pick(bound, centre))
        return value if np.ndim(value) else float(value)

    return (
        {lv: fix(v, np.minimum) for lv, v in low.items()},
        {lv: fix(v, np.maximum) for lv, v in high.items()},
    )


def _nested(
    low: dict[float, Any], high: dict[float, Any]
) -> tuple[dict[float, Any], dict[float, Any]]:
    """Each wider level widened to contain the narrower ones (the levels nest)."""
    out_low, out_high = dict(low), dict(high)
    ordered = sorted(low)
    for narrow, wide in zip(ordered, ordered[1:], strict=False):
        lo = np.fmin(out_low[wide], out_low[narrow])
        hi = np.fmax(out_high[wide], out_high[narrow])
        out_low[wide] = lo if np.ndim(lo) else float(lo)
        out_high[wide] = hi if np.ndim(hi) else float(hi)
    return out_low, out_high


def _session_effects(
    n: FloatArray,
    y: FloatArray,
    c: NDArray[np.int64],
    prompt: NDArray[np.int64],
    session: NDArray[np.int64],
    cells: int,
    sessions: int,
) -> tuple[FloatArray, FloatArray]:
    """Per intent, the centred session effects of the additive prompt + session model
    fitted to the (prompt, session) cell rates weighted by their runs (backfitting;
    closed form when every cell has the same runs), and the variance that the runs'
    own noise gives an effect: sigma_w^2 mean_s(1 / N_s), sigma_w^2 the runs-weighted
    residual mean square. Returns (C, S) effects and (C,) noise variances."""
    effects = np.zeros((cells, sessions))
    noise = np.zeros(cells)
    for k in range(cells):
        mine = c == k
        if not mine.any():
            continue
        _, rows = np.unique(prompt[mine], return_inverse=True)
        rows = np.asarray(rows, np.int64).ravel()
        shape = (int(rows.max()) + 1, sessions)
        total, runs = np.zeros(shape), np.zeros(shape)
        np.add.at(total, (rows, session[mine]), y[mine])
        np.add.at(runs, (rows, session[mine]), n[mine])
        seen = runs > 0
        rate = np.where(seen, total / np.where(seen, runs, 1.0), 0.0)
        per_prompt, per_session = runs.sum(axis=1), runs.sum(axis=0)
        eff = np.zeros(sessions)
        level = np.zeros(shape[0])
        for _ in range(200):
            level = (runs * (rate - eff)).sum(axis=1) / np.where(per_prompt > 0, per_prompt, 1.0)
            new = (runs * (rate - level[:, None])).sum(axis=0) / np.where(
                per_session > 0, per_session, 1.0
            )
            new -= np.average(new, weights=per_session) if per_session.sum() > 0 else 0.0
            done = float(np.max(np.abs(new - eff))) <= 1e-14
            eff = new
            if done:
                break
        resid = runs * (rate - level[:, None] - eff[None, :]) ** 2
        df = int(seen.sum()) - shape[0] - sessions + 1
        sigma2 = float(resid.sum()) / df if df > 0 else 0.0
        effects[k] = eff
        noise[k] = sigma2 * float(np.mean(1.0 / np.where(per_session > 0, per_session, np.inf)))
    return effects, noise


def _rescaled(effects: FloatArray, noise: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Rows of session effects rescaled so that the mean of S of them resampled with
    replacement has variance sigma^2 / S, sigma^2 = max(0, S_e^2 - noise) (ANOVA method
    of moments), and sigma^2 per row."""
    sessions = effects.shape[1]
    spread = (effects**2).sum(axis=1) / (sessions - 1)
    variance = np.maximum(0.0, spread - noise)
    scale = np.sqrt(
        np.where(
            spread > 0,
            variance * sessions / (sessions - 1) / np.where(spread > 0, spread, 1.0),
            0.0,
        )
    )
    return effects * scale[:, None], variance


def _interaction(
    n: FloatArray,
    y: FloatArray,
    c: NDArray[np.int64],
    prompt: NDArray[np.int64],
    session: NDArray[np.int64],
    q: FloatArray,
) -> FloatArray:
    """Per intent, the prompt x session interaction term of the two-way bootstrap's
    variance of the plug-in score: sum of the squared double-centred residuals of
    z = y - q n over the intent's prompts x sessions, over (its runs)^2 (linearised).
    Method "v1" only."""
    out = np.zeros(q.size)
    sessions = int(session.max()) + 1
    for k in range(q.size):
        mine = c == k
        if not mine.any() or not np.isfinite(q[k]):
            continue
        _, rows = np.unique(prompt[mine], return_inverse=True)
        z = np.zeros((int(rows.max()) + 1, sessions))
        np.add.at(z, (rows, session[mine]), y[mine] - q[k] * n[mine])
        e = z - z.mean(axis=1, keepdims=True) - z.mean(axis=0, keepdims=True) + z.mean()
        out[k] = float(np.sum(e**2)) / float(np.sum(n[mine])) ** 2
    return out


def _uncross(
    boot: FloatArray, roll: FloatArray, q: FloatArray, w: FloatArray, interaction: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Method "v1": shrink the two-way bootstrap's draws about the estimate so that their
    variance is the bootstrap's minus twice the prompt x session interaction term. With
    prompts and sessions crossed (the same prompts in every session), resampling both
    (the pigeonhole bootstrap, Owen 2007) counts the run-level noise of a prompt in a
    session about 1 + 2 (S - 1) / S times instead of once, and the interaction term's
    expectation is (S - 1) / S of it (a linear statistic's exact bootstrap variance is
    the prompt, the session and this interaction term)."""

    def shrink(draws: FloatArray, centre: Any, extra: Any) -> FloatArray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            var = np.nanvar(draws, axis=0, ddof=1)
            factor = np.sqrt(np.clip(1.0 - 2.0 * extra / np.where(var > 0, var, 1.0), 0.0, 1.0))
        return np.asarray(centre + (draws - centre) * np.where(var > 0, factor, 1.0))

    roll_centre = float(np.sum(w * q))
    return shrink(boot, q, interaction), shrink(roll, roll_centre, np.sum(w**2 * interaction))


def _effective(
    q: FloatArray, variance: FloatArray, trials: FloatArray, prompts: FloatArray
) -> FloatArray:
    """n_eff = q (1 - q) / V per intent (Korn and Graubard 1998), at most the runs (a
    design effect below 1 is not credited); each prompt counted once (rho = 1) where the
    variance says nothing (q at 0 or 1, or no variation)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        n_eff = q * (1.0 - q) / variance
    usable = (q > 0) & (q < 1) & (variance > 0) & np.isfinite(n_eff)
    return np.asarray(np.where(usable, np.minimum(n_eff, trials), prompts), dtype=np.float64)


def _expanded(level: float, units: int, upper: bool) -> float:
    """The expanded percentile's tail (Hesterberg 2015; method "v1"): the percentile
    bootstrap is too narrow by about sqrt((n - 1) / n) and a normal instead of a t
    quantile at n resampled units; the tail is Phi(sqrt(n / (n - 1)) t_{n-1}(tail))."""
    tail = (1.0 - level) / 2.0
    if units < 2:
        return 1.0 - tail if upper else tail
    z = math.sqrt(units / (units - 1.0)) * float(t_ppf(tail, units - 1))
    low = float(norm_cdf(z))
    return 1.0 - low if upper else low
