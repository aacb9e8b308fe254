"""A ToolBottleneckBench task family: everything that decides the correct outcome.

Seed section 3.1: a family fixes the request, the fact values that decide it, the
decision label, the rule for which evidence must be cited, the permitted final state
and the operational tools. The compiler (:mod:`.compile`) changes one pressure at a
time and checks that nothing of this moves.

The file also says how the facts are laid out over source records at each workflow
level (``layouts``): level ``low`` puts every fact in one record (a search and a read,
2 reads), ``medium`` spreads them over two records of a dependency chain (4 reads),
``high`` over three (6 reads). ``sources`` names the record kinds of that chain, in
order; the first is the primary record the request names and the action changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from prereg.core.errors import BadInput
from prereg.core.safeio import (
    MAX_EXPERIMENT_FILE_BYTES,
    UnreadableFile,
    escaped,
    read_regular_file,
)
from prereg.core.yamlio import FieldRuleError, load_model
from prereg.experiments.toolbottleneck.cells import (
    SLUG,
    EncodingName,
    RetrieverName,
    WorkflowLevel,
)

Slug = Annotated[str, Field(pattern=SLUG)]
FamilyId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]
#: A tool-cluster label (``tool_cluster:``): spelled like a family id, since it names the
#: resampling cluster of the family's tasks (a task's ``cluster``).
ClusterLabel = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]
#: Base name of an operational tool; the exposed function name adds a route code.
ToolBase = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")]
FactType = Literal["string", "integer", "number", "boolean", "date", "money"]
FactValue = str | int | float | bool
Operation = Literal["search", "read", "act"]
WORKFLOW_LEVELS: tuple[WorkflowLevel, ...] = ("low", "medium", "high")
ENCODINGS: tuple[EncodingName, ...] = ("raw", "compact", "typed", "linked")
#: The placeholders a request must carry: the primary record's lookup key and the route.
REQUEST_FIELDS = ("{ref}", "{route}")


class Strict(BaseModel):
    """Unknown fields are errors, instances immutable, no silent type coercion."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Route(Strict):
    """The three coordinates an operational tool and its records share (seed 3.2, V)."""

    workspace: Slug
    region: Slug
    collection: Slug

    @property
    def text(self) -> str:
        return f"{self.workspace}/{self.region}/{self.collection}"


class Fact(Strict):
    """A decision fact: its value and the type the typed encodings declare for it."""

    value: FactValue
    type: FactType = "string"


