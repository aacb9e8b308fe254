"""The completion-cap sweep in full (seed appendix E.1, Tables 7 and 9, Figures 2b and 8).

For each configuration (what plays the arm and its menu mode; the completion cap is what
the sweep varies) that holds, at two completion caps, both menu ends (its smallest and
largest menu) in one or more of the four endpoint workflow x encoding cells
({low, high} x {raw, linked}, the seed's "four endpoint W x D cells"):

- **the menu contrast at each cap**: the paired within-family visible-menu contrast
  (largest minus smallest menu), the mean over the W x D cells held at both menu ends and
  both caps, each cell mean over a family's tasks (a task's mean over its repeats) and
  then over families, families weighting equally;
- **the interaction**: the high cap's contrast minus the low cap's (support [-2, 2]:
  printed in points without the ``pp`` unit, as the repairs' Sigma);
- **the manipulation check**: the share of the largest-menu episodes of those cells that
  ended at the completion cap, at each cap; the high cap passes when it truncates at most
  5% (the seed's ceiling, :data:`CEILING`);
- **the strata** (readings S1-S3 of docs/toolbottleneck.md): from the panel, that is the
  configuration's own runs at the low cap: B (truncation-heavy) at least 20% of its
  largest-menu episodes truncated, M (mild) 5 to 20%, N (null) no truncation and a menu
  contrast within 3 points of zero; a configuration that meets none is listed unassigned
  ("-"). The crossover (Table 7: every intermediate cap against the lowest) uses the
  seed's other strata: B at least 20%, S at most 15% with a loss of at least 8 points,
  N as above;
- **the pre-specified margin** (5 points, :data:`MARGIN`): an interaction whose 95%
  interval lies above it "clears the margin", below it "below the margin", else
  "inconclusive"; no interval, no decision;
- **the repeats' disagreement** (Dis.): over the conditions (arm, task) of the sweep's
  cells at both caps run at least twice, the share whose success differs between
  repeats;
- **pooled rows**: stratum B over its configurations that pass the manipulation check
  (the seed's primary reading), M and N, and all configurations: the mean of the
  configurations' figures, families weighting equally.

Every interval is a 95% percentile of one family-cluster bootstrap shared by every
estimand of the table (the tasks measured in every arm the table reads; exact
enumeration up to 11 families, :func:`prereg.reports.toolbottleneck.repairs.resample`),
under the rule of docs/statistics.md: below 10 families (``FEW_CLUSTERS``), without
spread, or not containing its estimate, it is withheld and the reason is printed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from prereg.reports.toolbottleneck.census import CensusRow, scored, truncation
from prereg.reports.toolbottleneck.estimates import Estimate, estimate_cell
from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint, StudyTable
from prereg.reports.toolbottleneck.repairs import Resamples, quantile, resample
from prereg.stats.bootstrap import FEW_CLUSTERS
from prereg.stats.enumeration import draws_for_mc_se

Matrix = NDArray[np.float64]

#: the seed's manipulation-check ceiling: the high cap truncates at most 5%
CEILING = 0.05
#: the seed's pre-specified margin for the interaction (5 points)
MARGIN = 0.05
LEVEL = 0.95
#: the four endpoint W x D cells' levels
ENDPOINT_W = ("low", "high")
ENDPOINT_D = ("raw", "linked")


@dataclass(frozen=True)
class SweepArm:
    """What the sweep reads of an arm: its configuration without the cap, the cap, and
    its capacity cell."""

    configuration: str
    cap: int
    menu: int
    workflow: str
    encoding: str


@dataclass(frozen=True)
class SweepRow:
    """One configuration (or a pooled stratum: ``pooled`` configurations)."""

    name: str
    stratum: str
    caps: tuple[int, int]
    truncation: tuple[float | None, float | None]
    low: Estimate
    high: Estimate
    interaction: Estimate
    check: bool | None  # the manipulation check (None: pooled row)
    decision: str
    disagreement: float | None
    pooled: int = 0
    cells: int = 0
    #: the configuration's released V effect at the low cap (seed Table 9's Rel.)
    released: float | None = None
    #: the interaction when every excluded (infra_error) unit takes either outcome
    either_way: tuple[float, float] | None = None


@dataclass(frozen=True)
class Sweep:
    """One sweep (the lowest cap against a higher one) over its configurations."""

    kind: str  # "sweep" (lowest against highest cap) or "crossover"
    rows: tuple[SweepRow, ...]
    pooled: tuple[SweepRow, ...]
    families: int
    exact: bool
    disagreement_by_cap: tuple[tuple[int, float | None], ...]
    reason: str | None = None  # why no row has a figure
    excluded: int = 0  # units left out (infra_error, not counted) in the sweep's arms


@dataclass(frozen=True)
class _Filled:
    """An excluded unit given an outcome (the either-way bound)."""

    arm: str
    task_id: str
    repeat: int
    success: bool
    status: str = "ok"
    terminal_flag: str | None = None
    first_unmet_obligation: str | None = None
    calls: int = 0


# --- what the sweep reads -----------------------------------------------------------------


def sweep_plans(
    arms: Mapping[str, SweepArm],
) -> dict[str, dict[int, dict[tuple[str, str], tuple[str, str]]]]:
    """configuration -> cap -> (W, D) -> (small-menu arm, large-menu arm), over the
    endpoint cells a configuration holds at both its menu ends (first arm of a cell wins)."""
    by: dict[str, dict[tuple[int, int, str, str], str]] = defaultdict(dict)
    for arm_id, a in arms.items():
        if a.workflow in ENDPOINT_W and a.encoding in ENDPOINT_D:
            by[a.configuration].setdefault((a.cap, a.menu, a.workflow, a.encoding), arm_id)
    out: dict[str, dict[int, dict[tuple[str, str], tuple[str, str]]]] = {}
    for config, cells in by.items():
        menus = sorted({m for _, m, _, _ in cells})
        if len(menus) < 2:
            continue
        small, large = menus[0], menus[-1]
        plan: dict[int, dict[tuple[str, str], tuple[str, str]]] = {}
        for cap in sorted({c for c, _, _, _ in cells}):
            held = {
                (w, d): (cells[(cap, small, w, d)], cells[(cap, large, w, d)])
                for w in ENDPOINT_W
                for d in ENDPOINT_D
                if (cap, small, w, d) in cells and (cap, large, w, d) in cells
            }
            if held:
                plan[cap] = held
        if len(plan) >= 2:
            out[config] = plan
    return out


def family_matrix(
    records: Sequence[CensusRow], arms: Sequence[str], family_of: Callable[[str], str]
) -> tuple[list[str], Matrix]:
    """(families, families x arms): each arm's success over a family's tasks (a task's
    mean over repeats), the tasks measured in every arm; counted episodes only."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    wanted = set(arms)
    for r in records:
        if r.arm in wanted and scored(r):
            runs[(r.task_id, r.arm)].append(float(bool(r.success)))
    tasks = sorted({t for t, _ in runs})
    tasks = [t for t in tasks if all((t, a) in runs for a in arms)]
    by_family: dict[str, list[list[float]]] = defaultdict(list)
    for t in tasks:
        by_family[family_of(t)].append([float(np.mean(runs[(t, a)])) for a in arms])
    families = sorted(by_family)
    rows = [np.mean(by_family[f], axis=0) for f in families]
    return families, np.array(rows, dtype=float).reshape(len(rows), len(arms))


