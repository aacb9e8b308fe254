"""The registered control arms, each judged by its fixed rule (InvokeRank, 7.2, Figure 6).

Controls tell an instrument that works from one that does not; they never change
the registration's verdict. Every statistic comes from :mod:`prereg.stats`; the
rules below were fixed before any data and are applied mechanically:

- **placebo** (an arm identical to its reference): the paired prompt-and-run
  bootstrap (``prereg.stats.paired_bootstrap``, 10,000 draws, the registration's
  seed) of placebo minus reference on the registered outcome. *Pass* when the 95%
  interval covers 0. (At 95% a sound instrument still fails about one round in
  twenty.)
- **blinded** (the reference's metadata replaced by placeholders): on ``selected``
  (the first call went to the focal integration; positive prompts), the reference
  and blinded rates and the paired bootstrap of blinded minus reference. *Pass*
  when selection falls by at least half (blinded rate <= reference rate / 2) and
  the 95% upper bound of the change is below 0.
- **decoy** (an unrelated server added to the pool): decoy picks are runs of the
  decoy arm whose first call went to the added server, over every prompt (and
  split into positive and negative prompts). The Jeffreys interval
  (``prereg.stats.jeffreys_interval``) at 90% on counts deflated by the repeats'
  design effect (``prereg.stats.icc_binary`` with prompts as groups; rho = 1,
  each prompt counting once, when it cannot be estimated). *Fails only if* the
  lower bound exceeds 2%; the upper bounds say what the sample can vouch for.
- **clone_swap** (two copies under matched opaque labels, labels and listing
  order crossed in a balanced 2 x 2): among runs whose first call went to either
  copy, the pair share (copy a's share), the label bias (the share of the copy
  carrying the arm's first label) and the position bias (the share of the
  first-listed copy), each with a 90% Jeffreys interval deflated like the decoy's.
  *Pass* when the pair share's interval covers 50%. Label and position bias are
  reported separately, not judged.

A control whose statistic has no data (no completed run, or runs recorded
without the offer block) is ``not_measured``, never passed.

**Minimums.** Placebo and blinded rest on the paired bootstrap the primary analysis
uses, and are read with its minimum: over fewer than
:data:`prereg.stats.bootstrap.FEW_CLUSTERS` prompts (the clusters it resamples) the
primary test's decision "cannot be read" (:mod:`prereg.reports.registered.apply`: the
interval under-covers), and so the control reads "too few prompts": its
figures are shown, its verdict is ``not_measured`` with that reason, never pass or fail.
From the minimum up the rules above apply unchanged. (Decoy and clone swap read Jeffreys
intervals deflated by the design effect, not a bootstrap, and have no such minimum.)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg import stats
from prereg.experiments.controls import ControlName, clone_labels
from prereg.registry.schema import Registration
from prereg.reports.model import ControlReport, Interval, Provenance
from prereg.reports.observations import Obs
from prereg.reports.pairs import PairData, build_pairs, runset
from prereg.stats.bootstrap import FEW_CLUSTERS

PLACEBO_LEVEL = 0.95
BLINDED_LEVEL = 0.95
DECOY_LEVEL = 0.90
CLONE_LEVEL = 0.90
DECOY_FLOOR = 0.02
DRAWS = 10_000


def _f(value: Any) -> float | None:
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _pts(value: float | None) -> str:
    return "null" if value is None else f"{100 * value:+.1f}"


def _pct(value: float | None) -> str:
    return "null" if value is None else f"{100 * value:.1f}%"


class Context:
    """What every control needs: the registration, the runs, the tasks, the offers."""

    def __init__(
        self,
        reg: Registration,
        observations: Sequence[Obs],
        task_order: Sequence[str],
        intents: Mapping[str, str],
        offers: Mapping[str, Any],
    ) -> None:
        self.reg = reg
        self.observations = observations
        self.task_order = list(task_order)
        self.intents = dict(intents)
        self.offers = offers
        self.seed = reg.design.seed

    def runs(self, arm: str) -> list[Obs]:
        return [o for o in self.observations if o.arm == arm and o.ok]

    def servers(self, arm: str) -> list[dict[str, Any]]:
        offer = self.offers.get(arm)
        if offer is None:
            return []
        return [
            {
                "key": s.key,
                "surface": s.source,
                "role": s.role,
                "name": s.surface.name,
                "digest": s.digest,
                "snapshot_digest": s.surface.snapshot_digest,
                "transform": s.surface.transform,
            }
            for s in offer.every_server()
        ]


def control_reports(ctx: Context) -> list[ControlReport]:
    """One report per registered control arm, in registration order."""
    out = []
    for arm in ctx.reg.arms:
        if arm.control is None:
            continue
        reference = ctx.reg.reference_of(arm.id) or ""
        report = JUDGES[arm.control].judge(ctx, arm.id, reference)
        surfaces = {arm.id: ctx.servers(arm.id)}
        if reference:
            surfaces[reference] = ctx.servers(reference)
        out.append(report.model_copy(update={"surfaces": surfaces}))
    return out


# ---- placebo and blinded: paired differences ---------------------------------------------


def _paired(
    ctx: Context, arm: str, reference: str, outcome: str, level: float
) -> tuple[Any, Any, dict[str, Any]] | None:
    pairs = build_pairs(
        ctx.observations,
        reference,
        arm,
        outcome,
        ctx.task_order,
        ctx.intents,
        per_session=ctx.reg.design.repeats_per_run,
    )
    yc, yt, prompts, runs = pairs.long_form()
    if yc.size == 0:
        return None
    res = stats.paired_bootstrap(
        yc,
        yt,
        prompts,
        runs_control=runs,
        runs_treatment=runs,
        draws=DRAWS,
        level=level,
        seed=ctx.seed,
    )
    params = {
        "draws": DRAWS,
        "seed": ctx.seed,
        "level": level,
        "rows": int(yc.size),
        "prompts": pairs.n,
        "min_prompts": FEW_CLUSTERS,
        "runs": "repeat index of each arm",
    }
    return res, pairs, params


def too_few_prompts(prompts: int) -> str | None:
    """Why a bootstrap control over ``prompts`` prompts cannot be read, or None: the
    primary test's minimum (:data:`prereg.stats.bootstrap.FEW_CLUSTERS` clusters, as
    :mod:`prereg.reports.registered.apply` reads it), the same for the controls."""
    if prompts >= FEW_CLUSTERS:
        return None
    return (
        f"too few prompts: {prompts} prompts, fewer than {FEW_CLUSTERS}, the fewest the "
        "primary test reads a paired bootstrap over (over fewer clusters its interval "
        "under-covers), so the control can neither pass nor fail"
    )


def _empty(
    ctx: Context,
    arm: str,
    reference: str,
    control: ControlName,
    statistic: str,
    outcome: str,
    function: str,
    why: str,
) -> ControlReport:
    return ControlReport(
        arm=arm,
        control=control,
        reference=reference or None,
        check=JUDGES[control].check,
        statistic=statistic,
        outcome=outcome,
        estimate=None,
        summary="no data",
        interval=None,
        rule=JUDGES[control].rule,
        verdict="not_measured",
        reason=why,
        provenance=Provenance(
            function=function, registration_field="arms", runs=runset([], "none")
        ),
    )


def _placebo(ctx: Context, arm: str, reference: str) -> ControlReport:
    outcome = ctx.reg.outcome
    statistic = f"placebo minus reference, {outcome} (points)"
    got = _paired(ctx, arm, reference, outcome, PLACEBO_LEVEL)
    if got is None:
        return _empty(
            ctx,
            arm,
            reference,
            "placebo",
            statistic,
            outcome,
            "prereg.stats.paired_bootstrap",
            f"no task has a measured '{outcome}' in both arms",
        )
    res, pairs, params = got
    low, high = _f(res.low), _f(res.high)
    few = too_few_prompts(pairs.n)
    if low is None or high is None:
        verdict, reason = "not_measured", "the bootstrap interval is undefined"
    elif few is not None:
        verdict, reason = "not_measured", few
    elif low <= 0.0 <= high:
        verdict, reason = (
            "pass",
            (f"the {PLACEBO_LEVEL:.0%} interval {_pts(low)} to {_pts(high)} points covers 0"),
        )
    else:
        verdict, reason = (
            "fail",
            (
                f"the {PLACEBO_LEVEL:.0%} interval {_pts(low)} to "
                f"{_pts(high)} points excludes 0: two identical arms differ"
            ),
        )
    return ControlReport(
        arm=arm,
        control="placebo",
        reference=reference,
        check=JUDGES["placebo"].check,
        statistic=statistic,
        outcome=outcome,
        estimate=_f(res.estimate),
        summary=f"{_pts(_f(res.estimate))} points over {pairs.n} prompts",
        interval=Interval(low=low, high=high, level=PLACEBO_LEVEL, method=res.method),
        rule=JUDGES["placebo"].rule,
        verdict=verdict,
        reason=reason,
        details={"prompts": pairs.n, "rows": params["rows"], "min_prompts": FEW_CLUSTERS},
        provenance=Provenance(
            function="prereg.stats.paired_bootstrap",
            parameters=params,
            registration_field="arms",
            runs=pairs.runset(),
        ),
    )


def _rate(pairs: PairData, runs: Mapping[str, Mapping[int, bool]]) -> tuple[float | None, int, int]:
    values = [v for task in pairs.tasks for v in runs[task].values()]
    if not values:
        return None, 0, 0
    ji = stats.jeffreys_interval(int(sum(values)), len(values), level=BLINDED_LEVEL)
    return _f(ji.estimate), int(sum(values)), len(values)


def _blinded(ctx: Context, arm: str, reference: str) -> ControlReport:
    outcome = "selected"
    statistic = "selection with metadata, then blinded (%)"
    got = _paired(ctx, arm, reference, outcome, BLINDED_LEVEL)
    if got is None:
        return _empty(
            ctx,
            arm,
            reference,
            "blinded",
            statistic,
            outcome,
            "prereg.stats.paired_bootstrap",
            "no positive prompt has a measured selection in both arms",
        )
    res, pairs, params = got
    ref_rate, ref_k, ref_n = _rate(pairs, pairs.control_runs)
    blind_rate, blind_k, blind_n = _rate(pairs, pairs.treatment_runs)
    low, high = _f(res.low), _f(res.high)
    change = _f(res.estimate)
    summary = f"{_pct(ref_rate)} to {_pct(blind_rate)}; change {_pts(change)} points"
    few = too_few_prompts(pairs.n)
    if high is None or ref_rate is None or blind_rate is None:
        verdict, reason = "not_measured", "the bootstrap interval is undefined"
    elif few is not None:
        verdict, reason = "not_measured", few
    else:
        halves = blind_rate <= ref_rate / 2.0
        below = high < 0.0
        if halves and below:
            verdict, reason = (
                "pass",
                (
                    f"selection fell from {_pct(ref_rate)} to "
                    f"{_pct(blind_rate)} (by at least half) and the 95% "
                    f"upper bound {_pts(high)} points is below 0"
                ),
            )
        else:
            why = []
            if not halves:
                why.append(
                    f"selection fell from {_pct(ref_rate)} to {_pct(blind_rate)}, by less than half"
                )
            if not below:
                why.append(f"the 95% upper bound {_pts(high)} points is not below 0")
            verdict, reason = (
                "fail",
                "; ".join(why)
                + (": the runs do not depend on the metadata as the control requires"),
            )
    return ControlReport(
        arm=arm,
        control="blinded",
        reference=reference,
        check=JUDGES["blinded"].check,
        statistic=statistic,
        outcome=outcome,
        estimate=change,
        summary=summary,
        interval=Interval(low=low, high=high, level=BLINDED_LEVEL, method=res.method),
        rule=JUDGES["blinded"].rule,
        verdict=verdict,
        reason=reason,
        details={
            "reference_rate": ref_rate,
            "reference_selected": ref_k,
            "reference_runs": ref_n,
            "blinded_rate": blind_rate,
            "blinded_selected": blind_k,
            "blinded_runs": blind_n,
            "prompts": pairs.n,
            "min_prompts": FEW_CLUSTERS,
            "rates_function": "prereg.stats.jeffreys_interval(...).estimate",
        },
        provenance=Provenance(
            function="prereg.stats.paired_bootstrap",
            parameters=params,
            registration_field="arms",
            runs=pairs.runset(),
        ),
    )


# ---- decoy and clone_swap: shares of first picks ------------------------------------------


def _share(values: Sequence[bool], groups: Sequence[str], level: float) -> dict[str, Any]:
    """Jeffreys interval of a share, deflated by the design effect of prompts as clusters."""
    n = len(values)
    if n == 0:
        return {
            "successes": 0,
            "trials": 0,
            "estimate": None,
            "low": None,
            "high": None,
            "deff": None,
            "rho": None,
            "rho_source": "no runs",
        }
    sizes = list(Counter(groups).values())
    if all(size <= 1 for size in sizes):
        rho, source = 0.0, "not needed: one run per prompt (DEFF = 1)"
    else:
        rho = stats.icc_binary(np.asarray(values, dtype=float), np.asarray(groups))
        source = "estimated (ANOVA, prompts as groups)"
        if math.isnan(rho):
            rho, source = 1.0, "default 1.0 (not estimable: each prompt counts once)"
    deff = float(stats.design_effect(sizes, rho))
    ji = stats.jeffreys_interval(int(sum(values)), n, level=level, deff=deff)
    return {
        "successes": int(sum(values)),
        "trials": n,
        "estimate": _f(ji.estimate),
        "low": _f(ji.low),
        "high": _f(ji.high),
        "deff": deff,
        "rho": rho,
        "rho_source": source,
        "effective_trials": _f(ji.effective_trials),
        "method": ji.method,
    }


def _recorded(runs: Sequence[Obs]) -> list[Obs]:
    return [o for o in runs if o.offer is not None]


def _decoy(ctx: Context, arm: str, reference: str) -> ControlReport:
    spec = next(a for a in ctx.reg.arms if a.id == arm)
    decoy = spec.decoy or ""
    statistic = f"decoy picks (first call to '{decoy}')"
    runs = _recorded(ctx.runs(arm))
    if not runs:
        return _empty(
            ctx,
            arm,
            reference,
            "decoy",
            statistic,
            "first_server",
            "prereg.stats.jeffreys_interval",
            "no completed run of the decoy arm records its offer",
        )
    picks = [o.first_server == decoy for o in runs]
    overall = _share(picks, [o.task_id for o in runs], DECOY_LEVEL)
    by_polarity = {}
    for polarity in ("positive", "negative"):
        sub = [o for o in runs if o.polarity == polarity]
        by_polarity[polarity] = {
            **_share([o.first_server == decoy for o in sub], [o.task_id for o in sub], DECOY_LEVEL),
            "prompts": len({o.task_id for o in sub}),
        }
    low = overall["low"]
    if low is not None and low > DECOY_FLOOR:
        verdict, reason = (
            "fail",
            (
                f"the decoy was picked in {overall['successes']} of "
                f"{overall['trials']} runs; the 90% lower bound "
                f"{_pct(low)} exceeds 2%"
            ),
        )
    else:
        verdict, reason = (
            "pass",
            (
                f"{overall['successes']} decoy picks in "
                f"{overall['trials']} runs; the 90% lower bound "
                f"{_pct(low)} does not exceed 2%"
            ),
        )
    pos, neg = by_polarity["positive"], by_polarity["negative"]
    summary = (
        f"{overall['successes']} of {overall['trials']} runs; {pos['successes']} of "
        f"{pos['trials']} on {pos['prompts']} positive and {neg['successes']} of "
        f"{neg['trials']} on {neg['prompts']} negative prompts; upper 90% bounds "
        f"{_pct(pos['high'])} and {_pct(neg['high'])}"
    )
    units = [o.unit for o in runs]
    return ControlReport(
        arm=arm,
        control="decoy",
        reference=reference,
        check=JUDGES["decoy"].check,
        statistic=statistic,
        outcome="first_server",
        estimate=overall["estimate"],
        summary=summary,
        interval=Interval(
            low=overall["low"],
            high=overall["high"],
            level=DECOY_LEVEL,
            method=str(overall.get("method", "")),
        ),
        rule=JUDGES["decoy"].rule,
        verdict=verdict,
        reason=reason,
        details={
            "decoy": decoy,
            "all": overall,
            "positive": pos,
            "negative": neg,
            "floor": DECOY_FLOOR,
        },
        provenance=Provenance(
            function="prereg.stats.jeffreys_interval",
            registration_field="arms",
            parameters={
                "level": DECOY_LEVEL,
                "deff": overall["deff"],
                "rho": overall["rho"],
                "design_effect": "prereg.stats.design_effect(runs per prompt, rho)",
                "icc": "prereg.stats.icc_binary(picks, prompt)",
            },
            runs=runset(units, f"arm {arm}; status ok; offer recorded; every prompt"),
        ),
    )


def _clone(ctx: Context, arm: str, reference: str) -> ControlReport:

    spec = next(a for a in ctx.reg.arms if a.id == arm)
    copy_a, copy_b = f"{spec.surface}:a", f"{spec.surface}:b"
    first_label = clone_labels(ctx.seed, arm)[0]
    statistic = "copy a's share of the pair's first picks"
    runs = [
        o
        for o in _recorded(ctx.runs(arm))
        if o.clone is not None and o.first_server in (copy_a, copy_b)
    ]
    if not runs:
        return _empty(
            ctx,
            arm,
            reference,
            "clone_swap",
            statistic,
            "first_server",
            "prereg.stats.jeffreys_interval",
            "no completed run's first call went to either copy",
        )
    groups = [o.task_id for o in runs]
    picked_a = [o.first_server == copy_a for o in runs]
    labels = [
        (o.clone or {}).get("label_a") if a else (o.clone or {}).get("label_b")
        for o, a in zip(runs, picked_a, strict=True)
    ]
    firsts = [
        (o.clone or {}).get("first") == ("a" if a else "b")
        for o, a in zip(runs, picked_a, strict=True)
    ]
    pair = _share(picked_a, groups, CLONE_LEVEL)
    label = _share([lab == first_label for lab in labels], groups, CLONE_LEVEL)
    position = _share(firsts, groups, CLONE_LEVEL)
    cells: dict[str, dict[str, int]] = {}
    for o, a in zip(runs, picked_a, strict=True):
        cell = o.clone or {}
        name = f"a={cell.get('label_a')}, b={cell.get('label_b')}, {cell.get('first')} listed first"
        entry = cells.setdefault(name, {"a": 0, "b": 0})
        entry["a" if a else "b"] += 1
    low, high = pair["low"], pair["high"]
    if low is not None and high is not None and low <= 0.5 <= high:
        verdict, reason = (
            "pass",
            (
                f"copy a won {pair['successes']} of {pair['trials']} pair "
                f"picks; the 90% interval {_pct(low)} to {_pct(high)} "
                "covers 50%"
            ),
        )
    else:
        verdict, reason = (
            "fail",
            (
                f"copy a won {pair['successes']} of {pair['trials']} pair "
                f"picks; the 90% interval {_pct(low)} to {_pct(high)} "
                "excludes 50%: the host tells identical servers apart"
            ),
        )
    summary = (
        f"pair share {_pct(pair['estimate'])} of {pair['trials']} picks; label bias "
        f"({first_label}) {_pct(label['estimate'])} ({_pct(label['low'])} to "
        f"{_pct(label['high'])}); position bias (listed first) "
        f"{_pct(position['estimate'])} ({_pct(position['low'])} to "
        f"{_pct(position['high'])})"
    )
    return ControlReport(
        arm=arm,
        control="clone_swap",
        reference=reference,
        check=JUDGES["clone_swap"].check,
        statistic=statistic,
        outcome="first_server",
        estimate=pair["estimate"],
        summary=summary,
        interval=Interval(
            low=low, high=high, level=CLONE_LEVEL, method=str(pair.get("method", ""))
        ),
        rule=JUDGES["clone_swap"].rule,
        verdict=verdict,
        reason=reason,
        details={
            "pair_share": pair,
            "label_bias": {**label, "label": first_label},
            "position_bias": position,
            "cells": cells,
            "copies": [copy_a, copy_b],
        },
        provenance=Provenance(
            function="prereg.stats.jeffreys_interval",
            registration_field="arms",
            parameters={
                "level": CLONE_LEVEL,
                "deff": pair["deff"],
                "rho": pair["rho"],
                "design_effect": "prereg.stats.design_effect(picks per prompt, rho)",
                "icc": "prereg.stats.icc_binary(indicator, prompt)",
            },
            runs=runset(
                [o.unit for o in runs], f"arm {arm}; status ok; first call to {copy_a} or {copy_b}"
            ),
        ),
    )


# ---- the table: one judge per registrable control -------------------------------------------


@dataclass(frozen=True)
class ControlJudge:
    """How the report judges one kind of control arm (InvokeRank, Figure 6)."""

    #: the check's name in the report
    check: str
    #: the fixed rule, as printed
    rule: str
    judge: Callable[[Context, str, str], ControlReport]


#: Keyed by :data:`prereg.experiments.controls.CONTROLS`'s names (a test checks they agree).
JUDGES: Mapping[ControlName, ControlJudge] = {
    "placebo": ControlJudge(
        "Placebo",
        "95% interval of the difference covers 0",
        _placebo,
    ),
    "blinded": ControlJudge(
        "Blinded metadata",
        "selection falls by half and the 95% upper bound of the change is below 0",
        _blinded,
    ),
    "decoy": ControlJudge(
        "Decoy",
        "fails only if the lower bound of the 90% interval exceeds 2%",
        _decoy,
    ),
    "clone_swap": ControlJudge(
        "Clone swap",
        "the 90% interval of the pair share covers 50%",
        _clone,
    ),
}
