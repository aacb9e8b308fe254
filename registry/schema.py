"""The registration schema: what a researcher commits to before any run exists.

Unknown fields are rejected everywhere (``extra="forbid"``), so a typo cannot
silently drop a commitment. Cross-field rules that need only the document live
here; rules that need the experiment (surfaces exist, split has tasks) live in
:mod:`prereg.registry.resolve`.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from prereg.core.yamlio import FieldRuleError
from prereg.experiments.controls import ControlName
from prereg.experiments.models import LOCKED_SPLIT, SplitName
from prereg.experiments.toolbottleneck.cells import ArmCell, StudyRepair
from prereg.registry.factorial import SETTABLE, DesignError, expand, settable
from prereg.registry.hosts import DRIVERS, DriverName, ToolAccess, tool_access_problem
from prereg.registry.judges import Judge, confound_problem, wrap_judges
from prereg.stats import (
    REGISTRABLE_TESTS,
    TEST_NAMES,
    MultiplicityMethod,
    TestName,
    check_weights,
    factorial_weights,
)
from prereg.stats.invokerank import ScoreInterval

ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"

#: Outcomes a run record carries and a registration may analyse.
OutcomeName = Literal[
    "success", "surfaced", "selected", "invoked", "executed", "completed", "focal"
]
OUTCOMES: tuple[OutcomeName, ...] = get_args(OutcomeName)
#: Host parameters that change sampling; refused unless the registration allows them.
SAMPLING_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "min_p",
        "typical_p",
        "repetition_penalty",
    }
)


class Strict(BaseModel):
    """Unknown fields are errors; instances are immutable; types are strict.

    Strict: no string or number becomes a boolean (``allow_sampling: 'yes'``), no
    boolean a number (``repeats: true``), no float an integer (``repeats: 3.0``), no
    number a string. YAML gives real booleans and numbers, so plain YAML is unaffected.
    A pair (``compare``, ``prior``) is written as a YAML list: see :data:`StrictPair`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