def family_resample(matrix: Matrix, *, draws: int, seed: int) -> Resamples:
    """The family-cluster bootstrap of the families' rows (exact up to 11 families, else
    drawn: :func:`~prereg.reports.toolbottleneck.repairs.resample`). Below
    ``FEW_CLUSTERS`` families no interval is printed, so nothing is resampled: the one
    "resample" is the sample itself (never read: :func:`estimate_of` withholds first)."""
    if matrix.shape[0] < FEW_CLUSTERS:
        return Resamples(matrix.mean(axis=0)[None, :], np.ones(1), True)
    return resample(matrix, draws=max(draws, draws_for_mc_se()), seed=seed)


def estimate_of(point: float, values: Matrix, prob: Matrix, families: int) -> Estimate:
    """The one rule for a printed interval (docs/statistics.md): withheld below
    FEW_CLUSTERS families, without spread, or when it misses its estimate."""
    if families < FEW_CLUSTERS:
        return Estimate(point, reason=f"too few families ({families} < {FEW_CLUSTERS})")
    tail = (1.0 - LEVEL) / 2.0
    low, high = quantile(values, prob, tail), quantile(values, prob, 1.0 - tail)
    if high - low <= 1e-12:
        return Estimate(point, reason="no spread: every resample gives the same value")
    if not low - 1e-9 <= point <= high + 1e-9:
        return Estimate(point, reason="the percentile interval does not contain the estimate")
    return Estimate(point, low, high)


def _decision(e: Estimate) -> str:
    if e.low is None or e.high is None:
        return f"not decided: {e.reason}"
    if e.low > MARGIN:
        return "clears the 5-point margin"
    if e.high < MARGIN:
        return "below the 5-point margin"
    return "inconclusive: the interval holds the 5-point margin"


