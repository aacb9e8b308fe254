"""The registered analysis of one registration, assembled into a :class:`Report`.

Order of work: load with refusal (:mod:`.load`), judge completeness (the planned
units, or with a stopping rule the prompts up to its crossing), refuse an
incomplete set unless ``allow_incomplete``, then compute exactly what the
registration asked for, compute the verdict (:mod:`.registered.verdict`), and add the
exploratory block.

The labelling rule: a report is *confirmatory* only when the registration is
confirmatory, its run set is complete (or it is not runnable, which is itself
the pre-committed confirmatory outcome) and ``--explore`` was not given.
Otherwise it is *exploratory*, with the reasons listed. The ``verdict`` field is
computed by :func:`prereg.reports.registered.verdict.final_verdict` from the registration
and the runs only: ``explore`` is not an input to it, and ``allow_incomplete``
only decides whether an incomplete set is refused (exit 4) or reported with
the verdict ``incomplete``.
"""

from __future__ import annotations

import importlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from prereg.core.errors import ProtocolRefusal, WriteFailure
from prereg.core.files import refuse_linked_folders
from prereg.core.forked import fork_map
from prereg.core.version import code_version
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.registry.registrations import Entry, Registry
from prereg.registry.schema import Registration, TestSpec
from prereg.registry.sessions import session_progress
from prereg.registry.verify import verified_entry
from prereg.reports import exploratory, invariants
from prereg.reports.arms import arm_report, denominators, pooled_icc
from prereg.reports.calibration.stored import stored_calibration
from prereg.reports.invokerank import controls
from prereg.reports.invokerank.section import invokerank_parts
from prereg.reports.invokerank.telemetry import report_block as telemetry_block
from prereg.reports.judged import section as judged
from prereg.reports.load import (
    MAX_NAMED,
    LoadedRuns,
    frozen_experiment,
    load_runs,
    load_telemetry,
    require_claim,
)
from prereg.reports.model import (
    Completeness,
    ContrastReport,
    MultiplicityReport,
    Reading,
    Report,
    ReportProvenance,
    RunsSummary,
    SessionState,
    TestReport,
    VerdictReport,
)
from prereg.reports.observations import Obs, unit_label
from prereg.reports.pairs import ArmOutcomes, PairData, arm_outcomes, pair_outcomes
from prereg.reports.pairwise import pairwise_changes
from prereg.reports.registered import contrasts, family, stopping
from prereg.reports.registered.apply import run_test
from prereg.reports.registered.verdict import final_verdict
from prereg.reports.render import figures
from prereg.reports.toolbottleneck.model import StudyReport
from prereg.runners.judging.verdicts import Verdict as JudgeVerdict
from prereg.runners.record import RunRecord
from prereg.runners.store.choose import resolve_store
from prereg.runners.store.verify import verified_records

#: Runs from which the report's sections are spread over processes (fewer: a fork costs
#: more than it saves).
FORK_FROM = 2000


@dataclass(frozen=True)
class Options:
    allow_incomplete: bool = False
    explore: bool = False
    command: str = "prereg analyse"
    store: str | None = None  # --store: the run store (else PREREG_STORE, else runs/)


class _Pairs:
    """Paired data per (control, treatment, outcome), built once each from its two arms'
    outcomes, each arm's read once per outcome (``build_pairs`` reads no other arm's; every
    pair of ten arms would otherwise read each run's outcome once per pair it is in)."""

    def __init__(self, loaded: LoadedRuns) -> None:
        self.loaded = loaded
        self.cache: dict[tuple[str, str, str], PairData] = {}
        self.outcomes: dict[tuple[str, str], ArmOutcomes] = {}
        self.by_arm: dict[str, list[Obs]] = defaultdict(list)
        for o in loaded.used:
            self.by_arm[o.arm].append(o)
        self.clusters = {t.id: t.cluster for t in loaded.tasks}

    def arm(self, arm: str, outcome: str) -> ArmOutcomes:
        key = (arm, outcome)
        if key not in self.outcomes:
            self.outcomes[key] = arm_outcomes(self.by_arm.get(arm, []), arm, outcome)
        return self.outcomes[key]

    def get(self, reg: Registration, spec: TestSpec) -> PairData:
        control, treatment = reg.compared_arms(spec)
        outcome = spec.outcome or reg.outcome
        key = (control, treatment, outcome)
        if key not in self.cache:
            self.cache[key] = pair_outcomes(
                self.arm(control, outcome),
                self.arm(treatment, outcome),
                control,
                treatment,
                outcome,
                self.loaded.task_order,
                self.loaded.intents,
                self.clusters,
                reg.design.repeats_per_run,
            )
        return self.cache[key]


