"""Loading an experiment folder through a ``read`` function, with precise errors.

``load_experiment(read, name)`` reads ``experiment.yaml`` and every file it
references through ``read`` (a path relative to the experiment folder ->
bytes; FileNotFoundError when missing). Runs pass a reader over the registry's
frozen objects, so what runs is exactly what was registered; ``prereg split
show`` and registration pass a reader over the workspace folder.

Every problem is a :class:`prereg.core.errors.BadInput` naming the file, the line and
column, and the field, for both schema errors (pydantic, via
:mod:`prereg.core.yamlio`) and cross-file rules checked here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

from prereg.core.errors import BadInput
from prereg.core.safeio import (
    MAX_EXPERIMENT_FILE_BYTES,
    UnreadableFile,
    check_json,
    escaped,
    read_regular_file,
    size_text,
)
from prereg.core.yamlio import Located, format_loc, load_yaml, parse_yaml, validate
from prereg.experiments.models import (
    SPLIT_NAMES,
    ArgRef,
    ArgSource,
    ChainStep,
    CollectionSpec,
    CorpusFile,
    Created,
    Deleted,
    ExperimentFile,
    OperationSpec,
    ServiceFile,
    StepRef,
    SurfaceFile,
    Task,
    Updated,
)
from prereg.experiments.oracles import certification_problem
from prereg.experiments.refs import as_step_ref
from prereg.experiments.schema_lint import unknown_keywords
from prereg.experiments.service import type_ok
from prereg.experiments.snapshots import load_snapshot_bytes, snapshot_surface
from prereg.experiments.splits import assign_by_fractions
from prereg.experiments.surfaces import Role, Surface, Tool
from prereg.experiments.text import normalise
from prereg.experiments.toolbottleneck.registrable import (
    SURFACE,
    StudyExperiment,
    is_study,
    load_study_experiment,
)

Reader = Callable[[str], bytes]
#: Where a problem is in a file: the keys and indices down to the node.
Loc = tuple[int | str, ...]
M = TypeVar("M", bound=BaseModel)
ENTRY = "experiment.yaml"


class Doc:
    """A parsed file, for errors that point at a node of it.

    The fast C parser reads the data; node positions (the slower pure-Python
    composer of :mod:`prereg.core.yamlio`) are computed only when an error needs them.
    """

    def __init__(self, path: str, raw: bytes) -> None:
        self.path = path
        self.raw = raw
        self._located: Located | None = None

    @property
    def located(self) -> Located:
        if self._located is None:
            self._located = parse_yaml(self.raw, self.path)
        return self._located

    def where(self, loc: Sequence[int | str]) -> str:
        pos = self.located.line_of(loc)
        return f"{self.path}:{pos[0]}:{pos[1]}" if pos else self.path

    def fail(self, loc: Sequence[int | str], message: str) -> BadInput:
        return BadInput(message, file=self.where(loc), field=format_loc(loc))


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
    _by_id: Mapping[str, Task] = field(default_factory=dict, repr=False)

    @property
    def surface_ids(self) -> frozenset[str]:
        """Names an arm's ``surface:`` may use: the surfaces and the pool members."""
        return frozenset(self.surfaces)

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


# ---- reading files -------------------------------------------------------------------------


def _check_relpath(doc: Doc, loc: Sequence[int | str], rel: str) -> None:
    pure = PurePosixPath(rel)
    if "\\" in rel or pure.is_absolute() or ".." in pure.parts or rel.startswith("~"):
        raise doc.fail(
            loc,
            f"'{rel}' must be a relative path inside the experiment folder "
            "(no '..', no absolute path)",
        )


def _read(read: Reader, rel: str, site: tuple[Doc, Sequence[int | str]] | None) -> bytes:
    try:
        data = read(rel)
    except FileNotFoundError:
        if site is None:
            raise BadInput(
                f"'{rel}' not found: an experiment folder needs an {ENTRY}", file=rel
            ) from None
        doc, loc = site
        raise doc.fail(loc, f"referenced file '{rel}' not found") from None
    except IsADirectoryError:
        if site is None:
            raise BadInput("expected a file, got a directory", file=rel) from None
        doc, loc = site
        raise doc.fail(loc, f"referenced path '{rel}' is a directory, not a file") from None
    except UnreadableFile as exc:
        if site is None:
            raise BadInput(exc.reason, file=rel) from None
        doc, loc = site
        raise doc.fail(loc, f"referenced path '{rel}' {exc.reason}") from None
    if len(data) > MAX_EXPERIMENT_FILE_BYTES:  # a reader other than folder_reader's
        reason = (
            f"is {size_text(len(data))}, over the {size_text(MAX_EXPERIMENT_FILE_BYTES)} "
            "limit for an experiment file"
        )
        if site is None:
            raise BadInput(reason, file=rel)
        raise site[0].fail(site[1], f"referenced file '{rel}' {reason}")
    return data


