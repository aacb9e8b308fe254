"""Figure 5 of the seed (appendix A, "Example task family"): one task family compiled
under the V, W and D pressures, from the compiler's own outputs.

The seed's Figure 5 illustrates a family, not a measurement: it has no estimate and no
interval. prereg draws it from the registration's frozen experiment, never from written
text: the family of the split's first task (in corpus order, under that task's seed) is
compiled by :func:`prereg.experiments.toolbottleneck.compile.compile_cell` at

- **V**: the smallest and the largest capacity menu the registration's arms show (the
  family's own smallest and largest ``sizes.menus`` when the arms show fewer than two),
  at the low workflow and raw encoding: the menu's tool names, in menu order, with the
  reference program's tools (the gold tools) marked;
- **W**: the low and the high workflow at the smallest menu, raw: the certified minimum
  and the reference program's call chain;
- **D**: every encoding of the family (``sizes.encodings``: raw, compact, typed, linked)
  at the smallest menu and the low workflow: the same returned record, the observation
  of the reference program's first read, as each encoding renders it (its encoding
  blocks, the envelope left out: :data:`prereg.runners.toolbottleneck.host.ENVELOPE`).

Every panel carries its variant's id and digest, the same the registration pinned for
the arms that play that cell (reading F5 in docs/toolbottleneck.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import rfc8785

from prereg.experiments import Experiment
from prereg.experiments.toolbottleneck.compile import Cell, Variant, compile_cell
from prereg.experiments.toolbottleneck.family import EncodingName, FamilyFile, WorkflowLevel
from prereg.registry.schema import Registration
from prereg.reports.toolbottleneck.model import ExamplePanel, FamilyExample, StudyTable
from prereg.runners.toolbottleneck.host import ENVELOPE

TITLE = "Example task family compiled under V, W and D (seed Figure 5)"
#: the workflow levels Figure 5 shows (the seed's W endpoints)
W_LEVELS: tuple[WorkflowLevel, WorkflowLevel] = ("low", "high")


def registered_menus(registration: Registration) -> list[int]:
    """The capacity menus the registration's arms show (no Discovery catalog, no
    frontier handoffs, no holdout arm), smallest first."""
    return sorted(
        {
            a.toolbottleneck.menu
            for a in registration.arms
            if a.toolbottleneck is not None
            and a.toolbottleneck.menu is not None
            and a.toolbottleneck.catalog is None
            and not a.toolbottleneck.handoffs
            and not a.toolbottleneck.holdout_arm
        }
    )


def example_cells(family: FamilyFile, menus: Sequence[int]) -> list[tuple[str, str, Cell]]:
    """(pressure, level, cell) of each panel: V at the two menu ends, W at low and high,
    D at every encoding of the family; the base cell is the smallest menu, low, raw."""
    ends = (
        [menus[0], menus[-1]]
        if len(menus) >= 2
        else [family.sizes.menus[0], family.sizes.menus[-1]]
    )
    small, raw = ends[0], family.sizes.encodings[0]
    encodings: list[EncodingName] = list(family.sizes.encodings)
    return [
        *[("V", str(m), Cell("capacity", m, "low", 0, raw)) for m in ends],
        *[("W", w, Cell("capacity", small, w, 0, raw)) for w in W_LEVELS],
        *[("D", e, Cell("capacity", small, "low", 0, e)) for e in encodings],
    ]


def _call(call: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={v}" for k, v in sorted(call["args"].items()))
    return f"{call['function']}({args})"


def first_read(variant: Variant) -> int:
    """The index (0-based) of the reference program's first read: its function's schema
    is a read (the compiler's menu says "Read ...")."""
    described = {f["name"]: str(f["description"]) for f in variant.component("menu")["functions"]}
    program = variant.component("workflow")["program"]
    return next(
        (i for i, c in enumerate(program) if described.get(c["function"], "").startswith("Read ")),
        0,
    )


def panel(pressure: str, level: str, variant: Variant, record_index: int) -> ExamplePanel:
    """What the compiled variant shows at one level of one pressure."""
    workflow = variant.component("workflow")
    observation = variant.document["observations"][record_index]
    blocks = {k: v for k, v in observation.items() if k not in ENVELOPE}
    return ExamplePanel(
        pressure=pressure,
        level=level,
        variant=variant.id,
        digest=variant.digest,
        menu=[str(f["name"]) for f in variant.component("menu")["functions"]],
        gold=sorted({str(c["function"]) for c in workflow["program"]}),
        certified_minimum=int(workflow["certified_minimum"]),
        program=[_call(c) for c in workflow["program"]],
        record=rfc8785.dumps(blocks).decode(),
    )


def family_example(registration: Registration, experiment: Experiment | None) -> FamilyExample:
    """Figure 5's data: the split's first family compiled at each panel's cell (withheld,
    with the reason, without the frozen experiment or a task)."""
    study = None if experiment is None else experiment.toolbottleneck
    tasks = [] if experiment is None else experiment.tasks_in_split(registration.split)
    if study is None or not tasks:
        why = "the study's frozen experiment was not given" if study is None else "no task"
        return FamilyExample(family="", seed=0, decision="", record_call=0, panels=[], withheld=why)
    menus = registered_menus(registration)
    if not menus:
        return FamilyExample(
            family="",
            seed=0,
            decision="",
            record_call=0,
            panels=[],
            withheld="no capacity arm: Figure 5 shows the family's capacity cells",
        )
    family, seed = study.task(tasks[0].id)
    cells = example_cells(family, menus)
    variants: dict[str, Variant] = {}
    for _, _, cell in cells:  # the base cell is in V, W and D: compiled once
        if cell.code not in variants:
            variants[cell.code] = compile_cell(family, cell, seed=seed)
    base = variants[cells[0][2].code]
    index = first_read(base)
    return FamilyExample(
        family=family.id,
        seed=seed,
        decision=family.decision,
        record_call=index + 1,
        panels=[panel(p, level, variants[cell.code], index) for p, level, cell in cells],
    )


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def example_table(example: FamilyExample) -> list[StudyTable]:
    """Figure 5's numbers as a table (every renderer prints it; the figure draws it):
    per panel, what the pressure changes, shortened to a line, and the variant's digest."""
    if example.withheld is not None:
        return []
    rows = []
    for p in example.panels:
        if p.pressure == "V":
            places = ", ".join(str(p.menu.index(g) + 1) for g in p.gold)
            what = f"{len(p.menu)} tools shown; the {len(p.gold)} gold tools at {places}"
        elif p.pressure == "W":
            chain = " > ".join(c.split("(", 1)[0] for c in p.program)
            what = _short(f"certified minimum {p.certified_minimum}: {chain}", 240)
        else:
            what = _short(p.record, 100)
        rows.append([p.pressure, p.level, what, p.digest.removeprefix("sha256:")[:12]])
    note = (
        f"Family {example.family} (seed {example.seed}; decision {example.decision}), the "
        "split's first, compiled by prereg's variant compiler at each cell: V (menu sizes, "
        "low workflow, raw), W (workflow levels, smallest menu, raw), D (encodings, "
        f"smallest menu, low workflow; the record returned by call {example.record_call}, "
        "the reference program's first read, without its envelope). An illustration of "
        "the compiled variants, not an estimate."
    )
    return [
        StudyTable(
            title=TITLE,
            columns=["pressure", "level", "what the compiled variant shows", "variant digest"],
            rows=rows,
            note=note,
        )
    ]
