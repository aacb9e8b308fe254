"""The workflow frontier (seed 5.1 and appendix E, "Frontier"; Figures 3b and 9; issue 42,
item 4).

A frontier arm puts ``handoffs`` public handoffs in front of the low workflow (reading 5);
its level 0 is the capacity arm of the same configuration, menu and encoding at the low
workflow. Readings F1-F3 of docs/toolbottleneck.md:

- **Levels are the registered handoffs.** The seed indexes the frontier by certified
  calls (2, 6, 14, 30). A run record does not carry its variant's certified minimum (the
  compiler's, which another reading sets: 2 + 2h for a read-only family), so the tables
  and the figure name each level by its handoffs h, read from the arms' cells, never by
  a minimum written here.
- **Per level**: graded episodes, success (families weighting equally), mean and median
  executed calls with the interquartile range, episodes ended at the episode budget and
  the median tokens per episode (seed: "the median episode executes 20 calls ... and
  uses 132,392 tokens").
- **Contrasts**: for every h > 0, success at h minus success at level 0, each
  (configuration, menu, encoding) group's difference of family means over the tasks
  measured in both, averaged over the groups holding both levels, with a 95% percentile
  family-cluster interval under the one rule (docs/statistics.md; the seed's four
  families give intervals it prints, prereg withholds them below 10 families).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from prereg.reports.toolbottleneck.capsweep import Estimate, family_matrix
from prereg.reports.toolbottleneck.census import CensusRow, scored
from prereg.reports.toolbottleneck.estimates import estimate_cell
from prereg.reports.toolbottleneck.lanes import pairwise_estimate
from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint, StudyTable
from prereg.stats.bootstrap import FEW_CLUSTERS


@dataclass(frozen=True)
class FrontierArm:
    configuration: str
    menu: int
    workflow: str
    encoding: str
    handoffs: int


Group = tuple[str, int, str]  # configuration, menu, encoding


def frontier_groups(arms: Mapping[str, FrontierArm]) -> dict[Group, dict[int, str]]:
    """(configuration, menu, encoding) -> handoffs -> arm, over the low workflow; only the
    groups holding level 0 and a level above it."""
    groups: dict[Group, dict[int, str]] = defaultdict(dict)
    for arm_id, a in arms.items():
        if a.workflow == "low":
            groups[(a.configuration, a.menu, a.encoding)].setdefault(a.handoffs, arm_id)
    return {
        g: dict(sorted(levels.items()))
        for g, levels in sorted(groups.items())
        if 0 in levels and any(h > 0 for h in levels)
    }


@dataclass(frozen=True)
class Level:
    group: Group
    handoffs: int
    arm: str
    episodes: int
    success: float | None
    mean_calls: float | None
    calls_quartiles: tuple[float, float, float] | None
    over_budget: int
    median_tokens: float | None


@dataclass(frozen=True)
class FrontierContrast:
    handoffs: int
    groups: int
    families: int
    estimate: Estimate | None


def frontier_levels(
    records: Sequence[CensusRow],
    arms: Mapping[str, FrontierArm],
    family_of: Callable[[str], str],
    tokens: Mapping[tuple[str, str, int], float | None],
) -> list[Level]:
    out = []
    for group, levels in frontier_groups(arms).items():
        for h, arm in levels.items():
            rows = [r for r in records if r.arm == arm and scored(r)]
            _, m = family_matrix(rows, [arm], family_of)
            calls = np.array([r.calls for r in rows], dtype=float)
            spent = [tokens.get((r.arm, r.task_id, r.repeat)) for r in rows]
            measured = [t for t in spent if t is not None]
            out.append(
                Level(
                    group,
                    h,
                    arm,
                    len(rows),
                    float(m.mean()) if m.size else None,
                    float(calls.mean()) if rows else None,
                    tuple(float(q) for q in np.percentile(calls, [25, 50, 75]))  # type: ignore[arg-type]
                    if rows
                    else None,
                    sum(r.terminal_flag == "episode_budget" for r in rows),
                    float(np.median(measured))
                    if measured and len(measured) == len(spent)
                    else None,
                )
            )
    return out


def frontier_contrasts(
    records: Sequence[CensusRow],
    arms: Mapping[str, FrontierArm],
    family_of: Callable[[str], str],
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> list[FrontierContrast]:
    groups = frontier_groups(arms)
    out = []
    for h in sorted({h for levels in groups.values() for h in levels if h > 0}):
        pairs = [(levels[h], levels[0]) for levels in groups.values() if h in levels]
        estimate, n = pairwise_estimate(records, pairs, family_of, draws=draws, seed=seed)
        out.append(FrontierContrast(h, len(pairs), n, estimate))
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pp(e: Estimate | None) -> str:
    return estimate_cell(e, missing="-; no task measured at both levels")


def frontier_tables(
    levels: Sequence[Level], contrasts: Sequence[FrontierContrast]
) -> list[StudyTable]:
    if not levels:
        return []
    rows = []
    for lv in levels:
        q = lv.calls_quartiles
        rows.append(
            [
                lv.group[0],
                f"V={lv.group[1]} D={lv.group[2]}",
                str(lv.handoffs),
                lv.arm,
                str(lv.episodes),
                _pct(lv.success),
                "-" if lv.mean_calls is None else f"{lv.mean_calls:.1f}",
                "-" if q is None else f"{q[1]:.0f} ({q[0]:.0f} to {q[2]:.0f})",
                str(lv.over_budget),
                "not measured" if lv.median_tokens is None else f"{lv.median_tokens:,.0f}",
            ]
        )
    tables = [
        StudyTable(
            title="Workflow frontier: success and calls by public handoffs (seed Figure 3b, "
            "appendix E)",
            columns=[
                "configuration",
                "cell",
                "handoffs",
                "arm",
                "episodes",
                "success",
                "mean calls",
                "median calls (IQR)",
                "ended at the episode budget",
                "median tokens",
            ],
            rows=rows,
            note=(
                "Levels are the registered handoffs in front of the low workflow (level 0: the "
                "low-workflow capacity arm of the same configuration, menu and encoding); each "
                "handoff adds a search and a read to the certified minimum, which the run "
                "record does not carry, so no level is named by its certified calls here. "
                "Success weights families equally."
            ),
        )
    ]
    if contrasts:
        families = max(c.families for c in contrasts)
        tables.append(
            StudyTable(
                title="Frontier contrasts: success at h handoffs minus level 0 (family clusters)",
                columns=["contrast", "groups", "families", "estimate"],
                rows=[
                    [f"{c.handoffs} handoffs - 0", str(c.groups), str(c.families), _pp(c.estimate)]
                    for c in contrasts
                ],
                note=(
                    "Each (configuration, menu, encoding) group's difference of family means "
                    "over the tasks measured at both levels, averaged over the groups; 95% "
                    f"percentile family-cluster interval over {families} families"
                    + (
                        f" (withheld below {FEW_CLUSTERS} families)."
                        if families < FEW_CLUSTERS
                        else "."
                    )
                ),
            )
        )
    return tables


def frontier_figure(levels: Sequence[Level]) -> list[StudyFigure]:
    """Figure 3b's numbers: each group's success at each level (x: handoffs)."""
    points = [
        StudyPoint(
            label=f"{lv.group[0]} V={lv.group[1]} D={lv.group[2]}",
            value=lv.success,
            x=float(lv.handoffs),
        )
        for lv in levels
        if lv.success is not None
    ]
    return [StudyFigure(name="tb_frontier", points=points)] if points else []


def frontier_episodes_figure(
    records: Sequence[CensusRow],
    arms: Mapping[str, FrontierArm],
    tokens: Mapping[tuple[str, str, int], float | None],
) -> list[StudyFigure]:
    """Figure 9's numbers: every graded frontier episode's executed calls (x) and tokens,
    labelled by its level and whether it ended at the episode budget; none when a token
    count was not measured (never read as zero)."""
    level = {arm: h for levels in frontier_groups(arms).values() for h, arm in levels.items()}
    points = []
    for r in records:
        if r.arm not in level or not scored(r):
            continue
        spent = tokens.get((r.arm, r.task_id, r.repeat))
        if spent is None:
            return []
        ended = " (episode budget)" if r.terminal_flag == "episode_budget" else ""
        points.append(
            StudyPoint(label=f"{level[r.arm]} handoffs{ended}", value=spent, x=float(r.calls))
        )
    return [StudyFigure(name="tb_frontier_episodes", points=points)] if points else []
