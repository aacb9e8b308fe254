"""The experiment file format: pydantic models for the YAML files a researcher writes.

An experiment folder holds ``experiment.yaml`` (the entry file) and the files it
references by relative path: the service (collections, seed records, typed
operations), the corpus (tasks), the tool surfaces and, for selection
experiments, the pool members. Every model forbids unknown fields, so a typo is
an error with a file, a line and a field rather than a silently ignored setting.

Cross-file rules (a task names an operation the service defines, a tool maps to
operation parameters that exist) need several files at once and live in
:mod:`prereg.experiments.loader`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

ID_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

Id = Annotated[str, Field(pattern=ID_PATTERN, min_length=1, max_length=100)]
SplitName = Literal["dev", "validation", "test"]
#: Split names in order; the last is the locked split (InvokeRank 7.8; DESIGN.md invariant 4).
SPLIT_NAMES: tuple[SplitName, ...] = get_args(SplitName)
#: Reserved for one confirmatory registration; exploratory work never touches it.
LOCKED_SPLIT: SplitName = "test"
RelPath = Annotated[str, Field(min_length=1, max_length=300)]
FieldType = Literal["string", "integer", "number", "boolean", "string_list"]
Polarity = Literal["positive", "negative", "optional"]


class Strict(BaseModel):
    """Base: unknown fields are errors, instances are immutable, types are strict.

    Strict: no string or number becomes a boolean (``destructive: 'yes'``), no boolean a
    number (``limit: true``), no float an integer (``step: 1.0``), no number a string.
    YAML gives real booleans and numbers, so plain YAML is unaffected.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# ---- references between values ------------------------------------------------------------


class ArgRef(Strict):
    """The value of one argument of the tool call."""

    arg: str


class StepRef(Strict):
    """A value taken from the result of an earlier step: ``path`` is dotted (``items.0.id``)."""

    step: int = Field(ge=0)
    path: str = ""


class Const(Strict):
    """A literal value fixed by the surface."""

    value: Any


ArgSource = ArgRef | StepRef | Const


# ---- the service --------------------------------------------------------------------------


class FieldSpec(Strict):
    """A record field: its type and, for identifiers, the collection it refers to."""

    type: FieldType
    ref: str | None = None
    nullable: bool = False


class CollectionSpec(Strict):
    id_prefix: str = Field(pattern=r"^[a-z][a-z0-9]*$")
    description: str = ""
    fields: dict[str, FieldType | FieldSpec]
    records: list[dict[str, Any]] = Field(default_factory=list)

    def field_spec(self, name: str) -> FieldSpec | None:
        spec = self.fields.get(name)
        if spec is None:
            return None
        return spec if isinstance(spec, FieldSpec) else FieldSpec(type=spec)


class ParamSpec(Strict):
    """A typed operation parameter; ``ref`` names the collection an identifier must exist in."""

    type: FieldType
    required: bool = False
    description: str = ""
    enum: list[str | int] | None = None
    minimum: float | None = None
    maximum: float | None = None
    ref: str | None = None


class Confirmation(Strict):
    """A destructive call must pass ``param`` equal to the target record's ``equals_field``.

    A typed confirmation (the name of the thing being destroyed) rather than a
    boolean, so that confirming needs the exact target, not just a flag.
    """

    param: str = "confirm"
    equals_field: str = "name"


OperationKind = Literal["get", "search", "create", "update", "append", "remove", "delete"]


class OperationSpec(Strict):
    """A typed operation on one collection.

    - ``get``: the record whose id is in param ``key``; ``expand`` inlines referenced records.
    - ``search``: records matching every ``equals`` filter and, for ``match`` params, ranked
      by how many query words occur in the listed fields (records matching none are dropped).
    - ``create``: a new record from ``set`` (field <- param) and ``defaults``.
    - ``update``: set fields from ``set`` on the record in ``key`` (only params passed);
      ``defaults`` here are constants set on every call (``clear``: an empty list).
    - ``append`` / ``remove``: add or remove param ``value`` in the list field ``field``.
    - ``delete``: remove the record in ``key``.
    """

    kind: OperationKind
    collection: str
    summary: str = ""
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    key: str | None = None
    match: dict[str, list[str]] = Field(default_factory=dict)
    equals: dict[str, str] = Field(default_factory=dict)
    limit: int = Field(20, ge=1, le=1000)
    set: dict[str, str] = Field(default_factory=dict)
    defaults: dict[str, Any] = Field(default_factory=dict)
    field: str | None = None
    value: str | None = None
    expand: dict[str, str] = Field(default_factory=dict)
    destructive: bool = False
    confirmation: Confirmation | None = None

    @property
    def mutates(self) -> bool:
        return self.kind not in ("get", "search")


