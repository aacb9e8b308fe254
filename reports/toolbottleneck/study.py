"""The report of a ToolBottleneckBench study run: arms, the capacity contrasts, the census.

- **Arms**: success, calls and tokens per arm (cell, menu mode, policy profile).
- **Capacity contrasts** (seed 4.2, appendix D): when the study holds the eight endpoint
  cells {V low, high} x {W low, high} x {raw, linked} of one menu mode and profile, the
  main effects of V, W and linked encoding (seed E_a), their pairwise interactions (E_ab),
  and, with the checkpoint cells, compact minus raw and typed minus raw at the baseline
  cell. Each is a paired within-task contrast of cell means (a task's mean over repeats),
  with a 95% percentile cluster bootstrap resampling families and its centred p value;
  the eight p values are Holm-corrected together (:mod:`prereg.stats.contrasts`,
  :func:`prereg.stats.multiplicity.holm`). Up to 11 families the bootstrap distribution
  is enumerated exactly (:func:`prereg.stats.enumeration.resampled_contrast`: no seed,
  MC SE 0); with more it is drawn, at least ``draws`` times and enough that the Monte
  Carlo standard error of a Holm p near .05 is below 0.002, and each p shows its MC SE.
- **Failure census** (:mod:`prereg.reports.toolbottleneck.census`), with the truncation stratum
  of each arm that differs from the baseline in one pressure.

The numbers of a simulated study describe the simulated policy, never a model; the
report says so in its first line.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.experiments.toolbottleneck.study import StudyRepair
from prereg.reports.render.markdown import table
from prereg.reports.toolbottleneck.capsweep import SweepArm, cap_sweeps, sweep_tables
from prereg.reports.toolbottleneck.census import (
    census_markdown,
    census_tables,
    truncation,
    truncation_stratum,
)
from prereg.reports.toolbottleneck.decoder import decode_pressure, decoder_markdown, packets
from prereg.reports.toolbottleneck.frontier import (
    FrontierArm,
    frontier_contrasts,
    frontier_levels,
    frontier_tables,
)
from prereg.reports.toolbottleneck.holdout import analyse_holdout, holdout_markdown
from prereg.reports.toolbottleneck.interactions import decompose, decomposition_tables
from prereg.reports.toolbottleneck.lanes import (
    LaneArm,
    lane_tables,
    routed_versus_fixed,
    sentinel_gains,
)
from prereg.reports.toolbottleneck.model import StudyTable
from prereg.reports.toolbottleneck.repairs import analyse_repairs, repairs_markdown
from prereg.runners.toolbottleneck.host import Contract
from prereg.runners.toolbottleneck.study import StudyRecord, StudyRun
from prereg.stats.contrasts import factorial_weights
from prereg.stats.enumeration import (
    draws_for_mc_se,
    holm_mc_se,
    resampled_contrast,
)
from prereg.stats.multiplicity import holm

ResamplingUnit = Literal["family", "intent"]

EFFECTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("V (largest - smallest menu)", ("V",)),
    ("W (high - low)", ("W",)),
    ("D (linked - raw)", ("D",)),
    ("V x W", ("V", "W")),
    ("V x D", ("V", "D")),
    ("W x D", ("W", "D")),
)
CHECKPOINTS = (
    ("compact - raw (baseline cell)", "compact"),
    ("typed - raw (baseline cell)", "typed"),
)


@dataclass(frozen=True)
class ContrastRow:
    name: str
    weights: dict[str, float]  # arm -> weight
    estimate: float
    low: float
    high: float
    pvalue: float
    holm: float
    units: int
    #: the p's bootstrap distribution was enumerated (no seed, MC SE 0), else drawn
    exact: bool = True
    #: the Monte Carlo standard errors of ``pvalue`` and ``holm`` (0 when exact)
    mc_se: float = 0.0
    holm_mc_se: float = 0.0
    #: multisets enumerated, or random draws
    resamples: int = 0


def cell_matrix(
    records: Sequence[StudyRecord], arms: Sequence[str], unit: ResamplingUnit = "family"
) -> tuple[list[str], list[str], np.ndarray[Any, np.dtype[np.float64]]]:
    """(tasks, their resampling units (family or intent), the tasks x arms matrix of mean
    success over repeats)."""
    sums: dict[tuple[str, str], list[int]] = defaultdict(list)
    family: dict[str, str] = {}
    for r in records:
        if r.arm in arms:
            sums[(r.task_id, r.arm)].append(int(r.success))
            family[r.task_id] = r.family if unit == "family" else r.intent
    tasks = sorted(family)
    m = np.full((len(tasks), len(arms)), np.nan)
    for i, task in enumerate(tasks):
        for j, arm in enumerate(arms):
            got = sums.get((task, arm))
            if got:
                m[i, j] = sum(got) / len(got)
    return tasks, [family[t] for t in tasks], m


def capacity_cell(cell: Mapping[str, Any]) -> bool:
    """A capacity cell: neither Discovery (a catalog) nor the handoff frontier."""
    return "R" not in cell and "handoffs" not in cell


def _same_configuration(a: StudyRecord, b: StudyRecord) -> bool:
    """Same menu mode, policy profile and completion cap: one configuration."""
    return (a.menu_mode, a.profile, a.completion_cap) == (b.menu_mode, b.profile, b.completion_cap)


def _design_arms(records: Sequence[StudyRecord], baseline: str) -> dict[tuple[Any, ...], str]:
    """Cell (V, W, D) -> arm, over the arms sharing the baseline's menu mode and profile."""
    base = next(r for r in records if r.arm == baseline)
    out: dict[tuple[Any, ...], str] = {}
    for r in records:
        if _same_configuration(r, base) and capacity_cell(r.cell):
            out.setdefault((r.cell["V"], r.cell["W"], r.cell["D"]), r.arm)
    return out