def _load(
    read: Reader, rel: str, model: type[M], site: tuple[Doc, Sequence[int | str]] | None
) -> tuple[M, Doc]:
    if site is not None:
        _check_relpath(site[0], site[1], rel)
    raw = _read(read, rel, site)
    data = load_yaml(raw, rel)  # libyaml, guarded (prereg.core.yamlio)
    if data is None:
        raise BadInput("the file is empty; expected a YAML mapping", file=rel)
    if not isinstance(data, dict):
        raise BadInput(
            f"expected a YAML mapping at the top level, got {type(data).__name__}", file=rel
        )
    doc = Doc(rel, raw)
    try:
        return model.model_validate(data), doc
    except ValidationError:
        located = doc.located
        return validate(model, located.data, located), doc


def folder_reader(folder: Path) -> Reader:
    """A reader over an experiment folder that refuses paths leaving it.

    Regular files only, at most :data:`~prereg.core.safeio.MAX_EXPERIMENT_FILE_BYTES`
    each: a FIFO, a device, a socket or a symlink loop raises
    :class:`~prereg.core.safeio.UnreadableFile` (never a hang); a directory
    IsADirectoryError; nothing there FileNotFoundError.
    """
    root = Path(os.path.realpath(folder))

    def read(relative: str) -> bytes:
        pure = PurePosixPath(relative)
        if pure.is_absolute() or ".." in pure.parts or "\\" in relative:
            raise BadInput(f"'{relative}' must stay inside the experiment folder", file=relative)
        if "\x00" in relative:
            raise UnreadableFile("is not a valid path (it contains a NUL character)")
        # realpath, not Path.resolve: a symlink loop is reported by the read, not raised here
        target = Path(os.path.realpath(root / pure))
        if not target.is_relative_to(root):
            raise BadInput(f"'{relative}' leaves the experiment folder", file=relative)
        return read_regular_file(target, limit=MAX_EXPERIMENT_FILE_BYTES, what="an experiment file")

    return read


# ---- the public entry point ----------------------------------------------------------------


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


# ---- the service ---------------------------------------------------------------------------


def _check_service(service: ServiceFile, doc: Doc) -> None:
    colls = service.collections
    for cname, coll in colls.items():
        _check_collection(cname, coll, colls, doc)
    for oname, op in service.operations.items():
        _check_operation(("operations", oname), op, colls, doc)