def _disagreement(records: Sequence[CensusRow], arms: set[str]) -> float | None:
    """Share of conditions (arm, task) run at least twice whose success differs."""
    runs: dict[tuple[str, str], set[bool]] = defaultdict(set)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        if r.arm in arms and scored(r):
            runs[(r.arm, r.task_id)].add(bool(r.success))
            counts[(r.arm, r.task_id)] += 1
    repeated = [k for k, n in counts.items() if n >= 2]
    if not repeated:
        return None
    return sum(len(runs[k]) > 1 for k in repeated) / len(repeated)


def stratum_of(kind: str, cut: float | None, contrast: float) -> str:
    """The stratum from the panel (the low cap): see the module docstring."""
    if cut is None:
        return "-"
    null = cut == 0 and abs(contrast) <= 0.03 + 1e-12
    if cut >= 0.20:
        return "B"
    if kind == "crossover":
        if cut <= 0.15 and contrast <= -0.08 + 1e-12:
            return "S"
        return "N" if null else "-"
    if cut >= 0.05:
        return "M"
    return "N" if null else "-"


def cap_sweeps(
    records: Sequence[CensusRow],
    arms: Mapping[str, SweepArm],
    family_of: Callable[[str], str],
    *,
    draws: int = 10_000,
    seed: int = 0,
    released: Mapping[tuple[str, int], float] | None = None,
    excluded: Sequence[CensusRow] = (),
) -> list[Sweep]:
    """The sweep (each configuration's lowest cap against its highest) and, where a
    configuration has caps between, the crossover (each intermediate cap against the
    lowest: Table 7). [] when no configuration holds both menu ends at two caps."""
    plans = sweep_plans(arms)
    if not plans:
        return []
    pairs: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for config, plan in sorted(plans.items()):
        caps = sorted(plan)
        pairs["sweep"].append((config, caps[0], caps[-1]))
        for mid in caps[1:-1]:
            pairs[f"crossover {mid}"].append((config, caps[0], mid))
    out = []
    for key in sorted(pairs, key=lambda k: 0 if k == "sweep" else int(k.split()[-1])):
        kind = "sweep" if key == "sweep" else "crossover"
        sweep = _sweep(
            kind, pairs[key], plans, records, family_of, draws=draws, seed=seed, excluded=excluded
        )
        if released:
            rows = tuple(replace(r, released=released.get((r.name, r.caps[0]))) for r in sweep.rows)
            sweep = replace(sweep, rows=rows)
        out.append(sweep)
    return out


def _either_way(
    records: Sequence[CensusRow],
    missing: Sequence[tuple[str, str, int]],
    columns: Sequence[str],
    family_of: Callable[[str], str],
    v: Matrix,
) -> tuple[float, float] | None:
    """The interaction (weights ``v`` over ``columns``) with every missing unit a success
    where its arm's weight is positive (the largest) or negative (the smallest), the
    rest failures; None when no unit is missing."""
    if not missing:
        return None
    index = {a: i for i, a in enumerate(columns)}
    values = []
    for sign in (1.0, -1.0):
        filled = [_Filled(a, t, k, sign * v[index[a]] > 0) for a, t, k in missing]
        _, m = family_matrix([*records, *filled], columns, family_of)
        values.append(float(m.mean(axis=0) @ v))
    return (min(values), max(values))


