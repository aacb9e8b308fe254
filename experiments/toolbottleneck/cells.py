"""What a registration says about a ToolBottleneckBench study (issue 19), kept light.

The registration schema reads these models (an arm's cell, the repairs) on every
command, so this module imports pydantic and the kernel only: the families, the
compiler and the loader of a study live elsewhere (:mod:`.registrable`, :mod:`.variants`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
        return self

    def levels(self) -> dict[str, object]:
        """The pressure levels as the study reports name them (V, W, D, R, handoffs)."""
        out: dict[str, object] = {"V": self.menu, "W": self.workflow, "D": self.encoding}
        if self.catalog is not None:
            out |= {"R": self.catalog, "retriever": self.retriever}
        if self.handoffs:
            out["handoffs"] = self.handoffs
        return out


class RepairLane(Strict):
    """The arms of one configuration at the stressed and the unstressed cell."""

    stressed: LaneArm
    unstressed: LaneArm


class StudySwitch(RepairLane):
    """A configuration switch: another configuration, no repair, the same two cells."""

    id: ArmId


class StudyRepair(Strict):
    """A repair aimed at one pressure (seed 4.3): the repaired lane, the no-repair lane
    of the incumbent configuration, and the switches it is compared with."""

    id: ArmId
    pressure: Literal["R", "V", "W", "D"]
    repaired: RepairLane
    control: RepairLane
    switches: list[StudySwitch] = Field(min_length=1)

    def lanes(self) -> list[tuple[str, RepairLane]]:
        return [("repaired", self.repaired), ("control", self.control)] + [
            (f"switches.{s.id}", s) for s in self.switches
        ]
