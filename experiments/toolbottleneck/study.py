"""A ToolBottleneckBench study file: families x seeds as tasks, cells as arms.

A study runs compiled variants offline (``prereg.runners.toolbottleneck.study``): each
task is a family compiled under one seed (other seeds, other opaque ids: another task of
the same family), each arm a capacity cell (menu size, workflow level, encoding) with its
menu mode (routed or fixed) and, optionally, its own policy profile (a configuration
switch). The harness budgets are the seed's contract (3.3): call limit = certified
minimum + ``call_limit_over_certified``, turn limit = call limit + ``turn_limit_over_calls``.

The study's digest covers the study file, every family file's bytes and the digest of
every compiled variant it runs, so a record names exactly what produced it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from prereg.core.errors import BadInput
from prereg.core.safeio import (
    MAX_EXPERIMENT_FILE_BYTES,
    UnreadableFile,
    escaped,
    read_regular_file,
)
from prereg.core.yamlio import FieldRuleError, load_model
from prereg.experiments.toolbottleneck.cells import (
    ArmId,
    StudyRepair,
    check_holdout,
    check_repair_ids,
    holdout_plays,
    holdout_problem,
)
from prereg.experiments.toolbottleneck.cells import RepairLane as RepairLane
from prereg.experiments.toolbottleneck.cells import StudySwitch as StudySwitch
from prereg.experiments.toolbottleneck.family import (
    EncodingName,
    FamilyFile,
    RetrieverName,
    Strict,
    WorkflowLevel,
    parse_family,
)
from prereg.experiments.toolbottleneck.registrable import tool_clusters

MenuMode = Literal["routed", "fixed"]


class StudyPolicy(Strict):
    """The simulated policy: a named profile and single-value overrides."""

    profile: str = Field("sim-steady", min_length=1, max_length=64)
    params: dict[str, float] = Field(default_factory=dict)


class StudyArm(Strict):
    """One arm: a capacity cell (or, with ``catalog`` and ``retriever``, a Discovery cell
    whose menu is the retriever's shortlist), its menu mode and optionally its policy."""

    id: ArmId
    menu: int | None = Field(None, gt=0)
    workflow: WorkflowLevel
    encoding: EncodingName
    menu_mode: MenuMode = "routed"
    policy: StudyPolicy | None = None
    catalog: int | None = Field(None, gt=0)
    retriever: RetrieverName | None = None
    #: the arm's own completion cap (the seed's sixteenfold sweep, appendix E.1)
    completion_cap: int | None = Field(None, gt=0)
    #: public handoffs before the low workflow: a frontier cell (seed 3.2, W frontier)
    handoffs: int = Field(0, ge=0, le=64)
    #: who issues the calls (seed 4.3): absent, the model; ``public-handoff``, the
    #: public-handoff controller (:mod:`prereg.runners.toolbottleneck.controller`)
    controller: Literal["public-handoff"] | None = None
    #: how records return (seed 5.5): ``native`` (the cell's encoding) or ``canonical``
    #: (the wrong-layer control); absent, native, and the arm is no holdout arm
    delivery: Literal["native", "canonical"] | None = None

    @model_serializer(mode="wrap")
    def _omit_added(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Absent holdout fields are not digested (earlier studies keep their digest)."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("controller", "delivery"):
                if data.get(name) is None:
                    data.pop(name, None)
        return data

    @property
    def holdout_arm(self) -> bool:
        """An arm of the structural holdout: it names a controller or a delivery; it
        plays a read-only frontier cell (``handoffs`` 0 is the 2-call cell)."""
        return self.controller is not None or self.delivery is not None

    @property
    def orchestration(self) -> str:
        return "controller" if self.controller is not None else "model"

    @model_validator(mode="after")
    def _discovery(self) -> StudyArm:
        if (self.catalog is None) != (self.retriever is None):
            raise FieldRuleError("retriever", "a Discovery arm gives both catalog and retriever")
        if self.catalog is None and self.menu is None:
            raise FieldRuleError("menu", "a capacity arm gives its menu size")
        if self.handoffs and (self.catalog is not None or self.workflow != "low"):
            raise FieldRuleError(
                "handoffs", "the handoff frontier sits in front of the low workflow (no catalog)"
            )
        if self.catalog is not None and self.menu is not None:
            raise FieldRuleError(
                "menu", "a Discovery arm's menu is the retriever's shortlist (sizes.shortlist)"
            )
        if self.holdout_arm and (self.catalog is not None or self.workflow != "low"):
            what = "controller" if self.controller is not None else "delivery"
            raise FieldRuleError(
                what,
                "a holdout arm plays a read-only frontier cell: the low workflow behind "
                "'handoffs' (0 for the 2-call cell), no catalog",
            )
        return self

    @property
    def cell(self) -> dict[str, Any]:
        out: dict[str, Any] = {"V": self.menu, "W": self.workflow, "D": self.encoding}
        if self.catalog is not None:
            out |= {"R": self.catalog, "retriever": self.retriever}
        if self.handoffs:
            out["handoffs"] = self.handoffs
        if self.holdout_arm:
            out |= {"orchestration": self.orchestration, "delivery": self.delivery or "native"}
        return out


class StudyBudgets(Strict):
    """The harness contract (seed 3.3); the defaults are the seed's."""

    completion_cap: int = Field(1024, gt=0)
    episode_tokens: int = Field(128_000, gt=0)
    call_limit_over_certified: int = Field(2, ge=0, le=100)
    turn_limit_over_calls: int = Field(2, ge=0, le=100)


class StudyFile(Strict):
    id: ArmId
    title: str = Field("", max_length=200)
    families: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default=[0], min_length=1)
    repeats: int = Field(1, ge=1, le=100)
    arms: list[StudyArm] = Field(min_length=1)
    baseline: ArmId | None = None
    policy: StudyPolicy = Field(default_factory=StudyPolicy)
    budgets: StudyBudgets = Field(default_factory=StudyBudgets)
    repairs: list[StudyRepair] = Field(default_factory=list)
    #: the structural holdout's families (by family id): held out from the core arms,
    #: played only by the holdout arms (those naming ``controller`` or ``delivery``)
    holdout: list[str] | None = Field(None, min_length=1)

    @model_serializer(mode="wrap")
    def _omit_added(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent holdout is not digested (earlier studies keep their digest)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("holdout") is None:
            data.pop("holdout", None)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> StudyFile:
        ids = [a.id for a in self.arms]
        if len(set(ids)) != len(ids):
            raise FieldRuleError("arms", "arm ids must be unique")
        check_repair_ids(self.repairs)
        for i, repair in enumerate(self.repairs):
            for name, lane in repair.lanes():
                for side in ("stressed", "unstressed"):
                    if getattr(lane, side) not in ids:
                        raise FieldRuleError(
                            f"repairs[{i}].{name}.{side}",
                            f"'{getattr(lane, side)}' is not an arm",
                        )
        if self.baseline is not None and self.baseline not in ids:
            raise FieldRuleError("baseline", f"'{self.baseline}' is not an arm")
        if len(set(self.seeds)) != len(self.seeds) or any(s < 0 for s in self.seeds):
            raise FieldRuleError("seeds", "distinct seeds, each >= 0")
        if len(set(self.families)) != len(self.families):
            raise FieldRuleError("families", "each family once")
        check_holdout(self.holdout, any(a.holdout_arm for a in self.arms))
        return self

    def plays(self, arm: StudyArm, family: str) -> bool:
        """Whether ``arm`` plays ``family``: with a ``holdout``, the holdout arms play the
        held-out families and the other arms the rest; without one, every arm every
        family."""
        return holdout_plays(arm.holdout_arm, family, self.holdout)

    @property
    def baseline_arm(self) -> str:
        return self.baseline or self.arms[0].id


class Study:
    """A study file read with its families (paths relative to the study file)."""

    def __init__(self, spec: StudyFile, families: list[tuple[FamilyFile, str, bytes]]) -> None:
        self.spec = spec
        self.families = families

    def tool_clusters(self, filename: str = "<study>") -> dict[str, str]:
        """Family id -> its tool cluster (reading 32; :func:`.registrable.tool_clusters`);
        BadInput naming the family file and ``tool_cluster`` for a label that names
        another cluster's family."""
        base = Path(filename).parent
        return tool_clusters([(f, str(base / name)) for f, name, _ in self.families])

    def file_digests(self) -> dict[str, str]:
        return {name: "sha256:" + hashlib.sha256(raw).hexdigest() for _, name, raw in self.families}


def _read(path: Path, what: str) -> bytes:
    try:
        return read_regular_file(path, limit=MAX_EXPERIMENT_FILE_BYTES, what=what)
    except FileNotFoundError:
        raise escaped(BadInput("no such file", file=str(path))) from None
    except IsADirectoryError:
        raise escaped(BadInput(f"is a folder, expected {what}", file=str(path))) from None
    except UnreadableFile as exc:
        raise escaped(BadInput(exc.reason, file=str(path))) from None


def load_study(path: str | Path) -> Study:
    """Read and validate a study and its families; BadInput naming file and field."""
    path = Path(path)
    spec = load_model(StudyFile, _read(path, "a study file"), str(path))
    families = []
    for i, rel in enumerate(spec.families):
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise BadInput(
                "a family path is relative to the study file, inside its folder",
                file=str(path),
                field=f"families[{i}]",
            )
        fpath = path.parent / rel
        raw = _read(fpath, "a task family")
        families.append((parse_family(raw, str(fpath)), rel, raw))
    problem = holdout_problem(spec.holdout, {f.id: f.intent for f, _, _ in families})
    if problem is not None:
        raise BadInput(problem[1], file=str(path), field=problem[0])
    study = Study(spec, families)
    study.tool_clusters(str(path))  # a bad tool_cluster label is refused at load
    return study
