"""The entry point: :func:`load_experiment` reads ``experiment.yaml`` and assembles the
service, the corpus, the surfaces and the pool into an :class:`Experiment`.

The one place that knows the order of the parts and the files they come from; each part
is checked by its own module (:mod:`.service_rules`, :mod:`.corpus`, :mod:`.surface_files`).
A ToolBottleneckBench study (``kind: toolbottleneck``) is assembled from its own loader.
"""

from __future__ import annotations

from prereg.core.errors import BadInput
from prereg.core.safeio import escaped
from prereg.core.yamlio import load_yaml
from prereg.experiments.loader.corpus import _assign_splits, _check_corpus, _check_eligible
from prereg.experiments.loader.experiment import Experiment, PoolEntry
from prereg.experiments.loader.files import ENTRY, Reader, _load, _read
from prereg.experiments.loader.service_rules import _check_service
from prereg.experiments.loader.surface_files import _check_pool_names, _load_surface
from prereg.experiments.models import CorpusFile, ExperimentFile, ServiceFile
from prereg.experiments.surfaces import Surface
from prereg.experiments.toolbottleneck.registrable import (
    SURFACE,
    is_study,
    load_study_experiment,
)


def load_experiment(read: Reader, name: str) -> Experiment:
    """Load and cross-check experiment ``name`` through ``read``; BadInput on any problem.

    Every message is escaped (:func:`prereg.core.safeio.escaped`): the values it echoes
    come from the experiment's files.
    """
    try:
        return _load_experiment(read, name)
    except BadInput as exc:
        raise escaped(exc) from None


def _load_experiment(read: Reader, name: str) -> Experiment:
    raw = _read(read, ENTRY, None)
    if is_study(load_yaml(raw, ENTRY)):
        return _study_experiment(read, raw, name)
    spec, entry = _load(read, ENTRY, ExperimentFile, None)
    if spec.name != name:
        raise entry.fail(
            ("name",),
            f"the experiment is named '{spec.name}' but was loaded as "
            f"'{name}' (the folder name and 'name' must agree)",
        )
    files: list[str] = [ENTRY]

    def note(rel: str) -> None:
        if rel not in files:
            files.append(rel)

    service, service_doc = _load(read, spec.service, ServiceFile, (entry, ("service",)))
    note(spec.service)
    _check_service(service, service_doc)

    corpus, corpus_doc = _load(read, spec.corpus, CorpusFile, (entry, ("corpus",)))
    note(spec.corpus)
    tasks = _check_corpus(corpus, corpus_doc, service)

    surfaces: dict[str, Surface] = {}
    for sid, rel in spec.surfaces.items():
        surfaces[sid] = _load_surface(read, sid, rel, (entry, ("surfaces", sid)), service)
        note(rel)
    pool: list[PoolEntry] = []
    if spec.pool is not None:
        for index, member in enumerate(spec.pool.members):
            loc = ("pool", "members", index)
            if member.id in surfaces:
                raise entry.fail(
                    (*loc, "id"),
                    f"'{member.id}' is already the id of a surface or another pool member",
                )
            surfaces[member.id] = _load_surface(
                read, member.id, member.surface, (entry, (*loc, "surface")), service
            )
            note(member.surface)
            pool.append(PoolEntry(member.id, member.role))
        _check_pool_names(surfaces, pool, entry)

    eligible = _check_eligible(
        corpus, corpus_doc, [(m.id, m.role) for m in pool], list(spec.surfaces)
    )
    split_of_cluster = _assign_splits(spec, entry, tasks)
    return Experiment(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        files=tuple(files),
        service=service,
        intents=dict(corpus.intents),
        tasks=tuple(tasks),
        surfaces=surfaces,
        pool=tuple(pool),
        split_of_cluster=split_of_cluster,
        corpus_file=spec.corpus,
        format_characters=frozenset(chr(int(c[2:], 16)) for c in spec.format_characters),
        corpus_lint=spec.corpus_lint,
        eligible=eligible,
        _by_id={t.id: t for t in tasks},
    )


def _study_experiment(read: Reader, raw: bytes, name: str) -> Experiment:
    """A ToolBottleneckBench study (``kind: toolbottleneck``, issue 19): its tasks are
    (family, seed) pairs and its one surface stands for the compiled variants; it has no
    corpus service (each variant carries its own world, built by the runner)."""
    loaded = load_study_experiment(read, ENTRY, raw, name)
    spec = loaded.study.spec
    surface = Surface(SURFACE, ENTRY, SURFACE, spec.title, "compiled variants", True, ())
    service = ServiceFile.model_construct(name=spec.name, collections={}, operations={})
    return Experiment(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        files=loaded.files,
        service=service,
        intents=loaded.intents,
        tasks=loaded.tasks,
        surfaces={SURFACE: surface},
        pool=(),
        split_of_cluster=loaded.split_of_cluster,
        toolbottleneck=loaded.study,
        _by_id={t.id: t for t in loaded.tasks},
    )
