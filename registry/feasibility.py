"""The feasibility gate: can the registered design answer its question as registered?

Checked at ``register``. A design that cannot is still recorded (what was believed
beforehand matters) but is marked not runnable in the ledger; ``run`` refuses it and
``analyse`` reports the pre-committed verdict ``not_runnable``. Three checks:

1. **The registered MDE** (``plan:``): with the prompts the split holds and the
   registered repeats as runs per arm (with ``design.sessions`` S >= 2: the S sessions,
   the between-run component being one per session), :func:`prereg.stats.mde_paired`
   must reach ``plan.mde``.
2. **Calibration of the primary test** (issue 14), for a confirmatory registration: the
   primary test is simulated on the registration's own design
   (:func:`prereg.registry.calibration.calibrate_registration`, scope "primary":
   :data:`GATE_SIMS` data sets per scenario, seeded with ``design.seed``, the planning
   figures of ``plan:`` or the documented defaults, the between-run component included).
   Not runnable when its type I error exceeds alpha by more than the Monte Carlo error
   (the estimate above alpha + 2 standard errors at alpha), or when the interval it
   prints under-covers by more than :data:`COVERAGE_SLACK` (2 points) beyond that error,
   with no effect or at the planned effect. The stopping rule, when registered, is
   judged the same way against its nominal 1/threshold.
3. **Few clusters**: the cluster bootstrap (``paired_bootstrap``: a bootstrap-SE
   interval with Student t critical values on n - 1 degrees of freedom) keeps its level
   from :data:`FEW_CLUSTERS` (10) resampling units (tasks, clusters or intents) up; below,
   its coverage is not established (the worst of 27 clustered binary designs covers 0.905
   at 8 clusters and 0.865 at 6 for a nominal 0.95, few units giving few distinct
   resamples and a t factor resting on a noisy variance; bench/cluster_coverage.py
   --few), and the report reads such a test as "too few clusters". A confirmatory
   registration whose primary is one (a test of two arms or of a contrast) is not
   runnable; any registered one (primary, secondary or a registered contrast, any
   registration) is warned of.

Exploratory registrations are not simulated at register (it would slow every pilot);
``prereg calibrate`` gives their table. The result (a dict, or None when there is
nothing to record) is frozen with the registration; every reason names the test and the
figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prereg.core.errors import BadInput
from prereg.experiments import Task
from prereg.registry.calibration import SplitTasks, calibrate_registration, runs_per_arm
from prereg.registry.schema import Registration
from prereg.stats import mde_paired
from prereg.stats.bootstrap import FEW_CLUSTERS

#: simulated data sets per scenario for the gate's calibration of the primary test
GATE_SIMS = 1000
#: an interval may fall short of nominal by this much (beyond Monte Carlo error)
COVERAGE_SLACK = 0.02
#: Monte Carlo standard errors allowed before a figure counts as worse than nominal
GATE_Z = 2.0


def _mde(registration: Registration, n_prompts: int) -> dict[str, Any]:
    """The registered-MDE check (``plan:``), or its fields empty without a plan."""
    plan = registration.plan
    runs = runs_per_arm(registration)
    # with replicate sessions, the runs are the sessions (only then the key is written:
    # a design without sessions records exactly what it recorded before)
    sessions = registration.design.sessions
    extra: dict[str, Any] = (
        {"sessions": sessions, "repeats": registration.design.repeats} if sessions > 1 else {}
    )
    if plan is None:
        return {
            "prompts": n_prompts,
            "runs_per_arm": runs,
            **extra,
            "alpha": registration.primary.alpha,
            "power": None,
            "sigma_d": None,
            "sigma_run": None,
            "registered_mde": None,
            "achievable_mde": None,
            "mde_reached": None,
        }
    alpha = plan.alpha if plan.alpha is not None else registration.primary.alpha
    achievable = float(
        mde_paired(
            plan.sigma_d,
            n_prompts,
            alpha=alpha,
            power=plan.power,
            sigma_run=plan.sigma_run,
            runs_per_arm=runs,
        )
    )
    return {
        "prompts": n_prompts,
        "runs_per_arm": runs,
        **extra,
        "alpha": alpha,
        "power": plan.power,
        "sigma_d": plan.sigma_d,
        "sigma_run": plan.sigma_run,
        "registered_mde": plan.mde,
        "achievable_mde": achievable,
        "mde_reached": achievable <= plan.mde + 1e-12,
    }


def _units(outcome: str, unit: str, split: SplitTasks) -> int | None:
    """Resampling units a test sees (None when the split's labels are not known)."""
    indices = list(range(len(split.ids)))
    if outcome != "success":  # positive tasks only
        if split.positive is None:
            return None
        indices = [i for i, positive in enumerate(split.positive) if positive]
    labels = split.labels(unit)
    if labels is None:
        return None
    return len({labels[i] for i in indices})


def _bootstraps(registration: Registration) -> list[tuple[str, str, str]]:
    """(where, outcome, unit) of every registered cluster bootstrap (``paired_bootstrap``):
    tests of two arms or of a contrast, and the registered contrasts the report prints."""
    found: list[tuple[str, str, str]] = []
    specs = [("primary", registration.primary)] + [
        (f"secondary[{i}]", s) for i, s in enumerate(registration.secondary)
    ]
    by_id = {c.id: c for c in registration.contrasts}
    for where, spec in specs:
        if spec.test != "paired_bootstrap":
            continue
        named = by_id.get(spec.contrast) if spec.contrast is not None else None
        outcome = spec.outcome or (named.outcome if named else None) or registration.outcome
        found.append((where, outcome, spec.unit))
    for i, contrast in enumerate(registration.contrasts):
        if contrast.test == "paired_bootstrap":
            outcome = contrast.outcome or registration.outcome
            found.append((f"contrasts[{i}] {contrast.id}", outcome, contrast.unit))
    return found


def _few_clusters(registration: Registration, split: SplitTasks) -> list[tuple[str, str]]:
    """(where, message) for each registered cluster bootstrap over too few units."""
    found = []
    for where, outcome, unit in _bootstraps(registration):
        units = _units(outcome, unit, split)
        if units is None or units >= FEW_CLUSTERS:
            continue
        found.append(
            (
                where,
                f"{where} test paired_bootstrap: a cluster bootstrap over {units} "
                f"{unit}(s), fewer than {FEW_CLUSTERS}, does not keep its level (its "
                f"interval covers as claimed from {FEW_CLUSTERS} resampled units up); the "
                "report reads it as 'too few clusters'",
            )
        )
    return found


def _judge(row: dict[str, Any]) -> str | None:
    """Why a calibrated row of the primary makes the design not runnable, or None."""
    nominal, estimate, sims = row["nominal"], row["estimate"], row["sims"]
    if nominal is None or estimate is None or not math.isfinite(estimate):
        return None
    se = math.sqrt(nominal * (1.0 - nominal) / sims) if 0.0 < nominal < 1.0 else 0.0
    what = f"{row['label']} test {row['test']}"
    scenario = "with no effect" if row["scenario"] == "null" else f"({row['scenario']})"
    if row["quantity"] == "type I error" and estimate > nominal + GATE_Z * se:
        return (
            f"{what}: simulated type I error {estimate:.3f} (MC SE {row['mc_se']:.3f}, "
            f"{sims} data sets) exceeds its nominal {nominal:g} {scenario}"
        )
    if row["quantity"] == "coverage" and estimate < nominal - COVERAGE_SLACK - GATE_Z * se:
        return (
            f"{what}: its {100 * nominal:g}% interval covers {estimate:.3f} (MC SE "
            f"{row['mc_se']:.3f}, {sims} data sets) {scenario}, more than "
            f"{100 * COVERAGE_SLACK:g} points under nominal"
        )
    return None


def _calibration(
    registration: Registration, split: SplitTasks
) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """The primary's calibration (confirmatory registrations), its reasons, its warnings."""
    if registration.kind != "confirmatory":
        return None, [], []
    try:
        doc = calibrate_registration(
            registration, split, sims=GATE_SIMS, seed=registration.design.seed, scope="primary"
        )
    except BadInput as exc:
        return None, [], [f"the primary test could not be calibrated: {exc.render()}"]
    rows = [r for r in doc["rows"] if r["label"] in ("primary", "stopping")]
    reasons = [why for why in map(_judge, rows) if why]
    warnings = [
        f"{item['label']} test {item['test']} not calibrated: {item['reason']}"
        for item in doc["skipped"]
    ]
    calibration = {
        "sims": doc["sims"],
        "seed": doc["seed"],
        "design": doc["design"],
        "rows": rows,
        "notes": doc["notes"],
    }
    return calibration, reasons, warnings


def check(
    registration: Registration, n_prompts: int, tasks: Sequence[Task] | None = None
) -> dict[str, Any] | None:
    """The gate's record (see the module docstring), or None when there is nothing to
    record (an exploratory registration without ``plan:`` and without a warning).

    ``tasks`` are the split's tasks in planned order; without them the clusters and
    intents of the split are unknown, so tests resampling them are neither counted nor
    simulated here (``n_prompts`` stands for the tasks).
    """
    split = SplitTasks.of(tasks) if tasks is not None else SplitTasks.count_only(n_prompts)
    record = _mde(registration, n_prompts)
    reasons: list[str] = []
    if record["mde_reached"] is False:
        plan = registration.plan
        assert plan is not None
        reasons.append(
            f"with {n_prompts} prompts and {record['runs_per_arm']} run(s) per arm the design "
            f"detects {record['achievable_mde']:.3f} at power {plan.power}, not the "
            f"registered MDE {plan.mde:.3f}"
        )
    few = _few_clusters(registration, split)
    warnings = [message for _, message in few]
    if registration.kind == "confirmatory":
        reasons += [message for where, message in few if where == "primary"]
    calibration, calibrated_reasons, calibration_warnings = _calibration(registration, split)
    reasons += calibrated_reasons
    warnings += calibration_warnings
    if registration.plan is None and calibration is None and not warnings:
        return None
    runnable = not reasons
    return {
        **record,
        "runnable": runnable,
        "reason": None if runnable else "; ".join(reasons),
        "reasons": reasons,
        "warnings": warnings,
        "calibration": calibration,
    }
