"""The compiled variants of a registered study (issue 19): an arm's cell for the compiler,
and the digest of every (arm, task) variant the registration pins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from prereg.experiments.toolbottleneck.cells import ArmCell
from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.experiments.toolbottleneck.registrable import StudyExperiment


def compiled_cell(spec: ArmCell, shortlist: int) -> Cell:
    """The compiler's cell of an arm (Discovery: the family's shortlist is the menu)."""
    if spec.catalog is not None and spec.retriever is not None:
        return Cell(
            "discovery", shortlist, spec.workflow, 0, spec.encoding, spec.catalog, spec.retriever
        )
    assert spec.menu is not None  # ArmCell checks
    # a holdout arm plays the read-only frontier, at 0 handoffs too (reading H1)
    frontier = spec.handoffs or spec.holdout_arm
    block: Literal["capacity", "frontier"] = "frontier" if frontier else "capacity"
    return Cell(block, spec.menu, spec.workflow, spec.handoffs, spec.encoding)


def variant_key(arm: str, task: str) -> str:
    return f"{arm}/{task}"


def variant_digests(
    study: StudyExperiment, cells: Mapping[str, ArmCell], tasks: list[str]
) -> dict[str, str]:
    """``<arm>/<task>`` -> the compiled variant's digest, for every arm and task of the
    split (cells shared by several arms are compiled once). A family whose cell cannot
    compile is refused (the compiler's BadInput, naming the family and field)."""
    out: dict[str, str] = {}
    compiled: dict[tuple[str, str], str] = {}
    for arm, spec in cells.items():
        for tid in tasks:
            family, seed = study.task(tid)
            cell = compiled_cell(spec, family.sizes.shortlist)
            key = (cell.code, tid)
            if key not in compiled:
                path = next(f.path for f in study.families if f.family.id == family.id)
                compiled[key] = compile_cell(family, cell, seed=seed, filename=path).digest
            out[variant_key(arm, tid)] = compiled[key]
    return out