def _complete_tasks(loaded: LoadedRuns) -> list[str]:
    """The planned tasks whose every planned unit has a completed run."""
    reg = loaded.entry.registration
    done = loaded.completed
    return [
        task
        for task in loaded.task_order
        if all((arm.id, task, r) in done for arm in reg.arms for r in range(reg.design.repeats))
    ]


def completeness(loaded: LoadedRuns, primary_pairs: Callable[[], PairData]) -> Completeness:
    """Whether the run set is complete; ``primary_pairs``: the primary test's paired
    data, built only when a stopping rule needs it (at a programme's size a fifth of a
    second, otherwise spent in a report section, in parallel)."""
    reg = loaded.entry.registration
    missing = loaded.missing
    done_units = loaded.completed
    open_infra = {o.unit for o in loaded.infra} - done_units
    cut = None
    basis = "every planned unit (arms x tasks of the split x repeats)"
    complete = not missing
    if not complete and reg.stopping is not None:
        cut = stopping.stopping_cut(
            reg, primary_pairs(), loaded.task_order, _complete_tasks(loaded)
        )
        if cut is not None:
            complete = True
            basis = (
                f"the registered stopping rule crossed its threshold at task {cut} of the "
                "registered stopping order; the units of the first tasks up to it are complete"
            )
    policy, counted = loaded.policy, len(loaded.counted)
    return Completeness(
        complete=complete,
        planned=len(loaded.planned),
        completed=len(done_units),
        missing=len(missing),
        missing_units=[unit_label(u) for u in missing[:MAX_NAMED]],
        infra_errors_open=len(open_infra),
        stopping_cut=cut,
        basis=f"{basis}; {denominators(policy.infrastructure, policy.attempts, counted)}",
        infrastructure=policy.infrastructure,
        attempts=policy.attempts,
        counted_as_failure=counted,
        denominators=denominators(policy.infrastructure, policy.attempts, counted),
        sessions=[
            SessionState(**s.to_json())
            for s in session_progress(
                loaded.planned, done_units, reg.design.repeats, reg.design.sessions
            )
        ],
    )


def _refuse_incomplete(entry_id: str, comp: Completeness) -> ProtocolRefusal:
    details = list(comp.missing_units)
    if comp.missing > len(details):
        details.append(f"... and {comp.missing - len(details)} more")
    infra = (
        f"; {comp.infra_errors_open} of them failed on infrastructure and will be retried "
        "by `prereg run`"
        if comp.infra_errors_open
        else ""
    )
    open_sessions = [str(s.session) for s in comp.sessions if not s.complete]
    sessions = (
        f" (replicate session{'s' if len(open_sessions) > 1 else ''} "
        f"{', '.join(open_sessions)} of {len(comp.sessions)} not complete: `prereg run "
        f"{entry_id} --session K` runs one)"
        if open_sessions
        else ""
    )
    return ProtocolRefusal(
        f"the runs of '{entry_id}' are incomplete: {comp.completed} of {comp.planned} planned "
        f"units completed, {comp.missing} missing{infra}{sessions}. Finish them with `prereg run "
        f"{entry_id}`, or analyse what exists with --allow-incomplete (the report is then "
        "exploratory and the verdict is 'incomplete')",
        details=details,
    )


