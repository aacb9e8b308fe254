"""``prereg compare A B``: two registrations' runs, side by side and paired.

Seed 002's comparison table lists each registration's own registered result
(per-arm successes, discordant pairs, verdict); this adds, for every arm the two
registrations share by id, the paired change from A to B on the same tasks.

What the paired comparison requires, and the refusals (exit 4 unless noted):

- each registration's runs belong to it (the checks of :mod:`.load`; exit 3);
- the same experiment and the same split;
- the same tasks: the two splits hold the same task ids, and every shared task
  has identical content (prompt, intent, polarity, goal, permitted and
  prohibited operations); the offending tasks are named;
- the same evidence class (never pooled, not even across a comparison);
- the same registered outcome;
- at least one arm id in common.

Hosts and models may differ (issue 13: a configuration is model + route + harness):
each side lists every arm's configuration (driver, model, configuration digest) and
the models its runs returned, and each paired change names the configuration on
either side, so a model swap is labelled, never hidden. Everything else that differs
(host, budgets, design, surfaces, tests) is listed under ``differences``. The paired
deltas are not registered by either registration: they are exploratory and carry no
verdict.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from prereg import stats
from prereg.core.errors import BadInput, ProtocolRefusal
from prereg.core.version import code_version
from prereg.core.workspace import Workspace
from prereg.registry.hosts import DRIVERS
from prereg.registry.registrations import Registry
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.registry.verify import verified_entry
from prereg.reports.analysis import Options, build_report
from prereg.reports.load import LoadedRuns, load_runs
from prereg.reports.model import Discordant, Interval, Provenance
from prereg.reports.pairs import runset
from prereg.reports.render.text import num
from prereg.stats.bootstrap import FEW_CLUSTERS


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Side(Model):
    registration: str
    digest: str
    kind: str
    complete: bool
    verdict: str
    mode: str
    arms: dict[str, str]  # arm -> "successes of measured"
    discordant: Discordant | None
    primary_pvalue: float | None
    models_requested: list[str]
    models_returned: list[str]
    evidence_class: str | None
    configurations: dict[str, str]  # arm -> its configuration's label (driver, model, digest)


class ArmChange(Model):
    arm: str
    configuration_a: str  # the arm's configuration in A (label)
    configuration_b: str  # ... and in B
    same_configuration: bool
    tasks: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    interval: Interval | None
    discordant: Discordant
    mcnemar_pvalue: float
    provenance: Provenance


class Comparison(Model):
    a: Side
    b: Side
    requirements: list[str]
    differences: list[str]
    changes: list[ArmChange]
    label: str
    prereg_version: str
    ledger_head: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _task_content(task: Any) -> str:
    data = task.model_dump(mode="json") if hasattr(task, "model_dump") else dict(task)
    return json.dumps(data, sort_keys=True)


def _check(a: LoadedRuns, b: LoadedRuns) -> tuple[list[str], list[str]]:
    """(problems, differences): refusals and allowed differences, each named."""
    problems: list[str] = []
    ra, rb = a.entry.registration, b.entry.registration
    ta = {t.id: t for t in a.tasks}
    tb = {t.id: t for t in b.tasks}
    only_a, only_b = sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))
    if only_a or only_b:
        problems.append(
            f"corpora differ: tasks only in {a.entry.id}: {only_a[:10] or '-'}; "
            f"only in {b.entry.id}: {only_b[:10] or '-'}"
        )
    changed = sorted(t for t in set(ta) & set(tb) if _task_content(ta[t]) != _task_content(tb[t]))
    if changed:
        problems.append(
            f"corpora differ: {len(changed)} shared task(s) have different content: "
            f"{', '.join(changed[:10])}"
        )
    if ra.experiment != rb.experiment:
        problems.append(
            f"experiments differ: {a.entry.id} {ra.experiment}, {b.entry.id} {rb.experiment}"
        )
    if ra.split != rb.split:
        problems.append(f"splits differ: {a.entry.id} {ra.split}, {b.entry.id} {rb.split}")
    classes_a, classes_b = _classes(ra), _classes(rb)
    if classes_a != classes_b or (a.evidence_class != b.evidence_class and a.used and b.used):
        problems.append(
            f"evidence classes differ: {a.entry.id} {a.evidence_class or '/'.join(classes_a)}, "
            f"{b.entry.id} {b.evidence_class or '/'.join(classes_b)} (never pooled)"
        )
    if ra.outcome != rb.outcome:
        problems.append(f"outcomes differ: {a.entry.id} {ra.outcome}, {b.entry.id} {rb.outcome}")
    if not {x.id for x in ra.arms} & {x.id for x in rb.arms}:
        problems.append("no arm id in common: nothing to pair")
    differences = []
    da, db = ra.model_dump(mode="json"), rb.model_dump(mode="json")
    for key in sorted(set(da) | set(db)):
        if key in ("id", "title", "hypothesis", "falsification", "supersedes", "notes"):
            continue
        if da.get(key) != db.get(key):
            differences.append(
                f"{key}: {json.dumps(da.get(key), sort_keys=True)} -> "
                f"{json.dumps(db.get(key), sort_keys=True)}"
            )
    for surface in sorted(set(a.entry.files) | set(b.entry.files)):
        if a.entry.files.get(surface) != b.entry.files.get(surface):
            differences.append(
                f"file {surface}: {a.entry.files.get(surface)} -> {b.entry.files.get(surface)}"
            )
    return problems, differences


def _classes(reg: Registration) -> list[str]:
    """The evidence classes a registration's arms run in (one, by the schema's rule)."""
    return sorted({DRIVERS[reg.config_of(x.id).host.driver].evidence_class for x in reg.arms})


def config_label(reg: Registration, arm: str) -> str:
    """An arm's configuration as a label: driver, model and configuration digest."""
    config = arm_config(reg, arm)
    model = f" {config.model}" if config.model else ""
    return f"{config.driver}{model} [{config.digest()[7:19]}]"


