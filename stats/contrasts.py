"""Registered contrasts over design cells: factorial weights, cluster bootstrap, sign flip.

A contrast is a weighted combination sum_c w_c m_c of cell means (a cell is one arm, a
configuration). It is estimated within resampling units (tasks, paraphrase clusters or
intents): each unit gets its own contrast d_u = sum_c w_c m_{u,c}, every unit counts
once, and the units are what the bootstrap resamples and the sign-flip test flips.
This is the paired within-family contrast of seed 001 (section 4.2, appendix D).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import count, draw_count, probability, refuse_text, rng_seed
from prereg.stats.bootstrap import (
    _codes,
    _half_width,
    _inverted_pvalue,
    _Part,
    _prompt_draws,
)
from prereg.stats.permutation import DEFAULT_DRAWS, sign_flip_test
from prereg.stats.results import ContrastResult, PermutationResult

__all__ = [
    "check_weights",
    "contrast_bootstrap",
    "contrast_sign_flip",
    "factorial_weights",
]

#: relative tolerance when checking that weights sum to the declared value
_SUM_TOL = 1e-9


def check_weights(
    weights: Any, sum_to: float = 0.0, *, n_cells: int | None = None
) -> tuple[float, ...]:
    """The weights as a tuple of floats, or ValueError saying what is wrong.

    Refuses an empty or non-flat vector, nan or infinite entries, all-zero weights (a
    contrast that compares nothing), a length other than ``n_cells`` (when given), and a
    sum other than ``sum_to`` beyond a tolerance of 1e-9 x max(1, sum |w|). A contrast
    of arms sums to 0 (the default); pass ``sum_to=1`` for a weighted cell mean.
    """
    refuse_text(weights, "weights")
    refuse_text(sum_to, "sum_to")
    if not math.isfinite(float(sum_to)):
        raise ValueError(f"sum_to must be finite, got {sum_to!r}")
    arr = np.asarray(weights, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"weights must be a non-empty flat list, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("weights contain nan or infinite values")
    if n_cells is not None:
        n_cells = count(n_cells, "n_cells")
    if n_cells is not None and arr.size != n_cells:
        raise ValueError(f"weights: the contrast has {arr.size} weights for {n_cells} cells")
    if not np.any(arr != 0.0):
        raise ValueError("weights are all zero (the contrast compares nothing)")
    total = float(arr.sum())
    tol = _SUM_TOL * max(1.0, float(np.abs(arr).sum()))
    if abs(total - float(sum_to)) > tol:
        raise ValueError(f"weights sum to {total:.12g}, expected {float(sum_to):g}")
    return tuple(float(v) for v in arr)


def _sign(cell: Mapping[str, object], factor: str, levels: tuple[object, object]) -> int:
    """-1 at the low level, +1 at the high level, 0 outside the two-level design."""
    if factor not in cell:
        return 0
    level = cell[factor]
    if level == levels[0]:
        return -1
    if level == levels[1]:
        return 1
    return 0


def factorial_weights(
    cells: Sequence[Mapping[str, object]],
    effect: str | Sequence[str],
    low_high: Mapping[str, tuple[object, object]],
) -> tuple[float, ...]:
    """Weights of a main effect or interaction in a two-level factorial over ``cells``.

    ``low_high`` names the k factors of the 2^k design and their (low, high) levels;
    ``cells`` lists every cell of the registration (each a mapping factor -> level);
    ``effect`` is one factor (main effect) or several (their interaction). A cell is in
    the design when every factor has its low or high level; other cells (the seed's
    checkpoint cells, a third level of a factor) get weight 0. The design cells must
    hold each of the 2^k level combinations exactly once (ValueError otherwise, which
    also catches a misspelt level).

    With s_f(c) = -1 / +1 at the low / high level of f, n = 2^k design cells and r
    factors in ``effect``:

        w_c = (2^r / n) prod_{f in effect} s_f(c).

    This is the r-fold difference of differences of cell means, averaged over the other
    k - r factors: a main effect is the mean of the cells at high minus the mean at low
    (2/n, seed 001's E_a = 1/4 sum s_a m_c for n = 8); a two-factor interaction is
    (m_11 - m_10) - (m_01 - m_00) averaged over the other factors (4/n: seed 001's
    E_ab = 1/2 sum s_a s_b m_c for n = 8, weights (1, -1, -1, 1) for a 2 x 2). Unlike
    Yates' convention (2/n for every order, half the difference of differences), the
    interaction is on the same scale as the simple effects it compares. Weights come
    back in the order of ``cells`` and sum to 0. Reference: Box, Hunter and Hunter
    (2005), Statistics for Experimenters, ch. 5.
    """
    if not isinstance(low_high, Mapping):
        raise ValueError("low_high must map each factor to its (low, high) levels")
    if len(low_high) == 0:
        raise ValueError("low_high names no factor: the design needs at least one factor")
    factors = (effect,) if isinstance(effect, str) else tuple(effect)
    if not factors:
        raise ValueError("effect names no factor")
    if len(set(factors)) != len(factors):
        raise ValueError(f"effect repeats a factor: {list(factors)}")
    for factor in factors:
        if factor not in low_high:
            raise ValueError(f"effect factor {factor!r} is not a factor of the design")
    for factor, levels in low_high.items():
        if len(levels) != 2 or levels[0] == levels[1]:
            raise ValueError(f"factor {factor!r} needs two distinct (low, high) levels")
    design = tuple(low_high)
    signs = [tuple(_sign(cell, f, low_high[f]) for f in design) for cell in cells]
    in_design = [0 not in s for s in signs]
    seen: dict[tuple[int, ...], int] = {}
    for i, s in enumerate(signs):
        if in_design[i]:
            if s in seen:
                raise ValueError(f"cells {seen[s]} and {i} are the same factorial cell")
            seen[s] = i
    n = 2 ** len(design)
    if len(seen) != n:
        raise ValueError(
            f"the {len(design)}-factor design needs {n} cells, found {len(seen)} "
            f"(factors {list(design)}; check the level names)"
        )
    positions = [design.index(f) for f in factors]
    scale = 2.0 ** len(factors) / n
    return tuple(
        scale * math.prod(s[p] for p in positions) if ok else 0.0
        for s, ok in zip(signs, in_design, strict=True)
    )


def _unit_contrasts(
    values: Any, weights: Any, units: Any
) -> tuple[NDArray[np.float64], tuple[float, ...], int]:
    """Per-unit contrasts d_u, the checked weights, and the number of rows."""
    refuse_text(values, "values")
    m = np.asarray(values, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"values must be a (units, cells) matrix, got shape {m.shape}")
    if m.shape[0] == 0:
        raise ValueError("values is empty (no row)")
    w = check_weights(weights, n_cells=m.shape[1])
    used = np.asarray(w) != 0.0
    bad = ~np.all(np.isfinite(m[:, used]), axis=1)
    if np.any(bad):
        rows = np.nonzero(bad)[0]
        raise ValueError(
            f"values: {rows.size} row(s) lack a weighted cell (nan or infinite), first row "
            f"{rows[0]}; a contrast needs every weighted cell in every unit"
        )
    per_row = m[:, used] @ np.asarray(w)[used]
    if units is None:
        return per_row, w, m.shape[0]
    codes, n_units = _codes(units, m.shape[0], "units")
    sums = np.bincount(codes, weights=per_row, minlength=n_units)
    return sums / np.bincount(codes, minlength=n_units), w, m.shape[0]


def _support(values: Any, weights: tuple[float, ...]) -> tuple[float, float, str]:
    """(low, high, what) the contrast can take: with every weighted cell mean in [0, 1]
    (rates, proportions) [sum of the negative weights, sum of the positive weights], the
    contrast's parameter space; otherwise the range the observed cell means allow,
    sum_{w > 0} w x [min - max, max - min] over the weighted cells (the weights sum to 0,
    so the negative weights contribute the mirror image)."""
    w = np.asarray(weights)
    used = w != 0.0
    cells = np.asarray(values, dtype=np.float64)[:, used]
    positive = float(w[w > 0].sum())
    negative = float(w[w < 0].sum())
    if bool(np.all((cells >= 0.0) & (cells <= 1.0))):
        return negative, positive, "a contrast of cell means in [0, 1]"
    span = float(cells.max() - cells.min())
    return -positive * span, positive * span, "the contrast the observed cell means allow"


def contrast_bootstrap(
    values: Any,
    weights: Any,
    *,
    units: Any = None,
    draws: int = 10_000,
    level: float = 0.95,
    seed: int | None = 0,
    small_clusters: Literal["t", "none"] = "t",
) -> ContrastResult:
    """Cluster bootstrap of a contrast of cell means, resampling units.

    ``values`` is a (rows, cells) matrix of cell means, ``weights`` one weight per cell
    (checked by :func:`check_weights`, sum 0). Each row gives d_row = sum_c w_c m_c
    (cells of weight 0 may be nan). Without ``units`` every row is a resampling unit;
    with ``units`` (one label per row: the task's cluster or intent) a unit's contrast
    is the mean over its rows, so tasks count equally within their unit and every unit
    counts once. The estimate is mean_u(d_u); by linearity it equals the contrast of
    the unit-weighted cell means. Needs at least two units.

    Interval (``small_clusters="t"``, the default), the one
    :func:`prereg.stats.paired_bootstrap` prints, for the same reason (it keeps its level
    from :data:`prereg.stats.bootstrap.FEW_CLUSTERS` units, where the percentile interval
    covers 0.907 at 10 clusters and 0.930 at 20 for a nominal 0.95; see there):

        estimate -+ sqrt(U / (U - 1)) t_{U-1,q} SE*,   q = (1 + level) / 2,

    with SE* the bootstrap standard error of the mean of U resampled units. SE* is
    computed exactly, not from the draws: the mean of U units drawn with replacement has
    variance (plug-in variance of the d_u) / U, which is what the draws' variance
    estimates. So the interval and p do not depend on ``seed`` or ``draws`` (a .05
    decision cannot turn on the seed, issue 39), and the interval is the one-sample t
    interval of the unit contrasts, estimate -+ t_{U-1,q} s / sqrt(U) (s the SD with
    U - 1 degrees of freedom). ``se`` is SE*. ``pvalue`` inverts the interval: the
    smallest alpha at which the 1 - alpha interval excludes 0, i.e. the two-sided t test
    on U - 1 degrees of freedom, 2 P(T_{U-1} > |estimate| / (s / sqrt(U))); so ``pvalue
    <= alpha`` exactly when the 1 - alpha interval excludes 0. A zero estimate gives
    p = 1; units that all have the same non-zero contrast give a zero-width interval and
    p = 0 (a point interval excludes 0 at every level), with a note.

    Bounds: the interval is intersected with the contrast's support. When every weighted
    cell mean lies in [0, 1] (rates) that is [sum of the negative weights, sum of the
    positive weights], the range of the contrast over every possible set of rates: the
    true contrast lies in it, so the intersection covers exactly when the interval does.
    Otherwise it is the range the observed cell means allow (the parameter space when the
    observed extremes are the scale's ends). ``truncated`` says an end was moved in,
    ``note`` to what. The interval is centred on the estimate, so it contains it.

    ``small_clusters="none"``: the previous method, kept for before/after comparisons and
    for the seed's figures (:func:`prereg.stats.enumeration.resampled_contrast`): the
    percentile interval, the (1 -+ level)/2 quantiles of the draws (linear
    interpolation), ``se`` their SD, and the two-sided centred bootstrap p, which
    resamples T* - t as the null distribution of T - theta (Hall and Wilson 1991,
    Biometrics 47:757-762, guideline 1) and counts the observed draw once (Davison and
    Hinkley 1997, ch. 4):

        p = (1 + #{|d* - est| >= |est|}) / (draws + 1),

    with floor 1 / (draws + 1) (about 10^-4 at 10,000 draws, as seed 001 notes). It lies
    inside the range of the d_u, hence inside the bounds; a percentile interval that
    misses the estimate (skewed draws) is left as it is, with a note.

    Draws resample the U units with replacement, ``draws`` times (vectorised, seeded with
    ``numpy.random.default_rng(seed)``); ``distribution`` holds them in both modes (the
    same draws). With few units prefer :func:`contrast_sign_flip` (exact) or
    :func:`prereg.stats.enumeration.resampled_contrast` (the percentile bootstrap
    enumerated exactly). ValueError naming the argument for a bad ``level``, ``draws``,
    ``seed``, ``small_clusters``, ``values`` (not a matrix, empty, text, nan or infinity
    in a weighted cell), ``weights`` or ``units`` (wrong length, a missing label).
    """
    if small_clusters not in ("t", "none"):
        raise ValueError(f"small_clusters must be 't' or 'none', got {small_clusters!r}")
    level = probability(level, "level")
    draws = draw_count(draws)
    seed = rng_seed(seed)
    d, w, n_rows = _unit_contrasts(values, weights, units)
    n = int(d.size)
    if n < 2:
        raise ValueError(f"a bootstrap needs at least two resampling units, got {n}")
    estimate = float(d.mean())
    rng = np.random.default_rng(seed)
    out = _prompt_draws(rng, d, draws)
    notes: list[str] = []
    flat = bool(np.ptp(d) == 0.0)
    if small_clusters == "t":
        # the exact bootstrap variance of a mean of n units: plug-in variance / n
        exact_var = 0.0 if flat else float(np.mean((d - estimate) ** 2)) / n
        parts: list[_Part] = [(exact_var, n - 1, n / (n - 1))]
        half = _half_width(parts, (1.0 - level) / 2.0)
        low, high = estimate - half, estimate + half
        se = math.sqrt(exact_var)
        pvalue = _inverted_pvalue(estimate, parts)
        interval = (
            f"bootstrap-SE interval with Student t critical values ({n - 1} df; bootstrap "
            f"variance exact: plug-in variance / {n}), p by inverting it (t test)"
        )
    else:
        tail = (1.0 - level) / 2.0
        low, high = (float(v) for v in np.quantile(out, [tail, 1.0 - tail]))
        se = float(out.std(ddof=1)) if draws > 1 else 0.0
        bound = abs(estimate) - 1e-12 * max(1.0, abs(estimate))
        extreme = int(np.count_nonzero(np.abs(out - estimate) >= bound))
        pvalue = min(1.0, (1 + extreme) / (draws + 1))
        if max(low - estimate, estimate - high) > 1e-12 * max(1.0, abs(estimate)):
            notes.append("the percentile interval does not contain the estimate (skewed draws)")
        interval = "percentile interval, centred two-sided p"
    lo, hi, what = _support(values, w)
    truncated = bool(low < lo or high > hi)
    if truncated:
        low, high = min(max(low, lo), estimate), max(min(high, hi), estimate)
        notes.append(f"interval truncated to [{lo:g}, {hi:g}], the range of {what}")
    if high - low <= 0.0:
        notes.append("zero width: every unit has the same contrast (no spread between units)")
    unit_word = "rows" if units is None else "labelled units"
    return ContrastResult(
        estimate=estimate,
        low=low,
        high=high,
        level=level,
        se=se,
        pvalue=pvalue,
        n=n,
        n_rows=n_rows,
        draws=draws,
        seed=seed,
        weights=w,
        method=f"cluster bootstrap of a contrast resampling {n} {unit_word}, {interval}",
        unit_contrasts=d,
        distribution=out,
        truncated=truncated,
        note="; ".join(notes),
    )


def contrast_sign_flip(
    values: Any,
    weights: Any,
    alternative: str = "two-sided",
    *,
    units: Any = None,
    draws: int = DEFAULT_DRAWS,
    seed: int | None = 0,
) -> PermutationResult:
    """Sign-flip test of a contrast over its per-unit values d_u (see contrast_bootstrap).

    Under H0 each unit's contrast is symmetric about zero, so the 2^U sign patterns are
    equally likely; :func:`prereg.stats.sign_flip_test` computes the exact p (by
    enumeration up to 40 non-zero units). With U units the smallest two-sided p is
    2 / 2^U: seed 001's 12 intents give p = .0098 (40 / 4096) for compact encoding.
    ``values``, ``weights`` and ``units`` as in :func:`contrast_bootstrap`.
    """
    draws, seed = draw_count(draws), rng_seed(seed)
    d, _, _ = _unit_contrasts(values, weights, units)
    res = sign_flip_test(d, alternative, draws=draws, seed=seed)
    return replace(res, method=f"{res.method}, of a contrast over {d.size} units")
