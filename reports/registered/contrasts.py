"""Registered contrasts (issue 13, item 4): weighted combinations of arms, tested as registered.

A contrast's value in one resampling unit is sum_c w_c m_{u,c}, with m_{u,c} the unit's
mean outcome in cell (arm) c: every measured repeat of a task averaged, then the tasks of
the unit averaged, so every unit counts once and every task once within its unit. Only
tasks with every weighted cell measured enter (the others are counted and named in the
note). The statistics are :func:`prereg.stats.contrast_bootstrap` (cluster bootstrap
over units: the bootstrap-SE interval with Student t critical values, withheld below
FEW_CLUSTERS units or when every unit has the same contrast) and
:func:`prereg.stats.contrast_sign_flip` (exact sign-flip over units).

Decisions, fixed before any data: a ``paired_bootstrap`` contrast rejects when its
interval at 1 - alpha (two-sided) or 1 - 2 alpha (one-sided) excludes zero on the
registered side, as the paired bootstrap of two arms does; a ``sign_flip_test`` contrast
when its p is at most alpha. The family ``contrasts`` adjusts every registered contrast's
p-value by the registered method (Holm, as seed 001 does, or BH); its rejections are
reported beside the contrasts and never change the verdict, which only the primary test
decides. A primary test that names a contrast reads it with the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg import stats
from prereg.registry.schema import Contrast, Registration, TestSpec
from prereg.reports.model import (
    ContrastReport,
    FamilyMember,
    Interval,
    MultiplicityReport,
    Provenance,
    TestReport,
)
from prereg.reports.observations import Obs
from prereg.reports.pairs import runset
from prereg.reports.registered.family import adjust
from prereg.reports.registered.verdict import Evidence, read_superiority
from prereg.stats.bootstrap import FEW_CLUSTERS

#: How a contrast's reading names the two directions (the verdict wording's "arms").
SIDES = ("negative side", "positive side")


@dataclass(frozen=True)
class CellMeans:
    """Per-task mean outcomes of the weighted cells, for the tasks where all are measured."""

    tasks: tuple[str, ...]
    arms: tuple[str, ...]
    values: np.ndarray  # (tasks, arms)
    dropped: tuple[str, ...]
    units: tuple[tuple[str, str, int], ...]


def cell_means(
    observations: Sequence[Obs], arms: Sequence[str], outcome: str, task_order: Sequence[str]
) -> CellMeans:
    """The (task, arm) mean of the measured repeats; tasks missing any arm are dropped."""
    runs: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    for obs in observations:
        if obs.arm not in arms:
            continue
        value = obs.outcome(outcome)
        if value is not None:
            runs.setdefault((obs.task_id, obs.arm), []).append((obs.repeat, value))
    kept = [t for t in task_order if all((t, a) in runs for a in arms)]
    seen = {t for t, _ in runs}
    dropped = tuple(t for t in task_order if t in seen and t not in kept)
    matrix = np.array(
        [[np.mean([v for _, v in runs[(t, a)]]) for a in arms] for t in kept], dtype=float
    ).reshape(len(kept), len(arms))
    used = tuple((a, t, r) for t in kept for a in arms for r, _ in runs[(t, a)])
    return CellMeans(tuple(kept), tuple(arms), matrix, dropped, used)


def unit_labels(unit: str, tasks: Sequence[str], by_task: dict[str, Any]) -> list[str] | None:
    """Each task's resampling unit label (None: every task is its own unit)."""
    if unit == "task":
        return None
    return [getattr(by_task[t], unit) for t in tasks]


@dataclass(frozen=True)
class ContrastInputs:
    """What every contrast of a registration reads: the runs and the split's tasks."""

    reg: Registration
    observations: Sequence[Obs]
    task_order: Sequence[str]
    tasks: dict[str, Any]  # task id -> task (its cluster and intent)
    seed: int


def _decision_level(test: str, sides: str, alpha: float) -> float:
    return 1.0 - alpha if sides == "two-sided" else 1.0 - 2.0 * alpha


def _rejects(test: str, sides: str, alpha: float, low: float, high: float, p: float) -> bool:
    if test == "sign_flip_test":
        return p <= alpha
    if sides == "greater":
        return low > 0
    if sides == "less":
        return high < 0
    return low > 0 or high < 0


@dataclass(frozen=True)
class _Computed:
    estimate: float | None
    interval: Interval | None
    pvalue: float | None
    rejects: bool | None
    method: str
    units: int
    function: str


