"""Run units: a registration expanded into arms x tasks of its split x repeats.

Everything here is a function of the registration (including its seed) and the
frozen experiment, so the same registration always gives the same units, the
same rotations and the same per-unit seeds.

Rotations (InvokeRank, section 5.4): tool order is a nuisance variable, so each
unit gets one of ``rotations`` cyclic rotations of what is offered. Prompts are
put in a seeded order and prompt j, repeat k gets rotation (j + k) mod R, which
balances the rotations across prompts (each is used floor or ceil of N/R times
per repeat) and across the repeats of one prompt. The rotation of a (task,
repeat) is the same in every arm, so arms are compared on identical orders.

What a rotation does to the listing (blocks per integration, clone pairs kept
together) is :func:`prereg.experiments.offers.arrange`. clone_swap's 2 x 2 cell is
balanced the same way over a second seeded order of the prompts: prompt j,
repeat k gets cell (j + k) mod 4.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from prereg.experiments import Experiment, Task
from prereg.experiments.offers import (
    ArmOffer,
    ArmSpec,
    Server,
    arrange,
    offered_items,
    offers_for,
    plain_offer,
)
from prereg.experiments.surfaces import Role, Surface, Tool
from prereg.experiments.toolbottleneck.cells import ArmCell, holdout_plays
from prereg.registry.digest import canonical_json
from prereg.registry.pilot import PilotOptions
from prereg.registry.schema import Registration


@dataclass(frozen=True)
class Budgets:
    """The registered harness budgets (None: no limit).

    ``call_limit_over_certified`` / ``turn_limit_over_calls``: the registered rules that
    set a unit's call limit to its task's certified minimum plus k, and its turn limit to
    its call limit plus k (:func:`unit_budgets`); with a rule, its limit here is None.
    """

    completion_cap: int | None = None
    episode_tokens: int | None = None
    call_limit: int | None = None
    turn_limit: int | None = None
    spend_usd: float | None = None
    call_limit_over_certified: int | None = None
    turn_limit_over_calls: int | None = None


@dataclass(frozen=True)
class HarnessPolicy:
    """The registration's harness rules (``harness:``): infrastructure failures and cost."""

    infrastructure: Literal["retry", "count_as_failure"] = "retry"
    attempts: int | None = None
    cache_credit: bool = True

    def settles(self, infra_attempts: int) -> bool:
        """Whether a unit without an ok record is settled (counted as a failure, not run
        again) after ``infra_attempts`` infrastructure failures."""
        return (
            self.infrastructure == "count_as_failure"
            and self.attempts is not None
            and infra_attempts >= self.attempts
        )


@dataclass(frozen=True)
class ArmConfig:
    """One arm's resolved configuration (:meth:`Registration.config_of`), as the runners use it.

    ``budgets.spend_usd`` is the registration's cap (one cap over every arm).
    """

    driver: str
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    tool_search: bool = False
    allow_sampling: bool = False
    budgets: Budgets = Budgets()
    system_prompt: str | None = None
    #: ``connector``: the provider reaches the tools through the replay server's URL
    tool_access: str = "client"

    def as_json(self) -> dict[str, Any]:
        """The configuration as a record stores it: the system prompt by its sha256."""
        b = self.budgets
        prompt = self.system_prompt
        return {
            "driver": self.driver,
            "model": self.model,
            "params": dict(self.params),
            "tool_search": self.tool_search,
            "allow_sampling": self.allow_sampling,
            "budgets": {
                "completion_cap": b.completion_cap,
                "episode_tokens": b.episode_tokens,
                "call_limit": b.call_limit,
                "turn_limit": b.turn_limit,
                # the rules only when registered: a configuration without them keeps the
                # digest it had before they existed
                **{
                    rule: value
                    for rule, value in (
                        ("call_limit_over_certified", b.call_limit_over_certified),
                        ("turn_limit_over_calls", b.turn_limit_over_calls),
                    )
                    if value is not None
                },
            },
            "system_prompt_sha256": None
            if prompt is None
            else "sha256:" + hashlib.sha256(prompt.encode()).hexdigest(),
            # only when not the default: a client configuration keeps its earlier digest
            **({} if self.tool_access == "client" else {"tool_access": self.tool_access}),
        }

    def digest(self) -> str:
        """sha256 of :meth:`as_json` (canonical JSON): equal configurations, equal digests."""
        return "sha256:" + hashlib.sha256(canonical_json(self.as_json())).hexdigest()

    @property
    def host_key(self) -> tuple[object, ...]:
        """What building a driver depends on: arms with equal keys share one driver."""
        return (
            self.driver,
            self.model,
            canonical_json(dict(self.params)),
            self.tool_search,
            self.allow_sampling,
            self.tool_access,
        )