class ServiceFile(Strict):
    """The stateful service: collections of records and the operations on them."""

    name: str = Field(min_length=1)
    description: str = ""
    collections: dict[str, CollectionSpec] = Field(min_length=1)
    operations: dict[str, OperationSpec] = Field(min_length=1)


# ---- tool surfaces ------------------------------------------------------------------------


class ChainStep(Strict):
    op: str
    args: dict[str, ArgSource] = Field(default_factory=dict)


class ToolModel(Strict):
    """One tool as a host sees it, and what it does: one operation or a chain of them.

    ``operation`` without ``args`` passes tool arguments to the operation parameters
    of the same name. A ``chain`` runs its steps in order; a step may read an
    earlier step's result; the tool returns the last step's result.
    """

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    title: str = ""
    description: str = ""
    input_schema: dict[str, Any]
    operation: str | None = None
    args: dict[str, ArgSource] | None = None
    chain: list[ChainStep] | None = None

    @model_validator(mode="after")
    def _one_mapping(self) -> ToolModel:
        if self.operation is not None and self.chain is not None:
            raise ValueError("give either 'operation' or 'chain', not both")
        if self.args is not None and self.operation is None:
            raise ValueError("'args' maps tool arguments for 'operation'; it needs 'operation'")
        return self


class SurfaceFile(Strict):
    """A tool surface (an integration as hosts see it).

    ``replay_only`` surfaces (competitors, decoys) are offered but never
    executed: their tools map to no operation and a call to them is refused.
    """

    name: str = Field(min_length=1)
    title: str = ""
    description: str = ""
    replay_only: bool = False
    tools: list[ToolModel] = Field(min_length=1)


# ---- the corpus ---------------------------------------------------------------------------


class SolutionStep(Strict):
    """One step of the recorded solution path: an operation and its arguments.

    An argument value is a literal, or ``{step: i, path: a.b.0}`` to take it from
    the result of step ``i`` (ids that only a lookup returns).
    """

    op: str
    args: dict[str, Any] = Field(default_factory=dict)


class Solution(Strict):
    """The recorded path; ``certified: true`` declares it the task's certified shortest path.

    A certified path is checked when the experiment loads
    (:func:`prereg.experiments.oracles.certification_problem`): replayed on a fresh
    service it reaches the goal, every identifier it passes comes from an earlier step
    (or the prompt), and removing any one step breaks it. Its length is the task's
    certified minimum, which a registered ``call_limit_over_certified`` builds on.
    """

    certified: bool = False
    steps: list[SolutionStep] = Field(default_factory=list)
    answer: str | None = None


class Created(Strict):
    """Exactly one new record in ``collection`` whose fields include ``fields``."""

    collection: str
    fields: dict[str, Any] = Field(default_factory=dict)


class Updated(Strict):
    """Record ``id`` changed exactly the fields given, to the values given."""

    collection: str
    id: str
    fields: dict[str, Any] = Field(min_length=1)


class Deleted(Strict):
    collection: str
    id: str


