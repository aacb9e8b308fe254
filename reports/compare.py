"""``prereg compare A B [C ...]``: registrations' runs, side by side and paired.

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

InvokeRank (issue 41, item 1; seed 6.6): when both registrations carry an InvokeRank
section, ``invokerank`` puts both registrations' scores per shared arm, per intent and
overall, in one table and applies the seed's stability rule: the two 90% intervals (each
registration's score interval, its registered method) overlap, reported beside the 90%
paired prompt bootstrap of the change over the prompts both ran
(:func:`prereg.stats.invokerank.paired.paired_prompt_bootstrap`). Reading (docs/invokerank.md,
"Comparing two registrations"): the paired change is in the Selection-level plug-in (the
share of positive runs reaching Selected, intent-weighted with A's weights), the seed's
"change in selection"; the overlap is of the scores at their level, and two scores of
different levels (IR against IR_DS) are not compared.

More than two registrations (``compare A B C ...``, issue 41: "nothing puts several
registrations' InvokeRank results in one table"): A is the reference. Each other
registration must meet the requirements above against A and is compared with A exactly
as ``compare A X`` would (the same seed, A's; the prompts A and X both ran): B in ``b``,
``differences``, ``changes`` and ``invokerank`` as before, the third and later ones under
``others``. ``invokerank_table`` puts every registration's score per arm, intent and
overall in one table beside A's, each with its stability reading against A (present for
two registrations too). Reading (docs/invokerank.md): registrations after the first are
not compared with one another, and the N - 1 readings are exploratory, with no
multiplicity adjustment. The two-registration JSON keeps every key it had, and adds
``registrations``, ``others`` (empty) and ``invokerank_table``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
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
from prereg.reports.invokerank.intervals import EXTENDED
from prereg.reports.invokerank.scores import roll_up_weights
from prereg.reports.load import LoadedRuns, load_runs
from prereg.reports.model import (
    ArmInvokeRank,
    Discordant,
    Interval,
    InvokeRankReport,
    Provenance,
    Report,
)
from prereg.reports.observations import outcome_place
from prereg.reports.pairs import runset
from prereg.reports.render.markdown import esc, table
from prereg.reports.render.text import num, points
from prereg.stats.bootstrap import FEW_CLUSTERS
from prereg.stats.invokerank import MIN_PROMPTS
from prereg.stats.invokerank.paired import PAIRED_RESAMPLES, paired_prompt_bootstrap


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


class IRCompareRow(Model):
    """One arm's InvokeRank in both registrations, for one intent or overall."""

    arm: str
    intent: str  # an intent, or "overall" (the roll-up)
    symbol_a: str  # IR or IR_DS
    symbol_b: str
    score_a: float | None
    score_b: float | None
    interval_a: Interval | None  # each registration's 90% score interval
    interval_b: Interval | None
    overlap: bool | None  # None: not decided (an interval withheld, or levels differ)
    prompts: int  # prompts both registrations ran (positive, with a run in each)
    change: float | None  # paired change in the Selection-level plug-in, B - A
    change_interval: Interval | None  # 90% paired prompt bootstrap
    stability: str  # the rule's reading of the row


class IRComparison(Model):
    rule: str
    statistic: str
    rows: list[IRCompareRow]
    provenance: Provenance


class Against(Model):
    """A third or later registration, compared with the reference (the first) exactly as
    ``b`` is: its side, what differs, the paired changes and the InvokeRank rows."""

    side: Side
    differences: list[str]
    changes: list[ArmChange]
    invokerank: IRComparison | None = None


class IRScore(Model):
    """One registration's score in the table of every registration."""

    registration: str
    symbol: str
    score: float | None
    interval: Interval | None  # its 90% score interval


class IRAgainst(IRScore):
    """A registration's score beside the reference's, with the stability rule."""

    overlap: bool | None
    prompts: int
    change: float | None  # paired change, this registration minus the reference
    change_interval: Interval | None
    stability: str


class IRTableRow(Model):
    arm: str
    intent: str
    reference: IRScore
    #: one per other registration in the order given; None where that registration has
    #: no score for the arm (no InvokeRank section, or the arm not shared or not scored)
    against: list[IRAgainst | None]


