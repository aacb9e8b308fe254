"""The run record: one per run unit (registration, arm, task, repeat), as stored and exported.

This is the boundary with the analysis package and with the provider drivers,
so it is a strict pydantic model: unknown fields are refused on import, and the
invariants a record must satisfy are checked when it is built, not discovered
in analysis:

- every record carries the full registration digest (``sha256:<64 hex>``);
- a quantity that was not measured is null, never estimated (latency, tokens and
  cost under the replay driver; a funnel stage a host does not report);
- funnel stages are nested (Surfaced > Selected > Invoked > Executed > Completed):
  a stage recorded true while a measured parent is false is a recording error;
- every failed agent episode has exactly one terminal flag; a success has none;
- an infrastructure failure (``status: infra_error``) carries an error and no
  success verdict, so it can never be counted as an agent failure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from prereg.experiments.models import SplitName
from prereg.experiments.toolbottleneck.verify import OBLIGATIONS as STUDY_OBLIGATIONS
from prereg.registry.hosts import EvidenceClass

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"

Status = Literal["ok", "infra_error"]
Polarity = Literal["positive", "negative", "optional"]

#: Where the first external call went, or why there was none (InvokeRank, section 3.3).
TerminalClass = Literal[
    "focal",
    "competitor",
    "other_external",
    "searched_then_declined",
    "answered_without_search",
    "unresolved",
]
TERMINAL_CLASSES: tuple[str, ...] = TerminalClass.__args__  # type: ignore[attr-defined]

#: How a failed episode ended, in order of precedence (ToolBottleneckBench, section 3.4).
TerminalFlag = Literal[
    "completion_cap",
    "episode_budget",
    "call_limit",
    "turn_limit",
    "infeasible",
    "wrong_conclusion",
    "contract_break",
]
TERMINAL_FLAGS: tuple[str, ...] = TerminalFlag.__args__  # type: ignore[attr-defined]

#: The obligations checked, in check order; the first unmet one is recorded.
#: no_tool: a negative task made no call; tool_use: a task with a recorded path made one;
#: then the oracles; termination: the episode ended with an answer, not at a limit.
OBLIGATIONS: tuple[str, ...] = (
    "no_tool",
    "tool_use",
    "prohibited_operations",
    "confirmation",
    "no_mutation",
    "final_state",
    "answer",
    "termination",
)

FUNNEL_STAGES: tuple[str, ...] = ("surfaced", "selected", "invoked", "executed", "completed")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordingError(ValueError):
    """A record that contradicts itself (a funnel stage without its parent, say)."""


class Tokens(Strict):
    """Token counts as the host reported them; null when not measured (never estimated)."""

    input: int | None = Field(None, ge=0)
    output: int | None = Field(None, ge=0)
    reasoning: int | None = Field(None, ge=0)
    cached: int | None = Field(None, ge=0)

    @property
    def total(self) -> int | None:
        """input + output (+ reasoning when reported separately); None if nothing measured."""
        if self.input is None and self.output is None:
            return None
        return (self.input or 0) + (self.output or 0) + (self.reasoning or 0)


class Funnel(Strict):
    """The nested funnel of InvokeRank; each stage true, false or null (not measured)."""

    surfaced: bool | None = None
    selected: bool | None = None
    invoked: bool | None = None
    executed: bool | None = None
    completed: bool | None = None

    @model_validator(mode="after")
    def _nested(self) -> Funnel:
        stages = (self.surfaced, self.selected, self.invoked, self.executed, self.completed)
        if any(stage is False for stage in stages):  # else nothing can break the nesting
            check_funnel(dict(zip(FUNNEL_STAGES, stages, strict=True)))
        return self


def check_funnel(stages: dict[str, bool | None]) -> None:
    """Raise RecordingError if a true stage has a measured parent that is not true."""
    values = [stages.get(name) for name in FUNNEL_STAGES]
    for i, value in enumerate(values):
        if value is not True:
            continue
        for j in range(i):
            if values[j] is False:
                raise RecordingError(
                    f"funnel stage '{FUNNEL_STAGES[i]}' is true but its parent "
                    f"'{FUNNEL_STAGES[j]}' is false"
                )


class Oracles(Strict):
    """State-based verdicts (null when the oracle does not apply to the task)."""

    final_state: bool | None = None
    no_mutation: bool | None = None
    prohibited_operations: bool | None = None
    confirmation: bool | None = None
    answer: bool | None = None


TraceKind = Literal[
    "search", "tool_call", "tool_result", "malformed", "final", "cut", "stop", "error"
]


class TraceEvent(Strict):
    """One event of an episode: a tool search, a call, its result, the answer, a stop.

    Text fields hold untrusted content (prompts, tool output, model text) as data.
    """

    kind: TraceKind
    turn: int = Field(ge=0)
    tool: str | None = None
    arguments: Any = None
    operations: list[str] | None = None
    surfaced: list[str] | None = None
    result: Any = None
    is_error: bool | None = None
    text: str | None = None
    usage: Tokens | None = None
    latency_ms: float | None = Field(None, ge=0)
    cost_usd: float | None = Field(None, ge=0)
    model_returned: str | None = None
    retries: int | None = Field(None, ge=0)


ServerText = Literal["none", "name", "name_and_description"]
OfferRole = Literal["focal", "competitor", "decoy"]


class OfferedServer(Strict):
    """One integration as this unit listed it (untrusted server text is data here)."""

    key: str = Field(
        description="the integration within the arm (a surface id; a clone "
        "copy is '<surface>:a' or '<surface>:b')"
    )
    surface: str = Field(description="the experiment surface it comes from")
    role: OfferRole
    name: str = Field(description="the server name a host may be shown (a clone's label)")
    digest: str = Field(
        description="sha256 of the surface as offered, after any control's transformation"
    )
    snapshot_digest: str | None = Field(
        None, description="digest of the (derived) MCP snapshot, for snapshot surfaces"
    )
    transform: str | None = None
    tools: int = Field(ge=0)
    live: bool = False


class CloneCell(Strict):
    """clone_swap's 2 x 2 cell: which label copy a carried and which copy was listed first."""

    cell: int = Field(ge=0, le=3)
    label_a: str
    label_b: str
    first: Literal["a", "b"]


