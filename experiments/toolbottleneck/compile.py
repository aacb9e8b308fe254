"""The variant compiler: a family and a seed -> matched variants, each digested.

Blocks and matched sets (seed 3.2, 3.3):

- ``capacity``: the baseline cell (smallest menu, low workflow, raw) and the cells that
  move one pressure from it: the sets ``V`` (menu sizes), ``W`` (workflow levels) and
  ``D`` (encodings). :func:`compile_cell` builds any other cell (the factorial).
- ``discovery``: the set ``R``: every catalog size under every retriever, the workflow
  low and raw. The model's menu there *is* the retriever's shortlist, so within ``R``
  both the catalog and the menu move (the menu is how the catalog pressure arrives).
- ``frontier``: the set ``W-frontier``: the low layout behind 0, 2, 6, 14 handoffs,
  read-only (a family's action is dropped there, so the certified minima are the seed's
  2, 6, 14, 30 for every family; :mod:`.workflow`, reading 4).

A variant is a JSON document of five components (``core``, ``catalog``, ``menu``,
``workflow``, ``encoding``) plus the encoded observations of its reference program.
``core`` is *derived* from running the certified program (the facts it read, the final
state it left) and must equal the family's own; two variants of one set may differ only
in the component(s) of their pressure. Either failure is a refusal naming the family and
the field responsible: that is what makes the paired difference measure one pressure.

Digests are sha256 over RFC 8785 canonical JSON, as everywhere in prereg.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import rfc8785

from prereg.experiments.toolbottleneck.catalog import Availability, catalog_pool, shortlist
from prereg.experiments.toolbottleneck.encoding import encode, round_trip_problem
from prereg.experiments.toolbottleneck.family import (
    WORKFLOW_LEVELS,
    EncodingName,
    FamilyError,
    FamilyFile,
    RetrieverName,
    WorkflowLevel,
    refuse,
)
from prereg.experiments.toolbottleneck.menu import menu, route_neighbours, schemas
from prereg.experiments.toolbottleneck.workflow import (
    NotCertified,
    Workflow,
    acts,
    build_workflow,
    certify,
    operational_functions,
    run,
    task_request,
)
from prereg.experiments.toolbottleneck.world import Function, plain_fields

FORMAT = "prereg-toolbottleneck-variants/1"
COMPONENTS = ("core", "catalog", "menu", "workflow", "encoding")
#: The components each matched set may vary.
VARYING: Mapping[str, frozenset[str]] = {
    "R": frozenset({"catalog", "menu"}),
    "V": frozenset({"menu"}),
    "W": frozenset({"workflow"}),
    "D": frozenset({"encoding"}),
    "W-frontier": frozenset({"workflow"}),
}
Block = Literal["capacity", "discovery", "frontier"]


def digest(document: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(document)).hexdigest()


@dataclass(frozen=True)
class Cell:
    """Where a variant sits: its block and the level of every pressure."""

    block: Block
    menu: int
    workflow: WorkflowLevel
    handoffs: int
    encoding: EncodingName
    catalog: int | None = None
    retriever: RetrieverName | None = None

    @property
    def code(self) -> str:
        if self.block == "discovery":
            return f"discovery.R{self.catalog}.{self.retriever}"
        if self.block == "frontier":
            return f"frontier.H{self.handoffs}"
        return f"capacity.V{self.menu}.W{self.workflow}.D{self.encoding}"

    def document(self) -> dict[str, Any]:
        return {
            "block": self.block,
            "R": self.catalog,
            "retriever": self.retriever,
            "V": None if self.block == "discovery" else self.menu,
            "W": self.workflow,
            "handoffs": self.handoffs,
            "D": self.encoding,
        }


@dataclass(frozen=True)
class Variant:
    id: str
    cell: Cell
    document: Mapping[str, Any]

    @property
    def digest(self) -> str:
        return str(self.document["digest"])

    def component(self, name: str) -> Any:
        return self.document["components"][name]


@dataclass(frozen=True)
class CompiledFamily:
    family: FamilyFile
    seed: int
    variants: tuple[Variant, ...]
    sets: Mapping[str, tuple[str, ...]]

    def variant(self, variant_id: str) -> Variant:
        return next(v for v in self.variants if v.id == variant_id)

    def members(self, set_name: str) -> list[Variant]:
        return [self.variant(i) for i in self.sets[set_name]]

    def document(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "family": self.family.id,
            "family_digest": digest(self.family.model_dump(mode="json")),
            "seed": self.seed,
            "sets": {k: list(v) for k, v in self.sets.items()},
            "variants": [dict(v.document) for v in self.variants],
        }


class _Context:
    """Everything a family compiles to that does not depend on the cell, built once."""

    def __init__(self, family: FamilyFile, filename: str, seed: int) -> None:
        self.family, self.filename, self.seed = family, filename, seed
        _check_sizes(family, filename)
        self.operational = sorted(operational_functions(family).values(), key=lambda f: f.name)
        self.neighbours = route_neighbours(self.operational, family.id, seed)
        self.request = task_request(family, seed)
        self.read_only_request = task_request(family, seed, read_only=True)
        self._workflows: dict[tuple[str, int, bool], Workflow] = {}
        self._pool: list[Function] | None = None
        self._catalog_digests: dict[int, str] = {}

    def fail(self, field: str, message: str) -> FamilyError:
        return refuse(self.family, self.filename, field, message)

    def request_for(self, read_only: bool) -> str:
        return self.read_only_request if read_only else self.request

    def workflow(self, level: WorkflowLevel, handoffs: int, read_only: bool = False) -> Workflow:
        key = (level, handoffs, read_only)
        if key not in self._workflows:
            groups = self.family.layouts.of(level)
            tag = level if handoffs == 0 else f"frontier-{handoffs}"
            wf = build_workflow(self.family, self.seed, groups, handoffs, tag, read_only=read_only)
            try:
                certify(wf.world, wf.goal, wf.program)
            except NotCertified as exc:
                field = f"layouts.{level}" if handoffs == 0 else "sizes.handoffs"
                raise self.fail(field, f"the checker cannot certify the workflow: {exc}") from None
            self._workflows[key] = wf
        return self._workflows[key]

    def pool(self) -> list[Function]:
        if self._pool is None:
            largest = max(self.family.sizes.catalogs)
            self._pool = catalog_pool(
                self.operational, self.neighbours, largest, self.family.id, self.seed
            )
        return self._pool

    def catalog_digest(self, size: int) -> str:
        """Digest of the schemas of the catalog of ``size``, in catalog order (cached)."""
        if size not in self._catalog_digests:
            self._catalog_digests[size] = digest(schemas(self.pool()[:size]))
        return self._catalog_digests[size]

    def menu_functions(self, size: int) -> list[Function]:
        if size < len(self.operational):
            raise self.fail(
                "sizes.menus", f"a menu of {size} cannot show {len(self.operational)} tools"
            )
        if size - len(self.operational) > len(self.neighbours):
            raise self.fail(
                "sizes.menus",
                f"a menu of {size} needs {size - len(self.operational)} route neighbours; "
                f"only {len(self.neighbours)} exist",
            )
        return menu(self.operational, self.neighbours, size, self.family.id, self.seed)


def _check_sizes(family: FamilyFile, filename: str) -> None:
    sizes, k = family.sizes, len(family.tools)
    for n in sizes.catalogs:
        if sizes.shortlist > n:
            raise refuse(
                family,
                filename,
                "sizes.shortlist",
                f"the retriever shortlist ({sizes.shortlist}) is larger than the catalog of {n}",
            )
        if n < k:
            raise refuse(
                family, filename, "sizes.catalogs", f"a catalog of {n} cannot hold {k} tools"
            )
    for n in sizes.menus:
        if n < k:
            raise refuse(family, filename, "sizes.menus", f"a menu of {n} cannot show {k} tools")
    for level in WORKFLOW_LEVELS:
        records = sizes.workflow_reads[level] // 2
        if len(family.layouts.of(level)) != records:
            raise refuse(
                family,
                filename,
                f"layouts.{level}",
                f"{sizes.workflow_reads[level]} reads need {records} source record(s), "
                f"the layout has {len(family.layouts.of(level))}",
            )


# ---- components ---------------------------------------------------------------------------


def _reference_core(ctx: _Context, primary_id: str, read_only: bool) -> dict[str, Any]:
    """The core as the family states it: what every variant must reproduce (on the
    read-only frontier: the request says so and the permitted final state is unchanged)."""
    family = ctx.family
    final = []
    if family.action is not None and acts(family, read_only):
        final.append(
            {
                "record": primary_id,
                "field": family.action.field,
                "before": family.action.before,
                "value": family.action.value,
            }
        )
    return {
        "request": ctx.request_for(read_only),
        "facts": {n: {"value": f.value, "type": f.type} for n, f in sorted(family.facts.items())},
        "decision": family.decision,
        "evidence_rule": family.evidence,
        "permitted_final_state": final,
        "operational_tools": schemas(ctx.operational),
    }


def _derived_core(ctx: _Context, wf: Workflow, read_only: bool) -> dict[str, Any]:
    """The core as running the certified program shows it."""
    family = ctx.family
    trace = run(wf.world, wf.program, frozenset(family.facts))
    final = []
    for (rid, name), value in sorted(trace.changes.items()):
        record = wf.world.record(rid)
        before = record.fields.get(name) if record is not None else None
        final.append({"record": rid, "field": name, "before": before, "value": value})
    return {
        "request": ctx.request_for(read_only),
        "facts": {
            n: {"value": v, "type": family.facts[n].type}
            for n, v in sorted(trace.facts_read.items())
        },
        "decision": family.decision,
        "evidence_rule": family.evidence,
        "permitted_final_state": final,
        "operational_tools": schemas(
            sorted((f for f in wf.world.functions.values() if f.operational), key=lambda f: f.name)
        ),
    }


def _workflow_component(ctx: _Context, cell: Cell, wf: Workflow) -> dict[str, Any]:
    functions = wf.world.functions
    labels = [
        f"source-{i + 1}"
        for i, call in enumerate(wf.program)
        if functions[call.function].operation == "read" and call.arg in wf.goal.sources
    ]
    return {
        "level": cell.workflow,
        "handoffs": cell.handoffs,
        "records": [
            {
                "id": r.id,
                "kind": r.kind,
                "route": r.route.text,
                "ref": r.ref,
                "fields": plain_fields(r.fields),
            }
            for r in wf.world.records
        ],
        "program": [c.document(functions) for c in wf.program],
        "certified_minimum": wf.certified_minimum,
        "evidence": {"sources": sorted(wf.goal.sources)},
        "reference_answer": {
            "decision": ctx.family.decision,
            "facts": {n: f.value for n, f in sorted(ctx.family.facts.items())},
            "sources": labels,
        },
    }


def _observations(ctx: _Context, wf: Workflow, encoding: EncodingName) -> list[dict[str, Any]]:
    family = ctx.family
    declared = {n: f.type for n, f in family.facts.items()}
    trace = run(wf.world, wf.program, frozenset(family.facts))
    out = []
    for i, (call, results) in enumerate(zip(wf.program, trace.results, strict=True)):
        problem = round_trip_problem(results, encoding, declared)
        if problem is not None:
            field = _family_field(family, problem.field)
            raise ctx.fail(field, f"the {encoding} encoding does not round-trip: {problem}")
        envelope = {
            "call": i + 1,
            "tool": call.function,
            "source": f"source-{i + 1}",
            "hash": digest([r.value() for r in results]),
            "provenance": {
                f"/{r.id}/{name}": f"{r.kind}.{name}" for r in results for name in sorted(r.fields)
            },
        }
        out.append({**envelope, **encode(results, encoding, declared)})
    return out


def _family_field(family: FamilyFile, record_field: str) -> str:
    if record_field in family.facts:
        return f"facts.{record_field}"
    if family.action is not None and record_field == family.action.field:
        return "action"
    return "sizes.encodings"


def _menu_component(ctx: _Context, cell: Cell) -> dict[str, Any]:
    return {
        "size": cell.menu,
        "source": "menu",
        "functions": schemas(ctx.menu_functions(cell.menu)),
    }


def _discovery_components(ctx: _Context, cell: Cell, wf: Workflow) -> tuple[Any, Any]:
    if cell.catalog not in ctx.family.sizes.catalogs or cell.retriever is None:
        # the catalogs are nested prefixes of one ranking built for the registered sizes
        raise ctx.fail("sizes.catalogs", f"cell {cell.code}: not one of the family's catalogs")
    catalog = ctx.pool()[: cell.catalog]
    picked = shortlist(
        catalog, ctx.request, cell.retriever, ctx.family.sizes.shortlist, ctx.family.id, ctx.seed
    )
    availability = Availability(
        required=tuple(sorted({c.function for c in wf.program})),
        shortlisted=tuple(fn.name for fn in picked),
    )
    component = {
        "size": cell.catalog,
        "retriever": cell.retriever,
        "functions": [fn.name for fn in catalog],
        "schemas_digest": ctx.catalog_digest(cell.catalog),
        "shortlist": list(availability.shortlisted),
        "availability": {
            "required": list(availability.required),
            "available": availability.available,
            "missing": list(availability.missing),
        },
        "selection": None,
    }
    menu_doc = {"size": len(picked), "source": "shortlist", "functions": schemas(picked)}
    return component, menu_doc


# ---- variants -----------------------------------------------------------------------------


def _build(ctx: _Context, cell: Cell, matched_field: str) -> Variant:
    read_only = cell.block == "frontier"
    wf = ctx.workflow(cell.workflow, cell.handoffs, read_only)
    core = _derived_core(ctx, wf, read_only)
    reference = _reference_core(ctx, wf.primary_id, read_only)
    if core != reference:
        moved = sorted(k for k in reference if core.get(k) != reference[k])
        raise ctx.fail(
            matched_field,
            f"variant {cell.code} would differ in more than one pressure: its "
            f"{', '.join(moved)} differ from the family's",
        )
    catalog: Any = None
    if cell.block == "discovery":
        catalog, menu_doc = _discovery_components(ctx, cell, wf)
    else:
        menu_doc = _menu_component(ctx, cell)
    components = {
        "core": core,
        "catalog": catalog,
        "menu": menu_doc,
        "workflow": _workflow_component(ctx, cell, wf),
        "encoding": {"name": cell.encoding},
    }
    head: dict[str, Any] = {
        "format": FORMAT,
        "id": f"{ctx.family.id}/{cell.code}",
        "family": ctx.family.id,
        "seed": ctx.seed,
        "cell": cell.document(),
        "component_digests": {k: digest(v) for k, v in components.items()},
    }
    observations = _observations(ctx, wf, cell.encoding)
    head["measures"] = {  # what the seed's table 1 reports of each manipulation
        "schema_bytes": len(rfc8785.dumps(menu_doc["functions"])),
        "observation_bytes": [len(rfc8785.dumps(o)) for o in observations],
        "certified_minimum": wf.certified_minimum,
    }
    # the variant digest covers the head, each component through its digest, and the
    # observations: one pass of canonical JSON over each part, not over the whole again
    sealed = digest({**head, "observations": digest(observations)})
    document = {**head, "components": components, "observations": observations, "digest": sealed}
    return Variant(str(head["id"]), cell, document)


def matched_problem(variants: Sequence[Variant], set_name: str) -> str | None:
    """The first pair of a matched set that differs outside its pressure, or None."""
    allowed = VARYING[set_name]
    for i, a in enumerate(variants):
        for b in variants[i + 1 :]:
            moved = [
                c
                for c in COMPONENTS
                if c not in allowed
                and a.document["component_digests"][c] != b.document["component_digests"][c]
            ]
            if moved:
                return (
                    f"variants {a.cell.code} and {b.cell.code} would differ in more than the "
                    f"{set_name} pressure: also in {', '.join(moved)}"
                )
    return None


def compile_cell(
    family: FamilyFile, cell: Cell, *, seed: int = 0, filename: str = "<family>"
) -> Variant:
    """One variant at any cell (for example a factorial cell crossing several pressures)."""
    return _build(_Context(family, filename, seed), cell, "layouts")


def compile_family(
    family: FamilyFile, *, seed: int = 0, filename: str = "<family>"
) -> CompiledFamily:
    """Every matched set of the family, checked; FamilyError (exit 2) on a refusal."""
    ctx = _Context(family, filename, seed)
    sizes = family.sizes
    base_menu, raw = sizes.menus[0], sizes.encodings[0]
    plan: dict[str, list[tuple[Cell, str]]] = {
        "V": [(Cell("capacity", m, "low", 0, raw), "sizes.menus") for m in sizes.menus],
        "W": [(Cell("capacity", base_menu, lv, 0, raw), f"layouts.{lv}") for lv in WORKFLOW_LEVELS],
        "D": [
            (Cell("capacity", base_menu, "low", 0, e), "sizes.encodings") for e in sizes.encodings
        ],
        "R": [
            (Cell("discovery", sizes.shortlist, "low", 0, raw, n, r), "sizes.catalogs")
            for n in sizes.catalogs
            for r in sizes.retrievers
        ],
        "W-frontier": [
            (Cell("frontier", base_menu, "low", h, raw), "sizes.handoffs") for h in sizes.handoffs
        ],
    }
    built: dict[str, Variant] = {}
    sets: dict[str, tuple[str, ...]] = {}
    for set_name, cells in plan.items():
        members = []
        for cell, field in cells:
            if cell.code not in built:
                built[cell.code] = _build(ctx, cell, field)
            members.append(built[cell.code])
        problem = matched_problem(members, set_name)
        if problem is not None:
            raise ctx.fail(cells[-1][1], problem)
        sets[set_name] = tuple(v.id for v in members)
    return CompiledFamily(family, seed, tuple(built.values()), sets)