@dataclass(frozen=True)
class LiveSpec:
    """The registered live integration (``host.live``): calls to it execute on its server."""

    surface: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    timeout_s: float = 30.0


@dataclass(frozen=True)
class RunPlan:
    """What a run needs from a registration, independent of the registry's classes.

    ``arm_specs`` carries each arm's control; empty means plain arms (``arms``).
    ``driver``, ``model``, ``params`` and ``budgets`` are the registration's defaults;
    ``configs`` holds each arm's resolved configuration (:meth:`config`), which is what
    a unit runs with. ``budgets.spend_usd`` is the one spend cap of the whole plan.
    """

    registration_id: str
    digest: str
    experiment: str
    kind: str
    split: str
    arms: tuple[tuple[str, str], ...]  # (arm id, surface id)
    driver: str
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    batch: bool = False
    budgets: Budgets = Budgets()
    repeats: int = 1
    rotations: int = 1
    seed: int = 0
    #: replicate sessions (``design.sessions``): the repeats split into this many blocks
    sessions: int = 1
    arm_specs: tuple[ArmSpec, ...] = ()
    live: LiveSpec | None = None
    #: each arm's registered run stage (``arms[].stage``: selection or execution); empty:
    #: no stages registered, and ``live`` (when given) applies to every arm as before
    stages: Mapping[str, str] = field(default_factory=dict)
    configs: Mapping[str, ArmConfig] = field(default_factory=dict)
    harness: HarnessPolicy = HarnessPolicy()
    #: a ToolBottleneckBench study (issue 19): each arm's cell, and the registered digest
    #: of every compiled variant (``<arm>/<task>``, from the frozen document)
    study_cells: Mapping[str, ArmCell] = field(default_factory=dict)
    variants: Mapping[str, str] = field(default_factory=dict)
    #: the study's held-out families (``holdout:``, reading H6): the holdout arms play
    #: only these, the other arms only the rest; empty: every arm every task
    holdout: frozenset[str] = frozenset()
    #: a pilot's options (``run --limit/--task/--arm/--intent/--cache``, exploratory only;
    #: :mod:`prereg.registry.pilot`): the units this run keeps, and whether provider
    #: responses come from the response cache; None: the whole plan, no cache. Never set
    #: on a plan made for analysis.
    pilot: PilotOptions | None = None

    def config(self, arm: str) -> ArmConfig:
        """The arm's configuration (the registration's defaults when none was resolved)."""
        found = self.configs.get(arm)
        if found is not None:
            return found
        return ArmConfig(self.driver, self.model, dict(self.params), budgets=self.budgets)

    def arm_configs(self) -> dict[str, ArmConfig]:
        """Every arm's configuration, in arm order."""
        return {arm: self.config(arm) for arm, _ in self.arms}

    def runs_live(self, arm: str) -> bool:
        """Whether the arm's calls to the live integration execute on its live server:
        with stages registered only an execution arm's do; without, every arm's when
        ``live`` is given (the registration-wide ``host.live`` of before stages)."""
        if self.live is None:
            return False
        return self.stages.get(arm) == "execution" if self.stages else True

    def specs(self) -> tuple[ArmSpec, ...]:
        """Every arm with its control (plain arms when none was registered)."""
        return self.arm_specs or tuple(ArmSpec(a, s) for a, s in self.arms)


def arm_config(registration: Registration, arm_id: str) -> ArmConfig:
    """The arm's resolved configuration (:meth:`Registration.config_of`) for the runners;
    the spend cap is the registration's."""
    c = registration.config_of(arm_id)
    b = c.budgets
    return ArmConfig(
        driver=c.host.driver,
        model=c.host.model,
        params=dict(c.host.params),
        tool_search=c.host.tool_search,
        allow_sampling=c.host.allow_sampling,
        budgets=Budgets(
            b.completion_cap,
            b.episode_tokens,
            b.call_limit,
            b.turn_limit,
            registration.budgets.spend_usd,
            b.call_limit_over_certified,
            b.turn_limit_over_calls,
        ),
        system_prompt=c.system_prompt,
        tool_access=c.host.tool_access,
    )


