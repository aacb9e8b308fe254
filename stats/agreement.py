"""Agreement between raters: Cohen's kappa, and a judge's error rates against gold.

Cohen's kappa (Cohen 1960, Educ Psychol Meas 20:37-46) corrects the observed agreement
p_o of two raters for the agreement p_e their marginal rates give by chance:
kappa = (p_o - p_e) / (1 - p_e). Its interval here is the Wald interval on the
large-sample standard error of Fleiss, Cohen and Everitt (1969, Psychol Bull
72:323-327), the one SAS PROC FREQ prints as "ASE" and
``statsmodels.stats.inter_rater.cohens_kappa`` as ``std_kappa`` (computed here, not
imported: this package depends on numpy and scipy only). Optionally a percentile
bootstrap over the rated items, which, unlike the Wald interval, stays inside [-1, 1]
and is asymmetric near 1, where a good judge's kappa sits.

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

from prereg.stats._dist import norm_ppf, norm_sf
from prereg.stats._validate import count, counts, probability, vector
from prereg.stats.intervals import jeffreys_interval
from prereg.stats.results import ProportionInterval

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

    ``low``/``high``: kappa +- z ``se`` (the asymptotic standard error of Fleiss, Cohen
    and Everitt 1969; not clipped, as statsmodels and SAS print it). ``se0`` the
    standard error under kappa = 0 and ``pvalue`` its two-sided z test.
    ``bootstrap_low``/``bootstrap_high``: the percentile bootstrap interval over items
    (nan unless ``draws`` > 0). ``table``: rater a in rows, rater b in columns, in the
    order of ``categories``. ``note`` explains a degenerate table (empty otherwise).
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


def cohens_kappa_table(
    table: ArrayLike,
    *,
    level: float = 0.95,
    draws: int = 0,
    seed: int | None = 0,
    categories: Sequence[Hashable] | None = None,
) -> KappaResult:
    """Cohen's kappa of a square table of counts (rater a in rows, rater b in columns).

    The interval is kappa +- z SE with the asymptotic SE of Fleiss, Cohen and Everitt
    (1969), as ``statsmodels.stats.inter_rater.cohens_kappa`` computes it. With
    ``draws`` > 0, also a percentile bootstrap over items: resampling n items with
    replacement is a multinomial draw of the cell counts at the observed proportions,
    so it is vectorised over draws (seeded with ``seed``). Draws whose resampled table
    has chance agreement 1 (kappa undefined) are left out and counted in ``note``.
    A table whose chance agreement is 1 (both raters gave one and the same category)
    has kappa nan.
    """
    level = probability(level, "level")
    draws = count(draws, "draws")
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
    kappa, se, se0, po, pe = _kappa_and_se(tab.astype(np.float64))
    z = float(norm_ppf(0.5 + level / 2.0))
    notes = []
    if math.isnan(kappa):
        notes.append("chance agreement is 1 (one category used by both raters): kappa undefined")
    pvalue = (
        float(2.0 * norm_sf(abs(kappa) / se0)) if se0 > 0 and not math.isnan(kappa) else math.nan
    )
    b_low = b_high = math.nan
    if draws > 0 and not math.isnan(kappa):
        rng = np.random.default_rng(seed)
        cells = rng.multinomial(n, tab.ravel() / n, size=draws).astype(np.float64)
        ks = _kappa_draws(cells.reshape(draws, k, k))
        undefined = int(np.isnan(ks).sum())
        if undefined:
            notes.append(f"{undefined} of {draws} bootstrap tables had kappa undefined")
        tail = (1.0 - level) / 2.0
        b_low, b_high = (float(v) for v in np.nanquantile(ks, [tail, 1.0 - tail]))
    method = "Cohen's kappa, Wald interval on the Fleiss-Cohen-Everitt (1969) asymptotic SE"
    if draws > 0:
        method += f"; percentile bootstrap over items ({draws} draws)"
    return KappaResult(
        estimate=kappa,
        low=kappa - z * se,
        high=kappa + z * se,
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
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains nan or infinite values")
    if arr.dtype.kind == "O" and any(v is None for v in arr):
        raise ValueError(f"{name} contains None (an unrated item)")
    return arr


def cohens_kappa(
    rater_a: ArrayLike,
    rater_b: ArrayLike,
    *,
    categories: Sequence[Hashable] | None = None,
    level: float = 0.95,
    draws: int = 0,
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
    if a.size != b.size:
        raise ValueError(f"rater_b must label the same {a.size} items as rater_a, got {b.size}")
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
    if j.size != g.size:
        raise ValueError(f"judge must label the same {g.size} items as gold, got {j.size}")
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
