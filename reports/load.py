"""Loading a registration's runs, with refusal.

Analysis only ever sees runs that provably belong to the registration:

- every run must carry the registration's full digest (and name the
  registration); a run that names it with another digest, or carries its digest
  under another name, is refused with exit 3 and named (invariant 3);
- every run must come from one evidence class and from the registered driver:
  classes are never pooled (invariant 8), exit 3 naming the minority runs;
- every run must be a planned unit (arm x task of the split x repeat): a record
  for a unit the registration never planned is refused, exit 3.

Completeness (exit 4 unless ``--allow-incomplete``) is judged later, in
:mod:`prereg.reports.analysis`, because a registered stopping rule changes what
"complete" means.

Infrastructure failures follow the registered policy (``harness.infrastructure``):
under ``retry`` they are only counted (``infra``) and their units stay missing until
a run completes; under ``count_as_failure`` a planned unit with no ok record and at
least ``attempts`` infra_error records is settled and counted as a failure
(``counted``, also part of ``used``): see :func:`counted_failures`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput, IntegrityError, ProtocolRefusal
from prereg.core.forked import Forked
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.experiments.models import LOCKED_SPLIT
from prereg.experiments.offers import ArmOffer
from prereg.registry.audit_log import AuditLog
from prereg.registry.ledger import Ledger
from prereg.registry.registrations import Entry, Registry
from prereg.registry.units import (
    HarnessPolicy,
    build_offers,
    expand_units,
    harness_policy,
    plan_from_registration,
)
from prereg.reports.model import TelemetryLogHead
from prereg.reports.observations import (
    Obs,
    RecordLike,
    from_record,
    pinned_observation,
    replaced,
    unit_label,
)
from prereg.runners.exchange.telemetry import EVENT as TELEMETRY_EVENT
from prereg.runners.exchange.telemetry import TelemetryRow, log_path
from prereg.runners.store.choose import resolve_store
from prereg.runners.store.verify import held_gc, verified_as

Unit = tuple[str, str, int]
MAX_NAMED = 20
#: Plans from this many units on are expanded in a forked child (:mod:`prereg.core.forked`).
FORK_UNITS = 2000


@dataclass(frozen=True)
class LoadedRuns:
    """A registration's runs after the integrity checks."""

    entry: Entry
    tasks: tuple[Any, ...]  # the split's tasks, in corpus order
    surfaces: dict[str, Any]  # arm id -> frozen surface (or None)
    planned: tuple[Unit, ...]
    used: tuple[Obs, ...]  # the one ok record of each completed unit (+ ``counted``)
    infra: tuple[Obs, ...]  # infrastructure-failure records (all of them)
    records: int
    evidence_class: str | None
    offers: dict[str, Any] = field(default_factory=dict)  # arm id -> ArmOffer (as run)
    #: the verified run chains read (digest -> count, head); empty for supplied records
    chains: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the registered harness rules (how infrastructure failures count)
    policy: HarnessPolicy = HarnessPolicy()
    #: units counted as failures under count_as_failure (also in ``used``)
    counted: tuple[Obs, ...] = ()
    #: intent -> competitors declared eligible in the frozen corpus (``eligible``; an
    #: intent not listed: every competitor), for the InvokeRank shares and Lever
    eligible: dict[str, frozenset[str]] = field(default_factory=dict)

    @cached_property
    def completed(self) -> set[Unit]:
        """The units with a used run (read several times; the runs are frozen)."""
        return {o.unit for o in self.used}

    @property
    def missing(self) -> list[Unit]:
        done = self.completed
        return [u for u in self.planned if u not in done]

    @property
    def task_order(self) -> list[str]:
        return [t.id for t in self.tasks]

    @property
    def intents(self) -> dict[str, str]:
        return {t.id: t.intent for t in self.tasks}


def _named(observations: Sequence[Obs], describe: Callable[[Obs], str]) -> list[str]:
    lines = [describe(o) for o in observations[:MAX_NAMED]]
    if len(observations) > MAX_NAMED:
        lines.append(f"... and {len(observations) - MAX_NAMED} more")
    return lines


def planned_units(entry: Entry, experiment: Experiment) -> list[Unit]:
    """The registration's run units (arms x tasks of the split x repeats), as the runner
    expands them: one definition of "planned", shared with ``prereg run``."""

    plan = plan_from_registration(entry.registration, entry.digest)
    return [u.key for u in expand_units(plan, experiment)]


def arm_offers(entry: Entry, experiment: Experiment) -> dict[str, ArmOffer]:
    """Each arm's offer (controls applied) as the runner builds it; empty if it cannot be
    built (then nothing could have run either, and the controls read not measured)."""

    try:
        return build_offers(plan_from_registration(entry.registration, entry.digest), experiment)
    except BadInput:
        return {}


