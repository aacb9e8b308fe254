"""Repairs as the seed defines them (seed 001, section 4.3, 5.4 and appendix H).

For a repair aimed at pressure l, with mu^x_{l s} the mean success of lane x (``l`` the
repaired lane, ``0`` the incumbent without the repair, ``k`` a repair aimed at another
pressure, run on l's cells) at the unstressed (s = 0) or stressed (s = 1) cell:

    L = mu^0_{l0} - mu^0_{l1}                  the loss the repair targets
    Gamma = mu^l_{l1} - mu^0_{l1}              the stress gain
    Sigma = Gamma - (mu^l_{l0} - mu^0_{l0})    the gain specific to the stress
    Sigma^k = (mu^k_{l1} - mu^0_{l1}) - (mu^k_{l0} - mu^0_{l0})   the same of repair k
    Delta = Sigma - max_k Sigma^k              (k over the other pressures' repairs)

Sigma^k and Delta compare the repair with the *other pressures' repairs* registered on
its cells (``other_repairs``), never with configuration switches, which belong only in
the decision matrix (issue 42). Sigma, Sigma^k and Delta are differences of two
differences of rates: their support is [-2, 2] (printed [-200, 200] points).

Every mean is over tasks within a family, then over families (the tasks measured in every
arm the entry reads); every interval is a 95% percentile of one family-cluster bootstrap
shared by every estimand of the entry (Delta's max is taken resample by resample). Up to
11 families the bootstrap distribution is enumerated exactly (every multiset of the
families with its multinomial probability, :func:`prereg.stats.bootstrap_multisets`), so
no figure depends on a seed; from 12 it is drawn. Below 10 families no interval is
printed (the percentile bootstrap under-covers there; docs/statistics.md, "Each method's
minimum"), and no decision that reads an interval or a p is taken: the p values are
printed, read as a demonstration.

- **Activation** (seed 5.4 and appendix H, "Why activation is not specificity"): a repair
  activates when L > 0, Gamma > 0 and Sigma > 0; the intersection-union test (Berger 1982)
  takes the largest of the three one-sided centred bootstrap p values,
  P*(theta* - theta >= theta), and the activation p values of all repairs are
  Holm-corrected together (familywise 5%).
- **Equivalence** (seed 5.4): with a registered ``equivalence_margin`` m, two one-sided
  tests (Schuirmann 1987) of the stress gain at the 5% level, p = max(P*(Gamma* - Gamma >=
  Gamma + m), P*(Gamma* - Gamma <= Gamma - m)); equivalent when p <= .05. Beside it, the
  smallest symmetric margin at which the two tests reject (the seed's reported figure):
  max(Q(.95) - 2 Gamma, 2 Gamma - Q+(.05)) of the bootstrap distribution (Q the inverse
  CDF, Q+ the smallest value whose CDF exceeds .05); every larger margin rejects.
- **Decision matrix** (seed 4.3, appendix H): for each incumbent configuration (the
  entry's own lanes and its ``incumbents``), its repaired lane against every other
  configuration at the stressed cell (the other incumbents' no-repair lanes and the
  listed ``switches``): success-superior when the 95% interval of the success difference
  lies above zero against every switch; cost-superior when the interval of the cost
  difference lies below zero against every switch (on tokens, marked "(tokens)", when a
  record did not measure cost); Pareto-nondominated when no switch is at least as good on
  success, tokens, wall time and cost and strictly better on one (point estimates). The
  counts ("x of N") are computed over the incumbents. A quantity not measured (null in a
  record) reads "not measured" and is never taken as zero (invariant 7).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from prereg.experiments.toolbottleneck.study import StudyRepair
from prereg.reports.render.markdown import table
from prereg.reports.toolbottleneck.estimates import Estimate, estimate_cell
from prereg.runners.toolbottleneck.study import StudyRecord
from prereg.stats.bootstrap import FEW_CLUSTERS
from prereg.stats.enumeration import (
    MAX_ENUMERATED,
    bootstrap_multiset_count,
    bootstrap_multisets,
    draws_for_mc_se,
)
from prereg.stats.multiplicity import holm

Matrix = NDArray[np.float64]

#: the seed's levels: 95% intervals, one-sided tests and TOST at 5%, Holm at 5%
LEVEL = 0.95
ALPHA = 0.05


@dataclass(frozen=True)
class RepairRow:
    """One episode as the repair analysis reads it; ``wall_s`` and ``cost_usd`` None when
    not measured."""

    arm: str
    task_id: str
    family: str
    success: bool
    tokens: float
    wall_s: float | None = None
    cost_usd: float | None = None


def rows_of(records: Sequence[StudyRecord | RepairRow]) -> list[RepairRow]:
    """Study records as repair rows (the simulation measures neither wall time nor cost)."""
    return [
        r
        if isinstance(r, RepairRow)
        else RepairRow(r.arm, r.task_id, r.family, r.success, r.tokens_input + r.tokens_output)
        for r in records
    ]


#: What a decision-matrix quantity reads when no record of the compared arms measured it.
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Activation:
    """The intersection-union test of L > 0, Gamma > 0 and Sigma > 0: ``p`` the largest
    one-sided p; ``holm`` its Holm-adjusted value across the repairs; ``activates`` None
    when not decided (too few families)."""

    p_loss: float
    p_gain: float
    p_specific: float
    p: float
    holm: float | None = None
    activates: bool | None = None


@dataclass(frozen=True)
class Equivalence:
    """TOST of the stress gain: ``margin`` as registered (None: none registered, then the
    p and the decision are None); ``smallest`` the smallest margin the two tests reject at
    5% (None below the minimum of families)."""

    margin: float | None
    p: float | None
    equivalent: bool | None
    smallest: float | None


@dataclass(frozen=True)
class Versus:
    """An incumbent's repaired lane minus one switch at the stressed cell."""

    incumbent: str
    switch: str
    success: Estimate
    tokens: Estimate
    wall: Estimate | None
    cost: Estimate | None


