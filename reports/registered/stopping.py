"""A registered stopping rule: the beta-mixture e-process and where it crossed.

The stream is the primary comparison's per-task paired outcomes (repeats
aggregated as the primary test registers) in the *registered stopping order*
(:func:`prereg.registry.stream_order.stream_order`): a seeded random permutation of
the split's tasks drawn from ``design.seed``, fixed by the digest before any run.
The corpus order would let one intent's tasks (listed together) decide alone; the
order in which runs happened to finish would make the path depend on scheduling.
The monitor and the completeness cut read the same order.

When a stopping rule is registered it is the deciding procedure (see
:mod:`prereg.reports.registered.verdict`): crossed in the registered direction reads
``supported``; crossed against it ``not_supported``; never crossed reads
``not_supported`` when crossing was reachable (at least ``min_prompts`` tasks,
and the observed number of discordant pairs, all one way, would have reached
the threshold) and ``inconclusive`` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from prereg import stats
from prereg.registry.schema import Registration
from prereg.registry.stream_order import describe, stream_order
from prereg.reports.model import Discordant, Provenance, StoppingReport
from prereg.reports.pairs import BINARY_AGGREGATES, PairData
from prereg.reports.registered.verdict import Evidence, favoured_direction, read_superiority


def _aggregate(reg: Registration) -> str:
    agg = reg.primary.aggregate
    return agg if agg in BINARY_AGGREGATES else "majority"


def ordered_tasks(reg: Registration, tasks: Sequence[str]) -> list[str]:
    """``tasks`` in the registered stopping order (seeded by ``design.seed``)."""
    return stream_order(tasks, reg.design.seed)


def monitor(reg: Registration, pairs: PairData) -> tuple[stats.MonitorResult, list[str]]:
    """Run the registered monitor over ``pairs`` in the registered stopping order;
    returns the result and the paired tasks in the order the monitor read them."""
    rule = reg.stopping
    assert rule is not None
    order = ordered_tasks(reg, pairs.tasks)
    position = {task: i for i, task in enumerate(pairs.tasks)}
    index = np.array([position[t] for t in order], dtype=np.intp)
    ctl, trt = pairs.per_task(_aggregate(reg))
    result = stats.sequential_monitor(
        ctl[index] if index.size else ctl,
        trt[index] if index.size else trt,
        threshold=rule.threshold,
        min_prompts=rule.min_prompts,
        prior=rule.prior,
    )
    return result, order


def stopping_cut(
    reg: Registration, pairs: PairData, planned: Sequence[str], complete: Iterable[str]
) -> int | None:
    """Tasks (a prefix of the registered stopping order) the rule needs, if it crossed
    on that prefix.

    ``planned`` are the split's tasks, ``complete`` those whose every planned unit has a
    completed run; the prefix is the longest run of complete tasks at the head of the
    stopping order of ``planned``. Returns None when the e-process does not cross there.
    """
    if reg.stopping is None:
        return None
    done = set(complete)
    prefix: list[str] = []
    for task in ordered_tasks(reg, planned):
        if task not in done:
            break
        prefix.append(task)
    sub = pairs.subset(prefix)
    if sub.n == 0:
        return None
    result, order = monitor(reg, sub)
    if not result.stopped or result.stop_at is None:
        return None
    return prefix.index(order[result.stop_at - 1]) + 1


def stopping_report(reg: Registration, pairs: PairData) -> StoppingReport:
    rule = reg.stopping
    assert rule is not None
    control, treatment = pairs.control, pairs.treatment
    result, _ = monitor(reg, pairs)
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
        order=describe(reg.design.seed),
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
                "order": f"prereg.registry.stream_order.stream_order(tasks, {reg.design.seed})",
            },
            registration_field="stopping",
            runs=pairs.runset(),
        ),
    )
