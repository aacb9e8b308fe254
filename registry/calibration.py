"""A registration's own analysis, calibrated by simulation (``prereg calibrate``, the gate).

This module reads a :class:`Registration` and the tasks of its split and hands
:func:`prereg.stats.calibration.calibrate` what ``analyse`` would compute on them: every
registered test (primary and secondary) with its alpha, sides, aggregate, margin, level,
draws and resampling unit, on the tasks that carry its outcome (positive tasks for the
funnel outcomes); the registered stopping rule over the primary comparison; the interval
of the difference the report prints for the arms; and the per-intent intervals. No
statistic is computed here.

The simulated population (:func:`prereg.stats.calibration_model.population`) takes the
split's task count, the registered repeats (runs per arm; with ``design.sessions`` S >= 2
the run shift is one per session, shared by its repeats / S repeats, and the design's MDE
divides the run component by S, :func:`runs_per_arm`) and the planning figures:
``plan.sigma_d`` and ``plan.sigma_run`` when the registration plans, else sigma_d 0.35
(the PRD's planning figure, InvokeRank section 7.8) and no run component; base rate 0.5
and the model's default ICC unless given. The planned effect is ``plan.mde``, else the
design's own minimum detectable effect at the planned power
(:func:`prereg.stats.mde_paired` over the primary's tasks), in the direction the primary
test favours (``favours``, else ``sides``; two-sided without ``favours``: the treatment,
the second compared arm, ahead). Every test is simulated on the same pair of arms.

Tests of registered contrasts (and the registered contrasts themselves, whose intervals
the report prints) are simulated over the arms they weigh
(:func:`prereg.stats.calibration_model.simulate_arms`), the planned effect read on the
contrast's scale. Not simulated (listed under ``skipped`` with the reason): a contrast
whose weights do not sum to 0, tests whose resampling unit is not known for the split
(the gate may be given the task count only), and tests with no task carrying their
outcome.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.core.errors import BadInput
from prereg.experiments import Task
from prereg.registry.schema import Contrast, Registration, TestSpec
from prereg.stats import mde_paired
from prereg.stats.bootstrap import FEW_CLUSTERS
from prereg.stats.calibration import (
    CalibrationResult,
    CalibrationRow,
    FamilyPlan,
    MonitorPlan,
    PlannedTest,
    Progress,
    calibrate,
    verdict,
)
from prereg.stats.calibration_model import Population, population

#: planning figures used when the registration has no ``plan:`` block
DEFAULT_SIGMA_D = 0.35
DEFAULT_BASE_RATE = 0.5
DEFAULT_POWER = 0.8
#: simulated data sets per scenario, and bootstrap resamples per data set, by default
DEFAULT_SIMS = 1000
DEFAULT_DRAWS = 1000
#: the descriptive interval of the difference the report prints for the arms
DIFFERENCE = "difference (arms)"
PER_INTENT = "per-intent intervals"
#: an intent with fewer tasks gets no per-intent interval in the report, only "too few
#: tasks": the per-intent interval is the cluster bootstrap over the intent's tasks, whose
#: level holds from FEW_CLUSTERS clusters (issue 39; docs/statistics.md), the minimum of
#: every cluster bootstrap the report prints
MIN_INTENT_TASKS = FEW_CLUSTERS


def too_few_tasks(n: int) -> str | None:
    """The per-intent interval's null reason for an intent of ``n`` tasks, else None."""
    return f"too few tasks ({n} < {MIN_INTENT_TASKS})" if n < MIN_INTENT_TASKS else None


