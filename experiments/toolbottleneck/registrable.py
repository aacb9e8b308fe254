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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field, model_validator

from prereg.core.errors import BadInput
from prereg.core.yamlio import FieldRuleError, load_model
from prereg.experiments.models import SPLIT_NAMES, Solution, SplitName, Task
from prereg.experiments.toolbottleneck.cells import SLUG, Strict, WorkflowLevel
from prereg.experiments.toolbottleneck.family import FamilyFile, parse_family
from prereg.experiments.toolbottleneck.workflow import operational_functions, primary_ref

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
    #: family id -> its tool cluster (:func:`tool_clusters`), its tasks' ``cluster``
    clusters: Mapping[str, str] = field(default_factory=dict)

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


def reference_length(
    family: FamilyFile, workflow: WorkflowLevel, handoffs: int = 0, *, read_only: bool = False
) -> int:
    """The certified minimum of a family's variant at a workflow level and a number of
    handoffs (readings 2, 4, 5): a search and a read per record of the layout and per
    handoff, and the action where the family has one and the variant acts (the compiler
    certifies it). ``read_only``: a frontier variant, which never acts (reading 4)."""
    acts = family.action is not None and not read_only
    return 2 * len(family.layouts.of(workflow)) + 2 * handoffs + int(acts)


def required_tools(family: FamilyFile) -> frozenset[str]:
    """The family's operational tools as the functions its compiled world exposes (base
    name on the family's route, :func:`.workflow.operational_functions`): two families
    share a tool when they expose a function of the same name."""
    return frozenset(operational_functions(family))


def cluster_labels(family: FamilyFile) -> list[tuple[str, str]]:
    """The family's cluster labels with the field that gives each: its ``tool_cluster``
    and every tool's ``cluster`` (reading K4), in file order."""
    out = [] if family.tool_cluster is None else [(family.tool_cluster, "tool_cluster")]
    out += [(t.cluster, f"tools[{i}].cluster") for i, t in enumerate(family.tools) if t.cluster]
    return out


def tool_clusters(families: Sequence[tuple[FamilyFile, str]]) -> dict[str, str]:
    """Family id -> its tool cluster: the connected components of "shares a required
    tool" (:func:`required_tools`) or "gives the same cluster label" (reading 32): the
    family's ``tool_cluster`` or a tool's ``cluster`` (reading K4: a tool label says the
    tool is shared with the families whose tools give the same label; a tool without one
    is its family's own, so the default cluster stays the family).

    A label merges, never splits: families that share a tool are in one cluster whatever
    their labels say. A cluster is named by the first (in sorted order) label of its
    families, else by its first family id, so a family with its own tools and no label
    is its own cluster, named as the family. The result does not depend on the order of
    ``families`` (``(family, file)`` pairs; the file names a refusal). BadInput (naming
    the file and ``tool_cluster``) for a label that is the id of a family in another
    cluster, which would read as that family's cluster.
    """
    ids = [f.id for f, _ in families]
    parent = list(range(len(families)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(members: list[int]) -> None:
        for other in members[1:]:
            a, b = root(members[0]), root(other)
            if a != b:
                parent[max(a, b)] = min(a, b)

    holders: dict[tuple[str, str], list[int]] = {}
    for index, (family, _) in enumerate(families):
        for name in sorted(required_tools(family)):
            holders.setdefault(("tool", name), []).append(index)
        for label, _ in cluster_labels(family):
            holders.setdefault(("label", label), []).append(index)
    for members in holders.values():
        join(members)
    components: dict[int, list[int]] = {}
    for index in range(len(families)):
        components.setdefault(root(index), []).append(index)
    out: dict[str, str] = {}
    for members in components.values():
        labels = sorted({label for i in members for label, _ in cluster_labels(families[i][0])})
        name = labels[0] if labels else min(ids[i] for i in members)
        out.update({ids[i]: name for i in members})
    index_of = {fid: i for i, fid in enumerate(ids)}
    for index, (family, filename) in enumerate(families):
        for label, where in cluster_labels(family):
            # another component, even one that happens to carry the same name
            if label in index_of and root(index_of[label]) != root(index):
                raise BadInput(
                    f"family '{family.id}': {where.rsplit('.', 1)[-1]} '{label}' is the id "
                    f"of family '{label}', which is in another tool cluster "
                    f"('{out[label]}'); give a label that is not the id of another "
                    "cluster's family",
                    file=filename,
                    field=where,
                )
    return out


def is_study(data: object) -> bool:
    """Whether a parsed ``experiment.yaml`` declares this kind."""
    return isinstance(data, dict) and data.get("kind") == KIND


def task_id(family: FamilyFile, seed: int) -> str:
    return f"{family.id}-s{seed}"


def family_of_task(task: str) -> str:
    """The family of a study task id (:func:`task_id`'s inverse: ``<family>-s<seed>``).

    A study task's ``cluster`` is its family's *tool* cluster (families sharing a tool are
    one), so a report that resamples families takes the family from the task id instead."""
    family, sep, seed = task.rpartition("-s")
    return family if sep and seed.isdigit() else task


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
    clusters = tool_clusters([(f.family, f.path) for f in families])
    split_of = _cluster_splits(spec, _splits(spec, ids, entry), clusters, entry)
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
            # limit is resolved from the compiled variant, not from the task. The cluster
            # is the family's tool cluster (reading 32): the family itself when no other
            # family shares one of its tools or its label.
            tasks.append(
                Task(
                    id=tid,
                    intent=family.intent,
                    cluster=clusters[family.id],
                    prompt=request,
                    solution=Solution(certified=True),
                )
            )
    intents = {f.family.intent: f.family.intent for f in families}
    study = StudyExperiment(spec, tuple(families), by_task, clusters)
    files = (entry, *(f.path for f in families))
    return LoadedStudy(study, files, tuple(tasks), intents, split_of)


def _cluster_splits(
    spec: StudyExperimentFile, split_of: dict[str, str], clusters: dict[str, str], entry: str
) -> dict[str, str]:
    """Tool cluster -> split; BadInput (``splits.<split>``) when a cluster's families sit
    in two splits (a cluster is resampled whole, so it goes to one split)."""
    out: dict[str, str] = {}
    first: dict[str, str] = {}
    listed = {f: s for s, names in (spec.splits or {}).items() for f in names}
    for family, split in split_of.items():
        cluster = clusters[family]
        if cluster not in out:
            out[cluster], first[cluster] = split, family
            continue
        if out[cluster] != split:
            other = first[cluster]
            named = family if family in listed else other
            raise BadInput(
                f"family '{family}' (split {split}) and family '{other}' (split "
                f"{out[cluster]}) are in one tool cluster ('{cluster}': they share a "
                "required tool or a tool_cluster label), and a cluster sits in one split",
                file=entry,
                field=f"splits.{split_of[named]}",
            )
    return out


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