class IRTable(Model):
    """Every registration's InvokeRank per arm, intent and overall in one table, each
    read against the reference (the first registration) by the stability rule."""

    reference: str
    registrations: list[str]
    rule: str
    statistic: str
    reading: str
    rows: list[IRTableRow]


class Comparison(Model):
    a: Side
    b: Side
    requirements: list[str]
    differences: list[str]
    changes: list[ArmChange]
    invokerank: IRComparison | None = None
    label: str
    prereg_version: str
    ledger_head: dict[str, Any]
    #: every registration compared, the reference (``a``) first (issue 41)
    registrations: list[str] = []
    #: the third and later registrations, each against the reference as ``b`` is
    others: list[Against] = []
    #: every registration's InvokeRank in one table (None unless the reference has one)
    invokerank_table: IRTable | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def pairs(self) -> list[tuple[Side, list[str], list[ArmChange], IRComparison | None]]:
        """(side, differences, changes, InvokeRank rows) of every registration compared
        with the reference, in the order given (``b`` first)."""
        return [
            (self.b, self.differences, self.changes, self.invokerank),
            *((o.side, o.differences, o.changes, o.invokerank) for o in self.others),
        ]


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


def _report(loaded: LoadedRuns, head: dict[str, Any]) -> Report:
    return build_report(loaded, head, Options(allow_incomplete=True, command="prereg compare"))


def _side(loaded: LoadedRuns, report: Report) -> Side:
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


def compare(ws: Workspace, a_id: str, *others: str) -> Comparison:
    """Registrations ``a_id`` (the reference) and ``others`` (one or more), each compared
    with the reference: the two-registration comparison of ``a`` and ``b`` as before,
    the third and later ones under ``others``, and every InvokeRank score in one table."""
    ids = [a_id, *others]
    if not others:
        raise BadInput("compare needs at least two registrations", field="B")
    if a_id in others:
        raise BadInput("compare needs two different registrations", field="B")
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise BadInput(f"a registration is named twice: {', '.join(twice)}", field="REGISTRATION")
    registry = Registry(ws.registry)
    head = registry.head().to_json()
    loaded = [load_runs(ws, registry, verified_entry(registry, i)) for i in ids]
    a = loaded[0]
    problems: list[str] = []
    differences: list[list[str]] = []
    for x in loaded[1:]:
        found, differ = _check(a, x)
        prefix = "" if len(ids) == 2 else f"{x.entry.id}: "
        problems += [prefix + p for p in found]
        differences.append(differ)
    if problems:
        what = f"'{a_id}' and '{others[0]}'" if len(ids) == 2 else f"{', '.join(ids)}"
        raise ProtocolRefusal(
            f"{what} cannot be compared: {len(problems)} requirement(s) not met",
            details=problems,
        )
    seed = a.entry.registration.design.seed
    reports = [_report(x, head) for x in loaded]
    against = [
        _against(a, x, reports[0], rx, diff, seed)
        for x, rx, diff in zip(loaded[1:], reports[1:], differences, strict=True)
    ]
    first = against[0]
    return Comparison(
        a=_side(a, reports[0]),
        b=first.side,
        requirements=[
            "same experiment and split",
            "same tasks with identical content",
            "same evidence class",
            "same outcome",
            "a shared arm",
        ],
        differences=first.differences,
        changes=first.changes,
        invokerank=first.invokerank,
        label=(
            "exploratory: the paired changes between registrations were registered by "
            "neither; each side's verdict is its own registered analysis; each change "
            "names the configuration (driver, model, digest) on either side"
        ),
        prereg_version=code_version(),
        ledger_head=head,
        registrations=ids,
        others=against[1:],
        invokerank_table=invokerank_table(reports[0].invokerank, ids, against),
    )


def _against(
    a: LoadedRuns, x: LoadedRuns, report_a: Report, report_x: Report, differ: list[str], seed: int
) -> Against:
    """Registration ``x`` against the reference ``a``: what ``compare A X`` gives for X."""
    outcome = a.entry.registration.outcome
    arms_x = {y.id for y in x.entry.registration.arms}
    shared = [y.id for y in a.entry.registration.arms if y.id in arms_x]
    return Against(
        side=_side(x, report_x),
        differences=differ,
        changes=[_arm_change(a, x, arm, outcome, seed) for arm in shared],
        invokerank=invokerank_comparison(
            report_a.invokerank, report_x.invokerank, a, x, shared, seed
        ),
    )