def check_runs(entry: Entry, observations: Sequence[Obs], planned: Sequence[Unit]) -> None:
    """The refusals of the module docstring; raises IntegrityError (exit 3)."""
    foreign = [o for o in observations if o.digest != entry.digest or o.registration_id != entry.id]
    if foreign:
        digests = Counter(o.digest for o in foreign)
        raise IntegrityError(
            f"{len(foreign)} run(s) do not carry registration '{entry.id}' with its digest "
            f"{entry.digest}; runs of different registrations are never combined "
            f"(foreign digests: {', '.join(f'{d} x{n}' for d, n in digests.items())})",
            details=_named(
                foreign,
                lambda o: (
                    f"run {o.record_id} ({o.label()}): registration '{o.registration_id}', "
                    f"digest {o.digest}"
                ),
            ),
        )
    classes = Counter(o.evidence_class for o in observations)
    if len(classes) > 1:
        major = classes.most_common(1)[0][0]
        minority = [o for o in observations if o.evidence_class != major]
        raise IntegrityError(
            f"runs of '{entry.id}' come from {len(classes)} evidence classes "
            f"({', '.join(f'{c}: {n}' for c, n in classes.items())}); evidence classes are "
            "never pooled",
            details=_named(
                minority,
                lambda o: (
                    f"run {o.record_id} ({o.label()}): evidence class {o.evidence_class}, "
                    f"driver {o.driver}"
                ),
            ),
        )
    reg = entry.registration
    if reg.kind == "confirmatory" and "cached" in classes:
        raise IntegrityError(
            f"{classes['cached']} run(s) of confirmatory '{entry.id}' carry the evidence class "
            "'cached' (a pilot's response cache): a confirmatory analysis reads fresh "
            "responses only, and `prereg run --cache` is refused for it"
        )
    drivers = {arm.id: reg.config_of(arm.id).host.driver for arm in reg.arms}
    wrong_driver = [
        o
        for o in observations
        if o.driver is not None and o.arm in drivers and o.driver != drivers[o.arm]
    ]
    if wrong_driver:
        raise IntegrityError(
            f"{len(wrong_driver)} run(s) of '{entry.id}' were made by another driver than "
            "their arm's registered one",
            details=_named(
                wrong_driver,
                lambda o: (
                    f"run {o.record_id} ({o.label()}): driver {o.driver}, arm '{o.arm}' "
                    f"registers {drivers[o.arm]}"
                ),
            ),
        )
    plan = set(planned)
    stray = [o for o in observations if o.unit not in plan]
    if stray:
        raise IntegrityError(
            f"{len(stray)} run(s) of '{entry.id}' are not planned units of the registration "
            "(arm, task of the split, repeat)",
            details=_named(stray, lambda o: f"run {o.record_id} ({o.label()})"),
        )
    ok_units = Counter(o.unit for o in observations if o.ok)
    doubled = [u for u, n in ok_units.items() if n > 1]
    if doubled:
        raise IntegrityError(
            f"{len(doubled)} unit(s) of '{entry.id}' have more than one completed run",
            details=[unit_label(u) for u in doubled[:MAX_NAMED]],
        )


def counted_failures(
    observations: Sequence[Obs], planned: Sequence[Unit], policy: HarnessPolicy
) -> list[Obs]:
    """Under ``count_as_failure``: one failure per planned unit without an ok record whose
    infra_error records reached the registered attempts, in planned order. It is the
    unit's last infra_error record with ``counted_failure`` set and no cost or tokens
    (the records themselves carry those, so nothing is counted twice). Empty otherwise."""
    if policy.infrastructure != "count_as_failure":
        return []
    ok = {o.unit for o in observations if o.ok}
    failed: dict[Unit, list[Obs]] = {}
    for o in observations:
        if not o.ok and o.unit not in ok:
            failed.setdefault(o.unit, []).append(o)
    return [
        replaced(failed[u][-1], counted_failure=True, cost_usd=None, tokens=None)
        for u in planned
        if u in failed and policy.settles(len(failed[u]))
    ]


_EXPERIMENTS: dict[tuple[str, tuple[tuple[str, str], ...]], Experiment] = {}


def frozen_experiment(registry: Registry, entry: Entry) -> Experiment:
    """The registration's frozen experiment, cached in-process by its files' digests.

    The key is content-addressed (every file's sha256), so a cached experiment is
    exactly what the registry would load again; parsing the YAML is the slow part
    of an analysis, and tests and ``compare`` load the same experiment often.
    """
    key = (entry.experiment, tuple(sorted(entry.files.items())))
    if key not in _EXPERIMENTS:
        if len(_EXPERIMENTS) >= 16:
            _EXPERIMENTS.pop(next(iter(_EXPERIMENTS)))
        _EXPERIMENTS[key] = registry.load_experiment(entry)
    return _EXPERIMENTS[key]


