"""The loaded experiment: a frozen, cross-checked :class:`Experiment` shared by every run
unit, and the :class:`PoolEntry` of its pool.

Apart from the reading and checking, so that code which only uses a loaded experiment
(offers, fingerprints, split counts) depends on the value, not on how it is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prereg.core.errors import BadInput
from prereg.experiments.models import SPLIT_NAMES, CorpusLintSpec, ServiceFile, Task
from prereg.experiments.surfaces import Role, Surface
from prereg.experiments.toolbottleneck.registrable import StudyExperiment


@dataclass(frozen=True)
class PoolEntry:
    id: str
    role: Role


@dataclass(frozen=True)
class Experiment:
    """A loaded, cross-checked experiment. Immutable; shared by every run unit."""

    name: str
    title: str
    description: str
    files: tuple[str, ...]
    service: ServiceFile
    intents: Mapping[str, str]
    tasks: tuple[Task, ...]
    surfaces: Mapping[str, Surface]
    pool: tuple[PoolEntry, ...]
    split_of_cluster: Mapping[str, str]
    split_names: tuple[str, ...] = SPLIT_NAMES
    #: a ToolBottleneckBench study (``kind: toolbottleneck``): its families and tasks
    toolbottleneck: StudyExperiment | None = None
    #: the corpus file (experiment-relative), for messages about its prompts
    corpus_file: str = "corpus.yaml"
    #: the invisible characters the experiment declares its prompts may hold
    #: (``format_characters`` in experiment.yaml; see fingerprints.refuse_invisible)
    format_characters: frozenset[str] = frozenset()
    #: the corpus lint's settings (``corpus_lint`` in experiment.yaml; issue 41, item 5)
    corpus_lint: CorpusLintSpec | None = None
    #: intent -> the competitors declared eligible for it (``eligible`` in the corpus,
    #: InvokeRank 3.4); an intent not in it: every competitor of the pool
    eligible: Mapping[str, frozenset[str]] = field(default_factory=dict)
    _by_id: Mapping[str, Task] = field(default_factory=dict, repr=False)

    @property
    def surface_ids(self) -> frozenset[str]:
        """Names an arm's ``surface:`` may use: the surfaces and the pool members."""
        return frozenset(self.surfaces)

    def eligible_competitors(self, intent: str) -> frozenset[str]:
        """The pool's competitors eligible for ``intent``: as the corpus declares them, or
        every competitor when it declares none for the intent (the default)."""
        if intent in self.eligible:
            return self.eligible[intent]
        return frozenset(m.id for m in self.pool if m.role == "competitor")

    def task(self, task_id: str) -> Task:
        return self._by_id[task_id]

    def split_of(self, task: Task) -> str:
        return self.split_of_cluster[task.cluster]

    def tasks_in_split(self, split: str) -> list[Task]:
        """The tasks of one split, in corpus order."""
        if split not in self.split_names:
            raise BadInput(
                f"unknown split '{split}' (splits: {', '.join(self.split_names)})", field="split"
            )
        return [t for t in self.tasks if self.split_of_cluster[t.cluster] == split]

    def offered(self, focal: str) -> list[tuple[Surface, Role]]:
        """The surfaces offered to a host when ``focal`` is the arm's surface.

        Without a pool, just the focal surface. With a pool, the focal surface
        followed by every pool member other than it (competitors and decoys).
        """
        out: list[tuple[Surface, Role]] = [(self.surfaces[focal], "focal")]
        for member in self.pool:
            if member.id != focal:
                out.append((self.surfaces[member.id], member.role))
        return out