STABILITY_RULE = (
    "seed 6.6: a score is stable between the two registrations when their 90% intervals "
    "overlap (the method's stability rule); the 90% paired prompt bootstrap of the change, "
    "over the prompts both ran, is shown beside it, since overlap can miss a real change"
)
PAIRED_STATISTIC = (
    "paired change B - A in the Selection-level plug-in: per intent, the share of positive "
    "runs reaching Selected; overall, their weighted sum (A's intent weights); percentile "
    f"interval of {PAIRED_RESAMPLES} resamples of prompts within intents, the same prompts "
    f"on both sides; withheld below {MIN_PROMPTS} prompts in an intent"
)


def _positive_counts(loaded: LoadedRuns, arm: str) -> dict[str, tuple[str, int, int]]:
    """task -> (intent, positive runs, runs reaching Selected) of one arm."""
    place = outcome_place("selected")
    out: dict[str, tuple[str, int, int]] = {}
    for o in loaded.used:
        if o.arm != arm or o.polarity != "positive" or not (o.ok or o.counted_failure):
            continue
        intent, n, y = out.get(o.task_id, (o.intent, 0, 0))
        out[o.task_id] = (intent, n + 1, y + bool(o.outcomes[place]))
    return out


def _first(intervals: list[Any]) -> Interval | None:
    iv = next((i for i in intervals if round(i.level, 2) == 0.9), None)
    return None if iv is None else Interval.model_validate(iv.model_dump())


def _overlap(a: Interval | None, b: Interval | None) -> bool | None:
    if a is None or b is None or None in (a.low, a.high, b.low, b.high):
        return None
    return bool(float(a.low or 0.0) <= float(b.high or 0.0)) and bool(
        float(b.low or 0.0) <= float(a.high or 0.0)
    )


def _change_interval(estimate: float, low: float, high: float, method: str, units: int) -> Interval:
    iv = Interval.resampled(
        low, high, 0.90, method, unit="prompt", units=units, minimum=MIN_PROMPTS
    )
    if iv.low is not None and iv.high is not None and not iv.low <= estimate <= iv.high:
        iv = Interval(
            low=min(iv.low, estimate),
            high=max(iv.high, estimate),
            level=iv.level,
            method=iv.method,
            reason=EXTENDED,
        )
    return iv


def _stability(
    symbols: tuple[str, str], overlap: bool | None, ivs: tuple[Interval | None, ...]
) -> str:
    if symbols[0] != symbols[1]:
        return f"not compared: the scores are of different levels ({symbols[0]}, {symbols[1]})"
    if overlap is None:
        why = next((i.reason for i in ivs[:2] if i is not None and i.reason), None)
        return "not decided: no 90% interval on one side" + (f" ({why})" if why else "")
    change = ivs[2]
    if not overlap:
        return "not stable: the 90% intervals do not overlap"
    if change is None or change.low is None or change.high is None:
        return "stable by overlap; paired change: no interval"
    if change.low > 0 or change.high < 0:
        return "stable by overlap, but the paired change excludes 0"
    return "stable: the intervals overlap and the paired change covers 0"