def unit_budgets(budgets: Budgets, task: Task) -> Budgets:
    """The budgets one unit runs under: the registered rules resolved for its task.

    ``call_limit_over_certified: k`` gives call limit = the task's certified minimum + k;
    ``turn_limit_over_calls: k`` gives turn limit = the (resolved) call limit + k, or no
    turn limit when there is no call limit. Without rules, the budgets as registered.
    Raises ValueError for a rule on a task without a certified path (refused at register).
    """
    call_limit = budgets.call_limit
    if budgets.call_limit_over_certified is not None:
        minimum = task.certified_minimum
        if minimum is None:
            raise ValueError(
                f"task '{task.id}' has no certified path, so 'certified minimum + "
                f"{budgets.call_limit_over_certified}' is undefined for it"
            )
        call_limit = minimum + budgets.call_limit_over_certified
    turn_limit = budgets.turn_limit
    if budgets.turn_limit_over_calls is not None:
        turn_limit = None if call_limit is None else call_limit + budgets.turn_limit_over_calls
    return replace(budgets, call_limit=call_limit, turn_limit=turn_limit)


def harness_policy(registration: Registration) -> HarnessPolicy:
    """The registration's ``harness:`` rules for the runners and the analysis."""
    h = registration.harness
    return HarnessPolicy(h.infrastructure, h.attempts, h.cache_credit)


def plan_from_registration(registration: Registration, digest: str) -> RunPlan:
    """A RunPlan from a registry ``Registration`` (read by attribute)."""
    b = registration.budgets
    d = registration.design
    h = registration.host
    specs = tuple(
        ArmSpec(
            a.id,
            a.surface,
            getattr(a, "control", None),
            registration.reference_of(a.id) if hasattr(registration, "reference_of") else None,
            getattr(a, "decoy", None),
        )
        for a in registration.arms
    )
    live_reg = getattr(h, "live", None)
    live = (
        None
        if live_reg is None
        else LiveSpec(
            surface=live_reg.surface,
            command=None if live_reg.command is None else tuple(live_reg.command),
            url=live_reg.url,
            timeout_s=live_reg.timeout_s,
        )
    )
    configs = {arm.id: arm_config(registration, arm.id) for arm in registration.arms}
    return RunPlan(
        registration_id=registration.id,
        digest=digest,
        experiment=registration.experiment,
        kind=registration.kind,
        split=registration.split,
        arms=tuple((a.id, a.surface) for a in registration.arms),
        driver=h.driver,
        model=h.model,
        params=dict(h.params),
        batch=bool(getattr(h, "batch", False)),
        budgets=Budgets(
            b.completion_cap,
            b.episode_tokens,
            b.call_limit,
            b.turn_limit,
            b.spend_usd,
            b.call_limit_over_certified,
            b.turn_limit_over_calls,
        ),
        repeats=d.repeats,
        rotations=d.rotations,
        seed=d.seed,
        sessions=d.sessions,
        arm_specs=specs,
        live=live,
        stages={a.id: a.stage for a in registration.arms if a.stage is not None},
        configs=configs,
        harness=harness_policy(registration),
        study_cells={
            a.id: a.toolbottleneck for a in registration.arms if a.toolbottleneck is not None
        },
        holdout=frozenset(getattr(registration, "holdout", None) or ()),
    )


@dataclass(frozen=True)
class RunUnit:
    arm: str
    surface: str
    task: Task
    split: str
    repeat: int
    rotation: int
    seed: int
    prompt_seed: int
    cell: int = 0  # clone_swap's 2 x 2 cell (0..3), balanced like the rotations
    spec: ArmSpec | None = None  # the arm with its control (None: a plain arm)
    design_seed: int = 0  # the registered design seed (clone labels derive from it)
    #: the replicate session (``design.sessions``) the unit's repeat belongs to; a record
    #: carries it through its repeat number (:func:`session_of`), so its format is unchanged
    session: int = 0

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.arm, self.task.id, self.repeat)

    @property
    def label(self) -> str:
        return f"{self.arm}/{self.task.id}/{self.repeat}"


