"""A compiled variant as a runnable sandbox: its menu, its world, and encoded observations.

The compiler (:mod:`.compile`) digests a variant; this module rebuilds, from the same
family, seed and cell, what an episode needs to act on it: the functions of the menu
(operational tools and route neighbours, executable), the records, and the encoding of
whatever a call returns. Everything is checked against the compiled variant: the menu's
schemas and the reference program's observations must be the variant's byte for byte
(so a run acts on exactly the digested variant, never on a look-alike).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prereg.experiments.toolbottleneck.catalog import catalog_pool, shortlist
from prereg.experiments.toolbottleneck.compile import Cell, Variant, compile_cell, digest
from prereg.experiments.toolbottleneck.encoding import encode
from prereg.experiments.toolbottleneck.family import FactValue, FamilyFile
from prereg.experiments.toolbottleneck.menu import menu, route_neighbours, schemas
from prereg.experiments.toolbottleneck.verify import AnswerKey, answer_key
from prereg.experiments.toolbottleneck.workflow import (
    Workflow,
    build_workflow,
    operational_functions,
    task_request,
)
from prereg.experiments.toolbottleneck.world import Function, Returned, World, execute


class SandboxMismatch(RuntimeError):
    """The rebuilt sandbox is not the compiled variant (a bug, never bad input)."""


@dataclass(frozen=True)
class Sandbox:
    """One variant, runnable. ``menu`` is the full menu in display order."""

    family: FamilyFile
    seed: int
    cell: Cell
    variant: Variant
    workflow: Workflow
    world: World  # the workflow's records with every menu function executable
    menu: tuple[Function, ...]
    request: str
    key: AnswerKey = field(repr=False)

    @property
    def operational(self) -> tuple[Function, ...]:
        return tuple(f for f in self.menu if f.operational)

    def function(self, name: str) -> Function | None:
        return self.world.functions.get(name)

    def call(
        self, name: str, arg: str, changes: Mapping[tuple[str, str], FactValue]
    ) -> tuple[list[Returned], dict[tuple[str, str], FactValue]]:
        """Execute a call by name (a name nothing lists returns nothing)."""
        fn = self.function(name)
        if fn is None:
            return [], dict(changes)
        return execute(fn, arg, self.world, changes)

    def observation(self, index: int, name: str, results: Sequence[Returned]) -> dict[str, Any]:
        """The encoded observation of call ``index`` (0-based), as the compiler encodes one."""
        declared = {n: f.type for n, f in self.family.facts.items()}
        envelope = {
            "call": index + 1,
            "tool": name,
            "source": f"source-{index + 1}",
            "hash": digest([r.value() for r in results]),
            "provenance": {
                f"/{r.id}/{k}": f"{r.kind}.{k}" for r in results for k in sorted(r.fields)
            },
        }
        return {**envelope, **encode(results, self.cell.encoding, declared)}


def build_sandbox(family: FamilyFile, cell: Cell, *, seed: int = 0) -> Sandbox:
    """The sandbox of any cell, checked against its compiled variant. In Discovery the
    menu is the retriever's shortlist of the cell's catalog."""
    variant = compile_cell(family, cell, seed=seed)
    operational = sorted(operational_functions(family).values(), key=lambda f: f.name)
    neighbours = route_neighbours(operational, family.id, seed)
    read_only = cell.block == "frontier"  # the frontier is read-only (reading 4)
    request = task_request(family, seed, read_only=read_only)
    if cell.block == "discovery":
        assert cell.catalog is not None and cell.retriever is not None  # compile_cell checked
        largest = max(family.sizes.catalogs)
        pool = catalog_pool(operational, neighbours, largest, family.id, seed)
        shown = tuple(
            shortlist(
                pool[: cell.catalog],
                request,
                cell.retriever,
                family.sizes.shortlist,
                family.id,
                seed,
            )
        )
    else:
        shown = tuple(menu(operational, neighbours, cell.menu, family.id, seed))
    if schemas(shown) != variant.component("menu")["functions"]:
        raise SandboxMismatch(f"{variant.id}: the rebuilt menu is not the compiled one")
    groups = family.layouts.of(cell.workflow)
    tag = cell.workflow if cell.handoffs == 0 else f"frontier-{cell.handoffs}"
    wf = build_workflow(family, seed, groups, cell.handoffs, tag, read_only=read_only)
    functions = {**{f.name: f for f in shown}, **dict(wf.world.functions)}
    world = World(wf.world.records, functions, wf.world.request_literals)
    sandbox = Sandbox(
        family, seed, cell, variant, wf, world, shown, request, answer_key(variant.document)
    )
    _check_observations(sandbox)
    return sandbox


def _check_observations(sandbox: Sandbox) -> None:
    changes: dict[tuple[str, str], FactValue] = {}
    compiled = sandbox.variant.document["observations"]
    for i, call in enumerate(sandbox.workflow.program):
        results, changes = sandbox.call(call.function, call.arg, changes)
        if sandbox.observation(i, call.function, results) != compiled[i]:
            raise SandboxMismatch(f"{sandbox.variant.id}: observation {i + 1} differs")