def _arm_rows(
    arm: str,
    xa: ArmInvokeRank,
    xb: ArmInvokeRank,
    a: LoadedRuns,
    b: LoadedRuns,
    seed: int,
) -> list[IRCompareRow]:
    ca, cb = _positive_counts(a, arm), _positive_counts(b, arm)
    tasks = [t for t in a.task_order if t in ca and t in cb]
    intents = sorted({ca[t][0] for t in tasks})
    paired = None
    if tasks:
        weights, _ = roll_up_weights(intents, a.entry.registration.intent_weights)
        if sum(weights) <= 0:
            weights = [1.0] * len(intents)
        paired = paired_prompt_bootstrap(
            [ca[t][1] for t in tasks],
            [ca[t][2] for t in tasks],
            [cb[t][1] for t in tasks],
            [cb[t][2] for t in tasks],
            [intents.index(ca[t][0]) for t in tasks],
            weights=weights,
            level=0.90,
            seed=seed,
        )
    symbols = (xa.symbol, xb.symbol)
    rows = []
    scores_a = {i.intent: i for i in xa.intents}
    scores_b = {i.intent: i for i in xb.intents}
    for intent in ["overall", *sorted(set(scores_a) | set(scores_b))]:
        if intent == "overall":
            qa, qb = xa.q, xb.q
            ia, ib = _first(xa.intervals), _first(xb.intervals)
        else:
            sa, sb = scores_a.get(intent), scores_b.get(intent)
            qa, qb = (None if sa is None else sa.q), (None if sb is None else sb.q)
            ia = None if sa is None else _first(sa.intervals)
            ib = None if sb is None else _first(sb.intervals)
        change = change_iv = None
        prompts = 0
        if paired is not None and (intent == "overall" or intent in intents):
            if intent == "overall":
                prompts = len(tasks)
                change = paired.rollup
                units = int(np.min(paired.prompts))
                lo, hi = paired.rollup_low, paired.rollup_high
            else:
                c = intents.index(intent)
                prompts = units = int(paired.prompts[c])
                change, lo, hi = (
                    float(paired.change[c]),
                    float(paired.low[c]),
                    float(paired.high[c]),
                )
            change_iv = _change_interval(change, lo, hi, paired.method, units)
        overlap = _overlap(ia, ib) if symbols[0] == symbols[1] else None
        rows.append(
            IRCompareRow(
                arm=arm,
                intent=intent,
                symbol_a=xa.symbol,
                symbol_b=xb.symbol,
                score_a=qa,
                score_b=qb,
                interval_a=ia,
                interval_b=ib,
                overlap=overlap,
                prompts=prompts,
                change=change,
                change_interval=change_iv,
                stability=_stability(symbols, overlap, (ia, ib, change_iv)),
            )
        )
    return rows


def invokerank_comparison(
    ir_a: InvokeRankReport | None,
    ir_b: InvokeRankReport | None,
    a: LoadedRuns,
    b: LoadedRuns,
    shared: list[str],
    seed: int,
) -> IRComparison | None:
    """Both registrations' InvokeRank per shared arm, intent and overall, with the seed's
    stability rule (module docstring); None unless both carry an InvokeRank section."""
    if ir_a is None or ir_b is None:
        return None
    arms_a = {x.arm: x for x in ir_a.arms}
    arms_b = {x.arm: x for x in ir_b.arms}
    rows: list[IRCompareRow] = []
    for arm in shared:
        xa, xb = arms_a.get(arm), arms_b.get(arm)
        if xa is None or xb is None or xa.q is None or xb.q is None:
            continue
        rows += _arm_rows(arm, xa, xb, a, b, seed)
    return IRComparison(
        rule=STABILITY_RULE,
        statistic=PAIRED_STATISTIC,
        rows=rows,
        provenance=Provenance(
            function="prereg.stats.invokerank.paired.paired_prompt_bootstrap",
            parameters={"level": 0.90, "resamples": PAIRED_RESAMPLES, "seed": seed},
            registration_field=None,
        ),
    )


TABLE_READING = (
    "each registration is read against the first (the reference) alone, by the seed's rule "
    "(overlap of the two 90% score intervals, the 90% paired prompt bootstrap of the change "
    "beside it) over the prompts the reference and that registration both ran; "
    "registrations after the first are not compared with one another, and the N - 1 "
    "readings are exploratory, with no adjustment for their number"
)


