"""Per-intent rows and the registered multiplicity rule.

Per-intent intervals are *listed, not flagged*, as the InvokeRank seed does:
each intent's paired difference with its paired bootstrap interval, and no
mark of significance. An intent with fewer than ``MIN_INTENT_TASKS`` (FEW_CLUSTERS,
10) tasks gets no interval: the row says "too few tasks" (``interval`` null,
``interval_note`` the reason), since the cluster bootstrap keeps its level from 10
clusters (issue 39), and an intent whose tasks all show the same difference says so
instead of printing "0.000 to 0.000". Claims about intents are made only through the
registered multiplicity rule over the registered family:

- ``per-intent``: one hypothesis per intent, tested with the primary test as
  registered on that intent's tasks (for ``e-bh``, the beta-mixture e-value of
  the intent's discordant pairs, with the stopping rule's prior if registered);
- ``secondary``: one hypothesis per secondary test (its p-value; for ``e-bh``
  its e-value, so only e-value tests can be rejected there). The primary test
  is not in the family: it keeps its full alpha (fixed-sequence gatekeeping).

``method: none`` rejects a member when its unadjusted p-value is at most ``q``.
Neither the per-intent rows nor the family's rejections change the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from prereg import stats
from prereg.registry.calibration import too_few_tasks
from prereg.registry.schema import Registration
from prereg.reports.model import (
    Discordant,
    FamilyMember,
    IntentRow,
    Interval,
    MultiplicityReport,
    Provenance,
    RunSet,
    TestReport,
)
from prereg.reports.pairs import BINARY_AGGREGATES, PairData, runset
from prereg.reports.registered.apply import run_test


def intents_in_order(pairs: PairData) -> list[str]:
    seen: list[str] = []
    for task in pairs.tasks:
        intent = pairs.intents[task]
        if intent not in seen:
            seen.append(intent)
    return seen


def _tasks_of(pairs: PairData, intent: str) -> list[str]:
    return [t for t in pairs.tasks if pairs.intents[t] == intent]


def _mean_runs(runs: dict[str, dict[int, bool]]) -> float | None:
    values = [v for by_repeat in runs.values() for v in by_repeat.values()]
    return float(np.mean(values)) if values else None


def intent_rows(reg: Registration, pairs: PairData, seed: int, level: float) -> list[IntentRow]:
    """One row per intent; registered when the multiplicity family is per-intent."""
    agg = reg.primary.aggregate if reg.primary.aggregate in BINARY_AGGREGATES else "majority"
    registered = reg.multiplicity is not None and reg.multiplicity.family == "per-intent"
    rows = []
    for intent in intents_in_order(pairs):
        sub = pairs.subset(_tasks_of(pairs, intent))
        yc, yt, prompts, runs = sub.long_form()
        interval = None
        difference = None
        few = too_few_tasks(sub.n)
        if yc.size:  # the bootstrap's estimate: the mean over tasks of each task's mean
            per_task = [np.mean(yt[prompts == k] - yc[prompts == k]) for k in np.unique(prompts)]
            difference = float(np.mean(per_task))
        if yc.size and few is None:
            res = stats.paired_bootstrap(
                yc,
                yt,
                prompts,
                runs_control=runs,
                runs_treatment=runs,
                draws=10_000,
                level=level,
                seed=seed,
            )
            difference = float(res.estimate)
            interval = Interval.resampled(res.low, res.high, level, res.method, unit="task")
            if interval.reason is not None:  # withheld: the row's note says why
                few, interval = interval.reason, None
        b, c = sub.discordant(agg)
        rows.append(
            IntentRow(
                intent=intent,
                tasks=sub.n,
                control_rate=_mean_runs(sub.control_runs),
                treatment_rate=_mean_runs(sub.treatment_runs),
                difference=difference,
                interval=interval,
                interval_note=few if yc.size else "no paired runs",
                discordant=Discordant(b=b, c=c, n=b + c),
                provenance=Provenance(
                    function="prereg.stats.paired_bootstrap",
                    parameters={
                        "draws": 10_000,
                        "level": level,
                        "seed": seed,
                        "runs": sub.run_label,
                        "discordant": f"per task, repeats aggregated by '{agg}'",
                    },
                    registration_field="multiplicity" if registered else None,
                    runs=sub.runset(),
                ),
            )
        )
    return rows


def adjust(
    method: stats.MultiplicityRule,
    values: Sequence[float],
    pvals: Sequence[float | None],
    q: float,
) -> tuple[list[float | None], list[bool]]:
    """(adjusted values, rejections) of a family by ``method``; for ``none`` (no adjustment)
    the raw p values, a member rejected when its p is at most ``q``."""
    result = method.apply(list(values), q)
    if result is None:
        return list(pvals), [p is not None and p <= q for p in pvals]
    return [float(a) for a in result.adjusted], [bool(r) for r in result.reject]


def multiplicity_report(
    reg: Registration,
    pairs: PairData,
    secondary: Sequence[TestReport],
    seed: int,
    prior: tuple[float, float],
) -> MultiplicityReport | None:
    rule = reg.multiplicity
    if rule is None:
        return None
    names: list[str] = []
    estimates: list[float | None] = []
    ns: list[int] = []
    pvals: list[float | None] = []
    evals: list[float | None] = []
    used_units: list[tuple[str, str, int]] = []
    takes_e = stats.MULTIPLICITY_METHODS[rule.method].takes == "e"
    if rule.family == "per-intent":
        agg = reg.primary.aggregate if reg.primary.aggregate in BINARY_AGGREGATES else "majority"
        for intent in intents_in_order(pairs):
            sub = pairs.subset(_tasks_of(pairs, intent))
            used_units.extend(sub.units)
            names.append(f"intent {intent}")
            ns.append(sub.n)
            if takes_e:
                b, c = sub.discordant(agg)
                e = stats.beta_mixture_evalue(b, c, prior=prior)
                evals.append(float(e.evalue))
                pvals.append(None)
                estimates.append((c - b) / sub.n if sub.n else None)
            else:
                rep = run_test(
                    reg.primary,
                    role="secondary",
                    field_name=f"multiplicity (intent {intent})",
                    pairs=sub,
                    seed=seed,
                    prior=prior,
                )
                pvals.append(rep.pvalue)
                evals.append(rep.evalue)
                estimates.append(rep.estimate)
        note = (
            f"one hypothesis per intent, each tested with the primary test "
            f"({reg.primary.test}) on that intent's tasks"
            if not takes_e
            else "one hypothesis per intent, beta-mixture e-value of its discordant pairs"
        )
    else:
        for test in secondary:
            names.append(f"{test.registration_field} ({test.test})")
            ns.append(test.n)
            pvals.append(test.pvalue)
            evals.append(test.evalue)
            estimates.append(test.estimate)
        used_units.extend(pairs.units)
        note = "one hypothesis per secondary test; the primary test keeps its full alpha"
    method = stats.MULTIPLICITY_METHODS[rule.method]
    if method.takes == "e":
        values = [e if e is not None else 0.0 for e in evals]
    else:
        values = [p if p is not None else 1.0 for p in pvals]
    function = method.function
    adjusted, rejects = adjust(method, values, pvals, rule.q)
    if takes_e and rule.family == "secondary":
        note += "; members without an e-value (e taken as 0) cannot be rejected by e-BH"
    members = [
        FamilyMember(
            hypothesis=names[i],
            n=ns[i],
            estimate=estimates[i],
            pvalue=pvals[i],
            evalue=evals[i],
            adjusted=adjusted[i],
            reject=rejects[i],
        )
        for i in range(len(names))
    ]
    dedup = list(dict.fromkeys(used_units))
    runs: RunSet = runset(dedup, pairs.filter_text)
    return MultiplicityReport(
        method=rule.method,
        q=rule.q,
        family=rule.family,
        members=members,
        n_rejected=int(sum(rejects)),
        note=note,
        provenance=Provenance(
            function=function,
            parameters={"q": rule.q, "m": len(members)},
            registration_field="multiplicity",
            runs=runs,
        ),
    )
