"""Agreement between raters: Cohen's kappa, and a judge's error rates against gold.

Cohen's kappa (Cohen 1960, Educ Psychol Meas 20:37-46) corrects the observed agreement
p_o of two raters for the agreement p_e their marginal rates give by chance:
kappa = (p_o - p_e) / (1 - p_e). The point estimate, the large-sample SE of Fleiss, Cohen
and Everitt (1969, Psychol Bull 72:323-327; SAS PROC FREQ's "ASE",
``statsmodels.stats.inter_rater.cohens_kappa``'s ``std_kappa``) and the z test of
kappa = 0 on the SE under the null are computed here, not imported (this package
depends on numpy and scipy only).

The interval is a BCa bootstrap over items (Efron 1987, JASA 82:171-185; Efron and
Tibshirani 1993, ch. 14), not the Wald interval kappa +- z SE (issue 39). The table of
n items is multinomial, so resampling items is a multinomial draw of the cell counts
(4,000 by default, seeded); the bias correction is the share of resampled kappas below
the estimate, the acceleration the skewness of kappa's empirical influence (whose
second moment is the Fleiss-Cohen-Everitt variance). Every resampled kappa lies in
[-1, 1], so the interval does too. Exact coverage of nominal 95% intervals at 60 items,
over every 2 x 2 table (two raters who both say 1 at rate 0.3 or 0.5; each table's
bootstrap seeded; a table without an interval counts as not covering):

    kappa, prevalence    0.4,0.3  0.4,0.5  0.6,0.3  0.6,0.5  0.8,0.3  0.8,0.5
    Wald                   0.933    0.944    0.930    0.928    0.912    0.938
      leaves [-1, 1]       0        0        0.006    0.001    0.242    0.136
    percentile bootstrap   0.944    0.949    0.939    0.950    0.928    0.932
    Wald on atanh(kappa)   0.946    0.953    0.954    0.958    0.958    0.963
    BCa (this)             0.962    0.954    0.961    0.957    0.963    0.952

The Wald interval is symmetric while kappa's sampling distribution is skewed (a long
tail towards 0 when kappa is high), so near 1 it leaves the support and its lower limit
lies above the truth in 5-8% of tables; the percentile bootstrap keeps the support but
not the coverage (0.928). The Wald interval on atanh(kappa) (equivalently on
logit((kappa + 1) / 2)) covers, but lopsidedly: at kappa 0.8 its upper limit is below
the truth in 3.5-3.7% of tables and its lower limit never above it, so it understates a
good judge's agreement. BCa keeps each tail at 0.6-2.6% and is chosen. At 30 items its
coverage is 0.938-0.973 except at kappa 0.8 and prevalence 0.3 (0.908), where 7.2% of
tables have every item agreeing and get no interval (below); over the tables with an
interval it is 0.98. Simulated (2,000 tables each) at kappa 0.8 and 100 items, and kappa
0.6 and 0.8 at 200 items: 0.945-0.959.

Degenerate tables give a nan interval and a ``note`` saying why, never a zero-width
interval (the Wald interval printed "1.00 (1.00 to 1.00)" for them): chance agreement 1
(both raters used one category: kappa nan too); all items in one cell; one rater using
one category (kappa is 0 whatever the other says); every item agreeing (kappa 1: every
resample agrees too); and the rare table whose two BCa limits fall on one lump of equal
resampled kappas (perfect disagreement, kappa -1, with many items). The p-value is
unchanged (nan when the SE under the null is 0).

The judge's true- and false-positive rates against gold carry Jeffreys intervals
(``jeffreys_interval``): Brown, Cai and DasGupta (2001, Stat Sci 16:101-133) recommend
Jeffreys or Wilson over Wald for small n; Jeffreys has the better mean coverage of the
two near 0 and 1 (exactly where a good judge's false-positive rate sits), its
boundary-corrected form gives one-sided bounds at 0/k and k/k, and it is the interval
the rest of ``prereg.stats`` (the funnel, InvokeRank) reports, so a report speaks one
kind of interval.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from prereg.stats._dist import norm_cdf, norm_ppf, norm_sf
from prereg.stats._validate import count, counts, labels, probability, same_length, vector
from prereg.stats.intervals import jeffreys_interval
from prereg.stats.results import ProportionInterval

KAPPA_DRAWS = 4000
"""Bootstrap tables behind kappa's BCa interval by default."""
MIN_KAPPA_DRAWS = 1000
"""Fewest draws accepted: BCa reads quantiles in the tails beyond (1 - level) / 2, and
Efron and Tibshirani (1993) ask for at least 1,000 draws for interval endpoints."""