def _compute(
    means: CellMeans,
    weights: list[float],
    *,
    test: str,
    sides: str,
    alpha: float,
    unit: str,
    labels: list[str] | None,
    draws: int,
    level: float | None,
    seed: int,
) -> _Computed:
    n_units = len(set(labels)) if labels is not None else len(means.tasks)
    if n_units < 2:
        return _Computed(None, None, None, None, "not computed", n_units, "")
    decision = _decision_level(test, sides, alpha)
    boot = stats.contrast_bootstrap(
        means.values, weights, units=labels, draws=draws, level=decision, seed=seed
    )
    shown = boot
    if level is not None and abs(level - decision) > 1e-12:
        shown = stats.contrast_bootstrap(
            means.values, weights, units=labels, draws=draws, level=level, seed=seed
        )
    interval = Interval.resampled(
        shown.low,
        shown.high,
        shown.level,
        shown.method,
        unit=unit,
        units=n_units,
        minimum=FEW_CLUSTERS,
    )
    if test == "sign_flip_test":
        flip = stats.contrast_sign_flip(means.values, weights, sides, units=labels, seed=seed)
        p, method, function = float(flip.pvalue), flip.method, "prereg.stats.contrast_sign_flip"
    else:
        p, method, function = boot.pvalue, boot.method, "prereg.stats.contrast_bootstrap"
    rejects = _rejects(test, sides, alpha, boot.low, boot.high, p)
    return _Computed(boot.estimate, interval, p, rejects, method, n_units, function)


def _weights_of(reg: Registration, contrast: Contrast) -> dict[str, float]:
    weights = reg.contrast_weights(contrast.id)
    order = [a.id for a in reg.arms]
    return {arm: weights[arm] for arm in order if arm in weights}


def _evaluate(
    inputs: ContrastInputs, contrast: Contrast, spec: TestSpec | Contrast, outcome: str
) -> tuple[dict[str, float], CellMeans, _Computed]:
    """The contrast's weights, its cell means and its test as ``spec`` registers it (the
    contrast itself, or a primary or secondary test that names it)."""
    weights = _weights_of(inputs.reg, contrast)
    means = cell_means(inputs.observations, list(weights), outcome, inputs.task_order)
    done = _compute(
        means,
        list(weights.values()),
        test=spec.test,
        sides=spec.sides,
        alpha=spec.alpha,
        unit=spec.unit,
        labels=unit_labels(spec.unit, means.tasks, inputs.tasks),
        draws=spec.draws,
        level=spec.level,
        seed=inputs.seed,
    )
    return weights, means, done


def contrast_report(inputs: ContrastInputs, contrast: Contrast) -> ContrastReport:
    """One registered contrast, computed as registered (see the module docstring)."""
    reg = inputs.reg
    outcome = contrast.outcome or reg.outcome
    weights, means, done = _evaluate(inputs, contrast, contrast, outcome)
    note = (
        f"{len(means.dropped)} task(s) left out: a weighted cell has no measured run "
        f"({', '.join(means.dropped[:5])})"
        if means.dropped
        else ""
    )
    filter_text = f"status ok; outcome '{outcome}' measured; tasks with every weighted cell"
    return ContrastReport(
        id=contrast.id,
        description=contrast.description,
        effect=contrast.effect,
        weights=weights,
        test=contrast.test,
        sides=contrast.sides,
        alpha=contrast.alpha,
        unit=contrast.unit,
        outcome=outcome,
        tasks=len(means.tasks),
        units=done.units,
        estimate=done.estimate,
        interval=done.interval,
        pvalue=done.pvalue,
        method=done.method,
        note=note,
        provenance=Provenance(
            function=done.function or "prereg.stats.contrast_bootstrap",
            parameters={
                "weights": weights,
                "unit": contrast.unit,
                "draws": contrast.draws,
                "seed": inputs.seed,
                "sides": contrast.sides,
            },
            registration_field=f"contrasts[{reg.contrasts.index(contrast)}]",
            runs=runset(means.units, filter_text),
        ),
    )