@dataclass(frozen=True)
class Verdict:
    """One incumbent's decision against all its switches (None: not decided)."""

    incumbent: str
    switches: int
    success_superior: bool | None
    cost_superior: bool | None
    nondominated: bool | None


@dataclass(frozen=True)
class RepairResult:
    repair: str
    pressure: str
    families: int
    exact: bool
    resamples: int
    loss: Estimate
    gain: Estimate
    specific: Estimate
    #: Sigma^k of each other pressure's repair: id -> (pressure, estimate)
    others: dict[str, tuple[str, Estimate]]
    #: Sigma - max_k Sigma^k; None when no other pressure's repair is registered
    delta: Estimate | None
    activation: Activation
    equivalence: Equivalence
    versus: list[Versus]
    verdicts: list[Verdict]
    #: what cost-superiority was judged on: "cost" when measured, else "tokens"
    cost_basis: str = "tokens"

    @property
    def few(self) -> bool:
        return self.families < FEW_CLUSTERS


# --- the bootstrap, exact or drawn ------------------------------------------------------


@dataclass(frozen=True)
class Resamples:
    """The family-cluster bootstrap distribution of the arms' means: ``means`` (resamples x
    arms) and the probability of each resample."""

    means: Matrix
    prob: Matrix
    exact: bool


def resample(family_values: Matrix, *, draws: int, seed: int) -> Resamples:
    """Every multiset of the families with its probability (up to MAX_ENUMERATED), else
    ``draws`` seeded draws of equal weight."""
    n = family_values.shape[0]
    if bootstrap_multiset_count(n) <= MAX_ENUMERATED:
        counts, prob = bootstrap_multisets(n)
        return Resamples((counts.astype(float) @ family_values) / n, np.asarray(prob), True)
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    return Resamples(family_values[idx].mean(axis=1), np.full(draws, 1.0 / draws), False)


def quantile(values: Matrix, prob: Matrix, q: float, *, above: bool = False) -> float:
    """The inverse CDF: the smallest value whose CDF reaches ``q`` (``above``: exceeds q)."""
    order = np.argsort(values, kind="mergesort")
    cdf = np.cumsum(prob[order])
    if above:
        at = int(np.searchsorted(cdf, q + 1e-12, side="right"))
    else:
        at = int(np.searchsorted(cdf, q - 1e-12, side="left"))
    return float(values[order][min(at, values.size - 1)])