__all__ = [
    "KappaResult",
    "JudgeRates",
    "cohens_kappa",
    "cohens_kappa_table",
    "judge_rates",
]


@dataclass(frozen=True, eq=False)
class KappaResult:
    """Cohen's kappa of two raters with its interval.

    ``low``/``high``: the BCa bootstrap interval over items (inside [-1, 1]; nan, with
    the reason in ``note``, for a degenerate table). ``se`` is the asymptotic standard
    error of Fleiss, Cohen and Everitt (1969), as statsmodels and SAS print it; ``se0``
    the standard error under kappa = 0 and ``pvalue`` its two-sided z test.
    ``bootstrap_low``/``bootstrap_high``: the percentile interval of the same ``draws``
    resampled tables. ``table``: rater a in rows, rater b in columns, in the order of
    ``categories``. ``note`` explains a degenerate table or left-out draws (empty
    otherwise).
    """

    estimate: float
    low: float
    high: float
    level: float
    se: float
    se0: float
    pvalue: float
    observed_agreement: float
    expected_agreement: float
    n: int
    categories: tuple[Hashable, ...]
    bootstrap_low: float
    bootstrap_high: float
    draws: int
    seed: int | None
    method: str
    note: str
    table: NDArray[np.int64] = field(repr=False)


@dataclass(frozen=True)
class JudgeRates:
    """A binary judge's error rates against gold labels, each with a Jeffreys interval.

    ``tpr``: P(judge 1 | gold 1), the true-positive rate (sensitivity); ``fpr``:
    P(judge 1 | gold 0), the false-positive rate (1 - specificity). A rate whose gold
    class is empty has estimate nan and interval [0, 1].
    """

    tpr: ProportionInterval
    fpr: ProportionInterval
    true_positives: int
    false_positives: int
    false_negatives: int
    true_negatives: int
    n: int
    level: float
    method: str


def _kappa_and_se(table: NDArray[np.float64]) -> tuple[float, float, float, float, float]:
    """kappa, its asymptotic SE, the SE under kappa = 0, p_o and p_e of a square table.

    Fleiss, Cohen and Everitt (1969), with p_ij = table / n, row margins r_i, column
    margins c_j:

        var = [sum_i p_ii (1 - (r_i + c_i)(1 - kappa))^2
               + (1 - kappa)^2 sum_{i != j} p_ij (c_i + r_j)^2
               - (kappa - p_e (1 - kappa))^2] / (n (1 - p_e)^2),
        var0 = [p_e + p_e^2 - sum_i r_i c_i (r_i + c_i)] / (n (1 - p_e)^2).
    """
    n = float(table.sum())
    p = table / n
    r = p.sum(axis=1)
    c = p.sum(axis=0)
    po = float(np.trace(p))
    pe = float(np.sum(r * c))
    if pe >= 1.0 - 1e-15:
        return math.nan, math.nan, math.nan, po, pe
    kappa = (po - pe) / (1.0 - pe)
    diag = np.diag(p)
    term_a = float(np.sum(diag * (1.0 - (r + c) * (1.0 - kappa)) ** 2))
    off = p * (c[:, None] + r[None, :]) ** 2
    np.fill_diagonal(off, 0.0)
    term_b = (1.0 - kappa) ** 2 * float(off.sum())
    term_c = (kappa - pe * (1.0 - kappa)) ** 2
    denom = n * (1.0 - pe) ** 2
    var = max(term_a + term_b - term_c, 0.0) / denom
    var0 = max(pe + pe**2 - float(np.sum(r * c * (r + c))), 0.0) / denom
    return kappa, math.sqrt(var), math.sqrt(var0), po, pe


