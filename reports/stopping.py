"""A registered stopping rule: the beta-mixture e-process and where it crossed.

The stream is the primary comparison's per-task paired outcomes (repeats
aggregated as the primary test registers) in the *planned task order* of the
split, the order fixed by the frozen corpus before any run. Using the order in
which runs happened to finish would make the path depend on scheduling; the
planned order is data-independent and reproducible.

When a stopping rule is registered it is the deciding procedure (see
:mod:`prereg.reports.verdict`): crossed in the registered direction reads
``supported``; crossed against it ``not_supported``; never crossed reads
``not_supported`` when crossing was reachable (at least ``min_prompts`` tasks,
and the observed number of discordant pairs, all one way, would have reached
the threshold) and ``inconclusive`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from prereg import stats
from prereg.registry.schema import Registration
from prereg.reports.model import Discordant, Provenance, StoppingReport
from prereg.reports.pairs import BINARY_AGGREGATES, PairData
from prereg.reports.verdict import Evidence, favoured_direction, read_superiority


def _aggregate(reg: Registration) -> str:
    agg = reg.primary.aggregate
    return agg if agg in BINARY_AGGREGATES else "majority"


def monitor(reg: Registration, pairs: PairData) -> stats.MonitorResult:
    """Run the registered monitor over ``pairs`` (in their task order)."""
    rule = reg.stopping
    assert rule is not None
    ctl, trt = pairs.per_task(_aggregate(reg))
    return stats.sequential_monitor(
        ctl, trt, threshold=rule.threshold, min_prompts=rule.min_prompts, prior=rule.prior
    )


def stopping_cut(reg: Registration, pairs: PairData, complete_prefix: Sequence[str]) -> int | None:
    """Tasks (a prefix of the planned order) the rule needs, if it crossed on that prefix.

    ``complete_prefix`` is the longest prefix of planned tasks whose every planned
    unit has a completed run. Returns None when the e-process does not cross there.
    """
    if reg.stopping is None or not complete_prefix:
        return None
    sub = pairs.subset(complete_prefix)
    if sub.n == 0:
        return None
    result = monitor(reg, sub)
    if not result.stopped or result.stop_at is None:
        return None
    stop_task = sub.tasks[result.stop_at - 1]
    return list(complete_prefix).index(stop_task) + 1


def stopping_report(reg: Registration, pairs: PairData) -> StoppingReport:
    rule = reg.stopping
    assert rule is not None
    control, treatment = pairs.control, pairs.treatment
    result = monitor(reg, pairs)
    b_all, c_all = pairs.discordant(_aggregate(reg))
    best = stats.beta_mixture_evalue(b_all + c_all, 0, prior=rule.prior)
    reachable = pairs.n >= rule.min_prompts and float(best.evalue) >= rule.threshold
    if result.stopped:
        direction = (result.c > result.b) - (result.c < result.b)
        evidence = Evidence(rejects=True, direction=direction, attainable=True)
    else:
        evidence = Evidence(
            rejects=False,
            direction=0,
            attainable=reachable,
            unattainable_reason=(
                f"the e-process could not reach {rule.threshold:g}: "
                + (
                    f"only {pairs.n} paired task(s), fewer than min_prompts {rule.min_prompts}"
                    if pairs.n < rule.min_prompts
                    else f"{b_all + c_all} discordant pair(s), even all one way, stay below it"
                )
            ),
        )
    favoured = favoured_direction(reg.primary.favours, reg.primary.sides, control, treatment)
    reading, reason = read_superiority(evidence, favoured, (control, treatment))
    if result.stopped:
        reason = f"the e-process crossed {rule.threshold:g} at task {result.stop_at}; " + reason
    return StoppingReport(
        rule=rule.rule,
        threshold=rule.threshold,
        min_prompts=rule.min_prompts,
        prior=list(rule.prior),
        order="planned task order of the split (frozen corpus)",
        n_stream=result.n_stream,
        crossed=result.stopped,
        stop_at=result.stop_at,
        evalue=result.evalue,
        max_evalue=result.max_evalue,
        pvalue=result.pvalue,
        discordant=Discordant(b=result.b, c=result.c, n=result.b + result.c),
        path=[float(v) for v in result.evalues],
        reading=reading,
        reason=reason,
        provenance=Provenance(
            function="prereg.stats.sequential_monitor",
            parameters={
                "threshold": rule.threshold,
                "min_prompts": rule.min_prompts,
                "prior": list(rule.prior),
                "aggregate": _aggregate(reg),
                "first": control,
                "second": treatment,
            },
            registration_field="stopping",
            runs=pairs.runset(),
        ),
    )