class Offer(Strict):
    """What the unit offered and what the host was able to read of it.

    ``server_text`` is the driver's capability: whether the host path transmits a
    server's name and description at all (the OpenAI path carries them, the Claude
    API path does not). ``first_server`` is the key of the integration the first
    tool call went to (null: no call, or a name nothing offered).
    """

    control: str | None = None
    servers: list[OfferedServer] = Field(default_factory=list)
    server_text: ServerText = "none"
    first_server: str | None = None
    clone: CloneCell | None = None


class ChainLink(Strict):
    """A record's place in its registration's hash chain (see :mod:`prereg.runners.store.chain`)."""

    index: int = Field(ge=0)
    prev: str = Field(pattern=DIGEST_PATTERN)
    hash: str = Field(pattern=DIGEST_PATTERN)


class ConfigBudgets(Strict):
    """The arm's registered budgets. With a rule (``call_limit_over_certified``: the call
    limit is each task's certified minimum plus k; ``turn_limit_over_calls``: the turn
    limit is the call limit plus k) the limit it replaces is null here: the record keeps
    the registered rule, and the task's certified path (digested with the corpus) gives
    the unit's own limit."""

    completion_cap: int | None = None
    episode_tokens: int | None = None
    call_limit: int | None = None
    turn_limit: int | None = None
    call_limit_over_certified: int | None = None
    turn_limit_over_calls: int | None = None