class Goal(Strict):
    """The final state the task asks for, as changes to the seed state.

    No change listed means the task must not mutate the store. ``answer_includes``
    lists strings the final answer must contain (deterministic, no judge).
    """

    created: list[Created] = Field(default_factory=list)
    updated: list[Updated] = Field(default_factory=list)
    deleted: list[Deleted] = Field(default_factory=list)
    answer_includes: list[str] = Field(default_factory=list)

    @property
    def mutates(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


class Task(Strict):
    """One prompt of the corpus.

    ``permits`` lists the operations the task allows (null: it rules nothing
    out); ``prohibits`` lists operations it forbids. Tasks name operations,
    never tools, so every surface is scored on the same corpus.
    """

    id: Id
    intent: Id
    cluster: Id
    polarity: Polarity = "positive"
    prompt: str = Field(min_length=1)
    permits: list[str] | None = None
    prohibits: list[str] = Field(default_factory=list)
    goal: Goal = Field(default_factory=Goal)
    solution: Solution = Field(default_factory=Solution)
    notes: str | None = None
    #: the prompt names the focal integration (the Invoke Rating's branded-prompt term,
    #: InvokeRank 4.2); absent: not recorded, and left out of the task's dump
    branded: bool | None = None

    @model_serializer(mode="wrap")
    def _omit_unrecorded_branded(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A task that does not record ``branded`` dumps exactly as before the field."""
        data = handler(self)
        if isinstance(data, dict) and data.get("branded") is None:
            data.pop("branded", None)
        return data

    @property
    def certified_minimum(self) -> int | None:
        """Operations on the certified shortest path; None when the path is not certified."""
        return len(self.solution.steps) if self.solution.certified else None

    @property
    def rules_out_anything(self) -> bool:
        return self.permits is not None or bool(self.prohibits)

    def allows(self, op: str) -> bool:
        """Whether the task's remit includes operation ``op``."""
        if op in self.prohibits:
            return False
        return self.permits is None or op in self.permits


class CorpusFile(Strict):
    """The corpus: intents and their tasks.

    ``eligible`` (optional) declares, per intent, which competitors of the experiment's
    pool are eligible for it (the eligible set E_c of InvokeRank 3.4, without the focal
    integration, which is eligible for every intent of its corpus): the Selection Share's
    denominator and the Lever's best competitor range over it. An intent not listed keeps
    the default, every competitor of the pool; an empty list leaves only the focal
    integration (the intent is not contested). Checked against the pool when the
    experiment loads (:func:`prereg.experiments.loader.corpus._check_eligible`).
    """

    intents: dict[Id, str] = Field(min_length=1)
    tasks: list[Task] = Field(min_length=1)
    eligible: dict[Id, list[Id]] | None = None


# ---- the entry file -----------------------------------------------------------------------


class SplitSpec(Strict):
    """Whole clusters go to splits: by seeded fractions, or listed explicitly."""

    seed: int = 0
    fractions: dict[SplitName, float] | None = None
    assign: dict[SplitName, list[str]] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> SplitSpec:
        if (self.fractions is None) == (self.assign is None):
            raise ValueError("give exactly one of 'fractions' or 'assign'")
        if self.fractions is not None:
            missing = [s for s in SPLIT_NAMES if s not in self.fractions]
            if missing:
                raise ValueError(f"fractions must give every split; missing {missing}")
            if any(v < 0 for v in self.fractions.values()):
                raise ValueError("fractions must be >= 0")
            total = sum(self.fractions.values())
            if abs(total - 1.0) > 1e-9:
                raise ValueError(f"fractions must sum to 1, got {total:g}")
        return self


class PoolMember(Strict):
    id: Id
    role: Literal["competitor", "decoy"]
    surface: RelPath


class PoolSpec(Strict):
    """Competing integrations offered next to the arm's surface (the focal integration)."""

    members: list[PoolMember] = Field(min_length=1)


class CorpusLintSpec(Strict):
    """``corpus_lint`` of experiment.yaml: the settings of ``prereg corpus lint``
    (prereg.experiments.corpus_lint; docs/experiments.md, "Corpus lint")."""

    #: Jaccard of 5-character shingles at or above which two prompts are near-duplicates
    near_duplicate: float = Field(0.55, gt=0, le=1)
    #: names (the focal integration's, competitors') no prompt may contain
    brands: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    #: canary strings no prompt and no tool text may contain
    canaries: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)


class ExperimentFile(Strict):
    """The entry file. A surface or pool member path ending in ``.json`` is an MCP
    snapshot (``prereg-mcp-snapshot/1``); any other path is a YAML surface file."""

    name: Id
    title: str = ""
    description: str = ""
    service: RelPath
    corpus: RelPath
    surfaces: dict[Id, RelPath] = Field(min_length=1)
    pool: PoolSpec | None = None
    splits: SplitSpec
    #: invisible characters (category Cf and the other default-ignorables, such as
    #: U+200D ZERO WIDTH JOINER in an emoji sequence or U+200C in Persian) that the
    #: corpus's prompts may hold, written like ``U+200D``; ``register`` refuses any other
    #: (issue 40). The fingerprints remove them either way.
    format_characters: list[Annotated[str, Field(pattern=r"^U\+(10|0?[0-9A-F])?[0-9A-F]{4}$")]] = (
        Field(default_factory=list)
    )
    #: corpus hygiene settings (issue 41, item 5); absent: the documented defaults
    corpus_lint: CorpusLintSpec | None = None