def design_levels(by_cell: Mapping[tuple[Any, ...], str]) -> dict[str, tuple[object, object]]:
    """The two levels of each factor: the smallest and largest menu of the design arms,
    low and high workflow, raw and linked encoding (seed 3.2's endpoints)."""
    menus = sorted({v for v, _, _ in by_cell})
    return {"V": (menus[0], menus[-1]), "W": ("low", "high"), "D": ("raw", "linked")}


def capacity_contrasts(
    records: Sequence[StudyRecord],
    baseline: str,
    *,
    draws: int = 10_000,
    seed: int = 0,
    unit: ResamplingUnit = "family",
) -> list[ContrastRow]:
    """The eight contrasts (fewer when checkpoint cells are missing); [] without the
    eight endpoint cells. ``unit``: what the bootstrap resamples (families, the primary
    intervals; or intents, seed 4.2's repeat), Holm over the set."""
    by_cell = _design_arms(records, baseline)
    levels = design_levels(by_cell)
    corners = [(v, w, d) for v in levels["V"] for w in levels["W"] for d in levels["D"]]
    if levels["V"][0] == levels["V"][1] or any(c not in by_cell for c in corners):
        return []
    arms = [by_cell[c] for c in corners]
    cells = [{"V": v, "W": w, "D": d} for v, w, d in corners]
    specs: list[tuple[str, list[str], tuple[float, ...]]] = [
        (name, arms, factorial_weights(cells, list(effect), levels)) for name, effect in EFFECTS
    ]
    low_v, low_w, raw = levels["V"][0], levels["W"][0], levels["D"][0]
    for name, encoding in CHECKPOINTS:
        arm = by_cell.get((low_v, low_w, encoding))
        if arm is not None:
            specs.append((name, [by_cell[(low_v, low_w, raw)], arm], (-1.0, 1.0)))
    draws = max(draws, draws_for_mc_se(0.05, len(specs)))  # used only where not enumerated
    results = []
    for name, columns, weights in specs:
        _, families, m = cell_matrix(records, columns, unit)
        results.append(
            (
                name,
                columns,
                weights,
                resampled_contrast(m, weights, units=families, draws=draws, seed=seed),
            )
        )
    ps = [r.pvalue for *_, r in results]
    adjusted = holm(ps).adjusted
    errors = holm_mc_se(ps, [r.mc_se for *_, r in results])
    return [
        ContrastRow(
            name=name,
            weights={a: w for a, w in zip(columns, weights, strict=True) if w},
            estimate=res.estimate,
            low=res.low,
            high=res.high,
            pvalue=res.pvalue,
            holm=float(adj),
            units=res.n,
            exact=res.exact,
            mc_se=res.mc_se,
            holm_mc_se=err,
            resamples=res.resamples,
        )
        for (name, columns, weights, res), adj, err in zip(results, adjusted, errors, strict=True)
    ]