def invokerank_table(
    ir_ref: InvokeRankReport | None, ids: list[str], against: list[Against]
) -> IRTable | None:
    """Every registration's score per arm, intent and overall beside the reference's,
    from the pairwise rows (each registration against the reference); None unless the
    reference carries an InvokeRank section."""
    if ir_ref is None:
        return None
    arm_order = [x.arm for x in ir_ref.arms]
    keys: dict[tuple[str, str], IRScore] = {}
    cells: dict[tuple[str, str], list[IRAgainst | None]] = {}
    for j, other in enumerate(against):
        for r in other.invokerank.rows if other.invokerank is not None else []:
            key = (r.arm, r.intent)
            keys.setdefault(
                key,
                IRScore(
                    registration=ids[0], symbol=r.symbol_a, score=r.score_a, interval=r.interval_a
                ),
            )
            cells.setdefault(key, [None] * len(against))[j] = IRAgainst(
                registration=other.side.registration,
                symbol=r.symbol_b,
                score=r.score_b,
                interval=r.interval_b,
                overlap=r.overlap,
                prompts=r.prompts,
                change=r.change,
                change_interval=r.change_interval,
                stability=r.stability,
            )

    def order(key: tuple[str, str]) -> tuple[int, int, str]:
        arm, intent = key
        rank = arm_order.index(arm) if arm in arm_order else len(arm_order)
        return (rank, intent != "overall", intent)

    return IRTable(
        reference=ids[0],
        registrations=ids,
        rule=STABILITY_RULE,
        statistic=PAIRED_STATISTIC,
        reading=TABLE_READING,
        rows=[
            IRTableRow(arm=k[0], intent=k[1], reference=keys[k], against=cells[k])
            for k in sorted(keys, key=order)
        ],
    )


def _iv_text(iv: Interval | None) -> str:
    if iv is None:
        return "-"
    if iv.low is None or iv.high is None:
        return f"no interval ({iv.reason})" if iv.reason else "no interval"
    text = f"{points(iv.low)} to {points(iv.high)}"
    return text + (f" ({iv.reason})" if iv.reason else "")


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}"


