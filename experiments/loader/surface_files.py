"""Surface files: a YAML surface's tools checked and mapped onto the service's operations
(or an MCP snapshot, offered replay-only), and tool names unique among what a pool offers.

Produces the :class:`~prereg.experiments.surfaces.Surface` values the runners offer; the
runtime behaviour of a surface is :mod:`prereg.experiments.surfaces`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from prereg.core.safeio import check_json
from prereg.experiments.loader.experiment import PoolEntry
from prereg.experiments.loader.files import Doc, Reader, _check_relpath, _load, _read
from prereg.experiments.models import (
    ArgRef,
    ArgSource,
    ChainStep,
    ServiceFile,
    StepRef,
    SurfaceFile,
)
from prereg.experiments.schema_lint import unknown_keywords
from prereg.experiments.snapshots import load_snapshot_bytes, snapshot_surface
from prereg.experiments.surfaces import Surface, Tool


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
