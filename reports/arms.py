"""Per-arm outcome rates: Jeffreys intervals deflated by the repeats' design effect.

Repeats of a prompt are correlated, so an arm's runs carry less information than
their count. Following the InvokeRank method (4, steps 2, 3 and 8) the rate's
interval is Jeffreys on counts deflated by Kish's design effect,
DEFF = 1 + (Kbar - 1) rho, with rho the one-way ANOVA intraclass correlation of
the arm's outcomes grouped by task.

When the arm cannot estimate rho (one repeat, no variation, fewer than two
tasks) the estimate pooled over all the registration's arms (groups = arm x task) is used;
failing that, rho = 1, which counts each task once: the conservative choice
(InvokeRank 7.4: "a cell at 1 counts each prompt once, which is conservative";
we do not borrow its host-specific defaults 0.6/0.8, which were fitted to
another instrument). With one repeat per task DEFF is 1 whatever rho is.

Interval level: 1 - alpha of the primary test (two-sided 95% at alpha 0.05),
the level InvokeRank uses for experiment decisions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from prereg import stats
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.reports.model import ArmConfiguration, ArmReport, Interval, Provenance
from prereg.reports.observations import Obs
from prereg.reports.pairs import runset


def _icc(values: Sequence[bool], groups: Sequence[str]) -> float:
    if len(values) < 2:
        return math.nan
    return stats.icc_binary(np.asarray(values, dtype=float), np.asarray(groups))


def pooled_icc(observations: Sequence[Obs], arms: Sequence[str], outcome: str) -> float:
    values, groups = [], []
    for o in observations:
        if o.arm in arms:
            v = o.outcome(outcome)
            if v is not None:
                values.append(v)
                groups.append(f"{o.arm}\x00{o.task_id}")
    return _icc(values, groups)


def denominators(infrastructure: str, attempts: int | None, counted: int) -> str:
    """The registered infrastructure policy and what it did to the denominators, in words
    (the report states it next to completeness)."""
    if infrastructure == "count_as_failure":
        return (
            f"infrastructure failures: count_as_failure after {attempts} attempt(s) "
            f"(intention to treat): {counted} unit(s) counted as failures, kept in every "
            "rate, pair and test denominator; units with attempts left stay missing"
        )
    return (
        "infrastructure failures: retry: infra_error records are left out of every "
        "denominator and their units stay missing until a run completes"
    )


def configuration(reg: Registration, arm_id: str) -> ArmConfiguration:
    """The arm's resolved configuration as the report states it."""
    config = arm_config(reg, arm_id)
    return ArmConfiguration(**config.as_json(), digest=config.digest())


def arm_report(
    reg: Registration,
    arm_id: str,
    observations: Sequence[Obs],
    infra: Sequence[Obs],
    planned: int,
    outcome: str,
    level: float,
    pooled_rho: float,
) -> ArmReport:
    arm = next(a for a in reg.arms if a.id == arm_id)
    mine = [o for o in observations if o.arm == arm_id]
    measured = [o for o in mine if o.outcome(outcome) is not None]
    values = [bool(o.outcome(outcome)) for o in measured]
    groups = [o.task_id for o in measured]
    sizes = list(Counter(groups).values()) or [0]
    successes = int(sum(values))
    trials = len(values)
    kbar_one = all(s <= 1 for s in sizes)
    rho = _icc(values, groups)
    if kbar_one:
        source = "not needed: one measured run per task (DEFF = 1)"
        rho_used = 0.0 if math.isnan(rho) else rho
    elif not math.isnan(rho):
        source = "estimated from this arm's repeats (ANOVA, prompts as groups)"
        rho_used = rho
    elif not math.isnan(pooled_rho):
        source = "pooled over all arms, groups arm x task (this arm could not estimate it)"
        rho_used = pooled_rho
    else:
        source = "default 1.0 (conservative: each task counts once; not estimable)"
        rho_used = 1.0
    deff = float(stats.design_effect(sizes, rho_used)) if trials else 1.0
    ji = stats.jeffreys_interval(successes, trials, level=level, deff=deff)
    units = [o.unit for o in measured]
    arm_infra = [o for o in infra if o.arm == arm_id]
    ok_runs = [o for o in mine if o.ok]  # ``mine`` also holds units counted as failures
    costs = [o.cost_usd for o in [*ok_runs, *arm_infra] if o.cost_usd is not None]
    return ArmReport(
        id=arm_id,
        surface=arm.surface,
        control=arm.control,
        configuration=configuration(reg, arm_id),
        outcome=outcome,
        planned_runs=planned,
        runs=len(ok_runs) + len(arm_infra),
        runs_ok=len(ok_runs),
        infra_errors=len(arm_infra),
        counted_as_failure=len(mine) - len(ok_runs),
        measured=trials,
        successes=successes,
        rate=(successes / trials) if trials else None,
        # no measured run: no interval either (null, never the uninformative [0, 1])
        interval=Interval(
            low=float(ji.low) if trials else None,
            high=float(ji.high) if trials else None,
            level=level,
            method=ji.method,
        ),
        icc=None if math.isnan(rho) else rho,
        icc_source=source,
        design_effect=deff,
        effective_trials=float(ji.effective_trials),
        models_requested=sorted({o.model_requested for o in mine if o.model_requested}),
        models_returned=sorted({o.model_returned for o in mine if o.model_returned}),
        spend_usd=float(sum(costs)) if costs else None,
        provenance=Provenance(
            function="prereg.stats.jeffreys_interval",
            parameters={
                "successes": successes,
                "trials": trials,
                "level": level,
                "deff": deff,
                "rho": rho_used,
                "design_effect": "prereg.stats.design_effect(runs per task, rho)",
                "icc": "prereg.stats.icc_binary(outcomes, task)",
            },
            registration_field="arms",
            runs=runset(
                units,
                f"arm {arm_id}; status ok"
                + (
                    "; units counted as failures (infrastructure)"
                    if len(mine) > len(ok_runs)
                    else ""
                )
                + f"; outcome '{outcome}' measured",
            ),
        ),
    )