def contrast_test(
    inputs: ContrastInputs, spec: TestSpec, *, role: str, field_name: str
) -> TestReport:
    """A primary or secondary test that names a contrast, read as the registered rules say."""
    reg = inputs.reg
    assert spec.contrast is not None
    contrast = next(c for c in reg.contrasts if c.id == spec.contrast)
    outcome = spec.outcome or contrast.outcome or reg.outcome
    weights, means, done = _evaluate(inputs, contrast, spec, outcome)
    favoured = {"greater": 1, "less": -1}.get(spec.sides, 0)
    estimate = done.estimate
    direction = 0 if not estimate else (1 if estimate > 0 else -1)
    spread = bool(means.tasks) and bool(np.ptp(means.values @ np.asarray(list(weights.values()))))
    few = spec.test == "paired_bootstrap" and done.units < FEW_CLUSTERS
    evidence = Evidence(
        rejects=done.rejects,
        direction=direction,
        attainable=done.rejects is not None and (spread or bool(estimate)) and not few,
        unattainable_reason=(
            f"{done.units} {spec.unit}(s) with every weighted cell measured: too few"
            if done.rejects is None
            else f"too few {spec.unit}s ({done.units} < {FEW_CLUSTERS}): the cluster bootstrap "
            f"keeps its level from {FEW_CLUSTERS} {spec.unit}s, so its decision cannot be read"
            if few
            else "the contrast is the same in every unit, so no interval can exclude zero"
        ),
    )
    reading, reason = read_superiority(evidence, favoured, SIDES)
    deciding = role == "primary"
    decision = "undefined" if done.rejects is None else ("reject" if done.rejects else "no_reject")
    return TestReport(
        role=role,
        registration_field=field_name,
        test=spec.test,
        compare=list(weights),
        favours=None,
        sides=spec.sides,
        alpha=spec.alpha,
        aggregate="mean (cell means over repeats)",
        unit=spec.unit,
        units=done.units,
        contrast=contrast.id,
        outcome=outcome,
        estimate=estimate,
        estimate_label=(
            f"contrast '{contrast.id}': sum of weight x {spec.unit} mean outcome over "
            f"{len(weights)} arm(s)"
        ),
        interval=done.interval,
        pvalue=done.pvalue,
        n=len(means.tasks),
        decision=decision,
        reading=reading if deciding else None,
        reason=reason,
        method=done.method,
        note=(
            "a paired_bootstrap contrast decides by its interval; its p is that interval's "
            "inversion (the t test on units - 1 df)"
            if spec.test == "paired_bootstrap"
            else ""
        ),
        provenance=Provenance(
            function=done.function or "prereg.stats.contrast_bootstrap",
            parameters={"weights": weights, "unit": spec.unit, "seed": inputs.seed},
            registration_field=field_name,
            runs=runset(means.units, f"status ok; outcome '{outcome}' measured"),
        ),
    )


def family_report(inputs: ContrastInputs, reports: list[ContrastReport]) -> MultiplicityReport:
    """The registered family 'contrasts': every contrast's p adjusted by the method."""
    reg = inputs.reg
    rule = reg.multiplicity
    assert rule is not None and rule.family == "contrasts"
    method = stats.MULTIPLICITY_METHODS[rule.method]
    pvals = [r.pvalue for r in reports]
    values = [p if p is not None and math.isfinite(p) else 1.0 for p in pvals]
    adjusted, rejects = adjust(method, values, pvals, rule.q)
    for report, adj, rej in zip(reports, adjusted, rejects, strict=True):
        report.adjusted = adj
        report.reject = rej
    used: dict[tuple[str, str, int], None] = {}
    for contrast in reg.contrasts:
        weights = _weights_of(reg, contrast)
        outcome = contrast.outcome or reg.outcome
        for unit in cell_means(
            inputs.observations, list(weights), outcome, inputs.task_order
        ).units:
            used[unit] = None
    return MultiplicityReport(
        method=rule.method,
        q=rule.q,
        family="contrasts",
        members=[
            FamilyMember(
                hypothesis=f"contrast {r.id}",
                n=r.units,
                estimate=r.estimate,
                pvalue=r.pvalue,
                adjusted=adj,
                reject=rej,
            )
            for r, adj, rej in zip(reports, adjusted, rejects, strict=True)
        ],
        n_rejected=int(sum(rejects)),
        note=(
            f"one hypothesis per registered contrast ({len(reports)}), each tested as "
            "registered; the primary test keeps its full alpha"
        ),
        provenance=Provenance(
            function=method.function,
            parameters={"q": rule.q, "m": len(reports)},
            registration_field="multiplicity",
            runs=runset(list(used), "the registered contrasts' runs"),
        ),
    )


def contrast_reports(inputs: ContrastInputs) -> list[ContrastReport]:
    return [contrast_report(inputs, c) for c in inputs.reg.contrasts]
