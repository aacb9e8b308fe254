"""What a registration says about a ToolBottleneckBench study (issue 19), kept light.

The registration schema reads these models (an arm's cell, the repairs) on every
command, so this module imports pydantic and the kernel only: the families, the
compiler and the loader of a study live elsewhere (:mod:`.registrable`, :mod:`.variants`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from prereg.core.yamlio import FieldRuleError

SLUG = r"^[a-z][a-z0-9-]{0,39}$"
WorkflowLevel = Literal["low", "medium", "high"]
RetrieverName = Literal["flat-lexical", "connector-first"]
EncodingName = Literal["raw", "compact", "typed", "linked"]
MenuMode = Literal["routed", "fixed"]
#: The simulated policy profiles (prereg.runners.toolbottleneck.host.PROFILES, checked
#: there by a test): named settings of a mechanism, never models.
PolicyName = Literal["sim-steady", "sim-truncating", "sim-exact"]
POLICIES: tuple[str, ...] = ("sim-steady", "sim-truncating", "sim-exact")
ArmId = Annotated[str, Field(pattern=SLUG)]
#: An arm a repair's lane names: a study arm, or a registration's (factorial cell ids are
#: longer)
LaneArm = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=100)]

#: The arm fields a factorial may set, with the kind of their levels (registry.factorial).
CELL_FIELDS: Mapping[str, str] = {
    "toolbottleneck.menu": "integer",
    "toolbottleneck.workflow": "string",
    "toolbottleneck.encoding": "string",
    "toolbottleneck.menu_mode": "string",
    "toolbottleneck.policy": "string",
    "toolbottleneck.handoffs": "integer",
    "toolbottleneck.delivery": "string",
    "toolbottleneck.controller": "string",
}


class Strict(BaseModel):
    """Unknown fields are errors, instances immutable, no silent type coercion."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ArmCell(Strict):
    """An arm's cell of a study: the pressure levels, the menu mode and the policy.

    A capacity cell gives ``menu``; a frontier cell adds ``handoffs`` (in front of the
    low workflow); a Discovery cell gives ``catalog`` and ``retriever`` instead of
    ``menu`` (its menu is the retriever's shortlist). ``policy`` names the simulated
    policy profile: the configuration (a switch changes it).
    """

    menu: int | None = Field(None, gt=0)
    workflow: WorkflowLevel = "low"
    encoding: EncodingName = "raw"
    menu_mode: MenuMode = "routed"
    policy: PolicyName = "sim-steady"
    handoffs: int = Field(0, ge=0, le=64)
    catalog: int | None = Field(None, gt=0)
    retriever: RetrieverName | None = None
    #: the structural holdout (docs/toolbottleneck.md, readings H1-H6): who issues the
    #: calls (``public-handoff``: the controller) and how records return; either makes
    #: the arm a holdout arm, on the read-only frontier (``handoffs`` 0: the 2-call
    #: cell). Absent, they are left out of the document (earlier digests unchanged).
    controller: Literal["public-handoff"] | None = None
    delivery: Literal["native", "canonical"] | None = None

    @model_serializer(mode="wrap")
    def _omit_holdout(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Absent holdout fields are not digested (earlier registrations keep theirs)."""
        return _omit_absent(handler(self), ("controller", "delivery"))

    @property
    def holdout_arm(self) -> bool:
        """An arm of the structural holdout (it names a controller or a delivery)."""
        return self.controller is not None or self.delivery is not None

    @model_validator(mode="after")
    def _block(self) -> ArmCell:
        if (self.catalog is None) != (self.retriever is None):
            raise FieldRuleError("retriever", "a Discovery cell gives both catalog and retriever")
        if self.catalog is None and self.menu is None:
            raise FieldRuleError("menu", "a capacity cell gives its menu size")
        if self.catalog is not None and self.menu is not None:
            raise FieldRuleError(
                "menu", "a Discovery cell's menu is the retriever's shortlist (no menu)"
            )
        if self.handoffs and (self.catalog is not None or self.workflow != "low"):
            raise FieldRuleError(
                "handoffs", "the handoff frontier sits in front of the low workflow (no catalog)"
            )
        if self.holdout_arm and (self.catalog is not None or self.workflow != "low"):
            raise FieldRuleError(
                "controller" if self.controller is not None else "delivery",
                "a holdout arm plays a read-only frontier cell: the low workflow behind "
                "'handoffs' (0 for the 2-call cell), no catalog",
            )
        return self

    def levels(self) -> dict[str, object]:
        """The pressure levels as the study reports name them (V, W, D, R, handoffs)."""
        out: dict[str, object] = {"V": self.menu, "W": self.workflow, "D": self.encoding}
        if self.catalog is not None:
            out |= {"R": self.catalog, "retriever": self.retriever}
        if self.handoffs:
            out["handoffs"] = self.handoffs
        if self.holdout_arm:
            out["orchestration"] = "controller" if self.controller is not None else "model"
            out["delivery"] = self.delivery or "native"
        return out


class RepairLane(Strict):
    """The arms of one configuration at the stressed and the unstressed cell."""

    stressed: LaneArm
    unstressed: LaneArm


class StudySwitch(RepairLane):
    """A configuration switch: another configuration, no repair, at the repair's cells.

    The decision matrix reads its ``stressed`` arm (seed 4.3: switches are compared on the
    stressed cells); its ``unstressed`` arm is kept so earlier registrations load (it
    entered the old, switch-based Sigma^k) and is no longer read."""

    id: ArmId


class OtherRepair(RepairLane):
    """A repair aimed at *another* pressure, run on this repair's two cells (seed 4.3,
    K_l): its Sigma^k is the gain it makes specific to this stress, and Delta = Sigma -
    max_k Sigma^k measures the repair against it (the wrong-layer control)."""

    id: ArmId
    pressure: Literal["R", "V", "W", "D"]


class Incumbent(Strict):
    """One more configuration the repair was run on (its repaired and no-repair lanes):
    the decision matrix compares each incumbent's repaired lane with every other
    configuration at the stressed cell and counts the incumbents ("x of N")."""

    id: ArmId
    repaired: RepairLane
    control: RepairLane


def _omit_absent(data: Any, names: tuple[str, ...]) -> Any:
    if isinstance(data, dict):
        for name in names:
            if data.get(name) is None:
                data.pop(name, None)
    return data


class StudyRepair(Strict):
    """A repair aimed at one pressure (seed 4.3): the repaired lane and the no-repair lane
    of the incumbent configuration, the repairs aimed at the other pressures run on the
    same cells (``other_repairs``: Sigma^k and Delta), the configurations it is compared
    with in the decision matrix (``switches``, and the other ``incumbents``' no-repair
    lanes), and the TOST equivalence margin of its stress gain (``equivalence_margin``, a
    proportion, tested at the 5% level).

    The fields added by issue 42 (``other_repairs``, ``incumbents``,
    ``equivalence_margin``) are left out of the document when absent, so a registration
    that does not use them digests exactly as before; ``switches`` may now be left out
    (absent: the other incumbents are the switches)."""

    id: ArmId
    pressure: Literal["R", "V", "W", "D"]
    repaired: RepairLane
    control: RepairLane
    switches: list[StudySwitch] | None = None
    other_repairs: list[OtherRepair] | None = None
    incumbents: list[Incumbent] | None = None
    equivalence_margin: float | None = Field(None, gt=0, lt=1)

    @model_serializer(mode="wrap")
    def _omit_added(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Absent added fields are not digested (earlier registrations keep their digest)."""
        return _omit_absent(
            handler(self), ("switches", "other_repairs", "incumbents", "equivalence_margin")
        )

    @model_validator(mode="after")
    def _others(self) -> StudyRepair:
        for i, other in enumerate(self.other_repairs or []):
            if other.pressure == self.pressure:
                raise FieldRuleError(
                    f"other_repairs[{i}].pressure",
                    f"a repair aimed at another pressure than {self.pressure} (Sigma^k "
                    "compares the repair with the other pressures' repairs)",
                )
        ids = [self.id] + [i.id for i in self.incumbents or []]
        for name, listed in (
            ("other_repairs", [o.id for o in self.other_repairs or []]),
            ("switches", [s.id for s in self.switches or []]),
            ("incumbents", ids),
        ):
            dupes = sorted({x for x in listed if listed.count(x) > 1})
            if dupes:
                raise FieldRuleError(name, f"duplicate id(s): {', '.join(dupes)}")
        return self

    def lanes(self) -> list[tuple[str, RepairLane]]:
        """Every lane with its field path (the arms they name must exist)."""
        out: list[tuple[str, RepairLane]] = [("repaired", self.repaired), ("control", self.control)]
        out += [(f"switches.{s.id}", s) for s in self.switches or []]
        out += [(f"other_repairs.{o.id}", o) for o in self.other_repairs or []]
        for inc in self.incumbents or []:
            out += [
                (f"incumbents.{inc.id}.repaired", inc.repaired),
                (f"incumbents.{inc.id}.control", inc.control),
            ]
        return out