def require_claim(registry: Registry, entry: Entry) -> None:
    """Runs on the locked split are analysed only under the registration holding its claim.

    (A registration with no runs yet is not refused: its report says so.)

    Refused (exit 4) otherwise: runs made elsewhere under a claim this registry refused
    (exported, then imported) must not become a confirmatory verdict.
    """
    if entry.registration.split != LOCKED_SPLIT:
        return
    held = [c for c in entry.claims if c.get("digest") == entry.digest]
    if not held:
        holders = sorted({str(c["id"]) for c in registry.claimed_tasks().values()})
        raise ProtocolRefusal(
            f"'{entry.id}' runs on the locked split but holds no claim on it in this "
            "registry"
            + (f" (the claim is held by {', '.join(holders)})" if holders else "")
            + ": its runs cannot be analysed here",
            field="split",
        )


def load_runs(
    ws: Workspace,
    registry: Registry,
    entry: Entry,
    records: Sequence[RecordLike] | None = None,
    store: str | None = None,
    alongside: Callable[[], object] | None = None,
) -> LoadedRuns:
    """Load and check the runs of ``entry`` (``records`` overrides the store, for tests).

    ``store``: ``--store`` (else ``PREREG_STORE``, else the workspace's runs/ folder).
    ``alongside``: the caller's work for later, done while forked children verify a
    long chain (:func:`prereg.runners.store.verify.verified_as`). The garbage collector
    is held meanwhile (:func:`held_gc`): tens of thousands of records and observations
    are built, none of them in a cycle."""
    with held_gc():
        return _load(ws, registry, entry, records, store, alongside)


def _load(
    ws: Workspace,
    registry: Registry,
    entry: Entry,
    records: Sequence[RecordLike] | None,
    store: str | None,
    alongside: Callable[[], object] | None,
) -> LoadedRuns:
    experiment = frozen_experiment(registry, entry)
    tasks = tuple(experiment.tasks_in_split(entry.registration.split))
    surfaces = {arm.id: experiment.surfaces.get(arm.surface) for arm in entry.registration.arms}
    chains: dict[str, dict[str, Any]] = {}
    reg = entry.registration
    size = len(reg.arms) * len(tasks) * reg.design.repeats  # the plan's units, expanded next
    # a programme's plan is expanded in a forked child while its runs are read here
    planned_later = Forked(partial(planned_units, entry, experiment), fork=size >= FORK_UNITS)
    if records is None:  # each record read into its observation as it is verified
        location = resolve_store(ws.runs, store)
        observations, chains = verified_as(
            location,
            registry,
            entry,
            from_record,
            read_pinned=pinned_observation,
            alongside=alongside,
        )
    else:
        observations = [from_record(r) for r in records]
    planned = planned_later.result()
    check_runs(entry, observations, planned)
    classes = {o.evidence_class for o in observations}
    policy = harness_policy(entry.registration)
    counted = counted_failures(observations, planned, policy)
    return LoadedRuns(
        entry=entry,
        tasks=tasks,
        surfaces=surfaces,
        planned=tuple(planned),
        used=tuple(o for o in observations if o.ok) + tuple(counted),
        infra=tuple(o for o in observations if not o.ok),
        records=len(observations),
        evidence_class=next(iter(classes)) if len(classes) == 1 else None,
        offers=arm_offers(entry, experiment),
        chains=chains,
        policy=policy,
        counted=tuple(counted),
        eligible=dict(experiment.eligible),
    )


def load_telemetry(registry_dir: Path) -> tuple[list[TelemetryRow], TelemetryLogHead]:
    """Every imported telemetry row (evidence class T; issue 41 item 5) and the log's head,
    for the report's S-vs-T block (:func:`prereg.reports.invokerank.telemetry.report_block`):
    the chain verified first (exit 3 when tampered). The head is read after the events and
    must be theirs; an import landing between the two reads is waited out by reading
    again."""
    path = log_path(registry_dir)
    for _ in range(5):
        events = AuditLog(path).verified_events()
        head = Ledger(path).head()
        if head.seq == len(events):
            break
    else:
        raise IntegrityError(
            "the telemetry log kept changing while it was read; analyse again", file=str(path)
        )
    rows: list[TelemetryRow] = []
    calls = 0
    imports = 0
    for event in events:
        if event.get("event") == TELEMETRY_EVENT:
            imports += 1
            calls += int(event.get("calls", 0))
            rows.extend(TelemetryRow.model_validate(r) for r in event["rows"])
    return rows, TelemetryLogHead(
        path=f"registry/{path.name}", events=imports, calls=calls, seq=head.seq, hash=head.hash
    )