@dataclass(frozen=True)
class SplitTasks:
    """The tasks of the registered split, in planned order, as far as they are known."""

    ids: tuple[str, ...]
    clusters: tuple[str, ...] | None = None
    intents: tuple[str, ...] | None = None
    positive: tuple[bool, ...] | None = None

    @classmethod
    def of(cls, tasks: Sequence[Task]) -> SplitTasks:
        return cls(
            ids=tuple(t.id for t in tasks),
            clusters=tuple(t.cluster for t in tasks),
            intents=tuple(t.intent for t in tasks),
            positive=tuple(t.polarity == "positive" for t in tasks),
        )

    @classmethod
    def count_only(cls, n: int) -> SplitTasks:
        """Only the task count is known (clusters, intents and polarity are not)."""
        return cls(ids=tuple(f"task-{i}" for i in range(n)))

    def labels(self, unit: str) -> tuple[str, ...] | None:
        if unit == "task":
            return self.ids
        return self.clusters if unit == "cluster" else self.intents


@dataclass(frozen=True)
class Figures:
    """Planning figures given explicitly (each overrides the registration's ``plan:``).

    ``origins`` says where a given figure came from ("pilot" for ``--from-runs``); a
    figure not listed there was "given" (an option)."""

    sigma_d: float | None = None
    sigma_run: float | None = None
    effect: float | None = None
    icc: float | None = None
    base_rate: float | None = None
    origins: dict[str, str] = field(default_factory=dict)

    def origin(self, name: str) -> str:
        return self.origins.get(name, "given")


@dataclass(frozen=True)
class Resolved:
    """The figures a calibration runs with, and where each came from."""

    sigma_d: float
    sigma_run: float
    icc: float | None
    base_rate: float
    effect: float  # signed: the planned direction
    power: float
    sources: dict[str, str]
    notes: tuple[str, ...]


def _codes(labels: Sequence[str]) -> NDArray[np.intp]:
    order: dict[str, int] = {}
    return np.array([order.setdefault(label, len(order)) for label in labels], dtype=np.intp)


def _direction(reg: Registration) -> int:
    """+1 when the primary favours the treatment (second compared arm), -1 the control."""
    spec = reg.primary
    if spec.contrast is None:
        control, treatment = reg.compared_arms(spec)
        if spec.favours == treatment:
            return 1
        if spec.favours == control:
            return -1
    return -1 if spec.sides == "less" else 1


def _tasks_with(outcome: str, split: SplitTasks) -> NDArray[np.intp] | None:
    """Indices of the tasks that carry ``outcome`` (positive tasks for the funnel
    outcomes; all of them when polarity is not known): None for every task."""
    if outcome == "success" or split.positive is None:
        return None
    return np.flatnonzero(np.array(split.positive, dtype=bool)).astype(np.intp)


def _tasks_of(reg: Registration, spec: TestSpec, split: SplitTasks) -> NDArray[np.intp] | None:
    return _tasks_with(spec.outcome or reg.outcome, split)


def _count(subset: NDArray[np.intp] | None, split: SplitTasks) -> int:
    return len(split.ids) if subset is None else int(subset.size)


def _weights(reg: Registration, contrast_id: str) -> tuple[float, ...] | str:
    """A contrast's weights over the arms it combines, or why it is not simulated."""
    weights = tuple(reg.contrast_weights(contrast_id).values())
    if abs(sum(weights)) > 1e-9:
        return (
            f"contrast '{contrast_id}' has weights summing to {sum(weights):g}: it is not 0 "
            "without an effect, so it has no type I error to simulate"
        )
    return weights


