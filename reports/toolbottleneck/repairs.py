"""Repairs against switches (seed 001, section 4.3 and appendix H, "Decision matrix").

For a repair aimed at pressure l, with mu^x_{l s} the mean success of configuration x
(``l`` the repaired lane, ``0`` the incumbent without the repair, ``k`` a switch) at
the unstressed (s = 0) or stressed (s = 1) cell:

    L = mu^0_{l0} - mu^0_{l1}                  the loss the repair targets
    Gamma = mu^l_{l1} - mu^0_{l1}              the stress gain
    Sigma = Gamma - (mu^l_{l0} - mu^0_{l0})    the gain specific to the stress
    Sigma^k = (mu^k_{l1} - mu^0_{l1}) - (mu^k_{l0} - mu^0_{l0})   the same of switch k
    Delta = Sigma - max_k Sigma^k

Every mean is over tasks within a family, then over families; the intervals are 95%
percentiles of one family-cluster bootstrap (the same draws for every estimand, so
Delta's max is taken draw by draw). The decision matrix compares the repaired lane with
every switch at the stressed cell: success-superior when the paired interval of the
success difference lies above zero against every switch; cost-superior when the interval
of the cost difference lies below zero against every switch (when no record of the
compared arms measured a cost, as under the simulated policy, on tokens instead, and
said so); Pareto-nondominated when no switch is at least as good on success, tokens,
wall time and cost and strictly better on one (point estimates). A quantity not measured
(null in a record: wall time and cost under the simulation) reads "not measured" and
does not enter the comparison: it is never taken as zero (invariant 7).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from prereg.experiments.toolbottleneck.study import StudyRepair
from prereg.reports.render.markdown import table
from prereg.runners.toolbottleneck.study import StudyRecord

Matrix = NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class RepairRow:
    """One episode as the repair analysis reads it; ``wall_s`` and ``cost_usd`` None when
    not measured."""

    arm: str
    task_id: str
    family: str
    success: bool
    tokens: float
    wall_s: float | None = None
    cost_usd: float | None = None


def rows_of(records: Sequence[StudyRecord | RepairRow]) -> list[RepairRow]:
    """Study records as repair rows (the simulation measures neither wall time nor cost)."""
    return [
        r
        if isinstance(r, RepairRow)
        else RepairRow(r.arm, r.task_id, r.family, r.success, r.tokens_input + r.tokens_output)
        for r in records
    ]


#: What a decision-matrix quantity reads when no record of the compared arms measured it.
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class RepairResult:
    repair: str
    pressure: str
    families: int
    loss: Estimate
    gain: Estimate
    specific: Estimate
    switches: dict[str, Estimate]  # Sigma^k
    delta: Estimate
    success_vs: dict[str, Estimate]  # repaired minus switch at the stressed cell
    tokens_vs: dict[str, Estimate]
    success_superior: bool
    cost_superior: bool
    nondominated: bool
    #: repaired minus switch at the stressed cell; None: not measured by every record
    wall_vs: dict[str, Estimate | None] = field(default_factory=dict)
    cost_vs: dict[str, Estimate | None] = field(default_factory=dict)
    #: what cost-superiority was judged on: "cost" when measured, else "tokens"
    cost_basis: str = "tokens"


def family_means(
    records: Sequence[RepairRow], arms: Sequence[str], value: Callable[[RepairRow], float]
) -> Matrix:
    """(families x arms): the mean over a family's tasks of each task's mean over repeats,
    over the tasks measured in every arm."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    family: dict[str, str] = {}
    for r in records:
        if r.arm in arms:
            runs[(r.task_id, r.arm)].append(value(r))
            family[r.task_id] = r.family
    tasks = [t for t in sorted(family) if all((t, a) in runs for a in arms)]
    by_family: dict[str, list[list[float]]] = defaultdict(list)
    for t in tasks:
        by_family[family[t]].append([float(np.mean(runs[(t, a)])) for a in arms])
    return np.array([np.mean(by_family[f], axis=0) for f in sorted(by_family)], dtype=float)