@dataclass(frozen=True)
class CapRow:
    cap: int
    small: str  # arm at the smallest menu
    large: str  # arm at the largest menu
    effect: float | None  # paired menu contrast (large - small)
    truncated: float | None  # share of the large-menu episodes cut at the cap


def cap_sweep(records: Sequence[StudyRecord], baseline: str) -> list[CapRow]:
    """The menu contrast at each completion cap (seed appendix E.1), at the baseline's
    workflow and encoding, mode and profile; [] unless two caps have both menu ends."""
    base = next(r for r in records if r.arm == baseline)
    arms: dict[tuple[int, int], str] = {}
    for r in records:
        same = (r.menu_mode, r.profile) == (base.menu_mode, base.profile)
        if (
            same
            and capacity_cell(r.cell)
            and (r.cell["W"], r.cell["D"])
            == (
                base.cell["W"],
                base.cell["D"],
            )
        ):
            arms.setdefault((r.completion_cap, r.cell["V"]), r.arm)
    menus = sorted({v for _, v in arms})
    rows = []
    for cap in sorted({c for c, _ in arms}):
        small, large = arms.get((cap, menus[0])), arms.get((cap, menus[-1]))
        if small is None or large is None or small == large:
            continue
        stratum = truncation_stratum(records, small, large)
        cut = truncation([r for r in records if r.arm == large])
        rows.append(CapRow(cap, small, large, stratum.effect, cut.rate))
    return rows if len(rows) >= 2 else []


def _cap_section(records: Sequence[StudyRecord], baseline: str) -> list[str]:
    rows = cap_sweep(records, baseline)
    if not rows:
        return []
    body = [
        [
            r.cap,
            f"{r.large} - {r.small}",
            "-" if r.effect is None else f"{100 * r.effect:+.1f} pp",
            "-" if r.truncated is None else f"{100 * r.truncated:.1f}%",
        ]
        for r in rows
    ]
    first, last = rows[0].effect, rows[-1].effect
    note = []
    if first is not None and last is not None:
        note = [f"Interaction (largest cap minus smallest): {100 * (last - first):+.1f} pp.", ""]
    return [
        "## Completion-cap sweep: the menu contrast at each cap (paired on task and repeat)",
        "",
        *table(["cap", "contrast", "menu effect", "large-menu truncation"], body),
        "",
        *note,
    ]


def full_sweep_markdown(records: Sequence[StudyRecord], *, draws: int = 10_000) -> list[str]:
    """The completion-cap sweep in full and any crossover
    (:mod:`prereg.reports.toolbottleneck.capsweep`; seed appendix E.1, Tables 7 and 9)
    over the study's capacity arms, a configuration being a policy profile and menu mode."""
    arms: dict[str, SweepArm] = {}
    family: dict[str, str] = {}
    for r in records:
        family[r.task_id] = r.family
        if capacity_cell(r.cell) and r.arm not in arms:
            arms[r.arm] = SweepArm(
                f"{r.profile} / {r.menu_mode}",
                r.completion_cap,
                int(r.cell["V"]),
                str(r.cell["W"]),
                str(r.cell["D"]),
            )
    lines: list[str] = []
    for t in sweep_tables(cap_sweeps(records, arms, family.__getitem__, draws=draws)):
        lines += [f"## {t.title}", "", *table(t.columns, t.rows), ""]
        if t.note:
            lines += [t.note, ""]
    return lines