def _plan(
    reg: Registration,
    spec: TestSpec | Contrast,
    label: str,
    split: SplitTasks,
    contrast: str | None = None,
) -> PlannedTest | str:
    """The spec as the simulation runs it, or why it is not simulated."""
    weights: tuple[float, ...] | None = None
    if contrast is not None:
        found = _weights(reg, contrast)
        if isinstance(found, str):
            return found
        weights = found
    outcome = spec.outcome or reg.outcome
    if isinstance(spec, TestSpec) and spec.contrast is not None:
        named = next(c for c in reg.contrasts if c.id == spec.contrast)
        outcome = spec.outcome or named.outcome or reg.outcome
    subset = _tasks_with(outcome, split)
    if subset is not None and subset.size == 0:
        return f"no task of split '{reg.split}' carries outcome '{outcome}'"
    units = None
    if spec.unit != "task":
        labels = split.labels(spec.unit)
        if labels is None:
            return f"the split's {spec.unit}s are not known here (run `prereg calibrate`)"
        chosen = labels if subset is None else tuple(labels[i] for i in subset)
        units = _codes(chosen)
    if (
        weights is not None
        and (units.max() + 1 if units is not None else _count(subset, split)) < 2
    ):
        return "a contrast needs at least two units"
    return PlannedTest(
        label=label,
        test=spec.test,
        alpha=spec.alpha,
        sides=spec.sides,
        aggregate=spec.aggregate if isinstance(spec, TestSpec) else "mean",
        margin=spec.margin if isinstance(spec, TestSpec) else None,
        level=spec.level,
        draws=spec.draws,
        units=units,
        unit_name=spec.unit,
        seed=reg.design.seed,
        prior=reg.stopping.prior if reg.stopping is not None else (1.0, 1.0),
        subset=subset,
        weights=weights,
    )


def _same_contrast(reg: Registration, contrast: Contrast, spec: TestSpec) -> bool:
    """Whether a registered test of ``contrast`` is computed exactly as the contrast is."""
    if spec.contrast != contrast.id:
        return False
    outcome = spec.outcome or contrast.outcome or reg.outcome
    mine = (spec.test, spec.sides, spec.alpha, spec.unit, spec.level, spec.draws, outcome)
    theirs = (
        contrast.test,
        contrast.sides,
        contrast.alpha,
        contrast.unit,
        contrast.level,
        contrast.draws,
        contrast.outcome or reg.outcome,
    )
    return mine == theirs


def test_plans(
    reg: Registration, split: SplitTasks, scope: str = "all"
) -> tuple[list[PlannedTest], MonitorPlan | None, list[dict[str, str]]]:
    """The registered tests as simulated (``scope`` "primary": the primary only), the
    stopping rule, and what is not simulated with the reason."""
    specs = [("primary", reg.primary)]
    if scope == "all":
        specs += [(f"secondary[{i}]", s) for i, s in enumerate(reg.secondary)]
    plans: list[PlannedTest] = []
    skipped: list[dict[str, str]] = []
    for label, spec in specs:
        plan = _plan(reg, spec, label, split, spec.contrast)
        if isinstance(plan, str):
            skipped.append({"label": label, "test": spec.test, "reason": plan})
        else:
            plans.append(plan)
    if scope == "all":
        for i, contrast in enumerate(reg.contrasts):
            label = f"contrasts[{i}] {contrast.id}"
            if any(_same_contrast(reg, contrast, spec) for _, spec in specs):
                continue  # a registered test of it prints the same interval
            plan = _plan(reg, contrast, label, split, contrast.id)
            if isinstance(plan, str):
                skipped.append({"label": label, "test": contrast.test, "reason": plan})
            else:
                plans.append(plan)
    monitor = None
    primary_subset = _tasks_of(reg, reg.primary, split)
    if reg.stopping is not None and reg.primary.contrast is None:
        monitor = MonitorPlan(
            label="stopping",
            threshold=reg.stopping.threshold,
            min_prompts=reg.stopping.min_prompts,
            prior=reg.stopping.prior,
            aggregate=reg.primary.aggregate,
            subset=primary_subset,
        )
    if scope == "all" and reg.primary.contrast is None:
        plans.extend(_descriptive(reg, split, plans, primary_subset))
    return plans, monitor, skipped