def _side(loaded: LoadedRuns, head: dict[str, Any]) -> Side:
    report = build_report(loaded, head, Options(allow_incomplete=True, command="prereg compare"))
    return Side(
        registration=report.registration,
        digest=report.digest,
        kind=report.kind,
        complete=report.complete,
        verdict=report.verdict,
        mode=report.mode,
        arms={x.id: f"{x.successes} of {x.measured}" for x in report.arms},
        discordant=report.primary.discordant if report.primary else None,
        primary_pvalue=report.primary.pvalue if report.primary else None,
        models_requested=report.runs.models_requested,
        models_returned=report.runs.models_returned,
        evidence_class=report.runs.evidence_class,
        configurations={
            x.id: config_label(loaded.entry.registration, x.id)
            for x in loaded.entry.registration.arms
        },
    )


def _arm_change(a: LoadedRuns, b: LoadedRuns, arm: str, outcome: str, seed: int) -> ArmChange:
    def by_task(loaded: LoadedRuns) -> dict[str, dict[int, bool]]:
        out: dict[str, dict[int, bool]] = {}
        for o in loaded.used:
            v = o.outcome(outcome) if o.arm == arm else None
            if v is not None:
                out.setdefault(o.task_id, {})[o.repeat] = v
        return out

    ya, yb = by_task(a), by_task(b)
    tasks = [t for t in a.task_order if t in ya and t in yb]
    rows_a: list[float] = []
    rows_b: list[float] = []
    prompts: list[int] = []
    runs: list[int] = []
    b_only_a = c_only_b = 0
    for i, task in enumerate(tasks):
        for r in sorted(set(ya[task]) & set(yb[task])):
            rows_a.append(float(ya[task][r]))
            rows_b.append(float(yb[task][r]))
            prompts.append(i)
            runs.append(r)
        maj_a = sum(ya[task].values()) * 2 > len(ya[task])
        maj_b = sum(yb[task].values()) * 2 > len(yb[task])
        b_only_a += int(maj_a and not maj_b)
        c_only_b += int(maj_b and not maj_a)
    interval = None
    diff = None
    if rows_a:
        res = stats.paired_bootstrap(
            rows_a,
            rows_b,
            prompts,
            runs_control=runs,
            runs_treatment=runs,
            draws=10_000,
            level=0.95,
            seed=seed,
        )
        diff = res.estimate
        interval = Interval.resampled(
            res.low,
            res.high,
            0.95,
            res.method,
            unit="task",
            units=len(tasks),
            minimum=FEW_CLUSTERS,
        )
    mc = stats.mcnemar_exact(b_only_a, c_only_b)
    units = [(arm, t, r) for t in tasks for r in ya[t]]
    ra, rb = a.entry.registration, b.entry.registration
    return ArmChange(
        arm=arm,
        configuration_a=config_label(ra, arm),
        configuration_b=config_label(rb, arm),
        same_configuration=arm_config(ra, arm).digest() == arm_config(rb, arm).digest(),
        tasks=len(tasks),
        rate_a=sum(rows_a) / len(rows_a) if rows_a else None,
        rate_b=sum(rows_b) / len(rows_b) if rows_b else None,
        difference=diff,
        interval=interval,
        discordant=Discordant(b=b_only_a, c=c_only_b, n=b_only_a + c_only_b),
        mcnemar_pvalue=mc.pvalue,
        provenance=Provenance(
            function="prereg.stats.paired_bootstrap; prereg.stats.mcnemar_exact",
            parameters={
                "draws": 10_000,
                "level": 0.95,
                "seed": seed,
                "aggregate (McNemar)": "majority",
            },
            registration_field=None,
            runs=runset(
                units,
                f"arm {arm} of {a.entry.id}, paired with {b.entry.id} by task "
                "and repeat; status ok; outcome measured",
            ),
        ),
    )