def more_analyses_markdown(
    records: Sequence[StudyRecord],
    *,
    draws: int = 10_000,
    repairs: Sequence[StudyRepair] = (),
) -> list[str]:
    """The interaction decomposition, routed versus fixed lanes with each repair's
    sentinel gain, the frontier and Table 8 (:mod:`.interactions`, :mod:`.lanes`,
    :mod:`.frontier`, :func:`first_response_table`) over a study run's records, a
    configuration being a policy profile, menu mode and cap."""
    capacity: dict[str, SweepArm] = {}
    lanes: dict[str, LaneArm] = {}
    frontier: dict[str, FrontierArm] = {}
    family: dict[str, str] = {}
    for r in records:
        family[r.task_id] = r.family
        c = r.cell
        if "R" in c or r.arm in frontier:
            continue
        config = f"{r.profile} / {r.menu_mode} / cap {r.completion_cap}"
        menu, w, d = int(c["V"]), str(c["W"]), str(c["D"])
        frontier[r.arm] = FrontierArm(config, menu, w, d, int(c.get("handoffs", 0)))
        if capacity_cell(c):
            capacity[r.arm] = SweepArm(config, r.completion_cap, menu, w, d)
            lanes[r.arm] = LaneArm(r.profile, r.completion_cap, (menu, w, d), menu, r.menu_mode)
    of = family.__getitem__
    tokens: dict[tuple[str, str, int], float | None] = {
        (r.arm, r.task_id, r.repeat): float(r.tokens_input + r.tokens_output) for r in records
    }
    requests = {(r.arm, r.task_id, r.repeat): r.turns for r in records}
    tables = decomposition_tables(decompose(records, capacity, of, draws=draws))
    gains = sentinel_gains(
        records,
        [(x.id, x.pressure, x.repaired.stressed, x.control.stressed) for x in repairs],
        of,
        draws=draws,
    )
    tables += lane_tables(
        routed_versus_fixed(records, lanes, of, tokens, requests, draws=draws), gains
    )
    tables += frontier_tables(
        frontier_levels(records, frontier, of, tokens),
        frontier_contrasts(records, frontier, of, draws=draws),
    )
    tables += first_response_table(records)
    lines: list[str] = []
    for t in tables:
        lines += [f"## {t.title}", "", *table(t.columns, t.rows), ""]
        if t.note:
            lines += [t.note, ""]
    return lines


def first_response_table(records: Sequence[StudyRecord]) -> list[StudyTable]:
    """Table 8 of a study run (seed appendix E; readings T1-T3 and T4): per configuration
    (policy profile, menu mode, cap), its capacity arms at its largest menu; first
    requests are the episodes that made one (the simulated policy always does, outside
    Discovery), and the first response was cut at the completion cap when the episode
    ended with the flag ``completion_cap`` after one request (a cut response ends the
    episode). What fills a cut response is withheld: a study run's records keep no
    response text or reasoning telemetry."""
    largest: dict[str, int] = {}
    for r in records:
        if capacity_cell(r.cell) and "handoffs" not in r.cell:
            config = f"{r.profile} / {r.menu_mode} / cap {r.completion_cap}"
            largest[config] = max(largest.get(config, 0), int(r.cell["V"]))
    if not largest:
        return []
    counts: dict[str, list[int]] = {c: [0, 0] for c in largest}
    for r in records:
        config = f"{r.profile} / {r.menu_mode} / cap {r.completion_cap}"
        if not capacity_cell(r.cell) or "handoffs" in r.cell or r.turns < 1:
            continue
        if int(r.cell["V"]) != largest[config]:
            continue
        counts[config][0] += 1
        counts[config][1] += int(r.terminal_flag == "completion_cap" and r.turns == 1)
    withheld = "withheld: the records keep no response text or reasoning telemetry"
    rows = [
        [
            config,
            str(largest[config]),
            str(first),
            str(cut),
            "-" if not first else f"{100 * cut / first:.1f}%",
            withheld if cut else "-",
        ]
        for config, (first, cut) in sorted(counts.items())
    ]
    return [
        StudyTable(
            title="Truncated first responses at the largest menu (seed Table 8)",
            columns=[
                "configuration",
                "largest menu",
                "first requests",
                "truncated",
                "share",
                "what fills them",
            ],
            rows=rows,
            note=(
                "First requests: the episodes of the configuration's capacity arms at its "
                "largest menu that made a request; truncated: the first response ended at "
                "the completion cap (the episode stopped there, flag completion_cap, one "
                "request). The seed's split (reasoning only, partial call, partial text, "
                "both) needs the responses, which a study run does not keep."
            ),
        )
    ]