def _descriptive(
    reg: Registration,
    split: SplitTasks,
    registered: list[PlannedTest],
    subset: NDArray[np.intp] | None,
) -> list[PlannedTest]:
    """The intervals the report prints beside the registered tests: the difference of the
    arms (a paired bootstrap at 1 - alpha of the primary, unit task, 10,000 draws) unless a
    registered test prints the same one, and one per intent (the same, on its tasks) with
    at least ``MIN_INTENT_TASKS`` tasks (the report prints no interval below it)."""
    alpha, seed = reg.primary.alpha, reg.design.seed
    out = []
    same = any(
        p.test == "paired_bootstrap"
        and p.units is None
        and abs(p.interval_level - (1.0 - alpha)) < 1e-12
        and _same_tasks(p.subset, subset)
        for p in registered
    )
    if not same:
        out.append(
            PlannedTest(DIFFERENCE, "paired_bootstrap", alpha=alpha, seed=seed, subset=subset)
        )
    if split.intents is not None:
        indices = np.arange(len(split.ids)) if subset is None else subset
        intents = [split.intents[i] for i in indices]
        for intent in dict.fromkeys(intents):
            chosen = np.array([i for i, x in zip(indices, intents, strict=True) if x == intent])
            if too_few_tasks(chosen.size):
                continue  # the report prints "too few tasks", not an interval
            out.append(
                PlannedTest(
                    f"{PER_INTENT}: {intent}",
                    "paired_bootstrap",
                    alpha=alpha,
                    seed=seed,
                    subset=chosen.astype(np.intp),
                )
            )
    return out


#: members of a family whose null is not "no difference", or that need several arms
_NOT_SIMULATED = "tost_paired"


def _member(plan: PlannedTest | None, method: str) -> PlannedTest | None:
    """A registered test as a family member (None: counted in m, not simulated): e-BH
    takes e-values, so only e-value tests can be rejected there; a TOST's null is its
    margin and a contrast's test needs its arms, so neither is simulated."""
    if plan is None or plan.weights is not None or plan.test == _NOT_SIMULATED:
        return None
    if method == "e-bh" and plan.test != "beta_mixture":
        return None
    return plan


def _intent_members(
    reg: Registration, split: SplitTasks, primary: PlannedTest
) -> list[PlannedTest] | str:
    """One member per intent (the primary test on the intent's tasks; for e-BH the
    beta-mixture e-value of its discordant pairs), as :mod:`prereg.reports.registered.family`."""
    if split.intents is None:
        return "the split's intents are not known here"
    indices = np.arange(len(split.ids)) if primary.subset is None else primary.subset
    intents = [split.intents[i] for i in indices]
    labels = split.labels(primary.unit_name)
    out = []
    for intent in dict.fromkeys(intents):
        chosen = np.array(
            [i for i, x in zip(indices, intents, strict=True) if x == intent], dtype=np.intp
        )
        units = None
        if primary.units is not None and labels is not None:
            units = _codes([labels[i] for i in chosen])
        member = replace(primary, label=f"intent {intent}", subset=chosen, units=units)
        if reg.multiplicity is not None and reg.multiplicity.method == "e-bh":
            member = replace(member, test="beta_mixture", units=None)
        out.append(member)
    return out


def family_plan(
    reg: Registration, split: SplitTasks, plans: Sequence[PlannedTest]
) -> FamilyPlan | str | None:
    """The registered multiplicity family as simulated, or why it is not (None: no
    family registered)."""
    rule = reg.multiplicity
    if rule is None:
        return None
    by_label = {p.label: p for p in plans}
    if rule.family == "contrasts":
        return _contrast_family(reg, split)
    if rule.family == "per-intent":
        primary = by_label.get("primary")
        if primary is None or primary.weights is not None:
            return "the primary test is not simulated over two arms"
        found = _intent_members(reg, split, primary)
        if isinstance(found, str):
            return found
        members: list[PlannedTest | None] = list(found)
    else:
        members = [by_label.get(f"secondary[{i}]") for i in range(len(reg.secondary))]
        if not members:
            return "no secondary test"
    chosen = [_member(m, rule.method) for m in members]
    left = len(chosen) - sum(m is not None for m in chosen)
    note = (
        f"{left} member(s) not simulated (TOST, contrasts, or no e-value under e-BH): "
        "counted in m, never rejecting"
        if left
        else ""
    )
    if left == len(chosen):
        return f"no member of the {rule.family} family can be simulated ({note})"
    return FamilyPlan("multiplicity", rule.method, rule.q, rule.family, tuple(chosen), note)


