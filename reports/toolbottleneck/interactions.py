"""The interaction decomposition (seed appendix D, "Interaction"; issue 42, item 4).

The seed decomposes the V x W interaction over its 1,512 units (36 families x 21
configurations x the two encodings): "If the two pressures acted independently, the
expected V x W interaction would be 0.1 pp. Of the observed coefficient, 68.9% comes from
31 of 1,512 units in which every stressed cell fails. Dropping the units whose sign is
forced by the single-stress cells gives 2.0 pp [-0.3, 4.1]. Joint stress succeeds while a
single stress fails in 200 units (13.2%)." prereg reads it as follows (readings I1-I4 of
docs/toolbottleneck.md), for each of the three pairwise interactions of the endpoint
factorial (V x W is the seed's; V x D and W x D are computed the same way):

- **A unit** is a family, a configuration and a level of the third factor, holding the
  four cells of the pair: base m00, the two single-stress cells m10 (first pressure) and
  m01 (second), and the joint cell m11; each m is the family's mean over its tasks of a
  task's mean over its repeats (tasks measured in every arm the table reads). Its
  interaction is I = m11 - m10 - m01 + m00, so the seed's E_ab (half the signed sum over
  the eight cells) is the mean of I over units.
- **The independence expectation** is the interaction the pooled cell means would give if
  each pressure kept its own share of the successes whatever the other did (a
  multiplicative model): p11 = p10 p01 / p00, so E = (p00 - p10)(p00 - p01) / p00, with p
  the mean over units of each cell (the seed's 0.1 pp from its 15.6 pp menu loss and small
  workflow loss); undefined when p00 = 0.
- **Units in which every stressed cell fails**: m10 = m01 = m11 = 0; their share of the
  observed coefficient is the sum of their I over the sum of every unit's I (undefined at
  a zero sum).
- **Forced-sign units**: given the base and single-stress cells, I lies in [c, c + 1]
  with c = m00 - m10 - m01 (m11 in [0, 1]); its sign is forced when that whole range is
  on one side of zero (c > 0 or c + 1 < 0: with one binary run per cell, every single
  stress failing after a base success, or both succeeding after a base failure). The
  interaction without them is the mean of I over the other units.
- **Joint succeeds while a single stress fails**: m11 > 0 and min(m10, m01) < m11 (with
  binary cells: the joint cell succeeds and one single-stress cell fails), counted with
  its share of units.

The observed interaction and the one without forced-sign units carry 95% percentile
family-cluster intervals (a family is drawn with all its units; the mean over the drawn
units is a ratio, computed resample by resample), under the one rule of
docs/statistics.md: below 10 families, without spread, or missing its estimate, withheld
with the reason. I and its means lie in [-2, 2]: printed in points without the ``pp``
unit, as the repairs' Sigma.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from prereg.reports.toolbottleneck.capsweep import Estimate, SweepArm, family_resample
from prereg.reports.toolbottleneck.census import CensusRow, scored
from prereg.reports.toolbottleneck.estimates import estimate_cell
from prereg.reports.toolbottleneck.model import StudyTable
from prereg.reports.toolbottleneck.repairs import quantile
from prereg.stats.bootstrap import FEW_CLUSTERS

Matrix = NDArray[np.float64]
LEVEL = 0.95
#: the pairs, in the seed's order: (name, first pressure, second pressure)
PAIRS = (("V x W", "V", "W"), ("V x D", "V", "D"), ("W x D", "W", "D"))


@dataclass(frozen=True)
class Unit:
    family: str
    configuration: str
    level: str  # the third factor's level
    m00: float
    m10: float
    m01: float
    m11: float

    @property
    def interaction(self) -> float:
        return self.m11 - self.m10 - self.m01 + self.m00

    @property
    def all_stressed_fail(self) -> bool:
        return self.m10 == 0 and self.m01 == 0 and self.m11 == 0

    @property
    def forced(self) -> bool:
        c = self.m00 - self.m10 - self.m01
        return c > 1e-12 or c + 1.0 < -1e-12

    @property
    def joint_rescues(self) -> bool:
        return self.m11 > 0 and min(self.m10, self.m01) < self.m11


@dataclass(frozen=True)
class Decomposition:
    name: str
    units: int
    families: int
    observed: Estimate
    independence: float | None
    all_fail: int
    all_fail_share: float | None
    forced: int
    without_forced: Estimate | None  # None: every unit is forced
    rescued: int
    exact: bool


def _levels(arms: Mapping[str, SweepArm]) -> dict[str, dict[tuple[str, str, str], str]]:
    """configuration -> (V, W, D) as ('low'/'high' per factor) -> arm, over the endpoint
    cells (the configuration's smallest and largest menu, low and high W, raw and linked)."""
    by: dict[str, list[tuple[str, SweepArm]]] = defaultdict(list)
    for arm_id, a in arms.items():
        by[a.configuration].append((arm_id, a))
    out: dict[str, dict[tuple[str, str, str], str]] = {}
    for config, members in by.items():
        menus = sorted({a.menu for _, a in members})
        if len(menus) < 2:
            continue
        v = {menus[0]: "low", menus[-1]: "high"}
        w = {"low": "low", "high": "high"}
        d = {"raw": "low", "linked": "high"}
        cells: dict[tuple[str, str, str], str] = {}
        for arm_id, a in members:
            if a.menu in v and a.workflow in w and a.encoding in d:
                cells.setdefault((v[a.menu], w[a.workflow], d[a.encoding]), arm_id)
        out[config] = cells
    return out


def _family_means(
    records: Sequence[CensusRow], arms: Sequence[str], family_of: Callable[[str], str]
) -> dict[tuple[str, str], float]:
    """(family, arm) -> the family's mean over its tasks measured in every arm."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    wanted = set(arms)
    for r in records:
        if r.arm in wanted and scored(r):
            runs[(r.task_id, r.arm)].append(float(bool(r.success)))
    tasks = [t for t in sorted({t for t, _ in runs}) if all((t, a) in runs for a in arms)]
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for t in tasks:
        for a in arms:
            out[(family_of(t), a)].append(float(np.mean(runs[(t, a)])))
    return {k: float(np.mean(v)) for k, v in out.items()}


def units_of(
    records: Sequence[CensusRow],
    arms: Mapping[str, SweepArm],
    family_of: Callable[[str], str],
    pair: tuple[str, str],
) -> list[Unit]:
    """The units of one pairwise interaction (see the module docstring)."""
    axis = {"V": 0, "W": 1, "D": 2}
    a, b = axis[pair[0]], axis[pair[1]]
    third = ({0, 1, 2} - {a, b}).pop()
    plans = _levels(arms)
    quads: list[tuple[str, str, tuple[str, str, str, str]]] = []
    for config in sorted(plans):
        cells = plans[config]
        for level in ("low", "high"):

            def cell(x: str, y: str, level: str = level) -> tuple[str, str, str]:
                key = ["", "", ""]
                key[a], key[b], key[third] = x, y, level
                return (key[0], key[1], key[2])

            names = [
                cell("low", "low"),
                cell("high", "low"),
                cell("low", "high"),
                cell("high", "high"),
            ]
            if all(n in cells for n in names):
                n00, n10, n01, n11 = (cells[n] for n in names)
                quads.append((config, level, (n00, n10, n01, n11)))
    used = sorted({arm for _, _, q in quads for arm in q})
    if not used:
        return []
    means = _family_means(records, used, family_of)
    families = sorted({f for f, _ in means})
    return [
        Unit(f, config, level, *(means[(f, arm)] for arm in quad))
        for config, level, quad in quads
        for f in families
    ]


def _estimate(point: float, values: Matrix, prob: Matrix, families: int) -> Estimate:
    if families < FEW_CLUSTERS:
        return Estimate(point, reason=f"too few families ({families} < {FEW_CLUSTERS})")
    keep = np.isfinite(values)
    values, prob = values[keep], prob[keep] / prob[keep].sum()
    tail = (1.0 - LEVEL) / 2.0
    low, high = quantile(values, prob, tail), quantile(values, prob, 1.0 - tail)
    if high - low <= 1e-12:
        return Estimate(point, reason="no spread: every resample gives the same value")
    if not low - 1e-9 <= point <= high + 1e-9:
        return Estimate(point, reason="the percentile interval does not contain the estimate")
    return Estimate(point, low, high)


def decompose(
    records: Sequence[CensusRow],
    arms: Mapping[str, SweepArm],
    family_of: Callable[[str], str],
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> list[Decomposition]:
    """Each pairwise interaction's decomposition; [] for a pair without a unit."""
    out = []
    for name, first, second in PAIRS:
        units = units_of(records, arms, family_of, (first, second))
        if not units:
            continue
        families = sorted({u.family for u in units})
        index = {f: i for i, f in enumerate(families)}
        # per family: sum of I and count, over all units and over the unforced ones
        sums = np.zeros((len(families), 4))
        for u in units:
            i = index[u.family]
            sums[i, 0] += u.interaction
            sums[i, 1] += 1.0
            if not u.forced:
                sums[i, 2] += u.interaction
                sums[i, 3] += 1.0
        boot = family_resample(sums, draws=draws, seed=seed)
        with np.errstate(divide="ignore", invalid="ignore"):
            observed_draws = boot.means[:, 0] / boot.means[:, 1]
            free_draws = boot.means[:, 2] / boot.means[:, 3]
        total = sums.sum(axis=0)
        observed = _estimate(float(total[0] / total[1]), observed_draws, boot.prob, len(families))
        without = (
            _estimate(float(total[2] / total[3]), free_draws, boot.prob, len(families))
            if total[3] > 0
            else None
        )
        p = np.mean([[u.m00, u.m10, u.m01] for u in units], axis=0)
        independence = None if p[0] <= 0 else float((p[0] - p[1]) * (p[0] - p[2]) / p[0])
        fail = [u for u in units if u.all_stressed_fail]
        coefficient = float(sum(u.interaction for u in units))
        share = (
            None
            if abs(coefficient) < 1e-12
            else float(sum(u.interaction for u in fail)) / coefficient
        )
        out.append(
            Decomposition(
                name,
                len(units),
                len(families),
                observed,
                independence,
                len(fail),
                share,
                sum(u.forced for u in units),
                without,
                sum(u.joint_rescues for u in units),
                boot.exact,
            )
        )
    return out


def _points(e: Estimate | None) -> str:
    return estimate_cell(e, missing="-; every unit's sign is forced", unit="")


def decomposition_tables(results: Sequence[Decomposition]) -> list[StudyTable]:
    """The seed's interaction paragraph as a table, one row per pairwise interaction."""
    if not results:
        return []
    rows = []
    for d in results:
        rows.append(
            [
                d.name,
                str(d.units),
                _points(d.observed),
                "-" if d.independence is None else f"{round(100 * d.independence, 1) + 0.0:+.1f}",
                str(d.all_fail),
                "-"
                if d.all_fail_share is None
                else f"{round(100 * d.all_fail_share, 1) + 0.0:.1f}%",
                str(d.forced),
                _points(d.without_forced),
                f"{d.rescued} ({100 * d.rescued / d.units:.1f}%)",
            ]
        )
    families = max(d.families for d in results)
    how = (
        "not resampled"
        if families < FEW_CLUSTERS
        else ("enumerated exactly" if all(d.exact for d in results) else "drawn")
    )
    note = (
        "A unit is a family, a configuration and a level of the third factor, with its four "
        "cells (base, each single stress, joint); its interaction is joint - each single "
        "stress + base, and the observed coefficient (the seed's E_ab) is their mean, in "
        "points (support +-200). Independence expectation: (p00 - p10)(p00 - p01) / p00 from "
        "the pooled cell means (each pressure keeps its share of the successes whatever the "
        "other does). Forced-sign units: the base and single-stress cells fix the sign "
        "whatever the joint cell does. Rescued: the joint cell succeeds while a single-stress "
        "cell fails. 95% percentile family-cluster bootstrap over "
        f"{families} families ({how}; a family drawn with all its units)."
    )
    if families < FEW_CLUSTERS:
        note += f" Below {FEW_CLUSTERS} families no interval is printed."
    return [
        StudyTable(
            title="Interaction decomposition: independence expectation and forced-sign units "
            "(seed appendix D)",
            columns=[
                "interaction",
                "units",
                "observed (pp)",
                "independence expectation (pp)",
                "units where every stressed cell fails",
                "their share of the observed coefficient",
                "forced-sign units",
                "without forced-sign units (pp)",
                "joint succeeds while a single stress fails",
            ],
            rows=rows,
            note=note,
        )
    ]
