"""Running a ToolBottleneckBench study offline: every (arm, task, repeat) on the simulated
policy (:mod:`prereg.runners.toolbottleneck.host`), scored by the seed's verified success.

Each unit's generator is seeded from (study, arm, family, seed, repeat) only, so a unit
gives the same record whatever else runs, in whatever order. A record is a
:class:`StudyRecord`: the failure record (first unmet obligation, terminal flag), the
nine verdicts, calls, turns, the limits the unit ran under and the tokens, stamped with
the study digest and the digest of the variant it ran. It carries what the failure
census (:mod:`prereg.reports.toolbottleneck.census`) reads.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

import rfc8785
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from prereg.core.errors import BadInput, IntegrityError
from prereg.experiments import Experiment
from prereg.experiments.toolbottleneck.cells import ArmCell
from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.experiments.toolbottleneck.study import Study, StudyArm, StudyPolicy
from prereg.experiments.toolbottleneck.variants import compiled_cell, variant_key
from prereg.registry.resolve import study_player
from prereg.registry.units import Budgets, RunPlan, RunUnit
from prereg.runners.drivers.base import Driver
from prereg.runners.record import RunRecord, Tokens, TraceEvent
from prereg.runners.scoring import (
    api_server,
    configuration,
    infra_record,
    requested_model,
    unit_identity,
)
from prereg.runners.toolbottleneck.controller import CONTROLLER_ISSUED as CONTROLLER_ISSUED
from prereg.runners.toolbottleneck.controller import play_controlled
from prereg.runners.toolbottleneck.harness import HostPlayed, HostUnit, play_host
from prereg.runners.toolbottleneck.host import (
    PROFILES,
    Contract,
    Played,
    SimParams,
    play,
    unit_rng,
)

#: The registered driver that plays the simulated policy (reading 27) when the arm names
#: no local host profile; with ``host.model`` naming one the local host plays (reading
#: 34, :func:`prereg.registry.resolve.study_player`); any other driver is a model host.
SIMULATED_DRIVER = "local"
FORMAT: Literal["prereg-toolbottleneck-study-records/1"] = "prereg-toolbottleneck-study-records/1"


class StudyRecord(BaseModel):
    """One unit's outcome (status is always ``ok``: the simulation has no infrastructure)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["prereg-toolbottleneck-study-records/1"] = FORMAT
    study: str
    study_digest: str
    arm: str
    cell: dict[str, Any]
    menu_mode: str
    profile: str
    completion_cap: int = Field(gt=0)
    task_id: str
    family: str
    intent: str
    seed: int = Field(ge=0)
    repeat: int = Field(ge=0)
    variant: str
    variant_digest: str
    status: Literal["ok"] = "ok"
    success: bool
    first_unmet_obligation: str | None
    terminal_flag: str | None
    verdicts: dict[str, bool | None]
    calls: int = Field(ge=0)
    turns: int = Field(ge=0)
    call_limit: int = Field(ge=0)
    turn_limit: int = Field(ge=0)
    tokens_input: int = Field(ge=0)
    tokens_output: int = Field(ge=0)
    evidence_class: Literal["simulated"] = "simulated"
    # A holdout arm's record (an arm naming ``controller`` or ``delivery``) says who
    # issued the calls; the fields are absent from every other record.
    orchestration: Literal["model", "controller"] | None = None
    delivery: Literal["native", "canonical"] | None = None
    certified_minimum: int | None = Field(None, ge=0)
    controller_calls: int | None = Field(None, ge=0)
    model_calls: int | None = Field(None, ge=0)
    #: model requests (responses), the controller's calls needing none
    requests: int | None = Field(None, ge=0)
    #: the episode token budget fired (with or without another limit)
    over_budget: bool | None = None

    @model_serializer(mode="wrap")
    def _omit_holdout(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The holdout fields are left out where absent (other records as before)."""
        data = handler(self)
        if isinstance(data, dict):
            for name in HOLDOUT_FIELDS:
                if data.get(name) is None:
                    data.pop(name, None)
        return data


HOLDOUT_FIELDS: tuple[str, ...] = (
    "orchestration",
    "delivery",
    "certified_minimum",
    "controller_calls",
    "model_calls",
    "requests",
    "over_budget",
)


@dataclass(frozen=True)
class StudyRun:
    digest: str
    records: tuple[StudyRecord, ...]
    variants: dict[str, str]  # variant id -> digest


def arm_params(study: Study, arm: StudyArm, filename: str) -> tuple[str, SimParams]:
    """The arm's policy (its own, else the study's), resolved; BadInput naming the field."""
    policy: StudyPolicy = arm.policy or study.spec.policy
    field = f"arms.{arm.id}.policy" if arm.policy else "policy"
    if policy.profile not in PROFILES:
        raise BadInput(
            f"no simulated policy profile '{policy.profile}' (known: {', '.join(PROFILES)})",
            file=filename,
            field=f"{field}.profile",
        )
    try:
        return policy.profile, SimParams.from_params(policy.params, PROFILES[policy.profile])
    except ValueError as exc:
        raise BadInput(str(exc), file=filename, field=f"{field}.params") from None


def run_study(study: Study, filename: str = "<study>") -> StudyRun:
    """Every unit of the study, in a fixed order; refused whole (BadInput) before any runs."""
    spec = study.spec
    params = {arm.id: arm_params(study, arm, filename) for arm in spec.arms}
    sandboxes: dict[tuple[str, int, str], Sandbox] = {}
    for family, _, _ in study.families:
        for seed in spec.seeds:
            for arm in spec.arms:
                if not spec.plays(arm, family.id):
                    continue
                cell = _cell(arm, family.sizes.shortlist)
                sandboxes[(family.id, seed, arm.id)] = build_sandbox(family, cell, seed=seed)
    variants = {s.variant.id + f"@{s.seed}": s.variant.digest for s in sandboxes.values()}
    digest = (
        "sha256:"
        + hashlib.sha256(
            rfc8785.dumps(
                {
                    "study": spec.model_dump(mode="json"),
                    "files": study.file_digests(),
                    "variants": variants,
                }
            )
        ).hexdigest()
    )
    b = spec.budgets
    records = []
    for arm in spec.arms:
        profile, sim = params[arm.id]
        cap = arm.completion_cap or b.completion_cap
        contract = Contract(
            cap,
            b.episode_tokens,
            b.call_limit_over_certified,
            b.turn_limit_over_calls,
            arm.menu_mode,
        )
        for family, _, _ in study.families:
            if not spec.plays(arm, family.id):
                continue
            for seed in spec.seeds:
                sandbox = sandboxes[(family.id, seed, arm.id)]
                for repeat in range(spec.repeats):
                    rng = unit_rng(spec.id, arm.id, family.id, seed, repeat)
                    records.append(
                        _record(
                            spec.id,
                            digest,
                            arm,
                            (profile, cap),
                            sandbox,
                            repeat,
                            _play(arm, sandbox, sim, contract, rng),
                        )
                    )
    return StudyRun(digest, tuple(records), variants)


def _play(arm: StudyArm, sandbox: Sandbox, sim: SimParams, contract: Contract, rng: Any) -> Played:
    """One episode: under the public-handoff controller when the arm names it, else the
    model-run policy; records delivered as the arm says (native when it says nothing)."""
    delivery = arm.delivery or "native"
    if arm.controller is not None:
        return play_controlled(sandbox, sim, contract, rng, delivery)
    return play(sandbox, sim, contract, rng, delivery)


def _cell(arm: StudyArm, shortlist: int) -> Cell:
    """The arm's cell: capacity, frontier (handoffs; every holdout arm, the 2-call cell
    at 0 handoffs, read-only), or Discovery (the menu is the family's shortlist)."""
    if arm.catalog is not None and arm.retriever is not None:
        return Cell(
            "discovery", shortlist, arm.workflow, 0, arm.encoding, arm.catalog, arm.retriever
        )
    assert arm.menu is not None  # a capacity arm gives its menu (StudyArm checks)
    if arm.handoffs or arm.holdout_arm:
        return Cell("frontier", arm.menu, arm.workflow, arm.handoffs, arm.encoding)
    return Cell("capacity", arm.menu, arm.workflow, 0, arm.encoding)


def _record(
    study: str,
    digest: str,
    arm: StudyArm,
    config: tuple[str, int],
    sandbox: Sandbox,
    repeat: int,
    played: Any,
) -> StudyRecord:
    v = played.verification
    profile, cap = config
    holdout: dict[str, Any] = {}
    if arm.holdout_arm:
        issuers = played.issuers
        holdout = dict(
            orchestration=arm.orchestration,
            delivery=arm.delivery or "native",
            certified_minimum=sandbox.key.certified_minimum,
            controller_calls=sum(1 for i in issuers if i == "controller"),
            model_calls=sum(1 for i in issuers if i == "model"),
            requests=played.turns,
            over_budget="episode_budget" in played.episode.limits,
        )
    return StudyRecord(
        study=study,
        study_digest=digest,
        arm=arm.id,
        cell=arm.cell,
        menu_mode=arm.menu_mode,
        profile=profile,
        completion_cap=cap,
        task_id=f"{sandbox.family.id}@{sandbox.seed}",
        family=sandbox.family.id,
        intent=sandbox.family.intent,
        seed=sandbox.seed,
        repeat=repeat,
        variant=sandbox.variant.id,
        variant_digest=sandbox.variant.digest,
        success=v.success,
        first_unmet_obligation=v.first_unmet,
        terminal_flag=v.flag,
        verdicts=dict(v.verdicts),
        calls=len(played.episode.calls),
        turns=played.turns,
        call_limit=played.call_limit,
        turn_limit=played.turn_limit,
        tokens_input=played.input_tokens,
        tokens_output=played.output_tokens,
        **holdout,
    )


class StudyUnits:
    """Plays the planned units of a registered study: on the simulated policy when the
    arm's host is ``local`` with no profile (see the module docstring), else through its
    driver, a model host or the local host under a profile
    (:mod:`prereg.runners.toolbottleneck.harness`, :meth:`arun`). A holdout arm (naming
    ``controller`` or ``delivery``) plays on every host: the public-handoff controller
    and the delivery are the same on the simulated policy and in the host harness
    (:func:`prereg.runners.toolbottleneck.controller.follow_handoffs`).

    A simulated unit's generator is seeded from (registration, arm, task, repeat) only; its sandbox
    is the compiled variant of the arm's cell for the unit's family and seed, refused
    (IntegrityError, exit 3) when its digest is not the one registered.
    """

    def __init__(self, plan: RunPlan, experiment: Experiment) -> None:
        assert experiment.toolbottleneck is not None
        self.plan = plan
        self.study = experiment.toolbottleneck
        self._sandboxes: dict[tuple[str, str], Sandbox] = {}

    def sandbox(self, arm: str, task: str) -> Sandbox:
        spec = self.plan.study_cells[arm]
        family, seed = self.study.task(task)
        cell = compiled_cell(spec, family.sizes.shortlist)
        key = (cell.code, task)
        if key not in self._sandboxes:
            self._sandboxes[key] = build_sandbox(family, cell, seed=seed)
        sandbox = self._sandboxes[key]
        registered = self.plan.variants.get(variant_key(arm, task))
        if registered != sandbox.variant.digest:
            raise IntegrityError(
                f"the compiled variant of arm '{arm}', task '{task}' has digest "
                f"{sandbox.variant.digest}, but the registration pinned {registered}: the "
                "compiler or the families changed since it was registered; register anew"
            )
        return sandbox

    def prepare(self, units: Sequence[RunUnit]) -> None:
        """Build and check every unit's variant now: a variant that is not the registered
        one is refused (IntegrityError) before any unit runs or any record is written."""
        for unit in units:
            self.sandbox(unit.arm, unit.task.id)

    def contract(self, unit: RunUnit, sandbox: Sandbox) -> Contract:
        """The unit's harness contract (seed 3.3) under its arm's registered budgets."""
        budgets = self.plan.config(unit.arm).budgets
        call_slack, turn_slack = _slacks(budgets, sandbox.key.certified_minimum)
        return Contract(
            budgets.completion_cap or 1024,
            budgets.episode_tokens or 128_000,
            call_slack,
            turn_slack,
            self.plan.study_cells[unit.arm].menu_mode,
        )

    def budgets_of(self, unit: RunUnit) -> Budgets:
        """The budgets the unit runs under, resolved from its own compiled variant as
        :meth:`contract` and the players resolve them (``prereg run --dry-run``, reading
        38): the contract's completion cap and episode budget, call limit = the variant's
        certified minimum + the call slack, turn limit = call limit + the turn slack; turn
        limit 0 when the unit stops before any request (Discovery: a required tool not in
        the shortlist). The variant is built and checked as for a run (IntegrityError)."""
        sandbox = self.sandbox(unit.arm, unit.task.id)
        contract = self.contract(unit, sandbox)
        call_limit = sandbox.key.certified_minimum + contract.call_slack
        available = sandbox.key.required_functions <= sandbox.key.menu
        return replace(
            self.plan.config(unit.arm).budgets,
            completion_cap=contract.completion_cap,
            episode_tokens=contract.episode_tokens,
            call_limit=call_limit,
            turn_limit=call_limit + contract.turn_slack if available else 0,
        )

    async def arun(self, unit: RunUnit, driver: Driver) -> RunRecord:
        """One unit's record: on the simulated policy when the arm's host is ``local``
        with no profile, else played by its driver, a model host or the local host under
        a profile (:func:`prereg.registry.resolve.study_player`;
        :mod:`prereg.runners.toolbottleneck.harness`), a failure of the host being an
        infrastructure record (retried next run)."""
        config = self.plan.config(unit.arm)
        if study_player(config.driver, config.model) == "simulated":
            return self.run(unit, driver)
        started = datetime.now(UTC)
        try:
            sandbox = self.sandbox(unit.arm, unit.task.id)
            host = HostUnit(
                config.model,
                dict(config.params),
                config.system_prompt,
                unit.seed,
                unit.prompt_seed,
                unit.label,
            )
            spec = self.plan.study_cells[unit.arm]
            played = await play_host(
                sandbox,
                driver,
                host,
                self.contract(unit, sandbox),
                controller=spec.controller is not None,
                delivery=spec.delivery or "native",
            )
            return self._host_record(unit, driver, sandbox, played, started)
        except (asyncio.CancelledError, IntegrityError):
            raise
        except Exception as exc:  # the host or the recording failed: infrastructure
            message = f"{type(exc).__name__}: {exc}".strip()
            return infra_record(self.plan, unit, driver, message[:2000], started, _now())

    def _host_record(
        self,
        unit: RunUnit,
        driver: Driver,
        sandbox: Sandbox,
        played: HostPlayed,
        started: datetime,
    ) -> RunRecord:
        """A model host's or local profile's record: the same verdicts and failure record
        as the simulated policy's, with the host's tokens, latency and cost (null where
        not reported: the local host prices nothing)."""
        v = played.verification
        plan = self.plan
        return RunRecord(
            **unit_identity(plan, unit, driver),
            model_requested=requested_model(plan, unit, driver),
            model_returned=played.model_returned,
            started_at=started,
            finished_at=_now(),
            latency_ms=played.latency_ms,
            tokens=played.tokens,
            cost_usd=played.cost_usd,
            retries=played.retries,
            terminal_flag=v.flag,
            first_unmet_obligation=v.first_unmet,
            calls=len(played.episode.calls),
            turns=len(played.turns),
            success=v.success,
            trace=played.trace,
            config=configuration(plan, unit.arm),
            server=api_server(driver),
            obligations=dict(v.verdicts),
            variant_digest=sandbox.variant.digest,
        )

    def run(self, unit: RunUnit, driver: Driver) -> RunRecord:
        """One unit's record (the policy simulated; latency and cost null)."""
        started = datetime.now(UTC)
        spec: ArmCell = self.plan.study_cells[unit.arm]
        sandbox = self.sandbox(unit.arm, unit.task.id)
        contract = self.contract(unit, sandbox)
        rng = unit_rng(self.plan.digest, unit.arm, unit.task.id, unit.repeat)
        delivery = spec.delivery or "native"
        if spec.controller is not None:
            played = play_controlled(sandbox, PROFILES[spec.policy], contract, rng, delivery)
        else:
            played = play(sandbox, PROFILES[spec.policy], contract, rng, delivery)
        return self._record(unit, driver, spec, sandbox, played, started)

    def _record(
        self,
        unit: RunUnit,
        driver: Driver,
        spec: ArmCell,
        sandbox: Sandbox,
        played: Played,
        started: datetime,
    ) -> RunRecord:
        v = played.verification
        plan = self.plan
        return RunRecord(
            **unit_identity(plan, unit, driver),
            model_requested=spec.policy,  # the simulated policy's profile, not a model
            started_at=started,
            finished_at=datetime.now(UTC),
            tokens=Tokens(input=played.input_tokens, output=played.output_tokens),
            terminal_flag=v.flag,
            first_unmet_obligation=v.first_unmet,
            calls=len(played.episode.calls),
            turns=played.turns,
            success=v.success,
            trace=_trace(played),
            config=configuration(plan, unit.arm),
            obligations=dict(v.verdicts),
            variant_digest=sandbox.variant.digest,
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _slacks(budgets: Budgets, certified: int) -> tuple[int, int]:
    """(call limit - the variant's certified minimum, turn limit - call limit) as
    registered: the rules give them directly (the seed's contract: 2 and 2); absolute
    limits are taken as they are (a call limit below the certified minimum gives a
    negative slack: the unit stops as infeasible)."""
    if budgets.call_limit_over_certified is not None:
        call_slack = budgets.call_limit_over_certified
    else:
        call_slack = (budgets.call_limit or certified + 2) - certified
    if budgets.turn_limit_over_calls is not None:
        turn_slack = budgets.turn_limit_over_calls
    else:
        turn_slack = (budgets.turn_limit or certified + call_slack + 2) - certified - call_slack
    return call_slack, turn_slack


def _trace(played: Played) -> list[TraceEvent]:
    """The played events as trace events (calls with their arguments, stops)."""
    out: list[TraceEvent] = []
    turn = 0
    for event in played.trace:
        if event["kind"] == "response":
            turn += 1
        elif event["kind"] == "call":
            # a call the public-handoff controller issued says so (no model request)
            by = CONTROLLER_ISSUED if event.get("issuer") == "controller" else None
            out.append(
                TraceEvent(
                    kind="tool_call",
                    turn=turn,
                    tool=event["tool"],
                    arguments=event["arguments"],
                    text=by,
                )
            )
        elif event["kind"] == "stop":
            out.append(TraceEvent(kind="stop", turn=turn, text=", ".join(event["limits"])))
    if played.episode.answer is not None:
        out.append(TraceEvent(kind="final", turn=turn, text=played.episode.answer))
    return out