def _contrast_family(reg: Registration, split: SplitTasks) -> FamilyPlan | str:
    """The family 'contrasts' as :func:`prereg.reports.registered.contrasts.family_report`
    adjusts it: one member per registered contrast, tested as the contrast registers it
    (its test, sides, unit, draws and outcome; the report adjusts the bootstrap's
    two-sided p), its weights over every arm of the registration (0 for an arm it does not
    weigh) so that the members are simulated together on the same arms. A contrast that
    cannot be simulated (weights not summing to 0, fewer than two units, unknown units),
    and every contrast under e-BH (contrasts give p values, not e-values), is counted in m
    and never rejects."""
    rule = reg.multiplicity
    assert rule is not None
    arms = [a.id for a in reg.arms]
    members: list[PlannedTest | None] = []
    for i, contrast in enumerate(reg.contrasts):
        plan = _plan(reg, contrast, f"contrasts[{i}] {contrast.id}", split, contrast.id)
        if isinstance(plan, str) or rule.method == "e-bh":
            members.append(None)
            continue
        weights = reg.contrast_weights(contrast.id)
        members.append(replace(plan, weights=tuple(weights.get(arm, 0.0) for arm in arms)))
    if not members:
        return "no registered contrast"
    left = sum(m is None for m in members)
    note = (
        f"{left} contrast(s) not simulated (no e-value under e-BH, or not simulable alone): "
        "counted in m, never rejecting"
        if left
        else ""
    )
    if left == len(members):
        return f"no member of the contrasts family can be simulated ({note})"
    return FamilyPlan(
        "multiplicity", rule.method, rule.q, rule.family, tuple(members), note, arms=len(arms)
    )


def _few_task_intents(reg: Registration, split: SplitTasks) -> int:
    """Intents of the primary comparison's tasks with no per-intent interval."""
    if split.intents is None or reg.primary.contrast is not None:
        return 0
    subset = _tasks_of(reg, reg.primary, split)
    indices = range(len(split.ids)) if subset is None else subset
    sizes: dict[str, int] = {}
    for i in indices:
        sizes[split.intents[i]] = sizes.get(split.intents[i], 0) + 1
    return sum(1 for n in sizes.values() if too_few_tasks(n))


def _same_tasks(a: NDArray[np.intp] | None, b: NDArray[np.intp] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))


def runs_per_arm(reg: Registration) -> int:
    """The independent runs per arm the between-run component divides by: the registered
    replicate sessions when there are two or more (``design.sessions``: the run shift is
    one per session, shared by its repeats / sessions repeats), else ``design.repeats``
    (each repeat its own run, as before sessions existed; docs/statistics.md, "Planning
    with replicate sessions")."""
    return reg.design.sessions if reg.design.sessions > 1 else reg.design.repeats