def _estimate(point: float, draws: Matrix) -> Estimate:
    low, high = np.quantile(draws, [0.025, 0.975])
    return Estimate(point, float(low), float(high))


def repair_result(
    records: Sequence[StudyRecord | RepairRow],
    repair: StudyRepair,
    *,
    draws: int = 10_000,
    seed: int = 0,
) -> RepairResult:
    rows = rows_of(records)
    lanes = {"l": repair.repaired, "0": repair.control} | {s.id: s for s in repair.switches}
    arms = sorted({a for lane in lanes.values() for a in (lane.stressed, lane.unstressed)})
    col = {a: i for i, a in enumerate(arms)}
    success = family_means(rows, arms, lambda r: float(r.success))
    tokens = family_means(rows, arms, lambda r: r.tokens)
    n = success.shape[0]
    if n < 2:
        raise ValueError(f"repair '{repair.id}': a bootstrap needs two families, got {n}")
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    boot_s = success[idx].mean(axis=1)
    point_s = success.mean(axis=0)

    def mu(m: Matrix, x: str, stressed: bool) -> Matrix:
        lane = lanes[x]
        return m[..., col[lane.stressed if stressed else lane.unstressed]]

    def sigma(m: Matrix, x: str) -> Matrix:
        return (mu(m, x, True) - mu(m, "0", True)) - (mu(m, x, False) - mu(m, "0", False))

    def versus(m: Matrix | None) -> dict[str, Estimate | None]:
        """Repaired minus each switch at the stressed cell (None: not measured)."""
        if m is None:
            return {k: None for k in ks}
        boot, point = m[idx].mean(axis=1), m.mean(axis=0)
        return {
            k: _estimate(
                float(mu(point, "l", True) - mu(point, k, True)),
                mu(boot, "l", True) - mu(boot, k, True),
            )
            for k in ks
        }

    ks = [s.id for s in repair.switches]
    delta_p = sigma(point_s, "l") - max(sigma(point_s, k) for k in ks)
    delta_b = sigma(boot_s, "l") - np.max(np.stack([sigma(boot_s, k) for k in ks]), axis=0)
    success_vs = {k: e for k, e in versus(success).items() if e is not None}
    tokens_vs = {k: e for k, e in versus(tokens).items() if e is not None}
    wall_vs = versus(_measured(rows, arms, lambda r: r.wall_s))
    cost_vs = versus(_measured(rows, arms, lambda r: r.cost_usd))
    costed = all(e is not None for e in cost_vs.values())
    basis = {k: (cost_vs[k] if costed else tokens_vs[k]) for k in ks}
    return RepairResult(
        repair=repair.id,
        pressure=repair.pressure,
        families=n,
        loss=_estimate(
            float(mu(point_s, "0", False) - mu(point_s, "0", True)),
            mu(boot_s, "0", False) - mu(boot_s, "0", True),
        ),
        gain=_estimate(
            float(mu(point_s, "l", True) - mu(point_s, "0", True)),
            mu(boot_s, "l", True) - mu(boot_s, "0", True),
        ),
        specific=_estimate(float(sigma(point_s, "l")), sigma(boot_s, "l")),
        switches={k: _estimate(float(sigma(point_s, k)), sigma(boot_s, k)) for k in ks},
        delta=_estimate(float(delta_p), delta_b),
        success_vs=success_vs,
        tokens_vs=tokens_vs,
        success_superior=all(e.low > 0 for e in success_vs.values()),
        cost_superior=all(e is not None and e.high < 0 for e in basis.values()),
        nondominated=not any(
            _dominates(success_vs[k], tokens_vs[k], wall_vs[k], cost_vs[k]) for k in ks
        ),
        wall_vs=wall_vs,
        cost_vs=cost_vs,
        cost_basis="cost" if costed else "tokens",
    )