def invokerank_rows(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """The InvokeRank table (header, rows), scores in points, for Markdown and terminal."""
    header = [
        "arm",
        "intent",
        f"{c.a.registration} score",
        "90% interval",
        f"{c.b.registration} score",
        "90% interval",
        "overlap",
        "prompts paired",
        "paired change B - A (points)",
        "90% paired bootstrap",
        "stability (seed 6.6)",
    ]
    rows = []
    for r in c.invokerank.rows if c.invokerank is not None else []:
        rows.append(
            [
                r.arm,
                r.intent,
                f"{points(r.score_a)} ({r.symbol_a})",
                _iv_text(r.interval_a),
                f"{points(r.score_b)} ({r.symbol_b})",
                _iv_text(r.interval_b),
                "-" if r.overlap is None else ("yes" if r.overlap else "no"),
                str(r.prompts),
                _signed(r.change),
                _iv_text(r.change_interval),
                r.stability,
            ]
        )
    return header, rows


def table_rows(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """The table of every registration's InvokeRank (header, rows), for Markdown."""
    t = c.invokerank_table
    ref = c.a.registration
    header = ["arm", "intent", f"{ref} score (reference)", "90% interval"]
    for other in c.registrations[1:]:
        header += [
            f"{other} score",
            "90% interval",
            f"change {other} - {ref} (points)",
            "90% paired bootstrap",
            f"stability against {ref}",
        ]
    rows = []
    for r in t.rows if t is not None else []:
        row = [
            r.arm,
            r.intent,
            f"{points(r.reference.score)} ({r.reference.symbol})",
            _iv_text(r.reference.interval),
        ]
        for cell in r.against:
            if cell is None:
                row += ["-", "-", "-", "-", "no score on this side"]
                continue
            row += [
                f"{points(cell.score)} ({cell.symbol})",
                _iv_text(cell.interval),
                f"{_signed(cell.change)} ({cell.prompts} prompts)",
                _iv_text(cell.change_interval),
                cell.stability,
            ]
        rows.append(row)
    return header, rows


def markdown(c: Comparison) -> str:
    """The comparison as Markdown (every value escaped: ids and intents are untrusted)."""
    if len(c.registrations) > 2:
        return _markdown_many(c)
    out = [f"# {esc(c.a.registration)} compared with {esc(c.b.registration)}", ""]
    out += [f"- {esc(line)}" for line in describe(c, with_invokerank=False)]
    if c.invokerank is not None:
        header, rows = invokerank_rows(c)
        out += ["", "## InvokeRank: both registrations' scores", ""]
        out += [esc(c.invokerank.rule), "", esc(c.invokerank.statistic), ""]
        out += table(header, rows) if rows else ["No shared arm has a score on both sides."]
    return "\n".join(out) + "\n"


def _markdown_many(c: Comparison) -> str:
    """Three or more registrations: one table of every registration's scores."""
    others = ", ".join(esc(i) for i in c.registrations[1:])
    out = [f"# {others} compared with {esc(c.a.registration)} (the reference)", ""]
    out += [f"- {esc(line)}" for line in describe(c, with_invokerank=False)]
    t = c.invokerank_table
    if t is not None:
        header, rows = table_rows(c)
        out += ["", "## InvokeRank: every registration's scores", ""]
        out += [esc(t.rule), "", esc(t.statistic), "", esc(t.reading), ""]
        out += table(header, rows) if rows else ["No arm has a score in two registrations."]
    return "\n".join(out) + "\n"


def describe(c: Comparison, with_invokerank: bool = True) -> list[str]:
    """Plain lines for the terminal (callers print them as text, never as markup)."""
    lines = []
    for side in (c.a, *(p[0] for p in c.pairs())):
        arms = "; ".join(f"{k} {v}" for k, v in side.arms.items())
        disc = "-" if side.discordant is None else str(side.discordant.n)
        lines.append(
            f"{side.registration}: {side.verdict}"
            f"{'' if side.complete else ' (incomplete)'}. {arms}; discordant pairs "
            f"{disc}"
        )
    many = len(c.pairs()) > 1
    for side, differences, changes, _ in c.pairs():
        for ch in changes:
            iv = ch.interval
            configs = (
                f" [{ch.configuration_a}]"
                if ch.same_configuration
                else f" [{ch.configuration_a} -> {ch.configuration_b}]"
            )
            lines.append(
                f"arm {ch.arm}{configs}, {c.a.registration} -> {side.registration} on "
                f"{ch.tasks} tasks: {num(ch.rate_a)} -> {num(ch.rate_b)}, change "
                f"{num(ch.difference)}"
                + _change_text(iv)
                + f"; discordant {ch.discordant.n}, McNemar p {num(ch.mcnemar_pvalue)}"
            )
        prefix = f"{side.registration} " if many else ""
        lines += [f"{prefix}differs: {d}" for d in differences]
    if with_invokerank:
        lines += _invokerank_lines(c)
    lines.append(c.label)
    return lines


def _change_text(iv: Interval | None) -> str:
    """A paired change's 95% interval, or the reason it is withheld (never "null")."""
    if iv is None:
        return ""
    if iv.low is None or iv.high is None:
        return f" (no 95% interval: {iv.reason})" if iv.reason else " (no 95% interval)"
    return f" ({num(iv.low)} to {num(iv.high)}, 95%)"


def _invokerank_lines(c: Comparison) -> list[str]:
    if len(c.registrations) <= 2:
        if c.invokerank is None:
            return []
        lines = [f"InvokeRank stability rule: {c.invokerank.rule}"]
        for r in c.invokerank.rows:
            lines.append(
                f"InvokeRank {r.arm}, {r.intent}: {c.a.registration} {points(r.score_a)} "
                f"({_iv_text(r.interval_a)}), {c.b.registration} {points(r.score_b)} "
                f"({_iv_text(r.interval_b)}); paired change {_signed(r.change)} "
                f"({_iv_text(r.change_interval)}, {r.prompts} prompts): {r.stability}"
            )
        return lines
    t = c.invokerank_table
    if t is None:
        return []
    lines = [f"InvokeRank stability rule: {t.rule}", f"Reading: {t.reading}"]
    for row in t.rows:
        ref = row.reference
        lines.append(
            f"InvokeRank {row.arm}, {row.intent}: reference {t.reference} {points(ref.score)} "
            f"({_iv_text(ref.interval)})"
        )
        for name, cell in zip(t.registrations[1:], row.against, strict=True):
            if cell is None:
                lines.append(f"  {name}: no score for this arm")
                continue
            lines.append(
                f"  {name} {points(cell.score)} ({_iv_text(cell.interval)}); change "
                f"{_signed(cell.change)} ({_iv_text(cell.change_interval)}, {cell.prompts} "
                f"prompts): {cell.stability}"
            )
    return lines