def _kappa_draws(tables: NDArray[np.float64]) -> NDArray[np.float64]:
    """Kappa of each of a stack of k x k tables (draws x k x k); nan where p_e = 1."""
    n = tables.sum(axis=(1, 2))
    p = tables / n[:, None, None]
    po = np.trace(p, axis1=1, axis2=2)
    pe = np.einsum("dk,dk->d", p.sum(axis=2), p.sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pe < 1.0 - 1e-15, (po - pe) / (1.0 - pe), np.nan)


def _influence(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """The empirical influence of one item in cell (i, j) on kappa (a k x k array).

    Moving mass eps onto cell (i, j) changes p_o by delta_ij - p_o and p_e by
    c_i + r_j - 2 p_e, so kappa = (p_o - p_e) / (1 - p_e) changes by
        U_ij = [delta_ij - p_o - (1 - kappa)(c_i + r_j - 2 p_e)] / (1 - p_e).
    sum_ij p_ij U_ij^2 / n is the Fleiss-Cohen-Everitt variance exactly (the delta
    method), and the third moment gives the BCa acceleration. Needs p_e < 1.
    """
    p = table / table.sum()
    r, c = p.sum(axis=1), p.sum(axis=0)
    po, pe = float(np.trace(p)), float(np.sum(r * c))
    kappa = (po - pe) / (1.0 - pe)
    dpe = c[:, None] + r[None, :] - 2.0 * pe
    dpo = np.eye(p.shape[0]) - po
    return np.asarray((dpo - (1.0 - kappa) * dpe) / (1.0 - pe), dtype=np.float64)


def _no_spread(tab: NDArray[np.int64], cats: tuple[Hashable, ...]) -> str:
    """Why the bootstrap of a table has no spread (so no interval is given)."""
    n = int(tab.sum())
    if np.count_nonzero(tab) == 1:
        i, j = (int(v) for v in np.argwhere(tab)[0])
        return (
            f"all {n} items in one cell (rater a {cats[i]!r}, rater b {cats[j]!r}): every "
            "resample is that table, so no interval"
        )
    if np.trace(tab) == n:
        return f"all {n} items agree (kappa = 1): every resample agrees too, so no interval"
    for rater, margin in (("a", tab.sum(axis=1)), ("b", tab.sum(axis=0))):
        if np.count_nonzero(margin) == 1:
            label = cats[int(np.argmax(margin))]
            return (
                f"rater {rater} gave all {n} items {label!r}: kappa is 0 whatever the other "
                "rater says, so no interval"
            )
    return "every resample has the same kappa, so no interval"


def _bca(
    ks: NDArray[np.float64], kappa: float, table: NDArray[np.float64], level: float
) -> tuple[float, float, str]:
    """The BCa interval from the defined bootstrap kappas ``ks`` (low, high, reason).

    Bias correction z0 = Phi^-1(share of draws below kappa, ties counted half); the
    acceleration a = sum U^3 / (6 (sum U^2)^(3/2)) over items from the empirical
    influence U (Efron 1987; Efron and Tibshirani 1993, ch. 14), 0 where kappa has no
    first-order spread. The interval is the draws' quantiles at
    Phi(z0 + (z0 +- z) / (1 - a (z0 +- z))): inside [-1, 1] because every draw is.
    """
    tie = 1e-12 * max(1.0, abs(kappa))
    below = float(np.sum(ks < kappa - tie)) + 0.5 * float(np.sum(np.abs(ks - kappa) <= tie))
    share = below / ks.size
    if share <= 0.0 or share >= 1.0:
        side = "above" if share <= 0.0 else "below"
        return math.nan, math.nan, f"every resampled kappa lies {side} the estimate, so no interval"
    z0 = float(norm_ppf(share))
    u = _influence(table)
    w = table / table.sum()
    m2, m3 = float(np.sum(w * u**2)), float(np.sum(w * u**3))
    n = float(table.sum())
    a = m3 / (6.0 * math.sqrt(n) * m2**1.5) if m2 > 0.0 else 0.0
    z = float(norm_ppf(0.5 + level / 2.0))
    zs = np.array([z0 - z, z0 + z])
    alphas = norm_cdf(z0 + zs / (1.0 - a * zs))
    low, high = (float(v) for v in np.quantile(ks, alphas))
    if not low < high:  # both tails in one lump of equal resampled kappas
        return (
            math.nan,
            math.nan,
            f"both BCa limits fall on one resampled kappa ({low:.3g}), so no interval",
        )
    return low, high, ""


def cohens_kappa_table(
    table: ArrayLike,
    *,
    level: float = 0.95,
    draws: int = KAPPA_DRAWS,
    seed: int | None = 0,
    categories: Sequence[Hashable] | None = None,
) -> KappaResult:
    """Cohen's kappa of a square table of counts (rater a in rows, rater b in columns).

    The interval (``low``, ``high``) is the BCa bootstrap over items (see the module
    docstring for why, with its coverage): resampling the n items with replacement is
    a multinomial draw of the cell counts at the observed proportions, so ``draws``
    tables (at least 1,000; seeded with ``seed``) are drawn at once and their kappas
    computed together. Draws whose table has chance agreement 1 (kappa undefined) are
    left out and counted in ``note``. ``bootstrap_low``/``bootstrap_high`` are the
    percentile interval of the same draws. ``se`` is the Fleiss-Cohen-Everitt (1969)
    asymptotic SE (statsmodels' ``std_kappa``), ``pvalue`` the z test of kappa = 0 on
    the SE under the null ``se0``; neither depends on the draws.

    Degenerate tables give a nan interval (and percentile interval) and say why in
    ``note``, never a zero-width interval: chance agreement 1 (both raters used one and
    the same category: kappa nan too); all items in one cell; one rater using one
    category (kappa 0 for every resample); all items agreeing (kappa = 1: every
    resample agrees too); both BCa limits on one resampled value.
    """
    level = probability(level, "level")
    draws = count(draws, "draws")
    if draws < MIN_KAPPA_DRAWS:
        raise ValueError(
            f"draws must be at least {MIN_KAPPA_DRAWS} (the interval is a BCa bootstrap), "
            f"got {draws}"
        )
    tab = counts(table, "table")
    if tab.ndim != 2 or tab.shape[0] != tab.shape[1] or tab.shape[0] < 2:
        raise ValueError(f"table must be a square k x k table with k >= 2, got {tab.shape}")
    n = int(tab.sum())
    if n == 0:
        raise ValueError("table is empty (no rated items)")
    k = tab.shape[0]
    cats: tuple[Hashable, ...] = tuple(range(k)) if categories is None else tuple(categories)
    if len(cats) != k:
        raise ValueError(f"categories must name the table's {k} categories, got {len(cats)}")
    tabf = tab.astype(np.float64)
    kappa, se, se0, po, pe = _kappa_and_se(tabf)
    notes = []
    pvalue = (
        float(2.0 * norm_sf(abs(kappa) / se0)) if se0 > 0 and not math.isnan(kappa) else math.nan
    )
    low = high = b_low = b_high = math.nan
    if math.isnan(kappa):
        notes.append("chance agreement is 1 (one category used by both raters): kappa undefined")
    else:
        rng = np.random.default_rng(seed)
        cells = rng.multinomial(n, tab.ravel() / n, size=draws).astype(np.float64)
        ks = _kappa_draws(cells.reshape(draws, k, k))
        undefined = int(np.isnan(ks).sum())
        ks = ks[~np.isnan(ks)]
        spread = float(ks.max() - ks.min()) if ks.size else 0.0
        if spread <= 1e-12 or min(np.count_nonzero(tab.sum(axis=ax)) for ax in (0, 1)) == 1:
            notes.append(_no_spread(tab, cats))
        else:
            if undefined:
                notes.append(
                    f"{undefined} of {draws} bootstrap tables had kappa undefined (left out)"
                )
            tail = (1.0 - level) / 2.0
            b_low, b_high = (float(v) for v in np.quantile(ks, [tail, 1.0 - tail]))
            if not b_low < b_high:
                b_low = b_high = math.nan
            # the estimate as the draws compute it, so that a resample equal to the
            # observed table counts as a tie
            k_hat = float(_kappa_draws(tabf[None])[0])
            low, high, why = _bca(ks, k_hat, tabf, level)
            if why:
                notes.append(why)
    method = (
        f"Cohen's kappa; BCa bootstrap interval over items ({draws} multinomial draws, "
        "acceleration from the empirical influence); p-value: z test of kappa = 0 on the "
        "Fleiss-Cohen-Everitt (1969) SE under the null"
    )
    return KappaResult(
        estimate=kappa,
        low=low,
        high=high,
        level=level,
        se=se,
        se0=se0,
        pvalue=pvalue,
        observed_agreement=po,
        expected_agreement=pe,
        n=n,
        categories=cats,
        bootstrap_low=b_low,
        bootstrap_high=b_high,
        draws=draws,
        seed=seed,
        method=method,
        note="; ".join(notes),
        table=tab,
    )


def _labels(values: ArrayLike, name: str) -> NDArray[np.generic]:
    """One label per item, none missing (an unrated item is dropped by the caller)."""
    arr = labels(values, name)
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    return arr


def cohens_kappa(
    rater_a: ArrayLike,
    rater_b: ArrayLike,
    *,
    categories: Sequence[Hashable] | None = None,
    level: float = 0.95,
    draws: int = KAPPA_DRAWS,
    seed: int | None = 0,
) -> KappaResult:
    """Cohen's kappa of two raters' labels on the same items (binary or categorical).

    ``rater_a[i]`` and ``rater_b[i]`` label item i (0/1, booleans, integers or strings;
    an unrated item must be dropped by the caller, not passed as None). ``categories``
    fixes the category order (and admits categories neither rater used); by default the
    sorted union of the labels. See ``cohens_kappa_table`` for the interval.
    """
    a = _labels(rater_a, "rater_a")
    b = _labels(rater_b, "rater_b")
    same_length(a, "rater_a", b, "rater_b")  # the same items
    if categories is None:
        cats = sorted(set(a.tolist()) | set(b.tolist()), key=lambda v: (str(type(v)), v))
    else:
        cats = list(categories)
        if len(set(cats)) != len(cats):
            raise ValueError("categories must not repeat a category")
    if len(cats) < 2 and categories is None and cats and cats[0] in (0, 1):
        cats = [0, 1]  # binary labels, one class unused: kappa is undefined (nan)
    if len(cats) < 2:
        raise ValueError("kappa needs at least two categories; pass categories=")
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    tab = np.zeros((k, k), dtype=np.int64)
    for arr, name in ((a, "rater_a"), (b, "rater_b")):
        unknown = set(arr.tolist()) - set(index)
        if unknown:
            raise ValueError(f"{name} holds labels not in categories: {sorted(map(str, unknown))}")
    ia = np.array([index[v] for v in a.tolist()], dtype=np.intp)
    ib = np.array([index[v] for v in b.tolist()], dtype=np.intp)
    np.add.at(tab, (ia, ib), 1)
    return cohens_kappa_table(tab, level=level, draws=draws, seed=seed, categories=cats)


def _binary(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = vector(values, name)
    if not np.all((arr == 0.0) | (arr == 1.0)):
        raise ValueError(f"{name} must hold 0/1 labels (or booleans)")
    return arr


def judge_rates(gold: ArrayLike, judge: ArrayLike, *, level: float = 0.95) -> JudgeRates:
    """The judge's true- and false-positive rates against gold labels (0/1 each).

    TPR = TP / (TP + FN) over gold positives, FPR = FP / (FP + TN) over gold negatives,
    each with a boundary-corrected equal-tailed Jeffreys interval (see the module
    docstring for why Jeffreys).
    """
    level = probability(level, "level")
    g = _binary(gold, "gold")
    j = _binary(judge, "judge")
    same_length(g, "gold", j, "judge")  # the same items
    tp = int(np.sum((g == 1) & (j == 1)))
    fn = int(np.sum((g == 1) & (j == 0)))
    fp = int(np.sum((g == 0) & (j == 1)))
    tn = int(np.sum((g == 0) & (j == 0)))
    return JudgeRates(
        tpr=jeffreys_interval(tp, tp + fn, level=level),
        fpr=jeffreys_interval(fp, fp + tn, level=level),
        true_positives=tp,
        false_positives=fp,
        false_negatives=fn,
        true_negatives=tn,
        n=int(g.size),
        level=level,
        method="judge vs gold: TPR and FPR with Jeffreys equal-tailed intervals",
    )