def _measured(
    rows: Sequence[RepairRow], arms: Sequence[str], value: Callable[[RepairRow], float | None]
) -> Matrix | None:
    """Family means of a quantity every record of the arms measured; None otherwise (a
    null is never read as zero)."""
    values = [value(r) for r in rows if r.arm in arms]
    if not values or any(v is None for v in values):
        return None
    return family_means(rows, arms, lambda r: float(value(r) or 0.0))


def _dominates(
    success: Estimate, tokens: Estimate, wall: Estimate | None, cost: Estimate | None
) -> bool:
    """Whether the switch is at least as good as the repair on every measured quantity
    (success higher is better; tokens, wall time and cost lower) and strictly better on
    one. Differences are repaired minus switch, point estimates."""
    lower_better = [e.value for e in (tokens, wall, cost) if e is not None]
    as_good = success.value <= 0 and all(v >= 0 for v in lower_better)
    strictly = success.value < 0 or any(v > 0 for v in lower_better)
    return as_good and strictly


def _pp(e: Estimate) -> str:
    return f"{100 * e.value:+.1f} pp [{100 * e.low:+.1f}, {100 * e.high:+.1f}]"


def _tok(e: Estimate) -> str:
    return f"{e.value:+.0f} [{e.low:+.0f}, {e.high:+.0f}]"


def _opt(e: Estimate | None, unit: str) -> str:
    if e is None:
        return NOT_MEASURED
    return f"{e.value:+.3g} {unit} [{e.low:+.3g}, {e.high:+.3g}]"


def repair_tables(
    results: Sequence[RepairResult],
) -> list[tuple[str, list[str], list[list[str]]]]:
    """The estimands table and the decision matrix as (title, header, rows)."""
    if not results:
        return []
    estimands = [
        [r.repair, r.pressure, _pp(r.loss), _pp(r.gain), _pp(r.specific), k, _pp(e), _pp(r.delta)]
        for r in results
        for k, e in r.switches.items()
    ]
    matrix = [
        [
            r.repair,
            k,
            _pp(r.success_vs[k]),
            _tok(r.tokens_vs[k]),
            _opt(r.wall_vs.get(k), "s"),
            _opt(r.cost_vs.get(k), "USD"),
            "yes" if r.success_superior else "no",
            ("yes" if r.cost_superior else "no") + ("" if r.cost_basis == "cost" else " (tokens)"),
            "yes" if r.nondominated else "no",
        ]
        for r in results
        for k in r.switches
    ]
    return [
        (
            "Repairs against switches (seed 4.3; family-cluster bootstrap, 95%)",
            ["repair", "pressure", "L", "Gamma", "Sigma", "switch k", "Sigma^k", "Delta"],
            estimands,
        ),
        (
            "Decision matrix at the stressed cell (repaired lane minus switch)",
            [
                "repair",
                "switch",
                "success",
                "tokens",
                "wall time",
                "cost",
                "success-superior",
                "cost-superior",
                "Pareto-nondominated",
            ],
            matrix,
        ),
    ]


#: The note under the decision matrix: what did not enter, and why.
MATRIX_NOTE = (
    "Wall time and cost enter the Pareto comparison and cost-superiority only when every "
    "record of the compared arms measured them; 'not measured' (null in the records, as "
    "under the simulated policy) is never read as zero, and cost-superiority is then "
    "judged on tokens, marked '(tokens)'."
)


def repairs_markdown(results: Sequence[RepairResult]) -> list[str]:
    """The estimands table and the decision matrix, as Markdown lines."""
    tables = repair_tables(results)
    if not tables:
        return []
    (title, header, rows), (m_title, m_header, m_rows) = tables
    return [
        f"## {title}",
        "",
        *table(header, rows),
        "",
        f"{m_title}:",
        "",
        *table(m_header, m_rows),
        "",
        MATRIX_NOTE,
        "",
    ]