class Configuration(Strict):
    """The arm's fully resolved configuration the unit ran with (issue 13).

    The registration's digest covers it (it is a function of the frozen registration);
    the record carries it so that a record says, on its own, what produced it, and so
    that import and verify can check it against the registration. The system prompt is
    stored by its sha256 (the text is in the frozen registration). ``digest`` is the
    sha256 of the rest, as canonical JSON: equal configurations, equal digests.
    """

    driver: str
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    tool_search: bool = False
    allow_sampling: bool = False
    budgets: ConfigBudgets = Field(default_factory=ConfigBudgets)
    system_prompt_sha256: str | None = Field(None, pattern=DIGEST_PATTERN)
    #: set only for ``connector`` (the provider reached the tools through the replay's
    #: URL); absent otherwise, so a record written before the field hashes unchanged
    tool_access: Literal["connector"] | None = None
    digest: str = Field(pattern=DIGEST_PATTERN)

    @model_serializer(mode="wrap")
    def _omit_client_access(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("tool_access") is None:
            data.pop("tool_access", None)
        return data


class RunRecord(Strict):
    """One run unit's outcome. See the module docstring for the invariants."""

    schema_version: Literal[1] = 1
    record_id: str = Field(min_length=8, max_length=64)
    registration_id: str = Field(min_length=1)
    registration_digest: str = Field(pattern=DIGEST_PATTERN)
    experiment: str
    arm: str
    surface: str
    task_id: str
    intent: str
    cluster: str
    split: SplitName
    polarity: Polarity
    repeat: int = Field(ge=0)
    rotation: int = Field(ge=0)
    driver: str
    evidence_class: EvidenceClass
    model_requested: str | None = None
    model_returned: str | None = None
    started_at: datetime
    finished_at: datetime
    latency_ms: float | None = Field(None, ge=0)
    tokens: Tokens = Field(default_factory=Tokens)
    cost_usd: float | None = Field(None, ge=0)
    retries: int | None = Field(None, ge=0)  # provider requests retried; null: no requests
    funnel: Funnel = Field(default_factory=Funnel)
    terminal_class: TerminalClass | None = None
    terminal_flag: TerminalFlag | None = None
    first_unmet_obligation: str | None = None
    oracles: Oracles = Field(default_factory=Oracles)
    selected_operations: list[str] = Field(default_factory=list)
    selection_rate: float | None = Field(None, ge=0, le=1)
    unnecessary_calls: int | None = Field(None, ge=0)
    calls: int = Field(0, ge=0)
    turns: int = Field(0, ge=0)
    success: bool | None = None
    status: Status = "ok"
    error: str | None = None
    trace: list[TraceEvent] = Field(default_factory=list)
    batch: bool = False
    offer: Offer | None = None
    config: Configuration | None = None
    #: the API server called (``host:port``) when it is the user's own rather than the
    #: provider's (the openai-chat driver: vLLM, Ollama, a gateway); None otherwise
    server: str | None = None
    #: a ToolBottleneckBench study unit (issue 19): the nine obligations of the seed's
    #: verified success in check order (true, false, or null: undefined), and the digest
    #: of the compiled variant it ran; None for every other record (and not hashed then)
    obligations: dict[str, bool | None] | None = None
    variant_digest: str | None = Field(None, pattern=DIGEST_PATTERN)
    #: set by the run store when the record is appended (None before it is stored)
    chain: ChainLink | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RunRecord:
        if self.started_at.tzinfo is None or self.finished_at.tzinfo is None:
            # instants, as every writer records them; a time without an offset does not
            # compare with one that has it (Python raises TypeError, which would escape
            # validation here and in readers comparing records): refused, not a crash
            raise RecordingError("started_at and finished_at must state a UTC offset")
        if self.finished_at < self.started_at:
            raise RecordingError("finished_at is before started_at")
        if self.status == "infra_error":
            if not self.error:
                raise RecordingError("an infra_error record needs an error message")
            if self.success is not None:
                raise RecordingError(
                    "an infra_error record has no success verdict (it is not an agent outcome)"
                )
            return self
        if self.success is None:
            raise RecordingError("an ok record needs a success verdict")
        if self.success and self.terminal_flag is not None:
            raise RecordingError("a successful episode has no terminal flag")
        if not self.success and self.terminal_flag is None:
            raise RecordingError("a failed episode needs a terminal flag")
        known = OBLIGATIONS if self.obligations is None else STUDY_OBLIGATIONS
        if self.first_unmet_obligation is not None and self.first_unmet_obligation not in known:
            raise RecordingError(f"unknown obligation '{self.first_unmet_obligation}'")
        if self.obligations is not None and set(self.obligations) != set(STUDY_OBLIGATIONS):
            raise RecordingError(
                f"a study record lists the nine obligations {', '.join(STUDY_OBLIGATIONS)}"
            )
        if self.success == (self.first_unmet_obligation is not None):
            raise RecordingError(
                "a failed episode names its first unmet obligation; a successful one has none"
            )
        if self.evidence_class == "replay" and (
            self.latency_ms is not None
            or self.cost_usd is not None
            or self.tokens.total is not None
            or self.retries is not None
        ):
            raise RecordingError(
                "replay records carry no latency, tokens, cost or retries (not measured, so null)"
            )
        return self

    @property
    def unit_key(self) -> tuple[str, str, int]:
        return (self.arm, self.task_id, self.repeat)


#: Columns of the flat export (CSV), in order; nested values are JSON-encoded.
EXPORT_COLUMNS: tuple[str, ...] = (
    "record_id",
    "registration_id",
    "registration_digest",
    "experiment",
    "arm",
    "surface",
    "task_id",
    "intent",
    "cluster",
    "split",
    "polarity",
    "repeat",
    "rotation",
    "driver",
    "evidence_class",
    "model_requested",
    "model_returned",
    "started_at",
    "finished_at",
    "latency_ms",
    "tokens_input",
    "tokens_output",
    "tokens_reasoning",
    "tokens_cached",
    "cost_usd",
    "retries",
    "surfaced",
    "selected",
    "invoked",
    "executed",
    "completed",
    "terminal_class",
    "terminal_flag",
    "first_unmet_obligation",
    "oracle_final_state",
    "oracle_no_mutation",
    "oracle_prohibited_operations",
    "oracle_confirmation",
    "oracle_answer",
    "selected_operations",
    "selection_rate",
    "unnecessary_calls",
    "calls",
    "turns",
    "success",
    "status",
    "error",
    "batch",
    "trace",
    "offer",
    "config",
    "server",
    "obligations",
    "variant_digest",
    "chain",
    "schema_version",
)