def resolve_figures(reg: Registration, split: SplitTasks, given: Figures | None = None) -> Resolved:
    """The figures of the simulated population (see the module docstring)."""
    given = given or Figures()
    plan = reg.plan
    sources: dict[str, str] = {}

    def pick(name: str, explicit: float | None, planned: float | None, default: float) -> float:
        if explicit is not None:
            sources[name] = given.origin(name)
            return float(explicit)
        if planned is not None:
            sources[name] = "plan"
            return float(planned)
        sources[name] = "default"
        return default

    sigma_d = pick("sigma_d", given.sigma_d, plan.sigma_d if plan else None, DEFAULT_SIGMA_D)
    sigma_run = pick("sigma_run", given.sigma_run, plan.sigma_run if plan else None, 0.0)
    base_rate = pick("base_rate", given.base_rate, None, DEFAULT_BASE_RATE)
    power = pick("power", None, plan.power if plan else None, DEFAULT_POWER)
    sources["icc"] = given.origin("icc") if given.icc is not None else "model"
    notes: list[str] = []
    if given.effect is not None:
        magnitude, sources["effect"] = abs(float(given.effect)), given.origin("effect")
    elif plan is not None:
        magnitude, sources["effect"] = plan.mde, "plan"
    else:
        alpha = reg.primary.alpha
        n = _count(_tasks_of(reg, reg.primary, split), split)
        magnitude = float(
            mde_paired(
                sigma_d,
                max(n, 1),
                alpha=alpha,
                power=power,
                sigma_run=sigma_run,
                runs_per_arm=runs_per_arm(reg),
            )
        )
        sources["effect"] = "design MDE"
        notes.append(
            f"no plan: the planned effect is the design's own MDE at power {power:g} "
            f"({magnitude:.3f} over {n} task(s), sigma_d {sigma_d:g})"
        )
    sign = _direction(reg)
    if given.effect is not None and given.effect < 0:
        sign = -1
    return Resolved(
        sigma_d=sigma_d,
        sigma_run=sigma_run,
        icc=given.icc,
        base_rate=base_rate,
        effect=sign * magnitude,
        power=power,
        sources=sources,
        notes=tuple(notes),
    )


_FIELD = {
    "sigma_d": ("plan.sigma_d", "--sigma-d"),
    "sigma_run": ("plan.sigma_run", "--sigma-run"),
    "base_rate": (None, "--base-rate"),
    "icc": (None, "--icc"),
    "effect": ("plan.mde", "--effect"),
}


def _bad_figure(figures: Resolved, message: str) -> BadInput:
    """A figure the population cannot take, named as the registration or option gave it."""
    for name in ("sigma_d", "sigma_run", "icc", "base_rate"):
        if message.startswith(name):
            break
    else:
        name = "effect"
    plan_field, option = _FIELD[name]
    source = figures.sources.get(name, "given")
    field = plan_field if source == "plan" and plan_field else option
    if source == "pilot":
        field = "--from-runs"
    return BadInput(message, field=field)


def build_population(reg: Registration, split: SplitTasks, figures: Resolved) -> Population:
    try:
        return population(
            len(split.ids),
            reg.design.repeats,
            figures.sigma_d,
            sigma_run=figures.sigma_run,
            base_rate=figures.base_rate,
            icc=figures.icc,
            sessions=reg.design.sessions,
        )
    except ValueError as exc:
        raise _bad_figure(figures, str(exc)) from None


def _capped_effect(pop: Population, figures: Resolved) -> tuple[float, str | None]:
    """The planned effect, capped at 0.9 of the largest the population can show when it
    comes from the plan or the design (a note says so); an effect given explicitly
    beyond it is refused."""
    sign = 1 if figures.effect >= 0 else -1
    most = pop.truth("mean", sign * pop.max_shift(sign) * (1 - 1e-9))
    if abs(figures.effect) < abs(most) * 0.999:
        return figures.effect, None
    source = figures.sources.get("effect")
    if source in ("design MDE", "plan"):
        capped = 0.9 * most
        what = "the design's MDE" if source == "design MDE" else "plan.mde"
        return capped, (
            f"{what} {abs(figures.effect):.3f} is beyond what base rate {pop.base_rate:g} "
            f"allows (at most {abs(most):.3f}); the planned effect is taken as {abs(capped):.3f}"
        )
    raise _bad_figure(
        figures,
        f"an effect of {abs(figures.effect):g} cannot arise with base rate {pop.base_rate:g} "
        f"(at most {abs(most):.3f})",
    )