def _sweep(
    kind: str,
    chosen: Sequence[tuple[str, int, int]],
    plans: Mapping[str, Mapping[int, Mapping[tuple[str, str], tuple[str, str]]]],
    records: Sequence[CensusRow],
    family_of: Callable[[str], str],
    *,
    draws: int,
    seed: int,
    excluded: Sequence[CensusRow] = (),
) -> Sweep:
    # each configuration: the cells held at both caps, and the estimands' arm weights
    columns: list[str] = []
    weights: dict[str, tuple[dict[str, float], dict[str, float], int]] = {}
    for config, lo, hi in chosen:
        cells = sorted(set(plans[config][lo]) & set(plans[config][hi]))
        if not cells:
            continue
        at: dict[int, dict[str, float]] = {}
        for cap in (lo, hi):
            w: dict[str, float] = defaultdict(float)
            for cell in cells:
                small, large = plans[config][cap][cell]
                w[large] += 1.0 / len(cells)
                w[small] -= 1.0 / len(cells)
                columns += [a for a in (small, large) if a not in columns]
            at[cap] = dict(w)
        weights[config] = (at[lo], at[hi], len(cells))
    families, matrix = family_matrix(records, columns, family_of)
    n = len(families)
    if n == 0:
        return Sweep(kind, (), (), 0, True, (), "no task was measured in every arm of the sweep")
    boot = family_resample(matrix, draws=draws, seed=seed)
    point = matrix.mean(axis=0)

    def vec(w: Mapping[str, float]) -> Matrix:
        return np.array([w.get(a, 0.0) for a in columns], dtype=float)

    def est(v: Matrix) -> Estimate:
        return estimate_of(float(point @ v), boot.means @ v, boot.prob, n)

    missing = {(r.arm, r.task_id, r.repeat) for r in excluded if r.arm in set(columns)}
    missing -= {(r.arm, r.task_id, r.repeat) for r in records if scored(r)}

    def either_way(v: Matrix) -> tuple[float, float] | None:
        return _either_way(records, sorted(missing), columns, family_of, v)

    rows: list[SweepRow] = []
    vectors: dict[str, tuple[Matrix, Matrix]] = {}
    for config, lo, hi in chosen:
        if config not in weights:
            continue
        w_lo, w_hi, ncells = weights[config]
        v_lo, v_hi = vec(w_lo), vec(w_hi)
        vectors[config] = (v_lo, v_hi)
        large_lo = {a for a, x in w_lo.items() if x > 0}
        large_hi = {a for a, x in w_hi.items() if x > 0}
        cut_lo = truncation([r for r in records if r.arm in large_lo]).rate
        cut_hi = truncation([r for r in records if r.arm in large_hi]).rate
        interaction = est(v_hi - v_lo)
        contrast_lo = est(v_lo)
        check = None if cut_hi is None else cut_hi <= CEILING + 1e-12
        rows.append(
            SweepRow(
                name=config,
                stratum=stratum_of(kind, cut_lo, contrast_lo.value),
                caps=(lo, hi),
                truncation=(cut_lo, cut_hi),
                low=contrast_lo,
                high=est(v_hi),
                interaction=interaction,
                check=check,
                decision=_decision(interaction),
                disagreement=_disagreement(records, set(w_lo) | set(w_hi)),
                cells=ncells,
                either_way=either_way(v_hi - v_lo),
            )
        )
    pooled: list[SweepRow] = []
    strata = ("B", "S", "N") if kind == "crossover" else ("B", "M", "N")
    for label in (*strata, "all"):
        members = [
            r
            for r in rows
            if label == "all"
            or (r.stratum == label and (label != "B" or kind != "sweep" or r.check is True))
        ]
        if not members:
            continue
        v_lo = np.mean([vectors[r.name][0] for r in members], axis=0)
        v_hi = np.mean([vectors[r.name][1] for r in members], axis=0)
        interaction = est(v_hi - v_lo)
        name = "All" if label == "all" else f"Stratum {label}"
        pooled.append(
            SweepRow(
                name=f"{name} ({len(members)} cfg.)",
                stratum=label,
                caps=(members[0].caps[0], members[0].caps[1]),
                truncation=(None, None),
                low=est(v_lo),
                high=est(v_hi),
                interaction=interaction,
                check=None,
                decision=_decision(interaction),
                disagreement=None,
                pooled=len(members),
                either_way=either_way(v_hi - v_lo),
            )
        )
    by_cap: list[tuple[int, float | None]] = []
    for cap in sorted({c for _, lo, hi in chosen for c in (lo, hi)}):
        arms_at = {
            a
            for config, lo, hi in chosen
            if config in weights
            for c, w in zip((lo, hi), weights[config][:2], strict=True)
            if c == cap
            for a in w
        }
        by_cap.append((cap, _disagreement(records, arms_at)))
    return Sweep(
        kind, tuple(rows), tuple(pooled), n, boot.exact, tuple(by_cap), excluded=len(missing)
    )


# --- the tables ---------------------------------------------------------------------------


