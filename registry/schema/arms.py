"""What is compared: arms, each a whole configuration, and the factorial designs behind them.

An arm names a surface, an optional control and its overrides of the registration's
host, budgets and system prompt; :class:`Configuration` is what those resolve to. A
factorial design is another way of writing arms, so its models live beside them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_serializer,
    model_validator,
)

from prereg.core.yamlio import FieldRuleError
from prereg.experiments.controls import ControlName
from prereg.experiments.toolbottleneck.cells import ArmCell
from prereg.registry.factorial import SETTABLE, settable
from prereg.registry.schema.base import Identifier, Strict
from prereg.registry.schema.harness import Budgets, BudgetsOverride
from prereg.registry.schema.host import Host, HostOverride

#: A registered system prompt: the text itself is registered (and digested), and sent as
#: the provider's system field (Anthropic ``system``, OpenAI ``instructions``).
SystemPrompt = Annotated[str, Field(min_length=1, max_length=100_000)]

#: InvokeRank's run stages (seed 5.5): a selection run offers the frozen snapshots and
#: replays every call; an execution run executes the focal integration's calls on its
#: live server (``host.live``), competitors still replayed.
Stage = Literal["selection", "execution"]
STAGES: tuple[str, ...] = Stage.__args__  # type: ignore[attr-defined]


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
    #: InvokeRank's run stage (issue 41, item 1; seed 5.5): ``selection`` replays every
    #: call, ``execution`` executes the focal integration's calls on the registered live
    #: server (``host.live``). Absent on every arm: ``host.live``, when given, applies to
    #: every arm (as before stages existed). Named on one arm: named on every arm.
    stage: Stage | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_cell(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``toolbottleneck`` block or ``stage`` is left out, so every arm that
        has none digests exactly as before the field existed."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("toolbottleneck", "stage"):
                if data.get(name) is None:
                    data.pop(name, None)
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