def _runs_summary(loaded: LoadedRuns) -> RunsSummary:
    every = [*loaded.used, *loaded.infra]
    costs = [o.cost_usd for o in every if o.cost_usd is not None]
    tokens: dict[str, int] = {}
    for o in every:
        for key, value in (o.tokens or {}).items():
            if isinstance(value, int) and not isinstance(value, bool):
                tokens[key] = tokens.get(key, 0) + value
    return RunsSummary(
        records=loaded.records,
        used=len(loaded.used),
        infra_errors=len(loaded.infra),
        evidence_class=loaded.evidence_class,
        drivers=sorted({o.driver for o in every if o.driver}),
        models_requested=sorted({o.model_requested for o in every if o.model_requested}),
        models_returned=sorted({o.model_returned for o in every if o.model_returned}),
        spend_usd=float(sum(costs)) if costs else None,
        spend_measured_runs=len(costs),
        tokens=tokens or None,
        units=sorted(o.label() for o in loaded.used),
    )


def _surfaces(loaded: LoadedRuns) -> list[dict[str, Any]]:
    """Each arm's focal surface as offered (a control's transformation applied) and every
    server it lists, with the digest of each surface as offered."""
    out = []
    for arm in loaded.entry.registration.arms:
        surface = loaded.surfaces.get(arm.id)
        offer = loaded.offers.get(arm.id)
        servers: list[dict[str, Any]] = []
        if offer is not None:
            focal = offer.clones[0][0] if offer.clones else offer.servers[0]
            surface = focal.surface
            servers = [
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
        tools = (
            []
            if surface is None
            else [
                {"name": t.name, "title": t.title, "description": t.description}
                for t in surface.tools
            ]
        )
        out.append(
            {
                "arm": arm.id,
                "surface": arm.surface,
                "control": arm.control,
                "reference": loaded.entry.registration.reference_of(arm.id),
                "title": getattr(surface, "title", None),
                "description": getattr(surface, "description", None),
                "digest": getattr(surface, "digest", None),
                "servers": servers,
                "tools": tools,
            }
        )
    return out


def _tasks(loaded: LoadedRuns) -> list[dict[str, Any]]:
    return [
        {
            "id": t.id,
            "intent": t.intent,
            "cluster": t.cluster,
            "polarity": t.polarity,
            "prompt": t.prompt,
        }
        for t in loaded.tasks
    ]


def _family(
    inputs: contrasts.ContrastInputs,
    contrast_reports: list[ContrastReport],
    primary_pairs: PairData,
    secondary: list[TestReport],
    prior: tuple[float, float],
) -> MultiplicityReport | None:
    """The registered multiplicity family: the contrasts, the intents or the secondaries."""
    reg = inputs.reg
    if reg.multiplicity is not None and reg.multiplicity.family == "contrasts":
        return contrasts.family_report(inputs, contrast_reports) if contrast_reports else None
    if not primary_pairs.n:
        return None
    return family.multiplicity_report(reg, primary_pairs, secondary, inputs.seed, prior)


def build_report(
    loaded: LoadedRuns,
    head: dict[str, Any],
    options: Options,
    verdicts: Sequence[JudgeVerdict] = (),
) -> Report:
    """Everything after loading: completeness, the registered analysis, the verdict;
    ``verdicts``: the registered judges' (:mod:`prereg.reports.judged.section`).

    The sections are independent pure computations of the loaded runs: at a
    programme's size they are spread over processes (:mod:`prereg.core.forked`, the
    same values), the registered tests first and each arm's InvokeRank block last."""
    entry = loaded.entry
    reg = entry.registration
    pairs = _Pairs(loaded)
    comp = completeness(loaded, partial(pairs.get, reg, reg.primary))
    if entry.runnable and not comp.complete and not options.allow_incomplete:
        raise _refuse_incomplete(entry.id, comp)

    reasons = []
    if reg.kind == "exploratory":
        reasons.append("the registration is exploratory")
    if options.explore:
        reasons.append("--explore was given")
    if entry.runnable and not comp.complete:
        reasons.append("the run set is incomplete (analysed with --allow-incomplete)")

    invokerank = invokerank_parts(
        reg,
        judged.with_completed(reg, loaded.used, verdicts, judged.post_hoc_judges(entry)),
        native=judged.verdict_map(reg, verdicts, "native_self_service"),
        branded={t.id for t in loaded.tasks if t.branded},
        offers=loaded.offers,
        eligible=loaded.eligible or None,
    )
    sections: list[Callable[[], Any]] = [
        partial(_registered, loaded, pairs, comp),
        partial(_pairwise, reg, pairs),
        partial(_descriptive, loaded, reasons, verdicts),
        *invokerank.arms,
    ]
    done = fork_map(
        _call,
        sections,
        jobs_=None if len(loaded.used) >= FORK_FROM else 1,
        first=figures.prepare,  # matplotlib, for the figures next, while children start
    )
    fields: dict[str, Any] = {}
    for part in done[:3]:
        fields.update(part)
    return Report(
        registration=entry.id,
        title=reg.title,
        digest=entry.digest,
        kind=reg.kind,
        mode="exploratory" if reasons else "confirmatory",
        exploratory_reasons=reasons,
        complete=comp.complete,
        hypothesis=reg.hypothesis,
        falsification=reg.falsification,
        experiment=reg.experiment,
        split=reg.split,
        outcome=reg.outcome,
        host=reg.host.model_dump(mode="json"),
        per_intent_registered=(
            reg.multiplicity is not None and reg.multiplicity.family == "per-intent"
        ),
        feasibility=entry.feasibility,
        completeness=comp,
        invokerank=invokerank.assembled(done[3:]),
        registration_document=reg.model_dump(mode="json"),
        provenance=ReportProvenance(
            prereg_version=code_version(),
            analysed_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            ledger_head=head,
            registered_at=entry.registered_at,
            ledger_seq=entry.seq,
            frozen_path=f"registry/frozen/{entry.frozen_path.name}",
            superseded_by=entry.superseded_by,
            command=options.command,
            run_chains=loaded.chains,
        ),
        **fields,
    )


def _call(work: Callable[[], Any]) -> Any:
    return work()


def _registered(loaded: LoadedRuns, pairs: _Pairs, comp: Completeness) -> dict[str, Any]:
    """The registered analysis (per-arm rates, the primary and secondary tests, the
    multiplicity family, the stopping rule) and the verdict its rules give."""
    entry = loaded.entry
    reg = entry.registration
    primary_pairs = pairs.get(reg, reg.primary)
    seed = reg.design.seed
    prior = reg.stopping.prior if reg.stopping is not None else (1.0, 1.0)
    level = 1.0 - reg.primary.alpha
    pooled = pooled_icc(loaded.used, [a.id for a in reg.arms], reg.outcome)
    # the planned units of each arm (every task x repeat, save a study's held-out
    # families, which only its holdout arms play: reading H6)
    planned_per_arm = Counter(unit[0] for unit in loaded.planned)
    arms = [
        arm_report(
            reg, a.id, loaded.used, loaded.infra, planned_per_arm[a.id], reg.outcome, level, pooled
        )
        for a in reg.arms
    ]

    primary: TestReport | None = None
    secondary: list[TestReport] = []
    stop = None
    inputs = contrasts.ContrastInputs(
        reg, loaded.used, loaded.task_order, {t.id: t for t in loaded.tasks}, seed
    )

    def test(spec: TestSpec, role: str, field_name: str) -> TestReport:
        if spec.contrast is not None:
            return contrasts.contrast_test(inputs, spec, role=role, field_name=field_name)
        return run_test(
            spec,
            role=role,
            field_name=field_name,
            pairs=pairs.get(reg, spec),
            seed=seed,
            prior=prior,
        )

    contrast_reports = contrasts.contrast_reports(inputs) if loaded.used else []
    if loaded.used:
        primary = test(reg.primary, "primary", "primary")
        secondary = [
            test(spec, "secondary", f"secondary[{i}]") for i, spec in enumerate(reg.secondary)
        ]
        if reg.stopping is not None:
            stop = stopping.stopping_report(reg, primary_pairs)
    difference = None
    if primary_pairs.n and reg.primary.contrast is None:
        spec = TestSpec(
            test="paired_bootstrap",
            alpha=reg.primary.alpha,
            compare=reg.compared_arms(reg.primary),
            draws=10_000,
        )
        difference = run_test(
            spec, role="descriptive", field_name="arms", pairs=primary_pairs, seed=seed
        )
    multiplicity = _family(inputs, contrast_reports, primary_pairs, secondary, prior)
    per_intent = []
    if primary_pairs.n and reg.primary.contrast is None:
        per_intent = family.intent_rows(reg, primary_pairs, seed, level)

    reading: Reading | None
    if stop is not None:
        reading, reading_reason, decided_by = stop.reading, stop.reason, "stopping rule"
    elif primary is not None:
        reading, reading_reason, decided_by = primary.reading, primary.reason, "primary test"
    else:
        reading, reading_reason, decided_by = None, "no completed run", "primary test"
    verdict, decided, reason = final_verdict(
        entry.runnable,
        comp.complete,
        reading,
        decided_by,
        reading_reason,
        (entry.feasibility or {}).get("reason"),
    )
    return {
        "verdict": verdict,
        "verdict_detail": VerdictReport(
            value=verdict, decided_by=decided, reason=reason, rule_reading=reading
        ),
        "primary": primary,
        "secondary": secondary,
        "multiplicity": multiplicity,
        "contrasts": contrast_reports,
        "per_intent": per_intent,
        "stopping": stop,
        "arms": arms,
        "difference": difference,
    }


def _pairwise(reg: Registration, pairs: _Pairs) -> dict[str, Any]:
    """Every pair of arms' change (descriptive)."""
    seed = reg.design.seed
    return {"pairwise": pairwise_changes(reg, lambda spec: pairs.get(reg, spec), seed)}


def _descriptive(
    loaded: LoadedRuns, reasons: list[str], verdicts: Sequence[JudgeVerdict]
) -> dict[str, Any]:
    """What the report shows beside the registered analysis: the runs, surfaces and
    tasks, the exploratory block, the controls and the judges' section."""
    entry = loaded.entry
    reg = entry.registration
    return {
        "runs": _runs_summary(loaded),
        "surfaces": _surfaces(loaded),
        "tasks": _tasks(loaded),
        "exploratory": exploratory.exploratory_block(
            loaded.used, [a.id for a in reg.arms], reasons
        ),
        "controls": controls.control_reports(
            controls.Context(reg, loaded.used, loaded.task_order, loaded.intents, loaded.offers)
        ),
        "judged": judged.judged_report(entry, loaded.used, verdicts),
    }


def analyse(
    ws: Workspace, reg_id: str, options: Options | None = None, records: list[Any] | None = None
) -> Report:
    """Load, check and analyse registration ``reg_id`` of workspace ``ws``."""
    options = options or Options()
    # where its report is written (write_report): no folder on the way a link (exit 3)
    refuse_linked_folders(ws.root, "reports", reg_id, "exploratory", "figures")
    refuse_linked_folders(ws.root, "reports", reg_id, "figures")
    registry = Registry(ws.registry)
    entry = verified_entry(registry, reg_id)
    loaded = load_runs(
        ws, registry, entry, records=records, store=options.store, alongside=import_ahead
    )
    if records is None and loaded.records:
        require_claim(registry, entry)
    loaded = replace(loaded, chains=anchor_chains(registry, entry, loaded.chains))
    # exit 3 on a foreign rubric or a chain off its anchors; pins the heads it read
    verdicts = judged.load_verdicts(ws.runs, entry, registry)
    head = registry.head().to_json()  # after the anchor, so the report pins it
    report = build_report(loaded, head, options, verdicts)
    # a stored `prereg calibrate` table, only when it is of this digest (else a note)
    report.calibration, report.calibration_note = stored_calibration(ws, entry.id, entry.digest)
    if report.invokerank is not None:  # issue 41 item 5: S vs T, with the log's head read
        report.invokerank.telemetry = telemetry_block(
            entry.registration,
            loaded.used,
            loaded.surfaces,
            loaded.evidence_class,
            partial(load_telemetry, ws.registry),
        )
    if any(a.toolbottleneck is not None for a in entry.registration.arms):  # issue 19
        study = (
            [r if isinstance(r, RunRecord) else RunRecord.model_validate(r) for r in records]
            if records is not None
            else _study_records(ws, registry, entry, options)
        )
        report.toolbottleneck = _study_report(
            entry.registration, study, frozen_experiment(registry, entry)
        )
    # issue 39: every printed interval and count checked; a broken one is exit 1, unwritten
    invariants.enforce(report)
    return report


#: The ToolBottleneckBench study's tables (issue 19), imported by name where a
#: registration has study arms: with what they import (the study's harness and host),
#: 50 ms of every other analysis's start.
STUDY_TABLES = "prereg.reports.toolbottleneck.registered"
StudyTables = Callable[[Registration, list[RunRecord], Experiment], StudyReport | None]


def _study_report(
    registration: Registration, records: list[RunRecord], experiment: Experiment
) -> StudyReport | None:
    """:func:`prereg.reports.toolbottleneck.registered.study_report`, imported here (the
    frozen experiment: Figure 5 compiles its first family)."""
    tables: StudyTables = importlib.import_module(STUDY_TABLES).study_report
    return tables(registration, records, experiment)


#: What the sections import on first use: scipy's special functions and optimisers (the
#: statistics, through :mod:`prereg.stats._scipy`) and numpy's random generators (the
#: bootstraps). Matplotlib, for the figures, is :func:`figures.prepare`'s.
FIRST_USE = ("scipy.special", "scipy.optimize", "numpy.random")


def import_ahead() -> None:
    """Import :data:`FIRST_USE` now. ``analyse`` has this done while forked children
    verify a long chain: the sections' children, forked later, then inherit them instead
    of each importing scipy (0.4 s apiece). (A test checks that an analysis, after this
    and :func:`figures.prepare`, imports no more of scipy, numpy or matplotlib.)"""
    for name in FIRST_USE:
        importlib.import_module(name)


def _study_records(
    ws: Workspace, registry: Registry, entry: Entry, options: Options
) -> list[RunRecord]:
    """A study's run records (verified again: the census reads fields the observations
    do not carry)."""
    stored, _ = verified_records(resolve_store(ws.runs, options.store), registry, entry)
    return [r for r in stored if r.registration_digest == entry.digest]


def anchor_chains(
    registry: Registry, entry: Entry, chains: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Pin the analysed chain of ``entry``'s digest in the ledger (best effort).

    Returns the chains with ``anchor`` (the ledger seq that pins each head, or None
    when none does and the registry cannot be written: a read-only workspace can
    still be analysed; its report then says the head is unpinned).
    """
    out = {digest: dict(info) for digest, info in chains.items()}
    mine = out.get(entry.digest)
    if mine is not None:
        try:
            registry.anchor_runs(entry, int(mine["count"]), str(mine["head"]))
        except (OSError, WriteFailure):  # a read-only registry: the report says "unpinned"
            pass
    for digest, info in out.items():
        pinned = [
            a["seq"]
            for a in registry.anchors(digest)
            if (a.get("count"), a.get("head")) == (info["count"], info["head"])
        ]
        info["anchor"] = pinned[-1] if pinned else None
    return out