class OperationalTool(Strict):
    """A tool that does the work: search a kind by key, read a record by id, or act on one."""

    name: ToolBase
    operation: Operation
    kind: Slug
    connector: Slug
    description: str = Field("", max_length=500)
    #: Optional: the tool's cluster label (reading K4). Families whose tools give the same
    #: label share that tool (one implementation behind other routes), so they fall in one
    #: tool cluster; a tool without a label is its family's own (the default).
    cluster: ClusterLabel | None = None

    @field_validator("cluster", mode="before")
    @classmethod
    def _label_given(cls, value: Any) -> Any:
        """``cluster:`` written without a value is a mistake, not "no label"."""
        if value is None:
            raise ValueError("give a label (a slug such as 'casebook') or leave the field out")
        return value

    @model_serializer(mode="wrap")
    def _omit_absent_label(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A tool without a label dumps exactly as before the field existed (so its
        family's ``family_digest`` does not change)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("cluster") is None:
            data.pop("cluster", None)
        return data


class Action(Strict):
    """The one reversible action a task may require: ``tool`` sets ``field`` of the
    primary record from ``before`` to ``value`` (setting it back undoes it)."""

    tool: ToolBase
    field: Slug
    before: FactValue
    value: FactValue

    @model_validator(mode="after")
    def _changes_something(self) -> Action:
        if self.before == self.value:
            raise FieldRuleError("value", "the action must change the field (value == before)")
        return self


class Layouts(Strict):
    """Which facts each source record holds, per workflow level (one list per record)."""

    low: list[list[str]] = Field(min_length=1)
    medium: list[list[str]] = Field(min_length=1)
    high: list[list[str]] = Field(min_length=1)

    def of(self, level: WorkflowLevel) -> list[list[str]]:
        return {"low": self.low, "medium": self.medium, "high": self.high}[level]


class Sizes(Strict):
    """The levels of each pressure. Defaults are the seed's (section 3.2)."""

    catalogs: list[int] = Field(default=[32, 512, 2048], min_length=1)
    shortlist: int = Field(16, ge=1)
    retrievers: list[RetrieverName] = Field(
        default=["flat-lexical", "connector-first"], min_length=1
    )
    menus: list[int] = Field(default=[8, 32, 128], min_length=1)
    workflow_reads: dict[WorkflowLevel, int] = Field(default={"low": 2, "medium": 4, "high": 6})
    handoffs: list[int] = Field(default=[0, 2, 6, 14], min_length=1)
    encodings: list[EncodingName] = Field(default=list(ENCODINGS), min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> Sizes:
        for name in ("catalogs", "menus", "handoffs"):
            values: list[int] = getattr(self, name)
            if any(v < 0 for v in values) or values != sorted(set(values)):
                raise FieldRuleError(name, "levels must be distinct, >= 0 and ascending")
        if set(self.workflow_reads) != set(WORKFLOW_LEVELS):
            raise FieldRuleError("workflow_reads", "give low, medium and high")
        for level, reads in self.workflow_reads.items():
            if reads < 2 or reads % 2:
                raise FieldRuleError(
                    f"workflow_reads.{level}", "reads come in search+read pairs: even, >= 2"
                )
        if len(set(self.encodings)) != len(self.encodings) or self.encodings[0] != "raw":
            raise FieldRuleError("encodings", "distinct encodings, raw first (the reference)")
        return self


class FamilyFile(Strict):
    """One task family (seed 3.1), as written in YAML."""

    id: FamilyId
    intent: Slug
    domain: Slug
    title: str = Field("", max_length=200)
    request: str = Field(min_length=1, max_length=2000)
    route: Route
    sources: list[Slug] = Field(min_length=1)
    facts: dict[Slug, Fact] = Field(min_length=1)
    decision: Slug
    evidence: Literal["fact-sources"] = "fact-sources"
    action: Action | None = None
    tools: list[OperationalTool] = Field(min_length=1)
    layouts: Layouts
    sizes: Sizes = Field(default_factory=Sizes)
    #: Optional: families with the same label fall in one tool cluster (the resampling
    #: cluster of their tasks), beside the families they share an operational tool with
    #: (:func:`prereg.experiments.toolbottleneck.registrable.tool_clusters`).
    tool_cluster: ClusterLabel | None = None

    @field_validator("tool_cluster", mode="before")
    @classmethod
    def _label_given(cls, value: Any) -> Any:
        """``tool_cluster:`` written without a value is a mistake, not "no label"."""
        if value is None:
            raise ValueError("give a label (a slug such as 'crm-tools') or leave the field out")
        return value

    @model_serializer(mode="wrap")
    def _omit_absent_label(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A family without a label dumps exactly as before the field existed (so its
        ``family_digest`` does not change)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("tool_cluster") is None:
            data.pop("tool_cluster", None)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> FamilyFile:
        for placeholder in REQUEST_FIELDS:
            if placeholder not in self.request:
                raise FieldRuleError("request", f"the request must contain {placeholder}")
        if len(set(self.sources)) != len(self.sources):
            raise FieldRuleError("sources", "each source kind once")
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise FieldRuleError("tools", "tool names must be unique")
        for kind_index, kind in enumerate(self.sources):
            for op in ("search", "read"):
                if not any(t.kind == kind and t.operation == op for t in self.tools):
                    raise FieldRuleError(
                        f"sources[{kind_index}]", f"no operational '{op}' tool for kind '{kind}'"
                    )
        self._check_action()
        for level in WORKFLOW_LEVELS:
            self._check_layout(level)
        return self

    def _check_action(self) -> None:
        acts = [t for t in self.tools if t.operation == "act"]
        if self.action is None:
            if acts:
                raise FieldRuleError("tools", "an 'act' tool needs an 'action'")
            return
        tool = next((t for t in acts if t.name == self.action.tool), None)
        if tool is None:
            raise FieldRuleError("action.tool", "must name an operational tool of operation 'act'")
        if tool.kind != self.sources[0]:
            raise FieldRuleError("action.tool", "the action acts on the primary record")
        if self.action.field in self.facts:
            raise FieldRuleError("action.field", "the action may not change a decision fact")

    def _check_layout(self, level: WorkflowLevel) -> None:
        groups = self.layouts.of(level)
        if len(groups) > len(self.sources):
            raise FieldRuleError(
                f"layouts.{level}", f"{len(groups)} records but only {len(self.sources)} sources"
            )
        seen: set[str] = set()
        for i, group in enumerate(groups):
            for name in group:
                if name not in self.facts:
                    raise FieldRuleError(f"layouts.{level}[{i}]", f"unknown fact '{name}'")
                if name in seen:
                    raise FieldRuleError(f"layouts.{level}[{i}]", f"fact '{name}' placed twice")
                seen.add(name)

    @property
    def operational_tools(self) -> dict[str, OperationalTool]:
        return {t.name: t for t in self.tools}

    def tool_for(self, kind: str, operation: Operation) -> OperationalTool:
        return next(t for t in self.tools if t.kind == kind and t.operation == operation)


class FamilyError(BadInput):
    """A family the compiler refuses (exit 2), naming the family, its file and the field."""


def refuse(family: FamilyFile, filename: str, field: str, message: str) -> FamilyError:
    return FamilyError(f"family '{family.id}': {message}", file=filename, field=field)


def parse_family(text: str | bytes, filename: str) -> FamilyFile:
    """Validate a family document; BadInput naming the file, line and field on a problem."""
    return load_model(FamilyFile, text, filename)


def load_family(path: str | Path) -> FamilyFile:
    """Read and validate a family file; a missing or unreadable file is BadInput too."""
    try:
        raw = read_regular_file(path, limit=MAX_EXPERIMENT_FILE_BYTES, what="a task family")
    except FileNotFoundError:
        raise escaped(BadInput("no such file", file=str(path))) from None
    except IsADirectoryError:
        raise escaped(
            BadInput("is a folder, expected a family YAML file", file=str(path))
        ) from None
    except UnreadableFile as exc:
        raise escaped(BadInput(exc.reason, file=str(path))) from None
    return parse_family(raw, str(path))