def _upper_tail(values: Matrix, prob: Matrix, threshold: float, exact: bool) -> float:
    """P*(value >= threshold) (a 1e-12 slack for rounding); drawn: (1 + #) / (B + 1)."""
    hit = values >= threshold - 1e-12 * max(1.0, abs(threshold))
    if exact:
        return min(1.0, float(prob[hit].sum()))
    return (1.0 + float(hit.sum())) / (values.size + 1.0)


def one_sided_p(point: float, draws: Matrix, prob: Matrix, exact: bool) -> float:
    """The centred one-sided p of H0: theta <= 0, P*(theta* - theta >= theta)."""
    return _upper_tail(draws - point, prob, point, exact)


def tost_p(point: float, draws: Matrix, prob: Matrix, exact: bool, margin: float) -> float:
    """Two one-sided tests of |theta| >= margin, centred: the larger p."""
    centred = draws - point
    lower = _upper_tail(centred, prob, point + margin, exact)  # H0: theta <= -margin
    upper = _upper_tail(-centred, prob, margin - point, exact)  # H0: theta >= margin
    return max(lower, upper)


def smallest_margin(point: float, draws: Matrix, prob: Matrix) -> float:
    """The infimum of the margins at which the two one-sided tests reject at ALPHA."""
    high = quantile(draws, prob, 1.0 - ALPHA)
    low = quantile(draws, prob, ALPHA, above=True)
    return max(high - 2.0 * point, 2.0 * point - low, 0.0)


def _estimate(point: float, draws: Matrix, prob: Matrix, families: int, unit: str) -> Estimate:
    if families < FEW_CLUSTERS:
        return Estimate(point, None, None, f"too few {unit} ({families} < {FEW_CLUSTERS})")
    tail = (1.0 - LEVEL) / 2.0
    low, high = quantile(draws, prob, tail), quantile(draws, prob, 1.0 - tail)
    if high - low <= 1e-12:
        return Estimate(point, None, None, "no spread: every resample gives the same value")
    return Estimate(point, low, high)


# --- one repair ---------------------------------------------------------------------------


def family_means(
    records: Sequence[RepairRow], arms: Sequence[str], value: Callable[[RepairRow], float]
) -> Matrix:
    """(families x arms): the mean over a family's tasks of each task's mean over repeats,
    over the tasks measured in every arm."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    family: dict[str, str] = {}
    for r in records:
        if r.arm in arms:
            runs[(r.task_id, r.arm)].append(value(r))
            family[r.task_id] = r.family
    tasks = [t for t in sorted(family) if all((t, a) in runs for a in arms)]
    by_family: dict[str, list[list[float]]] = defaultdict(list)
    for t in tasks:
        by_family[family[t]].append([float(np.mean(runs[(t, a)])) for a in arms])
    rows = [np.mean(by_family[f], axis=0) for f in sorted(by_family)]
    return np.array(rows, dtype=float).reshape(len(rows), len(arms))


def _measured(
    rows: Sequence[RepairRow], arms: Sequence[str], value: Callable[[RepairRow], float | None]
) -> Matrix | None:
    """Family means of a quantity every record of the arms measured; None otherwise (a
    null is never read as zero)."""
    values = [value(r) for r in rows if r.arm in arms]
    if not values or any(v is None for v in values):
        return None
    return family_means(rows, arms, lambda r: float(value(r) or 0.0))


def _dominates(
    success: Estimate, tokens: Estimate, wall: Estimate | None, cost: Estimate | None
) -> bool:
    """Whether the switch is at least as good as the repair on every measured quantity
    (success higher is better; tokens, wall time and cost lower) and strictly better on
    one. Differences are repaired minus switch, point estimates."""
    lower_better = [e.value for e in (tokens, wall, cost) if e is not None]
    as_good = success.value <= 0 and all(v >= 0 for v in lower_better)
    strictly = success.value < 0 or any(v > 0 for v in lower_better)
    return as_good and strictly


def incumbents_of(repair: StudyRepair) -> list[tuple[str, str, str]]:
    """(name, repaired stressed arm, control stressed arm) of every incumbent: the entry's
    own lanes (named by their no-repair stressed arm) and its ``incumbents``."""
    out = [(repair.control.stressed, repair.repaired.stressed, repair.control.stressed)]
    out += [(i.id, i.repaired.stressed, i.control.stressed) for i in repair.incumbents or []]
    return out


def switches_of(repair: StudyRepair, incumbent: str) -> list[tuple[str, str]]:
    """(name, stressed arm) of every configuration an incumbent is compared with: the other
    incumbents' no-repair lanes and the listed switches (each arm once)."""
    out: list[tuple[str, str]] = []
    for name, _, control in incumbents_of(repair):
        if name != incumbent:
            out.append((name, control))
    out += [(s.id, s.stressed) for s in repair.switches or []]
    unique: list[tuple[str, str]] = []
    for name, arm in out:
        if arm not in {a for _, a in unique}:
            unique.append((name, arm))
    return unique


