"""A ToolBottleneckBench study as a registrable experiment kind (issue 19).

An experiment folder whose ``experiment.yaml`` says ``kind: toolbottleneck`` is a study:
it lists task families (paths inside the folder) and seeds; each (family, seed) is one
task (``<family>-s<seed>``: another seed gives other opaque ids for the same facts). A
registration on it makes every arm a capacity, frontier or Discovery cell with its
``toolbottleneck:`` block (menu, workflow, encoding, menu mode, simulated policy); a
factorial sets these fields as it sets any other (:data:`CELL_FIELDS`).

The compiled variant of every (arm, task) is digested into the registration's document
(:func:`prereg.experiments.toolbottleneck.variants.variant_digests`), so one changed byte
of what a unit runs changes the registration's digest (invariant 2); the runner
recompiles each variant and refuses a digest that differs.

::

    name: toolbottleneck
    kind: toolbottleneck
    title: ...
    families: [families/overdue-case-escalation.yaml, ...]
    seeds: [0, 1]
    splits: {dev: [overdue-case-escalation, ...]}     # optional: every family in dev
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, model_validator

from prereg.core.errors import BadInput
from prereg.core.yamlio import FieldRuleError, load_model
from prereg.experiments.models import SPLIT_NAMES, Solution, SplitName, Task
from prereg.experiments.toolbottleneck.cells import SLUG, Strict, WorkflowLevel
from prereg.experiments.toolbottleneck.family import FamilyFile, parse_family
from prereg.experiments.toolbottleneck.workflow import primary_ref

KIND = "toolbottleneck"
#: The one surface of a study: an arm's surface is its compiled variant.
SURFACE = "variants"


class StudyExperimentFile(Strict):
    """``experiment.yaml`` of kind toolbottleneck (see the module docstring)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=100)]
    kind: Literal["toolbottleneck"]
    title: str = Field("", max_length=200)
    description: str = Field("", max_length=4000)
    families: list[str] = Field(min_length=1)
    seeds: list[int] = Field(default=[0], min_length=1)
    splits: dict[SplitName, list[Annotated[str, Field(pattern=SLUG)]]] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> StudyExperimentFile:
        if len(set(self.seeds)) != len(self.seeds) or any(s < 0 for s in self.seeds):
            raise FieldRuleError("seeds", "distinct seeds, each >= 0")
        if len(set(self.families)) != len(self.families):
            raise FieldRuleError("families", "each family once")
        listed = [f for names in (self.splits or {}).values() for f in names]
        if len(set(listed)) != len(listed):
            raise FieldRuleError("splits", "a family sits in one split")
        return self


@dataclass(frozen=True)
class StudyFamily:
    family: FamilyFile
    path: str  # relative to the experiment folder


@dataclass(frozen=True)
class StudyExperiment:
    """What a loaded study adds to an :class:`prereg.experiments.Experiment`."""

    spec: StudyExperimentFile
    families: tuple[StudyFamily, ...]
    #: task id -> (family id, seed)
    tasks: Mapping[str, tuple[str, int]]

    def family(self, family_id: str) -> FamilyFile:
        return next(f.family for f in self.families if f.family.id == family_id)

    def task(self, task_id: str) -> tuple[FamilyFile, int]:
        family_id, seed = self.tasks[task_id]
        return self.family(family_id), seed


@dataclass(frozen=True)
class LoadedStudy:
    """The pieces the experiment loader assembles into an Experiment."""

    study: StudyExperiment
    files: tuple[str, ...]
    tasks: tuple[Task, ...]
    intents: dict[str, str]
    split_of_cluster: dict[str, str]


class StudyTask(Task):
    """A study's task with ``bound``: the largest certified minimum of its variants over
    a registration's arms, so that a per-task limit rule (certified minimum + k) bounds
    every unit of the task (``prereg run --dry-run``). A unit's own limit is always
    resolved from its compiled variant when it runs."""

    bound: int | None = Field(None, ge=0)

    @property
    def certified_minimum(self) -> int | None:
        return self.bound if self.bound is not None else super().certified_minimum


def reference_length(family: FamilyFile, workflow: WorkflowLevel, handoffs: int = 0) -> int:
    """The certified minimum of a family's variant at a workflow level and a number of
    handoffs (readings 2, 4, 5): a search and a read per record of the layout and per
    handoff, and the action where the family has one (the compiler certifies it)."""
    return 2 * len(family.layouts.of(workflow)) + 2 * handoffs + int(family.action is not None)


def is_study(data: object) -> bool:
    """Whether a parsed ``experiment.yaml`` declares this kind."""
    return isinstance(data, dict) and data.get("kind") == KIND


def task_id(family: FamilyFile, seed: int) -> str:
    return f"{family.id}-s{seed}"


def load_study_experiment(
    read: Callable[[str], bytes], entry: str, raw: bytes, name: str
) -> LoadedStudy:
    """Read a study experiment (its families through ``read``); BadInput naming the field."""
    spec = load_model(StudyExperimentFile, raw, entry)
    if spec.name != name:
        raise BadInput(
            f"the experiment is named '{spec.name}' but was loaded as '{name}' "
            "(the folder name and 'name' must agree)",
            file=entry,
            field="name",
        )
    families: list[StudyFamily] = []
    for index, rel in enumerate(spec.families):
        if rel.startswith("/") or ".." in rel.split("/") or "\\" in rel:
            raise BadInput(
                f"'{rel}' must be a relative path inside the experiment folder",
                file=entry,
                field=f"families[{index}]",
            )
        try:
            data = read(rel)
        except (FileNotFoundError, IsADirectoryError):
            raise BadInput(
                f"referenced file '{rel}' not found", file=entry, field=f"families[{index}]"
            ) from None
        families.append(StudyFamily(parse_family(data, rel), rel))
    ids = [f.family.id for f in families]
    if len(set(ids)) != len(ids):
        raise BadInput("two family files share one family id", file=entry, field="families")
    split_of = _splits(spec, ids, entry)
    tasks: list[Task] = []
    by_task: dict[str, tuple[str, int]] = {}
    for each in families:
        family = each.family
        for seed in spec.seeds:
            request = family.request.replace("{ref}", primary_ref(family, seed)).replace(
                "{route}", family.route.text
            )
            tid = task_id(family, seed)
            by_task[tid] = (family.id, seed)
            # the certified minimum is the variant's (it grows with W): the unit's call
            # limit is resolved from the compiled variant, not from the task
            tasks.append(
                Task(
                    id=tid,
                    intent=family.intent,
                    cluster=family.id,
                    prompt=request,
                    solution=Solution(certified=True),
                )
            )
    intents = {f.family.intent: f.family.intent for f in families}
    study = StudyExperiment(spec, tuple(families), by_task)
    files = (entry, *(f.path for f in families))
    return LoadedStudy(study, files, tuple(tasks), intents, split_of)


def _splits(spec: StudyExperimentFile, ids: list[str], entry: str) -> dict[str, str]:
    """Family -> split: as listed; a family not listed is in ``dev``."""
    out = {family: "dev" for family in ids}
    for split, names in (spec.splits or {}).items():
        if split not in SPLIT_NAMES:  # pragma: no cover - SplitName checks it
            raise BadInput(f"unknown split '{split}'", file=entry, field="splits")
        for name in names:
            if name not in out:
                raise BadInput(
                    f"'{name}' is not a family of the study", file=entry, field=f"splits.{split}"
                )
            out[name] = split
    return out