#: clone_swap crosses two labels with two listing orders: four cells per arm.
CLONE_CELLS = 4


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the parts (stable across Python versions and platforms)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def session_of(repeat: int, repeats: int, sessions: int) -> int:
    """The replicate session of a unit's repeat number: ``repeats`` runs of each prompt per
    arm split into ``sessions`` consecutive blocks of ``repeats // sessions`` (a unit's
    repeat number runs over the whole registration, so the unit key and the record format
    stay those of a design without sessions). ValueError for a split that is not whole."""
    if sessions < 1 or repeats < 1 or repeats % sessions:
        raise ValueError(f"{repeats} repeats do not split into {sessions} equal sessions")
    if not 0 <= repeat < repeats:
        raise ValueError(f"repeat {repeat} is outside 0..{repeats - 1}")
    return repeat // (repeats // sessions)


def expand_units(plan: RunPlan, experiment: Experiment) -> list[RunUnit]:
    """Every unit of the plan, ordered repeat-major so partial runs cover all prompts
    (and, with replicate sessions, session by session: session s's units all come before
    session s + 1's)."""
    tasks = experiment.tasks_in_split(plan.split)
    order = sorted(tasks, key=lambda t: derive_seed(plan.seed, "order", t.id))
    position = {t.id: j for j, t in enumerate(order)}
    # the clone_swap cell uses its own seeded order, so it is not tied to the rotation
    cells = sorted(tasks, key=lambda t: derive_seed(plan.seed, "clone-cell", t.id))
    cell_position = {t.id: j for j, t in enumerate(cells)}
    specs = plan.specs()
    units: list[RunUnit] = []
    for repeat in range(plan.repeats):
        for task in tasks:
            rotation = (position[task.id] + repeat) % plan.rotations
            cell = (cell_position[task.id] + repeat) % CLONE_CELLS
            prompt_seed = derive_seed(plan.seed, "prompt", task.id)
            for spec in specs:
                arm, surface = spec.id, spec.surface
                if not _plays(plan, experiment, arm, task):
                    continue
                units.append(
                    RunUnit(
                        arm=arm,
                        surface=surface,
                        task=task,
                        split=plan.split,
                        repeat=repeat,
                        rotation=rotation,
                        seed=derive_seed(plan.seed, "unit", arm, task.id, repeat),
                        prompt_seed=prompt_seed,
                        cell=cell,
                        spec=spec,
                        design_seed=plan.seed,
                        session=session_of(repeat, plan.repeats, plan.sessions),
                    )
                )
    if plan.pilot:
        return plan.pilot.apply(units, tasks)
    return units


def _plays(plan: RunPlan, experiment: Experiment, arm: str, task: Task) -> bool:
    """Whether the arm plays the task: a study with ``holdout:`` gives its held-out
    families to the holdout arms only (reading H6); every other plan, every task."""
    study, cell = experiment.toolbottleneck, plan.study_cells.get(arm)
    if not plan.holdout or study is None or cell is None:
        return True
    return holdout_plays(cell.holdout_arm, study.tasks[task.id][0], plan.holdout)


def offered_tools(
    experiment: Experiment, focal: str, rotation: int, rotations: int
) -> list[tuple[Tool, Role, Surface]]:
    """The tools offered in one unit of a plain arm on ``focal``, in its rotation's order.

    With a pool the integrations rotate as blocks (each keeps its own tool order);
    without one the surface's tools rotate. Rotation r of R shifts by
    floor(r * n / R) places, so R rotations are spread evenly over n items. Arms
    with a control: :func:`prereg.experiments.offers.offered_items`.
    """

    return offered_items(plain_offer(experiment, focal), rotation, rotations)[1]


def build_offers(plan: RunPlan, experiment: Experiment) -> dict[str, ArmOffer]:
    """Every arm's offer; BadInput (nothing run) when a control cannot apply."""
    return offers_for(plan.specs(), experiment, plan.seed)


def unit_servers(offers: Mapping[str, ArmOffer], unit: RunUnit, rotations: int) -> list[Server]:
    return arrange(offers[unit.arm], unit.rotation, rotations, unit.cell)
