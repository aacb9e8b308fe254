"""Routed- versus fixed-menu lanes and the repairs' sentinel gains (seed appendix D,
"Infrastructure failures and the routed-menu lane", and appendix H, "Sentinel repeats";
issue 42, item 4).

- **Routed versus fixed** (readings L1-L3 of docs/toolbottleneck.md): every pair of arms
  with the same host, completion cap and capacity cell (menu, workflow, encoding) whose
  menu modes are ``routed`` and ``fixed``. The estimate is the routed lane's success minus
  the fixed lane's, each pair's difference over the tasks measured in both (a family's
  tasks, then families, equally), averaged over the pairs, with a 95% percentile
  family-cluster interval under the one rule (docs/statistics.md). Beside it, per
  episode: the tokens each lane used (the mean over its graded episodes, pooled over the
  pairs; a point estimate, as the seed's "4,699 more tokens") and the schema exposures
  (schemas shown summed over the episode's requests). The fixed lane shows its whole menu
  at every request, so its exposures are its menu times its requests; the routed lane's
  menu narrows after the first executed operational call, at a request the run record
  does not mark, so its exposures (and the difference) are withheld, saying why.
- **Sentinel gains**: for each registered repair, the stress gain Gamma (repaired minus
  no-repair lane at the stressed cell) over the *sentinel* conditions only: the tasks run
  at least twice in both arms (success averaged over the runs: pass@1), with the same
  family-cluster interval. Where every task is repeated (a registration's uniform
  ``design.repeats`` of 2 or more) it equals the repair table's Gamma; the seed's
  sentinels are a three-run subset on 4 families.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from prereg.reports.toolbottleneck.capsweep import (
    Estimate,
    estimate_of,
    family_matrix,
    family_resample,
)
from prereg.reports.toolbottleneck.census import CensusRow, scored
from prereg.reports.toolbottleneck.estimates import estimate_cell
from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint, StudyTable
from prereg.reports.toolbottleneck.repairs import RepairResult
from prereg.stats.bootstrap import FEW_CLUSTERS


@dataclass(frozen=True)
class LaneArm:
    """What the lanes read of an arm: its host and cap, capacity cell and menu mode."""

    host: str
    cap: int
    cell: tuple[object, ...]  # (menu, workflow, encoding)
    menu: int
    menu_mode: str


def lane_pairs(arms: Mapping[str, LaneArm]) -> list[tuple[str, str]]:
    """(routed arm, fixed arm) with the same host, cap and cell (first arm of each wins)."""
    routed: dict[tuple[object, ...], str] = {}
    fixed: dict[tuple[object, ...], str] = {}
    for arm_id, a in arms.items():
        key = (a.host, a.cap, a.cell)
        if a.menu_mode == "routed":
            routed.setdefault(key, arm_id)
        elif a.menu_mode == "fixed":
            fixed.setdefault(key, arm_id)
    return sorted((routed[k], fixed[k]) for k in routed if k in fixed)


def pairwise_estimate(
    records: Sequence[CensusRow],
    pairs: Sequence[tuple[str, str]],
    family_of: Callable[[str], str],
    *,
    draws: int,
    seed: int,
) -> tuple[Estimate | None, int]:
    """The mean over pairs of (first - second), family means, one family-cluster bootstrap
    over the tasks measured in every arm (None: no such task); and the number of families."""
    columns = sorted({a for p in pairs for a in p})
    families, matrix = family_matrix(records, columns, family_of)
    n = len(families)
    w = np.zeros(len(columns))
    for plus, minus in pairs:
        w[columns.index(plus)] += 1.0 / len(pairs)
        w[columns.index(minus)] -= 1.0 / len(pairs)
    if n == 0:
        return None, 0
    boot = family_resample(matrix, draws=draws, seed=seed)
    return estimate_of(float(matrix.mean(axis=0) @ w), boot.means @ w, boot.prob, n), n


@dataclass(frozen=True)
class Lanes:
    pairs: tuple[tuple[str, str], ...]
    episodes: int  # paired (task, repeat) episodes over the pairs
    families: int
    success: Estimate
    tokens: tuple[float | None, float | None]  # routed, fixed: mean per episode
    fixed_exposures: float | None


def routed_versus_fixed(
    records: Sequence[CensusRow],
    arms: Mapping[str, LaneArm],
    family_of: Callable[[str], str],
    tokens: Mapping[tuple[str, str, int], float | None],
    requests: Mapping[tuple[str, str, int], int],
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> Lanes | None:
    """The routed-minus-fixed comparison (None without a pair). ``tokens`` and
    ``requests``: per unit (arm, task, repeat) of a graded episode, its tokens (None: not
    measured) and its model requests."""
    pairs = lane_pairs(arms)
    if not pairs:
        return None
    success, n = pairwise_estimate(records, pairs, family_of, draws=draws, seed=seed)
    if success is None:
        return None
    units = {(r.arm, r.task_id, r.repeat) for r in records if scored(r)}
    paired = sum(
        1
        for routed, fixed in pairs
        for arm, task, rep in units
        if arm == routed and (fixed, task, rep) in units
    )

    def mean_tokens(side: int) -> float | None:
        lane = {p[side] for p in pairs}
        values = [v for (arm, _, _), v in tokens.items() if arm in lane]
        if not values or any(v is None for v in values):
            return None
        return float(np.mean([v for v in values if v is not None]))

    fixed_arms = {p[1] for p in pairs}
    shown = [arms[arm].menu * k for (arm, _, _), k in requests.items() if arm in fixed_arms]
    return Lanes(
        tuple(pairs),
        paired,
        n,
        success,
        (mean_tokens(0), mean_tokens(1)),
        float(np.mean(shown)) if shown else None,
    )


@dataclass(frozen=True)
class SentinelGain:
    repair: str
    pressure: str
    tasks: int
    families: int
    runs: int  # the fewest graded runs of a sentinel condition
    gain: Estimate | None  # None: no sentinel task


def sentinel_gains(
    records: Sequence[CensusRow],
    repairs: Sequence[tuple[str, str, str, str]],
    family_of: Callable[[str], str],
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> list[SentinelGain]:
    """Each repair's (id, pressure, repaired stressed arm, no-repair stressed arm) stress
    gain over the tasks run at least twice in both arms."""
    runs: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        if scored(r):
            runs[(r.arm, r.task_id)] += 1
    out = []
    for rid, pressure, repaired, control in repairs:
        tasks = sorted(
            {
                t
                for (a, t), k in runs.items()
                if a == repaired and k >= 2 and runs.get((control, t), 0) >= 2
            }
        )
        if not tasks:
            out.append(SentinelGain(rid, pressure, 0, 0, 0, None))
            continue
        kept = set(tasks)
        rows = [r for r in records if r.task_id in kept]
        gain, n = pairwise_estimate(rows, [(repaired, control)], family_of, draws=draws, seed=seed)
        fewest = min(min(runs[(repaired, t)], runs[(control, t)]) for t in tasks)
        out.append(SentinelGain(rid, pressure, len(tasks), n, fewest, gain))
    return out


def _pp(e: Estimate | None) -> str:
    return estimate_cell(e, missing="-; no task run twice in both arms")


def _num(x: float | None) -> str:
    return "not measured" if x is None else f"{x:,.1f}"


def lane_tables(lanes: Lanes | None, gains: Sequence[SentinelGain]) -> list[StudyTable]:
    """The routed-versus-fixed table and the sentinel gains table (each when it has rows)."""
    out = []
    if lanes is not None:
        routed, fixed = lanes.tokens
        diff = None if routed is None or fixed is None else fixed - routed
        out.append(
            StudyTable(
                title="Routed- versus fixed-menu lanes: success, tokens and schema exposures "
                "(seed appendix D)",
                columns=[
                    "lane pairs",
                    "paired episodes",
                    "routed - fixed success",
                    "tokens per episode (routed)",
                    "tokens per episode (fixed)",
                    "fixed - routed tokens",
                    "schema exposures per episode (fixed)",
                    "schema exposures (routed)",
                ],
                rows=[
                    [
                        "; ".join(f"{a} vs {b}" for a, b in lanes.pairs),
                        str(lanes.episodes),
                        _pp(lanes.success),
                        _num(routed),
                        _num(fixed),
                        _num(diff),
                        _num(lanes.fixed_exposures),
                        "withheld: the record does not mark the request at which the "
                        "routed menu narrowed",
                    ]
                ],
                note=(
                    "Pairs: the same host, completion cap and capacity cell under the routed "
                    "and the fixed menu. Success: each pair's difference of family means, "
                    "averaged over the pairs, with a 95% percentile family-cluster interval "
                    f"over {lanes.families} families"
                    + (
                        f" (below {FEW_CLUSTERS} families no interval is printed)"
                        if lanes.families < FEW_CLUSTERS
                        else ""
                    )
                    + ". Tokens: the mean per graded episode of each lane. Schema "
                    "exposures: the schemas shown summed over an episode's requests (the "
                    "fixed lane's whole menu at every request)."
                ),
            )
        )
    if gains:
        out.append(
            StudyTable(
                title="Sentinel repeats: each repair's stress gain over the conditions run "
                "at least twice (seed appendix H)",
                columns=[
                    "repair",
                    "pressure",
                    "sentinel tasks",
                    "families",
                    "runs per condition (fewest)",
                    "stress gain on the sentinels",
                ],
                rows=[
                    [g.repair, g.pressure, str(g.tasks), str(g.families), str(g.runs), _pp(g.gain)]
                    for g in gains
                ],
                note=(
                    "Gamma (the repaired lane minus the no-repair lane at the stressed cell) "
                    "over the tasks run at least twice in both arms, success averaged over "
                    "the runs (pass@1), families weighting equally; 95% percentile "
                    f"family-cluster interval, withheld below {FEW_CLUSTERS} families."
                ),
            )
        )
    return out


def repair_figure(results: Sequence[RepairResult]) -> list[StudyFigure]:
    """Figure 4a's numbers: each repair's loss L, stress gain Gamma and specificity Sigma
    with the repair table's 95% family-cluster intervals (withheld ones with their
    reason)."""
    points = [
        StudyPoint(
            label=f"{r.repair} ({r.pressure}): {name}",
            value=e.value,
            low=e.low,
            high=e.high,
            reason=None if e.low is not None else (e.reason or "no interval"),
        )
        for r in results
        for name, e in (("L", r.loss), ("Gamma", r.gain), ("Sigma", r.specific))
    ]
    return [StudyFigure(name="tb_repairs", points=points, level=0.95)] if points else []