Identifier = Annotated[str, Field(pattern=ID_PATTERN, min_length=1, max_length=100)]
PositiveWeight = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: A pair written as a YAML (or JSON) list: the tuple alone is lax (strict mode accepts
#: only a tuple, which YAML cannot write); its items stay strict.
StrictPair = Annotated[tuple[StrictStr, StrictStr], Field(strict=False)]
StrictFloatPair = Annotated[tuple[StrictFloat, StrictFloat], Field(strict=False)]
Probability = Annotated[float, Field(gt=0.0, lt=1.0)]


class Live(Strict):
    """One integration whose calls execute on its live MCP server (an execution run).

    ``surface`` names a snapshot surface of the experiment: hosts are offered the
    frozen snapshot's tools as always, and only the calls go live (InvokeRank, 5.5).
    Before the first unit, the live server is snapshotted again and must serve
    exactly the registered snapshot (same digest), or the run is refused. Every
    other integration replays; competitors are only ever replayed. Give ``command``
    (a local stdio server, started by ``prereg run``) or ``url`` (streamable HTTP).
    """

    surface: str = Field(min_length=1)
    command: list[str] | None = Field(None, min_length=1)
    url: str | None = Field(None, pattern=r"^https?://")
    timeout_s: float = Field(30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_target(self) -> Live:
        if (self.command is None) == (self.url is None):
            raise FieldRuleError(
                "command",
                "give exactly one of 'command' (a stdio server) or 'url' (streamable HTTP)",
            )
        return self


class Host(Strict):
    """Where the arms run. Sampling parameters need ``allow_sampling: true``.

    ``params`` are also checked against the driver's table at register
    (:func:`prereg.registry.resolve.check_host_params`): what the driver would refuse at
    run is refused then. Not here: a frozen copy registered before a driver's table
    changed must still load.
    """

    driver: DriverName
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    allow_sampling: bool = False
    tool_search: bool = False
    batch: bool = False
    live: Live | None = None
    #: ``connector``: the provider reaches the tools through the replay server's URL
    #: (docs/providers.md); absent or ``client``: left out of the digested document
    tool_access: ToolAccess = "client"

    @model_serializer(mode="wrap")
    def _omit_client_access(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The default ``tool_access: client`` is left out of the document, so a host that
        does not set it digests exactly as before the field existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("tool_access") == "client":
            data.pop("tool_access")
        return data

    @model_validator(mode="after")
    def _tool_access(self) -> Host:
        problem = tool_access_problem(
            self.driver,
            self.tool_access,
            tool_search=self.tool_search,
            batch=self.batch,
            live=self.live is not None,
        )
        if problem is not None:
            raise FieldRuleError("tool_access", problem)
        return self

    @model_validator(mode="after")
    def _sampling(self) -> Host:
        sampling = sorted(SAMPLING_PARAMS & set(self.params))
        if sampling and not self.allow_sampling:
            raise FieldRuleError(
                "params",
                f"sampling parameter(s) {', '.join(sampling)} in host.params are "
                "refused unless host.allow_sampling is true (the registration must say so "
                "explicitly)",
            )
        if DRIVERS[self.driver].needs_model and not self.model:
            raise FieldRuleError("model", f"host.model is required for driver '{self.driver}'")
        return self


#: (limit, the rule that may replace it): a limit and its rule are never both given.
LIMIT_RULES: tuple[tuple[str, str], ...] = (
    ("call_limit", "call_limit_over_certified"),
    ("turn_limit", "turn_limit_over_calls"),
)


class Budgets(Strict):
    """Harness budgets (ToolBottleneckBench's harness contract, 3.3); an arm may override.

    ``call_limit_over_certified: k`` sets each task's call limit to its certified minimum
    plus k (the corpus declares each task's certified shortest path, ``solution:
    {certified: true}``; every task of the split must have one, checked at register);
    ``turn_limit_over_calls: k`` sets the turn limit to the (task's) call limit plus k.
    A rule replaces its limit: giving both is refused, and with the rule the limit reads
    null (it is per task, resolved by :func:`prereg.registry.units.unit_budgets`).
    """

    completion_cap: int = Field(1024, gt=0)
    episode_tokens: int = Field(128_000, gt=0)
    call_limit: int | None = Field(20, gt=0)
    turn_limit: int | None = Field(24, gt=0)
    spend_usd: float | None = Field(None, ge=0)
    call_limit_over_certified: int | None = Field(None, ge=0, le=1000)
    turn_limit_over_calls: int | None = Field(None, ge=0, le=1000)

    @model_validator(mode="before")
    @classmethod
    def _limit_rules(cls, data: Any) -> Any:
        """A rule replaces its limit (which then reads null); both given is refused.

        Read on the given keys (what ``model_fields_set`` would say), before defaults: a
        frozen copy lists the replaced limit as null, which is not "given".
        """
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for limit, rule in LIMIT_RULES:
            if out.get(rule) is None:
                if limit in out and out[limit] is None:
                    raise FieldRuleError(limit, f"{limit} may be null only with {rule}")
                continue
            if out.get(limit) is not None:
                raise FieldRuleError(
                    rule,
                    f"give either budgets.{limit} or budgets.{rule}, not both: the rule "
                    f"sets the {limit.replace('_', ' ')} of each task",
                )
            out[limit] = None
        return out


class HarnessRules(Strict):
    """Registration-wide harness rules (ToolBottleneckBench, 3.3 and 4.2).

    ``infrastructure``: what a unit whose runs fail on infrastructure (a driver raising,
    a provider down) becomes. ``retry`` (the default): its ``infra_error`` records are
    kept out of the analysis and the unit is run again by the next ``prereg run``; until
    a run completes it is missing. ``count_as_failure`` (intention to treat, seed 001
    4.2): the unit is retried until it has ``attempts`` infra_error records; then it is
    settled, and counts as a failure of its arm in every registered outcome (never
    silently dropped). A unit with an ok record is that record, whatever came before.

    ``cache_credit``: ``true`` (the default) prices cached input tokens at the provider's
    cached rate; ``false`` prices every input token at the uncached input rate (seed
    001's frozen route prices "without cache credit").
    """

    infrastructure: Literal["retry", "count_as_failure"] = "retry"
    attempts: int | None = Field(None, ge=1, le=100)
    cache_credit: bool = True

    @model_validator(mode="after")
    def _attempts(self) -> HarnessRules:
        if self.infrastructure == "count_as_failure" and self.attempts is None:
            raise FieldRuleError(
                "attempts",
                "count_as_failure needs the number of attempts after which a unit that "
                "failed on infrastructure counts as a failure (attempts: 3, say)",
            )
        if self.infrastructure == "retry" and self.attempts is not None:
            raise FieldRuleError(
                "attempts",
                "'attempts' is for infrastructure: count_as_failure (retry runs a unit "
                "again until it completes)",
            )
        return self


#: A registered system prompt: the text itself is registered (and digested), and sent as
#: the provider's system field (Anthropic ``system``, OpenAI ``instructions``).
SystemPrompt = Annotated[str, Field(min_length=1, max_length=100_000)]


class HostOverride(Strict):
    """An arm's host, over the registration's ``host``.

    Fields given replace the registration's. An arm that names another ``driver`` than
    the registration's gets a fresh host: nothing else is inherited (another provider's
    model or params would be meaningless), so it gives its own ``model`` and ``params``.
    ``params`` given replace the inherited params whole (no key-by-key merge: what an arm
    sends is what its ``params`` say). ``batch`` and ``live`` stay registration-wide.
    """

    driver: DriverName | None = None
    model: str | None = Field(None, min_length=1)
    params: dict[str, Any] | None = None
    allow_sampling: bool | None = None
    tool_search: bool | None = None
    tool_access: ToolAccess | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_access(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``tool_access`` is left out of the document (digests unchanged)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("tool_access") is None:
            data.pop("tool_access", None)
        return data

    def apply(self, base: Host) -> Host:
        """The arm's host: ``base`` with this override's fields (see the class docstring)."""
        given = self.model_dump(exclude_none=True)
        if self.driver is not None and self.driver != base.driver:
            fresh = {"driver": self.driver, "batch": base.batch, "live": base.live}
            return Host.model_validate({**fresh, **given})
        return Host.model_validate({**base.model_dump(), **given})


class BudgetsOverride(Strict):
    """An arm's budgets, over the registration's, field by field.

    ``spend_usd`` is not here: the spend cap is the registration's (one cap over every
    arm's requests).
    """

    completion_cap: int | None = Field(None, gt=0)
    episode_tokens: int | None = Field(None, gt=0)
    call_limit: int | None = Field(None, gt=0)
    turn_limit: int | None = Field(None, gt=0)
    call_limit_over_certified: int | None = Field(None, ge=0, le=1000)
    turn_limit_over_calls: int | None = Field(None, ge=0, le=1000)

    @model_validator(mode="after")
    def _limit_rules(self) -> BudgetsOverride:
        for limit, rule in LIMIT_RULES:
            if getattr(self, limit) is not None and getattr(self, rule) is not None:
                raise FieldRuleError(rule, f"give either {limit} or {rule}, not both")
        return self

    def apply(self, base: Budgets) -> Budgets:
        """The arm's budgets: a limit given replaces the registration's rule for it, and a
        rule given replaces the registration's limit."""
        given = self.model_dump(exclude_none=True)
        for limit, rule in LIMIT_RULES:
            if limit in given:
                given[rule] = None
            elif rule in given:
                given[limit] = None
        return Budgets.model_validate({**base.model_dump(), **given})


class Configuration(Strict):
    """One arm's fully resolved configuration: what its runs were sent with."""

    host: Host
    budgets: Budgets
    system_prompt: SystemPrompt | None = None


class Arm(Strict):
    """One arm: a surface of the experiment (optionally transformed by a control).

    A control arm (InvokeRank, 7.2) is a registered, deterministic transformation of
    its ``reference`` arm's offer (default: the first arm without a control), on the
    same surface: ``placebo`` offers exactly the reference's pool; ``blinded``
    replaces the surface's names, titles, descriptions, schema text and server text
    by neutral placeholders; ``decoy`` adds the unrelated server named by ``decoy``
    (a surface of the experiment) to the pool; ``clone_swap`` replaces the surface
    by two copies under matched opaque labels, crossing labels and listing order in
    a balanced 2 x 2. See ``prereg.experiments.controls`` and ``prereg.reports.controls``.

    An arm is a whole configuration (issue 13): besides its surface it may override the
    registration's ``host`` (see :class:`HostOverride`), ``budgets`` (field by field)
    and ``system_prompt``; :meth:`Registration.config_of` resolves the result.
    """

    id: Identifier
    surface: str = Field(min_length=1)
    control: ControlName | None = None
    reference: Identifier | None = None
    decoy: str | None = Field(None, min_length=1)
    description: str | None = None
    host: HostOverride | None = None
    budgets: BudgetsOverride | None = None
    system_prompt: SystemPrompt | None = None
    #: the arm's cell of a ToolBottleneckBench study (issue 19; an experiment of kind
    #: toolbottleneck): pressure levels, menu mode, simulated policy
    toolbottleneck: ArmCell | None = None
    #: the factor levels of a factorial cell (set by the expansion, see ``Factorial``)
    cell: dict[str, StrictStr | StrictInt | StrictFloat | StrictBool] | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_cell(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``toolbottleneck`` block is left out, so every arm that has none
        digests exactly as before the field existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("toolbottleneck") is None:
            data.pop("toolbottleneck", None)
        return data

    @model_validator(mode="after")
    def _control_fields(self) -> Arm:
        if self.control == "decoy" and self.decoy is None:
            raise FieldRuleError(
                "decoy",
                "a decoy control names the server it adds to the "
                "pool (decoy: <surface id of the experiment>)",
            )
        if self.decoy is not None and self.control != "decoy":
            raise FieldRuleError("decoy", "'decoy' is only for an arm with control: decoy")
        if self.reference is not None and self.control is None:
            raise FieldRuleError(
                "reference",
                "'reference' is only for a control arm (it "
                "names the arm the control is judged against)",
            )
        return self


class Factor(Strict):
    """One factor of a factorial design: the arm field it sets and its levels."""

    id: Identifier
    sets: str = Field(min_length=1)
    levels: list[StrictStr | StrictInt | StrictFloat | StrictBool] = Field(min_length=2)
    description: str | None = None

    @field_validator("sets")
    @classmethod
    def _settable(cls, value: str) -> str:
        if not settable(value):
            raise ValueError(
                f"a factor cannot set '{value}'; it sets one of: "
                f"{', '.join(SETTABLE)}, or host.params.<key>"
            )
        return value

    @model_validator(mode="after")
    def _distinct(self) -> Factor:
        if len({repr(v) for v in self.levels}) != len(self.levels):
            raise FieldRuleError("levels", f"factor '{self.id}' repeats a level")
        return self


class Factorial(Strict):
    """Factors crossed into cells, plus extra cells; see :mod:`prereg.registry.factorial`."""

    base: dict[str, Any] = Field(default_factory=dict)
    factors: list[Factor] = Field(min_length=1)
    extra_cells: list[dict[str, StrictStr | StrictInt | StrictFloat | StrictBool]] = Field(
        default_factory=list
    )
    #: whole arms beside the design (issue 19: a study's fixed-menu lane and switches),
    #: each the base with its own fields merged in; weight 0 in every factorial effect
    extra_arms: list[dict[str, Any]] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_no_extra_arms(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No extra arms: the field is left out, so earlier factorial digests stay."""
        data = handler(self)
        if isinstance(data, dict) and not data.get("extra_arms"):
            data.pop("extra_arms", None)
        return data

    @model_validator(mode="after")
    def _factors(self) -> Factorial:
        ids = [f.id for f in self.factors]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise FieldRuleError("factors", f"duplicate factor id(s): {', '.join(dupes)}")
        paths = [f.sets for f in self.factors]
        twice = sorted({p for p in paths if paths.count(p) > 1})
        if twice:
            raise FieldRuleError("factors", f"two factors set the same field: {', '.join(twice)}")
        return self


#: What a test pairs, aggregates and resamples by (issue 13, item 5): the task (prompt),
#: its paraphrase cluster (the task family) or its intent. See ``prereg.reports.pairs``.
Unit = Literal["task", "cluster", "intent"]
#: The tests that need one binary outcome per task, so pair by task only.
TASK_ONLY_TESTS = frozenset({"mcnemar_exact", "beta_mixture"})
#: The tests a contrast may be registered with (a contrast is a weighted sum of arms).
CONTRAST_TESTS = frozenset({"paired_bootstrap", "sign_flip_test"})


class Contrast(Strict):
    """A named weighted combination of arms (cells), tested as registered.

    Give ``weights`` (arm id -> weight; they must sum to ``sum_to``, default 0) or
    ``effect`` (factor ids of a two-level factorial: one factor is its main effect, the
    mean of the cells at the second level minus the mean at the first, seed 001's E_a;
    two or more their interaction, the difference of differences averaged over the other
    factors, seed 001's E_ab; weights from :func:`prereg.stats.factorial_weights`).
    The per-unit contrast is sum_c w_c m_{u,c}, m_{u,c} the unit's mean outcome in cell
    c; ``test``: ``paired_bootstrap`` (cluster bootstrap over units, percentile
    interval, centred p) or ``sign_flip_test`` (exact, over units).
    """

    id: Identifier
    effect: list[Identifier] | None = Field(None, min_length=1)
    weights: dict[str, StrictFloat | StrictInt] | None = None
    sum_to: float = 0.0
    test: Literal["paired_bootstrap", "sign_flip_test"] = "paired_bootstrap"
    alpha: Probability = 0.05
    sides: Literal["two-sided", "greater", "less"] = "two-sided"
    unit: Unit = "task"
    outcome: OutcomeName | None = None
    draws: int = Field(10_000, ge=100, le=1_000_000)
    level: Probability | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _one_definition(self) -> Contrast:
        if (self.effect is None) == (self.weights is None):
            raise FieldRuleError(
                "weights", "give exactly one of 'weights' (arm -> weight) or 'effect' (factors)"
            )
        return self


class Design(Strict):
    repeats: int = Field(1, ge=1, le=100)
    rotations: int = Field(1, ge=1, le=100)
    seed: int = 0


class TestSpec(Strict):
    """A statistical test as registered. ``compare`` defaults to the first two arms."""

    test: TestName
    alpha: Probability = 0.05
    sides: Literal["two-sided", "greater", "less"] = "two-sided"
    favours: str | None = None
    compare: StrictPair | None = None
    outcome: OutcomeName | None = None
    aggregate: Literal["majority", "all", "any", "first", "mean"] = "majority"
    margin: float | None = Field(None, gt=0, lt=1)
    level: Probability | None = None
    draws: int = Field(10_000, ge=100, le=1_000_000)
    unit: Unit = "task"
    #: test a registered contrast (``contrasts[].id``) instead of a pair of arms
    contrast: Identifier | None = None

    @field_validator("test", mode="before")
    @classmethod
    def _known_test(cls, value: object) -> object:
        if isinstance(value, str) and value not in TEST_NAMES:
            close = difflib.get_close_matches(value, TEST_NAMES, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"unknown test '{value}'{hint}; known tests: {', '.join(TEST_NAMES)}")
        return value

    @field_validator("outcome", mode="before")
    @classmethod
    def _known_outcome(cls, value: object) -> object:
        if isinstance(value, str) and value not in OUTCOMES:
            raise ValueError(f"unknown outcome '{value}'; known: {', '.join(OUTCOMES)}")
        return value

    @model_validator(mode="after")
    def _margin(self) -> TestSpec:
        if REGISTRABLE_TESTS[self.test].needs_margin and self.margin is None:
            raise FieldRuleError(
                "margin", f"{self.test} needs an equivalence margin (margin: 0.05, say)"
            )
        if self.unit != "task" and self.test in TASK_ONLY_TESTS:
            raise FieldRuleError(
                "unit",
                f"{self.test} needs one binary outcome per task: its unit is 'task' "
                f"(use paired_bootstrap, sign_flip_test or tost_paired to pair by {self.unit})",
            )
        if self.contrast is not None:
            if self.test not in CONTRAST_TESTS:
                raise FieldRuleError(
                    "test",
                    f"a contrast is tested with {' or '.join(sorted(CONTRAST_TESTS))}, "
                    f"not {self.test}",
                )
            if self.compare is not None or self.favours is not None:
                raise FieldRuleError(
                    "compare",
                    "a test of a contrast takes no 'compare' or 'favours' (the contrast's "
                    "weights say what is compared; 'sides' gives the direction)",
                )
        return self


class Multiplicity(Strict):
    method: MultiplicityMethod = "bh"
    q: Probability = 0.10
    family: Literal["per-intent", "secondary", "contrasts"] = "per-intent"


class Stopping(Strict):
    rule: Literal["beta-mixture"]
    threshold: float = Field(20.0, gt=1.0)
    min_prompts: int = Field(40, ge=1)
    prior: StrictFloatPair = (1.0, 1.0)


class Plan(Strict):
    """Planning figures; checked at ``register`` against the split's prompt count."""

    mde: Probability
    power: Probability = 0.8
    sigma_d: float = Field(gt=0)
    sigma_run: float = Field(0.0, ge=0)
    alpha: Probability | None = None


class InvokeRankSpec(Strict):
    """How the report's InvokeRank section estimates the score (issue 17, item 5)."""

    interval: ScoreInterval = Field(
        "published",
        description="the score's interval method (stats.invokerank.SCORE_INTERVALS): the "
        "published path's (default) or the calibrated bootstrap (InvokeRank 7.5); the "
        "other is shown beside it, labelled",
    )


class Registration(Strict):
    """A registration document (YAML). See README, "The registration format"."""

    id: Identifier
    title: str = Field(min_length=1)
    hypothesis: str = Field(min_length=1)
    falsification: str = Field(min_length=1)
    experiment: Identifier
    kind: Literal["exploratory", "confirmatory"]
    split: SplitName
    arms: list[Arm] = Field(min_length=1)
    factorial: Factorial | None = None
    contrasts: list[Contrast] = Field(default_factory=list)
    host: Host
    budgets: Budgets = Field(default_factory=lambda: Budgets())
    harness: HarnessRules = Field(default_factory=lambda: HarnessRules())
    system_prompt: SystemPrompt | None = None
    design: Design = Field(default_factory=lambda: Design())
    outcome: OutcomeName = "success"
    primary: TestSpec
    secondary: list[TestSpec] = Field(default_factory=list)
    multiplicity: Multiplicity | None = None
    stopping: Stopping | None = None
    plan: Plan | None = None
    supersedes: Identifier | None = None
    notes: str | None = None
    intent_weights: dict[Identifier, PositiveWeight] | None = Field(
        None,
        description="InvokeRank roll-up weights per intent (normalised; equal when absent; "
        "an intent not listed weighs 0)",
    )
    #: judges of outcomes no oracle decides (issue 18; registry/judges.py); absent: none
    judge: list[Judge] | None = None
    #: the InvokeRank score's interval method (issue 17, item 5); absent: published
    invokerank: InvokeRankSpec | None = None
    #: ToolBottleneckBench repairs against switches (issue 19, seed 4.3): each names the
    #: repaired lane, the no-repair lane and the switches (arm ids); absent: none
    repairs: list[StudyRepair] | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_intent_weights(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``intent_weights`` is left out of the document, so a registration that
        does not use it digests exactly as before the field existed."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("intent_weights", "judge", "repairs"):  # added: absent, not digested
                if data.get(name) is None:
                    data.pop(name, None)
            if data.get("invokerank") is None:  # added (issue 17): absent, not digested
                data.pop("invokerank", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_judge(cls, data: Any) -> Any:
        """``judge:`` may be written as one judge or a list of judges."""
        if isinstance(data, dict) and "judge" in data:
            return {**data, "judge": wrap_judges(data["judge"])}
        return data

    @model_validator(mode="before")
    @classmethod
    def _expand_factorial(cls, data: Any) -> Any:
        """``factorial:`` becomes ``arms:`` (one arm per cell); arms already listed (a frozen
        copy lists what it was expanded to) must be exactly the expansion."""
        if not isinstance(data, dict) or data.get("factorial") is None:
            return data
        try:
            design = Factorial.model_validate(data["factorial"])
            arms = expand(design.model_dump(mode="python"))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            cause = first.get("ctx", {}).get("error")
            if isinstance(cause, FieldRuleError):
                where = ".".join(filter(None, [where, *map(str, cause.field_path)]))
            raise FieldRuleError(f"factorial.{where}".rstrip("."), first["msg"]) from None
        except DesignError as exc:
            raise FieldRuleError(exc.field, str(exc)) from None
        if data.get("arms") is None:
            return {**data, "arms": arms}
        try:
            listed = [Arm.model_validate(a).model_dump() for a in data["arms"]]
            matches = listed == [Arm.model_validate(a).model_dump() for a in arms]
        except (ValidationError, TypeError):
            matches = False
        if not matches:
            raise FieldRuleError(
                "arms",
                "a factorial registration's arms are its cells: leave 'arms' out (they are "
                "generated from 'factorial')",
            )
        return data

    @model_validator(mode="after")
    def _rules(self) -> Registration:
        """Cross-field rules, checked in this order (the first broken one is reported)."""
        self._check_split()
        ids = [arm.id for arm in self.arms]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise FieldRuleError("arms", f"duplicate arm id(s): {', '.join(dupes)}")
        for where, spec in [("primary", self.primary)] + [
            (f"secondary[{i}]", s) for i, s in enumerate(self.secondary)
        ]:
            _check_compared_arms(where, spec, ids)
        self._check_controls(ids)
        self._check_configurations()
        self._check_contrasts(ids)
        self._check_judges()
        self._check_repairs(ids)
        if self.supersedes == self.id:
            raise FieldRuleError("supersedes", "a registration cannot supersede itself")
        return self

    def _check_judges(self) -> None:
        """Judge ids are unique; a judge of a host arm's model family declares the confound."""
        judges = self.judge or []
        keys = [j.key for j in judges]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise FieldRuleError("judge", f"duplicate judge id(s): {', '.join(dupes)} (give 'id')")
        hosts = [
            (a.id, self.config_of(a.id).host.driver, self.config_of(a.id).host.model)
            for a in self.arms
        ]
        problem = confound_problem(judges, hosts)
        if problem is not None:
            raise FieldRuleError(*problem)

    def _check_repairs(self, ids: list[str]) -> None:
        """Every lane of a repair names registered arms (study arms, issue 19)."""
        for index, repair in enumerate(self.repairs or []):
            for name, lane in repair.lanes():
                for side in ("stressed", "unstressed"):
                    arm = getattr(lane, side)
                    if arm not in ids:
                        raise FieldRuleError(
                            f"repairs[{index}].{name}.{side}", f"names unknown arm '{arm}'"
                        )

    def _check_split(self) -> None:
        if self.kind == "confirmatory" and self.split != LOCKED_SPLIT:
            raise FieldRuleError(
                "split",
                f"a confirmatory registration must use split '{LOCKED_SPLIT}' "
                f"(the locked split), not '{self.split}'",
            )
        if self.kind == "exploratory" and self.split == LOCKED_SPLIT:
            raise FieldRuleError(
                "split",
                "an exploratory registration may not use split "
                f"'{LOCKED_SPLIT}': the locked split is reserved for one confirmatory run",
            )

    def _check_controls(self, ids: list[str]) -> None:
        plain = [arm.id for arm in self.arms if arm.control is None]
        for index, arm in enumerate(self.arms):
            if arm.control is None:
                continue
            where = f"arms[{index}]"
            reference = arm.reference or (plain[0] if plain else None)
            if reference is None:
                raise FieldRuleError(
                    where,
                    f"control arm '{arm.id}' needs a reference arm: "
                    "an arm without a control (or name one with 'reference')",
                )
            if reference not in ids:
                raise FieldRuleError(f"{where}.reference", f"names unknown arm '{reference}'")
            ref = next(a for a in self.arms if a.id == reference)
            if ref.control is not None:
                raise FieldRuleError(
                    f"{where}.reference",
                    f"the reference '{reference}' is "
                    "itself a control arm; name an arm without a control",
                )
            if ref.surface != arm.surface:
                raise FieldRuleError(
                    f"{where}.surface",
                    f"a control is a transformation of "
                    f"its reference's surface: '{arm.surface}' differs from "
                    f"'{ref.surface}' of arm '{reference}'",
                )

    def _check_configurations(self) -> None:
        """Every arm's host resolves; all arms share one evidence class; batch is uniform."""
        for index, arm in enumerate(self.arms):
            if arm.host is None:
                continue
            try:
                arm.host.apply(self.host)
            except FieldRuleError as exc:
                raise FieldRuleError(f"arms[{index}].host.{exc.field_path[-1]}", str(exc)) from None
            except ValidationError as exc:
                first = exc.errors()[0]
                cause = first.get("ctx", {}).get("error")
                if isinstance(cause, FieldRuleError):  # a rule of Host, on one of its fields
                    where, message = ".".join(map(str, cause.field_path)), str(cause)
                else:
                    where = ".".join(str(p) for p in first["loc"]) or "driver"
                    message = first["msg"]
                raise FieldRuleError(f"arms[{index}].host.{where}", message) from None
        configs = [self.config_of(arm.id) for arm in self.arms]
        classes = {DRIVERS[c.host.driver].evidence_class for c in configs}
        if len(classes) > 1:
            listed = ", ".join(
                f"{arm.id}: {c.host.driver} ({DRIVERS[c.host.driver].evidence_class})"
                for arm, c in zip(self.arms, configs, strict=True)
            )
            raise FieldRuleError(
                "arms",
                "all arms of a registration share one evidence class (runs of different "
                f"classes are never compared); these arms mix them: {listed}",
            )
        if self.host.batch and len({_request_key(c.host) for c in configs}) > 1:
            raise FieldRuleError(
                "host.batch",
                "a batch registration sends every arm through one provider batch: its "
                "arms may not differ in driver, model or params",
            )

    def _check_contrasts(self, ids: list[str]) -> None:
        """Contrasts name existing arms or factors, sum as declared; tests name contrasts."""
        names = [c.id for c in self.contrasts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise FieldRuleError("contrasts", f"duplicate contrast id(s): {', '.join(dupes)}")
        for index, contrast in enumerate(self.contrasts):
            where = f"contrasts[{index}]"
            try:
                self.contrast_weights(contrast.id)
            except ValueError as exc:
                field = "effect" if contrast.effect is not None else "weights"
                raise FieldRuleError(f"{where}.{field}", str(exc)) from None
        specs = [("primary", self.primary)] + [
            (f"secondary[{i}]", s) for i, s in enumerate(self.secondary)
        ]
        for where, spec in specs:
            if spec.contrast is not None and spec.contrast not in names:
                raise FieldRuleError(
                    f"{where}.contrast",
                    f"names unknown contrast '{spec.contrast}' (registered: "
                    f"{', '.join(names) or 'none'})",
                )
        family = self.multiplicity.family if self.multiplicity else None
        if self.primary.contrast is not None:
            if self.stopping is not None:
                raise FieldRuleError(
                    "stopping",
                    "the stopping rule monitors the discordant pairs of two arms; a primary "
                    "test of a contrast has none (register a fixed-sample design)",
                )
            if family == "per-intent":
                raise FieldRuleError(
                    "multiplicity.family",
                    "the per-intent family tests the primary comparison on each intent; a "
                    "primary test of a contrast is not a comparison of two arms (use "
                    "family: contrasts or secondary)",
                )
        if family == "contrasts":
            assert self.multiplicity is not None
            if not self.contrasts:
                raise FieldRuleError(
                    "multiplicity.family", "the family 'contrasts' needs registered contrasts"
                )
            if self.multiplicity.method == "e-bh":
                raise FieldRuleError(
                    "multiplicity.method",
                    "contrasts are tested by p-values; correct them with holm, bh or none "
                    "(e-bh needs e-values)",
                )

    def contrast_weights(self, contrast_id: str) -> dict[str, float]:
        """Arm id -> weight of a registered contrast (ValueError if it cannot be built)."""
        contrast = next(c for c in self.contrasts if c.id == contrast_id)
        ids = [a.id for a in self.arms]
        if contrast.weights is not None:
            unknown = sorted(set(contrast.weights) - set(ids))
            if unknown:
                raise ValueError(
                    f"weights name unknown arm(s) {', '.join(unknown)} (arms: {', '.join(ids)})"
                )
            weights = {arm: float(w) for arm, w in contrast.weights.items()}
            check_weights(list(weights.values()), sum_to=contrast.sum_to)
            return weights
        assert contrast.effect is not None
        if self.factorial is None:
            raise ValueError("an 'effect' contrast needs a factorial design ('factorial:')")
        factors = {f.id: f for f in self.factorial.factors}
        for factor in contrast.effect:
            if factor not in factors:
                raise ValueError(f"unknown factor '{factor}' (factors: {', '.join(factors)})")
            if len(factors[factor].levels) != 2:
                raise ValueError(
                    f"factor '{factor}' has {len(factors[factor].levels)} levels; an effect "
                    "contrast needs two-level factors (give 'weights' instead)"
                )
        cells = [a.cell or {} for a in self.arms]
        low_high = {f.id: (f.levels[0], f.levels[1]) for f in self.factorial.factors}
        weights = dict(zip(ids, factorial_weights(cells, contrast.effect, low_high), strict=True))
        check_weights(list(weights.values()), sum_to=0.0)
        return {arm: w for arm, w in weights.items() if w != 0.0}

    def config_of(self, arm_id: str) -> Configuration:
        """The arm's fully resolved configuration (registration defaults, arm overrides)."""
        arm = next(a for a in self.arms if a.id == arm_id)
        host = self.host if arm.host is None else arm.host.apply(self.host)
        budgets = self.budgets if arm.budgets is None else arm.budgets.apply(self.budgets)
        prompt = arm.system_prompt if arm.system_prompt is not None else self.system_prompt
        return Configuration(host=host, budgets=budgets, system_prompt=prompt)

    def reference_of(self, arm_id: str) -> str | None:
        """The arm a control arm is judged against (None for an arm without a control)."""
        arm = next(a for a in self.arms if a.id == arm_id)
        if arm.control is None:
            return None
        return arm.reference or next(a.id for a in self.arms if a.control is None)

    def compared_arms(self, spec: TestSpec | None = None) -> tuple[str, str]:
        """(control, treatment) of a test: ``compare`` or the first two arms."""
        spec = spec or self.primary
        if spec.compare:
            return spec.compare
        return (self.arms[0].id, self.arms[1].id)


def _request_key(host: Host) -> str:
    """What a provider request depends on in a host (batch arms must agree on it)."""
    return repr((host.driver, host.model, sorted(host.params.items()), host.tool_search))


def _check_compared_arms(where: str, spec: TestSpec, ids: list[str]) -> None:
    """A test compares two distinct registered arms and favours one of them."""
    if spec.contrast is not None:
        return  # a contrast's arms are its weights' (checked with the contrasts)
    pair = spec.compare or tuple(ids[:2])
    if len(ids) < 2 or len(pair) != 2:
        raise FieldRuleError(where, "a comparative test needs at least two arms")
    for arm_id in pair:
        if arm_id not in ids:
            raise FieldRuleError(f"{where}.compare", f"names unknown arm '{arm_id}'")
    if pair[0] == pair[1]:
        raise FieldRuleError(f"{where}.compare", "names the same arm twice")
    if spec.favours is not None and spec.favours not in pair:
        raise FieldRuleError(
            f"{where}.favours",
            f"must be one of the compared arms {list(pair)}, got '{spec.favours}'",
        )


def is_valid_id(value: str) -> bool:
    return re.fullmatch(ID_PATTERN, value) is not None