def calibrate_registration(
    reg: Registration,
    split: SplitTasks,
    *,
    figures: Figures | None = None,
    sims: int = DEFAULT_SIMS,
    seed: int | None = 0,
    draws: int = DEFAULT_DRAWS,
    scope: str = "all",
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The calibration table of ``reg`` on ``split`` as a JSON-ready document.

    BadInput (naming the plan field or the option) when the figures cannot arise from
    binary outcomes. ``scope`` "primary" calibrates the primary test (and the stopping
    rule) only: what the feasibility gate needs.
    """
    resolved = resolve_figures(reg, split, figures)
    pop = build_population(reg, split, resolved)
    effect, capped = _capped_effect(pop, resolved)
    plans, monitor, skipped = test_plans(reg, split, scope)
    family = family_plan(reg, split, plans) if scope == "all" else None
    if isinstance(family, str):
        method = reg.multiplicity.method if reg.multiplicity is not None else "-"
        skipped.append({"label": "multiplicity", "test": method, "reason": family})
        family = None
    result = calibrate(
        pop,
        plans,
        effect=effect,
        power_target=resolved.power,
        monitor=monitor,
        sims=sims,
        seed=seed,
        draws=draws,
        progress=progress,
        family=family,
    )
    notes = list(resolved.notes) + list(result.notes)
    few = _few_task_intents(reg, split) if scope == "all" else 0
    if few:
        notes.append(
            f"per-intent intervals: {few} intent(s) with fewer than {MIN_INTENT_TASKS} tasks "
            "print 'too few tasks' in the report and are not simulated"
        )
    if capped:
        notes.append(capped)
    return document(reg, split, resolved, result, skipped, notes)


def _summarise_intents(rows: Sequence[CalibrationRow]) -> list[CalibrationRow]:
    """Per-intent rows become one coverage row per scenario: the mean coverage over the
    intents, with the worst intent named (their type I error and power are not shown:
    per-intent intervals are listed, not flagged)."""
    out: list[CalibrationRow] = []
    intents = [r for r in rows if r.label.startswith(PER_INTENT) and r.quantity == "coverage"]
    for scenario in dict.fromkeys(r.scenario for r in intents):
        group = [r for r in intents if r.scenario == scenario]
        if not group:
            continue
        mean = float(np.mean([r.estimate for r in group]))
        se = math.sqrt(sum(r.mc_se**2 for r in group)) / len(group)
        worst = min(group, key=lambda r: r.estimate)
        sims = sum(r.sims for r in group)
        nominal = group[0].nominal
        out.append(
            CalibrationRow(
                label=PER_INTENT,
                test="paired_bootstrap",
                quantity="coverage",
                scenario=scenario,
                nominal=nominal,
                estimate=mean,
                mc_se=se,
                verdict=verdict("coverage", mean, nominal, sims),
                sims=group[0].sims,
                truth=group[0].truth,
                note=(
                    f"mean over {len(group)} intent(s); worst: "
                    f"{worst.label.removeprefix(PER_INTENT + ': ')} covers {worst.estimate:.3f}"
                ),
            )
        )
    return out


def document(
    reg: Registration,
    split: SplitTasks,
    figures: Resolved,
    result: CalibrationResult,
    skipped: list[dict[str, str]],
    notes: list[str],
) -> dict[str, Any]:
    rows = [r for r in result.rows if not r.label.startswith(PER_INTENT)]
    rows += _summarise_intents(result.rows)
    intents = {
        r.label.removeprefix(PER_INTENT + ": "): {"scenario": r.scenario, "coverage": r.estimate}
        for r in result.rows
        if r.label.startswith(PER_INTENT) and r.quantity == "coverage" and r.scenario == "null"
    }
    return {
        "registration": reg.id,
        "kind": reg.kind,
        "experiment": reg.experiment,
        "split": reg.split,
        "sims": result.sims,
        "seed": result.seed,
        "bootstrap_draws": result.draws,
        "design": {
            **result.population.describe(),
            "effect": result.effect,
            "power_target": figures.power,
            "sources": figures.sources,
            "latent_effects": result.effects,
        },
        "rows": [r.to_json() for r in rows],
        "per_intent_coverage": intents,
        "skipped": skipped,
        "notes": notes,
        "method": result.method,
    }