def check_repair_ids(repairs: list[StudyRepair] | None) -> None:
    """Repair ids are unique within a study or registration (several repairs may aim at
    one pressure; each is named by its id)."""
    ids = [r.id for r in repairs or []]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise FieldRuleError("repairs", f"duplicate repair id(s): {', '.join(dupes)}")


# ---- the structural holdout's families (reading H6) -----------------------------------------

#: the ``holdout:`` of a study file or a registration: family ids held out
HoldoutFamilies = Annotated[list[Annotated[str, Field(pattern=SLUG)]], Field(min_length=1)]


def holdout_plays(holdout_arm: bool, family: str, holdout: Collection[str] | None) -> bool:
    """Whether an arm plays a family (reading H6): with a ``holdout``, the holdout arms
    (naming ``controller`` or ``delivery``) play the held-out families and the other arms
    the rest; without one, every arm every family."""
    if not holdout:
        return True
    return holdout_arm == (family in holdout)


def check_holdout(holdout: list[str] | None, any_holdout_arm: bool) -> None:
    """The rules a ``holdout`` obeys on its own document (FieldRuleError at ``holdout``):
    each family once, and an arm to play them."""
    if holdout is None:
        return
    if len(set(holdout)) != len(holdout):
        raise FieldRuleError("holdout", "each held-out family once")
    if not any_holdout_arm:
        raise FieldRuleError(
            "holdout", "held-out families need an arm naming 'controller' or 'delivery'"
        )


def holdout_problem(
    holdout: list[str] | None, intents: Mapping[str, str], where: str = "the study"
) -> tuple[str, str] | None:
    """The first problem of a ``holdout`` against the families it holds out from
    (``intents``: family id -> intent), as (field, message), or None: an id that is no
    family of ``where``, a held-out family whose intent a core family shares (the holdout
    holds out intents), or every family held out (the core arms would play none)."""
    if holdout is None:
        return None
    for i, held in enumerate(holdout):
        if held not in intents:
            known = ", ".join(sorted(intents))
            return (
                f"holdout[{i}]",
                f"'{held}' is not the id of a family of {where} (known: {known})",
            )
    core = {intents[f]: f for f in sorted(set(intents) - set(holdout))}
    for i, held in enumerate(holdout):
        if intents[held] in core:
            return (
                f"holdout[{i}]",
                f"family '{held}' has intent '{intents[held]}', which the core family "
                f"'{core[intents[held]]}' shares: the holdout holds out intents (seed 4.3, "
                "distinct from the core intents); hold out every family of the intent",
            )
    if set(holdout) == set(intents):
        return "holdout", "every family is held out: the core arms would play none"
    return None