def _check_operation(
    loc: Loc, op: OperationSpec, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    """One operation against the collections: every name it uses must exist."""
    if op.collection not in colls:
        raise doc.fail(
            (*loc, "collection"),
            f"unknown collection '{op.collection}' (collections: {', '.join(colls)})",
        )
    coll = colls[op.collection]
    for pname, param in op.params.items():
        if param.ref is not None and param.ref not in colls:
            raise doc.fail((*loc, "params", pname, "ref"), f"unknown collection '{param.ref}'")
    _check_operation_kind(loc, op, coll, doc)
    _check_operation_filters(loc, op, coll, doc)
    _check_operation_writes(loc, op, coll, colls, doc)
    _check_destructive(loc, op, coll, doc)


def _need_param(
    doc: Doc, loc: Loc, op: OperationSpec, key: str, value: str | None, *, required: bool = False
) -> None:
    """The operation's ``key`` (or ``value``) names one of its params (a required one)."""
    if value is None:
        raise doc.fail((*loc, key), f"a '{op.kind}' operation needs '{key}'")
    if value not in op.params:
        raise doc.fail(
            (*loc, key),
            f"'{value}' is not one of the operation's params ({', '.join(op.params) or 'none'})",
        )
    if required and not op.params[value].required:
        raise doc.fail(
            (*loc, "params", value, "required"),
            f"param '{value}' must be required (it is the operation's '{key}')",
        )


def _check_operation_kind(loc: Loc, op: OperationSpec, coll: CollectionSpec, doc: Doc) -> None:
    """What the operation's kind requires: a key, and for append/remove a list field."""
    if op.kind in ("get", "update", "append", "remove", "delete"):
        _need_param(doc, loc, op, "key", op.key, required=True)
    if op.kind in ("append", "remove"):
        _need_param(doc, loc, op, "value", op.value, required=True)
        if op.field is None or op.field not in coll.fields:
            raise doc.fail((*loc, "field"), "must name a list field of the collection")
        spec = coll.field_spec(op.field)
        if spec is None or spec.type != "string_list":
            raise doc.fail((*loc, "field"), f"'{op.field}' is not a string_list field")


def _check_operation_filters(loc: Loc, op: OperationSpec, coll: CollectionSpec, doc: Doc) -> None:
    """``match`` and ``equals``: params against fields of the collection (or ``id``)."""
    fields = set(coll.fields) | {"id"}
    for pname, fields_ in op.match.items():
        if pname not in op.params:
            raise doc.fail((*loc, "match", pname), f"'{pname}' is not a param")
        for f in fields_:
            if f not in fields:
                raise doc.fail((*loc, "match", pname), f"unknown field '{f}' of '{op.collection}'")
    for pname, f in op.equals.items():
        if pname not in op.params:
            raise doc.fail((*loc, "equals", pname), f"'{pname}' is not a param")
        if f not in fields:
            raise doc.fail((*loc, "equals", pname), f"unknown field '{f}'")


def _check_operation_writes(
    loc: Loc, op: OperationSpec, coll: CollectionSpec, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    """``set``, ``defaults`` and ``expand``: writable fields, params, referenced collections."""
    for f, pname in op.set.items():
        if f not in coll.fields or f == "id":
            raise doc.fail((*loc, "set", f), f"unknown or read-only field '{f}'")
        if pname not in op.params:
            raise doc.fail((*loc, "set", f), f"'{pname}' is not a param")
    for f in op.defaults:
        if f not in coll.fields:
            raise doc.fail((*loc, "defaults", f), f"unknown field '{f}'")
    for f, target in op.expand.items():
        if f not in coll.fields:
            raise doc.fail((*loc, "expand", f), f"unknown field '{f}'")
        if target not in colls:
            raise doc.fail((*loc, "expand", f), f"unknown collection '{target}'")


def _check_destructive(loc: Loc, op: OperationSpec, coll: CollectionSpec, doc: Doc) -> None:
    """A delete is destructive; a destructive operation has a key and a typed confirmation."""
    if op.kind == "delete" and not op.destructive:
        raise doc.fail((*loc, "destructive"), "a delete operation must be destructive: true")
    if not op.destructive:
        return
    if op.confirmation is None:
        raise doc.fail(
            (*loc, "confirmation"),
            "a destructive operation needs a confirmation ({param: confirm, equals_field: name})",
        )
    if op.key is None:
        raise doc.fail((*loc, "key"), "a destructive operation needs 'key' (its target)")
    if op.confirmation.param not in op.params:
        raise doc.fail(
            (*loc, "confirmation", "param"),
            f"'{op.confirmation.param}' is not one of the params",
        )
    if op.confirmation.equals_field not in coll.fields:
        raise doc.fail(
            (*loc, "confirmation", "equals_field"),
            f"unknown field '{op.confirmation.equals_field}'",
        )


def _check_collection(
    cname: str, coll: CollectionSpec, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    loc: Loc = ("collections", cname)
    for fname in coll.fields:
        spec = coll.field_spec(fname)
        assert spec is not None
        if spec.ref is not None and spec.ref not in colls:
            raise doc.fail((*loc, "fields", fname), f"unknown collection '{spec.ref}'")
    seen: set[str] = set()
    for index, record in enumerate(coll.records):
        _check_record(loc, index, record, coll, seen, doc)
    for index, record in enumerate(coll.records):
        _check_record_refs(loc, index, record, coll, colls, doc)


def _check_record(
    loc: Loc, index: int, record: Mapping[str, Any], coll: CollectionSpec, seen: set[str], doc: Doc
) -> None:
    """A seed record: a new string id, and known fields of the declared types."""
    rloc = (*loc, "records", index)
    rid = record.get("id")
    if not isinstance(rid, str) or not rid:
        raise doc.fail(rloc, "every record needs a string 'id'")
    if rid in seen:
        raise doc.fail((*rloc, "id"), f"duplicate record id '{rid}'")
    seen.add(rid)
    for fname, value in record.items():
        if fname == "id":
            continue
        spec = coll.field_spec(fname)
        if spec is None:
            raise doc.fail(
                (*rloc, fname), f"unknown field '{fname}' (fields: {', '.join(coll.fields)})"
            )
        if value is None and spec.nullable:
            continue
        if not type_ok(spec.type, value):
            raise doc.fail((*rloc, fname), f"expected {spec.type}, got {type(value).__name__}")


def _check_record_refs(
    loc: Loc,
    index: int,
    record: Mapping[str, Any],
    coll: CollectionSpec,
    colls: Mapping[str, CollectionSpec],
    doc: Doc,
) -> None:
    """Every identifier in a reference field names a seed record of the referenced collection."""
    for fname, value in record.items():
        spec = coll.field_spec(fname) if fname != "id" else None
        if spec is None or spec.ref is None or value is None:
            continue
        known = {r["id"] for r in colls[spec.ref].records}
        for v in value if isinstance(value, list) else [value]:
            if v not in known:
                raise doc.fail(
                    (*loc, "records", index, fname), f"'{v}' is not a record of '{spec.ref}'"
                )


# ---- surfaces ------------------------------------------------------------------------------


def _load_surface(
    read: Reader, sid: str, rel: str, site: tuple[Doc, Sequence[int | str]], service: ServiceFile
) -> Surface:
    if PurePosixPath(rel).suffix.lower() == ".json":
        # an MCP snapshot (prereg mcp snapshot): a recorded server, offered replay-only
        _check_relpath(site[0], site[1], rel)
        raw = _read(read, rel, site)
        check_json(raw, rel)  # what canonical JSON cannot carry, with line and column
        return snapshot_surface(sid, rel, load_snapshot_bytes(raw, rel))
    model, doc = _load(read, rel, SurfaceFile, site)
    tools: list[Tool] = []
    names: set[str] = set()
    for index, tm in enumerate(model.tools):
        loc: tuple[int | str, ...] = ("tools", index)
        if tm.name in names:
            raise doc.fail((*loc, "name"), f"duplicate tool name '{tm.name}'")
        names.add(tm.name)
        schema = tm.input_schema
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise doc.fail(
                (*loc, "input_schema"), f"not a valid JSON Schema: {exc.message}"
            ) from None
        for where, key in unknown_keywords(schema):
            raise doc.fail(
                (*loc, "input_schema", *where, key),
                f"'{key}' is not a JSON Schema keyword (validators ignore it; if "
                "it came from a YAML flow mapping split at a comma, quote the text)",
            )
        if schema.get("type") != "object":
            raise doc.fail(
                (*loc, "input_schema", "type"), "a tool's input_schema must have type: object"
            )
        props = schema.get("properties") or {}
        mapped = tm.operation is not None or tm.chain is not None
        if model.replay_only:
            if mapped:
                raise doc.fail(loc, "a replay_only surface's tools map to no operation")
            steps: tuple[ChainStep, ...] = ()
        else:
            if not mapped:
                raise doc.fail(
                    loc,
                    "a tool needs 'operation' or 'chain' (or mark the surface replay_only: true)",
                )
            steps = _tool_steps(tm.operation, tm.args, tm.chain, props, service, doc, loc)
        tools.append(
            Tool(
                name=tm.name,
                title=tm.title,
                description=tm.description,
                input_schema=schema,
                steps=steps,
                surface=sid,
            )
        )
    return Surface(
        id=sid,
        file=rel,
        name=model.name,
        title=model.title,
        description=model.description,
        replay_only=model.replay_only,
        tools=tuple(tools),
    )


def _tool_steps(
    operation: str | None,
    args: Mapping[str, ArgSource] | None,
    chain: Sequence[ChainStep] | None,
    props: Mapping[str, Any],
    service: ServiceFile,
    doc: Doc,
    loc: tuple[int | str, ...],
) -> tuple[ChainStep, ...]:
    ops = service.operations
    if operation is not None:
        if operation not in ops:
            raise doc.fail(
                (*loc, "operation"),
                f"unknown operation '{operation}' (operations: {', '.join(ops)})",
            )
        if args is None:
            extra = [p for p in props if p not in ops[operation].params]
            if extra:
                raise doc.fail(
                    (*loc, "input_schema", "properties", extra[0]),
                    f"tool argument '{extra[0]}' is not a parameter of "
                    f"'{operation}'; map it with 'args'",
                )
            args = {p: ArgRef(arg=p) for p in ops[operation].params if p in props}
        steps: list[ChainStep] = [ChainStep(op=operation, args=dict(args))]
        step_locs: list[tuple[int | str, ...]] = [(*loc, "args")]
    else:
        assert chain is not None
        if not chain:
            raise doc.fail((*loc, "chain"), "a chain needs at least one step")
        steps = list(chain)
        step_locs = [(*loc, "chain", i, "args") for i in range(len(chain))]
        for i, step in enumerate(chain):
            if step.op not in ops:
                raise doc.fail((*loc, "chain", i, "op"), f"unknown operation '{step.op}'")
    for i, (step, sloc) in enumerate(zip(steps, step_locs, strict=True)):
        op = ops[step.op]
        for param, source in step.args.items():
            if param not in op.params:
                raise doc.fail((*sloc, param), f"'{param}' is not a parameter of '{step.op}'")
            if isinstance(source, ArgRef) and source.arg not in props:
                raise doc.fail(
                    (*sloc, param),
                    f"tool argument '{source.arg}' is not in the input_schema properties",
                )
            if isinstance(source, StepRef) and source.step >= i:
                raise doc.fail((*sloc, param), f"step {source.step} does not run before step {i}")
        missing = [p for p, spec in op.params.items() if spec.required and p not in step.args]
        if missing:
            raise doc.fail(sloc, f"required parameter '{missing[0]}' of '{step.op}' gets no value")
    return tuple(steps)


def _check_pool_names(
    surfaces: Mapping[str, Surface], pool: Sequence[PoolEntry], entry: Doc
) -> None:
    """Tool names must be unique among everything offered together (hosts call by name)."""
    member_ids = {m.id for m in pool}
    for focal in surfaces:
        offered = [focal] + [m.id for m in pool if m.id != focal]
        owner: dict[str, str] = {}
        for sid in offered:
            for tool in surfaces[sid].tools:
                if tool.name in owner:
                    where = ("pool",) if sid in member_ids else ("surfaces", sid)
                    raise entry.fail(
                        where,
                        f"tool name '{tool.name}' is offered by both "
                        f"'{owner[tool.name]}' and '{sid}'",
                    )
                owner[tool.name] = sid


# ---- the corpus ----------------------------------------------------------------------------


def _check_corpus(corpus: CorpusFile, doc: Doc, service: ServiceFile) -> list[Task]:
    ops = service.operations
    colls = service.collections
    seen: dict[str, int] = {}
    cluster_key: dict[str, tuple[str, str, int]] = {}
    tasks: list[Task] = []
    for index, task in enumerate(corpus.tasks):
        loc: Loc = ("tasks", index)
        _check_task_identity(loc, index, task, corpus, seen, cluster_key, doc)
        task = _check_task_remit(loc, task, ops, doc)
        _check_solution(loc, task, ops, doc)
        _check_goal(loc, task, colls, doc)
        if task.solution.certified:
            problem = certification_problem(task, service)
            if problem is not None:
                raise doc.fail((*loc, "solution", "certified"), problem)
        tasks.append(task)
    return tasks


def _check_task_identity(
    loc: Loc,
    index: int,
    task: Task,
    corpus: CorpusFile,
    seen: dict[str, int],
    cluster_key: dict[str, tuple[str, str, int]],
    doc: Doc,
) -> None:
    """A new task id, a known intent, and one intent and polarity per cluster."""
    if task.id in seen:
        raise doc.fail(
            (*loc, "id"), f"duplicate task id '{task.id}' (first at tasks[{seen[task.id]}])"
        )
    seen[task.id] = index
    if task.intent not in corpus.intents:
        raise doc.fail(
            (*loc, "intent"),
            f"unknown intent '{task.intent}' (intents: {', '.join(corpus.intents)})",
        )
    key = (task.intent, task.polarity, index)
    first = cluster_key.setdefault(task.cluster, key)
    if first[:2] != key[:2]:
        raise doc.fail(
            (*loc, "cluster"),
            f"cluster '{task.cluster}' mixes intent/polarity "
            f"{first[0]}/{first[1]} (tasks[{first[2]}]) and {key[0]}/{key[1]}: "
            "paraphrases share an intent and a polarity",
        )


def _check_task_remit(loc: Loc, task: Task, ops: Mapping[str, OperationSpec], doc: Doc) -> Task:
    """Permitted and prohibited operations; a negative task comes back permitting none."""
    for fname in ("permits", "prohibits"):
        for j, op in enumerate(getattr(task, fname) or []):
            if op not in ops:
                raise doc.fail((*loc, fname, j), f"unknown operation '{op}'")
    both = set(task.permits or []) & set(task.prohibits)
    if both:
        raise doc.fail((*loc, "prohibits"), f"'{sorted(both)[0]}' is both permitted and prohibited")
    if task.polarity != "negative":
        return task
    if task.permits:
        raise doc.fail(
            (*loc, "permits"),
            "a negative task permits no operation (the right behaviour uses no tool)",
        )
    if task.solution.steps or task.goal.mutates:
        raise doc.fail(
            (*loc, "solution"), "a negative task has no solution steps and no state change"
        )
    return task.model_copy(update={"permits": []})


def _check_solution(loc: Loc, task: Task, ops: Mapping[str, OperationSpec], doc: Doc) -> None:
    """The recorded path: permitted operations, their params, references to earlier steps."""
    for j, step in enumerate(task.solution.steps):
        sloc = (*loc, "solution", "steps", j)
        if step.op not in ops:
            raise doc.fail((*sloc, "op"), f"unknown operation '{step.op}'")
        if not task.allows(step.op):
            raise doc.fail(
                (*sloc, "op"),
                f"the recorded path uses '{step.op}', which the task does not permit",
            )
        for pname, value in step.args.items():
            _check_step_arg((*sloc, "args", pname), j, step.op, pname, value, ops, doc)


def _check_step_arg(
    aloc: Loc,
    j: int,
    op: str,
    pname: str,
    value: Any,
    ops: Mapping[str, OperationSpec],
    doc: Doc,
) -> None:
    if pname not in ops[op].params:
        raise doc.fail(aloc, f"'{pname}' is not a parameter of '{op}'")
    try:
        ref = as_step_ref(value)
    except ValueError:
        raise doc.fail(aloc, "a reference is {step: N, path: a.b.0}") from None
    if ref is not None and ref.step >= j:
        raise doc.fail(aloc, f"step {ref.step} does not run before step {j}")


def _check_goal(loc: Loc, task: Task, colls: Mapping[str, CollectionSpec], doc: Doc) -> None:
    """The goal's changes name seed records and fields; its answer strings check something."""
    goal = task.goal
    for gname in ("created", "updated", "deleted"):
        for j, change in enumerate(getattr(goal, gname)):
            _check_change((*loc, "goal", gname, j), change, colls, doc)
    prompt = normalise(task.prompt)
    for j, text in enumerate(goal.answer_includes):
        if normalise(text) in prompt:
            raise doc.fail(
                (*loc, "goal", "answer_includes", j),
                f"'{text}' already appears in the prompt, so it checks nothing",
            )


def _check_change(
    gloc: Loc, change: Created | Updated | Deleted, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    """One change of the goal: a known collection, a seed record (but for created), fields."""
    if change.collection not in colls:
        raise doc.fail((*gloc, "collection"), f"unknown collection '{change.collection}'")
    coll = colls[change.collection]
    if not isinstance(change, Created):
        ids = {r["id"] for r in coll.records}
        if change.id not in ids:
            raise doc.fail((*gloc, "id"), f"no seed record '{change.id}' in '{change.collection}'")
    for fname in getattr(change, "fields", {}) or {}:
        if fname not in coll.fields:
            raise doc.fail((*gloc, "fields", fname), f"unknown field '{fname}'")


def _assign_splits(spec: ExperimentFile, entry: Doc, tasks: Sequence[Task]) -> dict[str, str]:
    clusters = [(t.cluster, t.intent) for t in tasks]
    names = {c for c, _ in clusters}
    if spec.splits.fractions is not None:
        # a Mapping is invariant in its keys: copy the SplitName-keyed dict as str-keyed
        fractions: dict[str, float] = dict(spec.splits.fractions.items())
        return assign_by_fractions(clusters, spec.splits.seed, fractions)
    assert spec.splits.assign is not None
    out: dict[str, str] = {}
    for split, listed in spec.splits.assign.items():
        for j, cluster in enumerate(listed):
            loc = ("splits", "assign", split, j)
            if cluster not in names:
                raise entry.fail(loc, f"unknown cluster '{cluster}'")
            if cluster in out:
                raise entry.fail(
                    loc,
                    f"cluster '{cluster}' is already in split "
                    f"'{out[cluster]}': a cluster goes to one split",
                )
            out[cluster] = split
    missing = sorted(names - set(out))
    if missing:
        raise entry.fail(
            ("splits", "assign"), f"clusters not assigned to any split: {', '.join(missing[:5])}"
        )
    return out