def _pressures_apart(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    return sum(a[k] != b[k] for k in ("V", "W", "D"))


def arm_rows(records: Sequence[StudyRecord]) -> list[list[Any]]:
    groups: dict[str, list[StudyRecord]] = defaultdict(list)
    for r in records:
        groups[r.arm].append(r)
    rows = []
    for arm, rs in groups.items():
        c = rs[0].cell
        n = len(rs)
        menu = f"R={c['R']} {c['retriever']} shortlist" if "R" in c else f"V={c['V']}"
        if "handoffs" in c:
            menu += f" H={c['handoffs']}"
        rows.append(
            [
                arm,
                f"{menu} W={c['W']} D={c['D']}",
                rs[0].menu_mode,
                rs[0].profile,
                rs[0].completion_cap,
                n,
                f"{100 * sum(r.success for r in rs) / n:.1f}%",
                f"{sum(r.calls for r in rs) / n:.2f}",
                f"{sum(r.tokens_input + r.tokens_output for r in rs) / n:.0f}",
            ]
        )
    return rows


def _pp(x: float) -> str:
    return f"{100 * x:+.1f} pp"


def _contrast_section(
    records: Sequence[StudyRecord], baseline: str, draws: int, unit: ResamplingUnit
) -> list[str]:
    contrasts = capacity_contrasts(records, baseline, draws=draws, unit=unit)
    if not contrasts:
        return []
    every_exact = all(c.exact for c in contrasts)
    rows = [
        [
            c.name,
            _pp(c.estimate),
            f"[{_pp(c.low)}, {_pp(c.high)}]",
            f"{c.pvalue:.4f}",
            f"{c.holm:.4f}",
            "0 (exact)" if c.exact else f"{c.mc_se:.4f}",
            "0 (exact)" if every_exact else f"{c.holm_mc_se:.4f}",
            c.units,
        ]
        for c in contrasts
    ]
    header = [
        "contrast",
        "estimate",
        "95% interval",
        "p",
        "Holm p",
        "MC SE",
        "Holm MC SE",
        f"{unit} clusters",
    ]
    drawn = sorted({c.resamples for c in contrasts if not c.exact})
    how = (
        "Up to 11 clusters the bootstrap distribution is enumerated exactly (every multiset "
        "of the clusters with its multinomial probability): p and interval do not depend "
        "on a seed and MC SE is 0."
    )
    if drawn:
        how += (
            f" Drawn here: {', '.join(f'{d:,}' for d in drawn)} resamples; MC SE = "
            "sqrt(p (1 - p) / draws), below 0.002 for a Holm p near .05."
        )
    return [
        f"## Capacity contrasts, resampling {unit} clusters (paired within task, Holm)",
        "",
        *table(header, rows),
        "",
        how,
        "",
    ]


def study_markdown(
    records: Sequence[StudyRecord],
    baseline: str,
    *,
    digest: str,
    draws: int = 10_000,
    repairs: Sequence[StudyRepair] = (),
    contract: Contract | None = None,
) -> str:
    """The whole report as Markdown (every cell escaped); ``contract``: the study's
    harness, which labels the census's turn-limit column when it cannot fire (F3)."""
    lines = [
        f"# Study {records[0].study if records else ''}",
        "",
        "Simulated policy (prereg.runners.toolbottleneck.host): these numbers describe a "
        "documented mechanism with seeded error rates, not a model.",
        "",
        f"Study digest: `{digest}`; {len(records)} episodes.",
        "",
        "## Arms",
        "",
        *table(
            ["arm", "cell", "menu", "policy", "cap", "episodes", "success", "calls", "tokens"],
            arm_rows(records),
        ),
        "",
    ]
    units: tuple[ResamplingUnit, ...] = ("family", "intent")
    for unit in units:
        lines += _contrast_section(records, baseline, draws, unit)
    lines += _cap_section(records, baseline)
    lines += full_sweep_markdown(records, draws=draws)
    lines += more_analyses_markdown(records, draws=draws, repairs=repairs)
    lines += repairs_markdown(*analyse_repairs(records, repairs, draws=draws))
    lines += decoder_markdown(decode_pressure(packets(records, baseline), draws=draws))
    lines += holdout_section(records, draws=draws)
    lines += [
        "## Failure census",
        "",
        census_markdown(census_tables(records, stress_pairs(records, baseline), contract=contract)),
    ]
    return "\n".join(lines)


def holdout_section(records: Sequence[StudyRecord], *, draws: int = 10_000) -> list[str]:
    """The structural holdout (Table 10 and L, Gamma, Sigma, Delta of the controller) when
    the study has holdout arms (records with ``orchestration``), through the same
    functions as a registered study's report (:mod:`.holdout`); nothing without them.
    Figure 10's numbers are Table 10's rows: a study run writes no figures."""
    if not any(r.orchestration is not None for r in records):
        return []
    return ["## Structural holdout", "", *holdout_markdown(analyse_holdout(records, draws=draws))]


def stress_pairs(records: Sequence[StudyRecord], baseline: str) -> list[tuple[str, str]]:
    """(arm at the baseline cell, arm one pressure away) within each configuration (menu
    mode, profile, cap): the pairs of the census's truncation-stratum table."""
    base_cell = next((r.cell for r in records if r.arm == baseline), None)
    if base_cell is None:
        return []
    at_base: dict[tuple[str, str, int], str] = {}
    for r in records:
        if r.cell == base_cell:
            at_base.setdefault((r.menu_mode, r.profile, r.completion_cap), r.arm)
    pairs: list[tuple[str, str]] = []
    for r in records:
        partner = at_base.get((r.menu_mode, r.profile, r.completion_cap))
        if (
            partner is not None
            and capacity_cell(r.cell)
            and _pressures_apart(r.cell, base_cell) == 1
            and (partner, r.arm) not in pairs
        ):
            pairs.append((partner, r.arm))
    return pairs


def check_out(out: Path) -> None:
    """BadInput (exit 2) when ``out`` exists and is not a folder: call it before running."""
    if out.exists() and not out.is_dir():
        raise BadInput("exists and is not a folder", file=str(out), field="--out")


def write_study(
    out: Path,
    run: StudyRun,
    baseline: str,
    *,
    draws: int = 10_000,
    repairs: Sequence[StudyRepair] = (),
    contract: Contract | None = None,
) -> list[Path]:
    """``out/records.jsonl`` (one record a line) and ``out/report.md``; returns the paths.

    Refused (BadInput, exit 2) when ``out`` exists and is not a folder."""
    check_out(out)
    records = out / "records.jsonl"
    report = out / "report.md"
    lines = "".join(
        json.dumps(r.model_dump(mode="json"), sort_keys=True) + "\n" for r in run.records
    )
    write_atomic(records, lines.encode(), what="the study records")
    text = study_markdown(
        list(run.records),
        baseline,
        digest=run.digest,
        draws=draws,
        repairs=repairs,
        contract=contract,
    )
    write_atomic(report, (text + "\n").encode(), what="the study report")
    return [records, report]