def repair_result(
    records: Sequence[StudyRecord | RepairRow],
    repair: StudyRepair,
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> RepairResult:
    """One repair's estimands, activation test, TOST and decision matrix (Holm across
    repairs is :func:`analyse_repairs`'s). ValueError with fewer than two families."""
    rows = rows_of(records)
    incumbents = incumbents_of(repair)
    comparisons = [(i, k, arm) for i, _, _ in incumbents for k, arm in switches_of(repair, i)]
    read = [repair.repaired, repair.control, *(repair.other_repairs or [])]
    arms = sorted(
        {a for lane in read for a in (lane.stressed, lane.unstressed)}
        | {a for _, r, c in incumbents for a in (r, c)}
        | {arm for _, _, arm in comparisons}
    )
    col = {a: i for i, a in enumerate(arms)}
    success = family_means(rows, arms, lambda r: float(r.success))
    n = success.shape[0]
    if n < 2:
        raise ValueError(f"repair '{repair.id}': a bootstrap needs two families, got {n}")
    boot = resample(success, draws=draws, seed=seed)
    point = success.mean(axis=0)
    prob = boot.prob

    def at(m: Matrix, arm: str) -> Matrix:
        return m[..., col[arm]]

    def sigma(m: Matrix, stressed: str, unstressed: str) -> Matrix:
        c = repair.control
        return (at(m, stressed) - at(m, c.stressed)) - (at(m, unstressed) - at(m, c.unstressed))

    def both(f: Callable[[Matrix], Matrix]) -> tuple[float, Matrix]:
        return float(f(point)), f(boot.means)

    r, c = repair.repaired, repair.control
    loss = both(lambda m: at(m, c.unstressed) - at(m, c.stressed))
    gain = both(lambda m: at(m, r.stressed) - at(m, c.stressed))
    spec = both(lambda m: sigma(m, r.stressed, r.unstressed))
    others: dict[str, tuple[str, tuple[float, Matrix]]] = {}
    for o in repair.other_repairs or []:
        others[o.id] = (o.pressure, both(_bound(sigma, o.stressed, o.unstressed)))

    def est(pair: tuple[float, Matrix]) -> Estimate:
        return _estimate(pair[0], pair[1], prob, n, "families")

    delta = None
    if others:
        ks = [pair for _, pair in others.values()]
        delta = est(
            (
                spec[0] - max(p for p, _ in ks),
                spec[1] - np.max(np.stack([d for _, d in ks]), axis=0),
            )
        )
    ps = [one_sided_p(p, d, prob, boot.exact) for p, d in (loss, gain, spec)]
    activation = Activation(ps[0], ps[1], ps[2], max(ps))
    margin = repair.equivalence_margin
    equivalence = Equivalence(
        margin,
        None if margin is None else tost_p(gain[0], gain[1], prob, boot.exact, margin),
        None,
        None if n < FEW_CLUSTERS else smallest_margin(gain[0], gain[1], prob),
    )
    if margin is not None and n >= FEW_CLUSTERS and equivalence.p is not None:
        equivalence = replace(equivalence, equivalent=equivalence.p <= ALPHA)

    tokens = family_means(rows, arms, lambda x: x.tokens)
    wall = _measured(rows, arms, lambda x: x.wall_s)
    cost = _measured(rows, arms, lambda x: x.cost_usd)
    costed = cost is not None
    tok_boot = resample(tokens, draws=draws, seed=seed)
    wall_boot = None if wall is None else resample(wall, draws=draws, seed=seed)
    cost_boot = None if cost is None else resample(cost, draws=draws, seed=seed)

    def diff(m: Matrix | None, b: Resamples | None, x: str, y: str) -> Estimate | None:
        if m is None or b is None:
            return None
        pt = float(at(m.mean(axis=0), x) - at(m.mean(axis=0), y))
        return _estimate(pt, at(b.means, x) - at(b.means, y), prob, n, "families")

    repaired_of = {name: rep for name, rep, _ in incumbents}
    versus: list[Versus] = []
    for i, k, arm in comparisons:
        x = repaired_of[i]
        s = diff(success, boot, x, arm)
        t = diff(tokens, tok_boot, x, arm)
        assert s is not None and t is not None
        versus.append(
            Versus(i, k, s, t, diff(wall, wall_boot, x, arm), diff(cost, cost_boot, x, arm))
        )
    verdicts = [
        _verdict(name, [v for v in versus if v.incumbent == name], costed, n)
        for name, _, _ in incumbents
    ]
    return RepairResult(
        repair=repair.id,
        pressure=repair.pressure,
        families=n,
        exact=boot.exact,
        resamples=int(prob.size),
        loss=est(loss),
        gain=est(gain),
        specific=est(spec),
        others={k: (p, est(pair)) for k, (p, pair) in others.items()},
        delta=delta,
        activation=activation,
        equivalence=equivalence,
        versus=versus,
        verdicts=verdicts,
        cost_basis="cost" if costed else "tokens",
    )


def _bound(
    f: Callable[[Matrix, str, str], Matrix], stressed: str, unstressed: str
) -> Callable[[Matrix], Matrix]:
    """``f`` with its two arms fixed (a closure per lane, not over the loop variable)."""
    return lambda m: f(m, stressed, unstressed)


def _verdict(name: str, rows: list[Versus], costed: bool, families: int) -> Verdict:
    if not rows:
        return Verdict(name, 0, None, None, None)
    nondominated = not any(_dominates(v.success, v.tokens, v.wall, v.cost) for v in rows)
    if families < FEW_CLUSTERS:
        return Verdict(name, len(rows), None, None, nondominated)

    def above(e: Estimate | None) -> bool | None:
        if e is None or e.low is None:
            return None  # withheld (no spread): not decided on it
        return e.low > 0

    def below(e: Estimate | None) -> bool | None:
        if e is None or e.high is None:
            return None
        return e.high < 0

    basis = [v.cost if costed else v.tokens for v in rows]
    return Verdict(
        name,
        len(rows),
        _every([above(v.success) for v in rows]),
        _every([below(b) for b in basis]),
        nondominated,
    )


def _every(values: Sequence[bool | None]) -> bool | None:
    """Three-valued "all": False if one is False, else None if one is undecided."""
    if any(v is False for v in values):
        return False
    if any(v is None for v in values):
        return None
    return True


def with_holm(results: Sequence[RepairResult]) -> list[RepairResult]:
    """The activation p values Holm-corrected across the repairs (familywise ALPHA); the
    decision taken only where every repair has enough families."""
    if not results:
        return []
    adjusted = holm([r.activation.p for r in results], alpha=ALPHA).adjusted
    out = []
    for r, a in zip(results, adjusted, strict=True):
        decided = None if r.few else bool(a <= ALPHA)
        out.append(replace(r, activation=replace(r.activation, holm=float(a), activates=decided)))
    return out


def analyse_repairs(
    records: Sequence[StudyRecord | RepairRow],
    repairs: Sequence[StudyRepair],
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> tuple[list[RepairResult], list[tuple[str, str]]]:
    """Every repair's result, Holm across them, and (id, why) of the repairs that could
    not be computed (fewer than two families). Drawn bootstraps use at least enough draws
    to keep the Monte Carlo error of a Holm p near .05 below 0.002."""
    draws = max(draws, draws_for_mc_se(ALPHA, max(1, len(repairs))))
    results: list[RepairResult] = []
    failed: list[tuple[str, str]] = []
    for repair in repairs:
        try:
            results.append(repair_result(records, repair, draws=draws, seed=seed))
        except ValueError as exc:
            failed.append((repair.id, str(exc)))
    return with_holm(results), failed


# --- the tables ---------------------------------------------------------------------------


def _cell(e: Estimate | None, *, scale: float = 100.0, unit: str = " pp", digits: int = 1) -> str:
    """``E unit [L, H]``, or ``E unit; <why no interval>`` (:func:`.estimates.cell`)."""
    return estimate_cell(e, missing=NOT_MEASURED, unit=unit, scale=scale, digits=digits)


def _sigma(e: Estimate | None) -> str:
    """Sigma, Sigma^k and Delta in points without the unit in the cell: their support is
    [-200, 200] (a difference of two differences), not a single difference's."""
    return _cell(e, unit="")


def _p(x: float | None) -> str:
    if x is None:
        return "-"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def _yes(x: bool | None, few: str) -> str:
    return few if x is None else ("yes" if x else "no")


def _few(r: RepairResult) -> str:
    if r.few:
        return f"not decided: too few families ({r.families} < {FEW_CLUSTERS})"
    return "not decided: an interval is withheld (no spread)"


Table = tuple[str, list[str], list[list[str]], str | None]

#: The note under the decision matrix: what did not enter, and why.
MATRIX_NOTE = (
    "Each incumbent's repaired lane against every other configuration at the stressed "
    "cell (the other incumbents' no-repair lanes and the listed switches). Wall time and "
    "cost enter the Pareto comparison and cost-superiority only when every record of the "
    "compared arms measured them; 'not measured' (null in the records) is never read "
    "as zero, and cost-superiority is then judged on "
    "tokens, marked '(tokens)'."
)


def _how(results: Sequence[RepairResult]) -> str:
    exact = all(r.exact for r in results)
    few = sorted({r.families for r in results if r.few})
    text = "Points (pp); 95% percentile family-cluster bootstrap, " + (
        "enumerated exactly (every multiset of the families): no seed, no Monte Carlo error."
        if exact
        else f"drawn ({max(r.resamples for r in results):,} resamples where not enumerated)."
    )
    if few:
        text += (
            f" With fewer than {FEW_CLUSTERS} families the percentile bootstrap under-covers: "
            "no interval is printed and no decision is taken; the p values are printed, read "
            "as a demonstration."
        )
    return text


def repair_tables(
    results: Sequence[RepairResult], failed: Sequence[tuple[str, str]] = ()
) -> list[Table]:
    """The repairs' tables as (title, header, rows, note)."""
    if not results and not failed:
        return []
    results = with_holm(results)  # idempotent: Holm across exactly these repairs
    how = _how(results) if results else None
    out: list[Table] = []
    if results:
        out.append(
            (
                "Repairs against switches and the other pressures' repairs (seed 4.3, 5.4): "
                "loss, stress gain, specificity and activation",
                [
                    "repair",
                    "pressure",
                    "L",
                    "Gamma",
                    "Sigma (pp)",
                    "p (activation)",
                    "Holm p",
                    "activates",
                    "families",
                ],
                [
                    [
                        r.repair,
                        r.pressure,
                        _cell(r.loss),
                        _cell(r.gain),
                        _sigma(r.specific),
                        _p(r.activation.p),
                        _p(r.activation.holm),
                        _yes(r.activation.activates, _few(r)),
                        str(r.families),
                    ]
                    for r in results
                ],
                f"{how} Activation: the intersection-union test of L > 0, Gamma > 0 and "
                "Sigma > 0 (the largest of three one-sided centred bootstrap p values), "
                f"Holm-corrected across the {len(results)} repair(s) at {ALPHA:g}. Sigma's "
                "support is [-200, 200] points.",
            )
        )
        spec_rows = []
        for r in results:
            if not r.others:
                spec_rows.append(
                    [
                        r.repair,
                        r.pressure,
                        _sigma(r.specific),
                        "-",
                        "-",
                        "-",
                        "not computed: no repair aimed at another pressure registered "
                        "on these cells",
                    ]
                )
            for k, (pressure, e) in r.others.items():
                spec_rows.append(
                    [
                        r.repair,
                        r.pressure,
                        _sigma(r.specific),
                        k,
                        pressure,
                        _sigma(e),
                        _sigma(r.delta),
                    ]
                )
        out.append(
            (
                "Specificity against the other pressures' repairs on the same cells "
                "(Sigma^k; Delta = Sigma - max_k Sigma^k)",
                [
                    "repair",
                    "pressure",
                    "Sigma (pp)",
                    "other repair k",
                    "aimed at",
                    "Sigma^k (pp)",
                    "Delta (pp)",
                ],
                spec_rows,
                "Bootstrap and withheld figures as in the first repairs table. Sigma^k is the "
                "gain repair k (aimed at another pressure) makes "
                "specific to this stress; configuration switches enter only the decision "
                "matrix. Support of Sigma, Sigma^k and Delta: [-200, 200] points.",
            )
        )
        out.append(
            (
                "Equivalence of the stress gain (two one-sided tests at 5%, seed 5.4)",
                [
                    "repair",
                    "Gamma",
                    "registered margin",
                    "p (TOST)",
                    "equivalent",
                    "smallest margin rejecting at 5%",
                ],
                [
                    [
                        r.repair,
                        _cell(r.gain),
                        "not registered"
                        if r.equivalence.margin is None
                        else f"±{100 * r.equivalence.margin:.1f} pp",
                        _p(r.equivalence.p),
                        "-"
                        if r.equivalence.margin is None
                        else _yes(r.equivalence.equivalent, _few(r)),
                        f"too few families ({r.families} < {FEW_CLUSTERS})"
                        if r.equivalence.smallest is None
                        else f"±{100 * r.equivalence.smallest:.1f} pp",
                    ]
                    for r in results
                ],
                "Bootstrap and withheld figures as in the first repairs table. p (TOST) = max "
                "of P*(Gamma* - Gamma >= Gamma + m) and P*(Gamma* - "
                "Gamma <= Gamma - m) for the registered margin m (repairs[i]."
                "equivalence_margin); the smallest margin is the infimum of the margins at "
                "which both tests reject at 5% (every larger one rejects).",
            )
        )
        matrix = [
            [
                r.repair,
                v.switch,
                _cell(v.success),
                _cell(v.tokens, scale=1.0, unit="", digits=0),
                NOT_MEASURED if v.wall is None else _cell(v.wall, scale=1.0, unit=" s", digits=3),
                NOT_MEASURED if v.cost is None else _cell(v.cost, scale=1.0, unit=" USD", digits=4),
                _yes(verdict.success_superior, _few(r)),
                _yes(verdict.cost_superior, _few(r))
                + ("" if r.cost_basis == "cost" else " (tokens)"),
                _yes(verdict.nondominated, "-"),
                v.incumbent,
            ]
            for r in results
            for verdict in r.verdicts
            for v in r.versus
            if v.incumbent == verdict.incumbent
        ]
        out.append(
            (
                "Decision matrix at the stressed cell (repaired lane minus switch)",
                [
                    "repair",
                    "switch",
                    "success",
                    "tokens",
                    "wall time",
                    "cost",
                    "success-superior",
                    "cost-superior",
                    "Pareto-nondominated",
                    "incumbent",
                ],
                matrix,
                MATRIX_NOTE,
            )
        )
        out.append(
            (
                "Decision matrix counts over the incumbents (x of N)",
                [
                    "repair",
                    "incumbents",
                    "success-superior",
                    "Pareto-nondominated",
                    "cost-superior",
                ],
                [_counts(r) for r in results],
                "N counts the incumbents with at least one switch; success- and "
                "cost-superiority read the 95% intervals (not decided below "
                f"{FEW_CLUSTERS} families), Pareto-nondominance the point estimates.",
            )
        )
    for repair, why in failed:
        out.append((f"Repair {repair}", [], [], why))
    return out


def _counts(r: RepairResult) -> list[str]:
    decided = [v for v in r.verdicts if v.switches]
    n = len(decided)

    def count(get: Callable[[Verdict], bool | None]) -> str:
        values = [get(v) for v in decided]
        if not n:
            return "no switch registered"
        if any(x is None for x in values):
            return _few(r)
        return f"{sum(bool(x) for x in values)} of {n}"

    cost = count(lambda v: v.cost_superior)
    if r.cost_basis != "cost" and n and not cost.startswith("not decided"):
        cost += " (tokens)"
    return [
        r.repair,
        str(n),
        count(lambda v: v.success_superior),
        count(lambda v: v.nondominated),
        cost,
    ]


def repairs_markdown(
    results: Sequence[RepairResult], failed: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """The repairs' tables as Markdown lines."""
    tables = repair_tables(results, failed)
    if not tables:
        return []
    lines: list[str] = []
    for i, (title, header, rows, note) in enumerate(tables):
        lines += [f"## {title}" if i == 0 else f"{title}:", ""]
        if header:
            lines += [*table(header, rows), ""]
        if note:
            lines += [note, ""]
    return lines