def compare(ws: Workspace, a_id: str, b_id: str) -> Comparison:
    if a_id == b_id:
        raise BadInput("compare needs two different registrations", field="B")
    registry = Registry(ws.registry)
    head = registry.head().to_json()
    a = load_runs(ws, registry, verified_entry(registry, a_id))
    b = load_runs(ws, registry, verified_entry(registry, b_id))
    problems, differences = _check(a, b)
    if problems:
        raise ProtocolRefusal(
            f"'{a_id}' and '{b_id}' cannot be compared: {len(problems)} requirement(s) not met",
            details=problems,
        )
    outcome = a.entry.registration.outcome
    shared = [
        x.id for x in a.entry.registration.arms if x.id in {y.id for y in b.entry.registration.arms}
    ]
    seed = a.entry.registration.design.seed
    return Comparison(
        a=_side(a, head),
        b=_side(b, head),
        requirements=[
            "same experiment and split",
            "same tasks with identical content",
            "same evidence class",
            "same outcome",
            "a shared arm",
        ],
        differences=differences,
        changes=[_arm_change(a, b, arm, outcome, seed) for arm in shared],
        label=(
            "exploratory: the paired changes between registrations were registered by "
            "neither; each side's verdict is its own registered analysis; each change "
            "names the configuration (driver, model, digest) on either side"
        ),
        prereg_version=code_version(),
        ledger_head=head,
    )


def describe(c: Comparison) -> list[str]:
    """Plain lines for the terminal (callers print them as text, never as markup)."""
    lines = []
    for side in (c.a, c.b):
        arms = "; ".join(f"{k} {v}" for k, v in side.arms.items())
        disc = "-" if side.discordant is None else str(side.discordant.n)
        lines.append(
            f"{side.registration}: {side.verdict}"
            f"{'' if side.complete else ' (incomplete)'}. {arms}; discordant pairs "
            f"{disc}"
        )
    for ch in c.changes:
        iv = ch.interval
        configs = (
            f" [{ch.configuration_a}]"
            if ch.same_configuration
            else f" [{ch.configuration_a} -> {ch.configuration_b}]"
        )
        lines.append(
            f"arm {ch.arm}{configs}, {c.a.registration} -> {c.b.registration} on {ch.tasks} "
            f"tasks: {num(ch.rate_a)} -> {num(ch.rate_b)}, change {num(ch.difference)}"
            + (f" ({num(iv.low)} to {num(iv.high)}, 95%)" if iv else "")
            + f"; discordant {ch.discordant.n}, McNemar p {num(ch.mcnemar_pvalue)}"
        )
    lines += [f"differs: {d}" for d in c.differences]
    lines.append(c.label)
    return lines