def _pts(x: float) -> str:
    return f"{round(100 * x, 1) + 0.0:+.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def sweep_tables(sweeps: Sequence[Sweep]) -> list[StudyTable]:
    """Table 9 (the sweep) and Table 7 (each crossover), in the seed's shape."""
    out = []
    for s in sweeps:
        if s.reason is not None:
            out.append(
                StudyTable(
                    title=_title(s),
                    columns=["configuration", "reason"],
                    rows=[["-", s.reason]],
                    note=None,
                )
            )
            continue
        body = []
        for r in (*s.rows, *s.pooled):
            check = (
                "-" if r.check is None else ("passes" if r.check else "fails: truncation persists")
            )
            body.append(
                [
                    r.name,
                    r.stratum if not r.pooled else "-",
                    f"{r.caps[0]} to {r.caps[1]}",
                    _pct(r.truncation[0]),
                    _pct(r.truncation[1]),
                    estimate_cell(r.low, unit=" pp"),
                    estimate_cell(r.high, unit=" pp"),
                    estimate_cell(r.interaction, unit=""),
                    "-"
                    if r.either_way is None
                    else f"{_pts(r.either_way[0])} to {_pts(r.either_way[1])}",
                    check,
                    r.decision,
                    "-" if r.released is None else f"{round(100 * r.released, 1) + 0.0:+.1f} pp",
                    _pct(r.disagreement) if not r.pooled else "-",
                ]
            )
        out.append(
            StudyTable(
                title=_title(s),
                columns=[
                    "configuration",
                    "stratum",
                    "caps (low to high)",
                    "largest-menu truncation at low cap",
                    "largest-menu truncation at high cap",
                    "menu contrast at low cap",
                    "menu contrast at high cap",
                    "interaction (pp)",
                    "interaction, excluded units either way (pp)",
                    "manipulation check (at most 5% at the high cap)",
                    "5-point margin",
                    "Rel. (V effect at the low cap, Table 4)",
                    "Dis. (repeats disagree)",
                ],
                rows=body,
                note=_note(s),
            )
        )
    return out


def _title(s: Sweep) -> str:
    if s.kind == "sweep":
        return (
            "Completion-cap sweep in full: the menu contrast at each cap, the interaction, "
            "the manipulation check and the strata (seed appendix E.1, Table 9)"
        )
    caps = sorted({r.caps[1] for r in s.rows})
    return (
        f"Crossover at cap {', '.join(str(c) for c in caps)}: the menu contrast against the "
        "lowest cap (seed Table 7)"
    )


def _note(s: Sweep) -> str:
    how = (
        "not resampled"
        if s.families < FEW_CLUSTERS
        else ("enumerated exactly" if s.exact else "drawn")
    )
    strata = (
        "S at most 15% with a loss of at least 8 points" if s.kind == "crossover" else "M 5 to 20%"
    )
    text = (
        "Paired within-family visible-menu contrast (largest minus smallest menu) over the "
        "endpoint W x D cells each configuration holds at both menu ends and both caps, "
        "families weighting equally; the interaction is the high cap's contrast minus the "
        "low cap's (points; support +-200). Truncation: the share of the largest-menu "
        "episodes of those cells ending at the completion cap. Strata from the low cap "
        f"(the panel): B at least 20% truncated, {strata}, N no truncation and a contrast "
        "within 3 points of zero, '-' none of these. Pooled rows average the "
        "configurations' figures"
        + (", stratum B over those passing the manipulation check" if s.kind == "sweep" else "")
        + f". 95% percentile family-cluster bootstrap over {s.families} families ({how}), "
        "shared by every figure of the table."
    )
    if s.families < FEW_CLUSTERS:
        text += (
            f" Below {FEW_CLUSTERS} families no interval is printed and no margin decision "
            "is taken."
        )
    shares = [f"{_pct(d)} at cap {c}" for c, d in s.disagreement_by_cap if d is not None]
    if shares:
        text += " The repeats disagree on " + ", ".join(shares) + " of conditions."
    else:
        text += " Dis. needs two repeats of a condition: none here."
    if s.excluded:
        text += (
            f" {s.excluded} unit(s) of the sweep's arms were left out (infra_error, not "
            "counted); 'either way' lets each take the outcome that lowers, then raises, "
            "the interaction."
        )
    else:
        text += " No unit of the sweep's arms was left out, so 'either way' is '-'."
    return text


def sweep_figure(sweeps: Sequence[Sweep]) -> list[StudyFigure]:
    """Figure 2b's numbers (the sweep) and Figure 8's (the crossovers, pooled in one
    figure): each configuration's (and pooled stratum's) menu contrast at each cap, with
    the table's intervals (withheld ones with their reason)."""
    out = []
    for kind, name in (("sweep", "tb_cap_sweep"), ("crossover", "tb_crossover")):
        points = []
        for sweep in (s for s in sweeps if s.kind == kind):
            for r in (*sweep.rows, *sweep.pooled):
                label = r.name if kind == "sweep" else f"{r.name} ({r.caps[0]} vs {r.caps[1]})"
                for cap, e in zip(r.caps, (r.low, r.high), strict=True):
                    points.append(
                        StudyPoint(
                            label=f"{label} at cap {cap}",
                            value=e.value,
                            x=float(cap),
                            low=e.low,
                            high=e.high,
                            reason=None if e.low is not None else e.reason,
                        )
                    )
        if points:
            out.append(StudyFigure(name=name, points=points, level=LEVEL))
    return out
