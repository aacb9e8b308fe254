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
success difference lies above zero against every switch, cost-superior when the
interval of the token difference lies below zero against every switch, and
Pareto-nondominated when no switch is at least as good on success and tokens and
strictly better on one (point estimates). Wall time and cost, which the seed's matrix
also weighs, are not measured by the simulated policy, so they do not enter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from prereg.experiments.toolbottleneck.study import StudyRepair
from prereg.reports.render_md import table
from prereg.runners.toolbottleneck_study import StudyRecord

Matrix = NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float


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


def family_means(
    records: Sequence[StudyRecord], arms: Sequence[str], value: Callable[[StudyRecord], float]
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
    records: Sequence[StudyRecord], repair: StudyRepair, *, draws: int = 10_000, seed: int = 0
) -> RepairResult:
    lanes = {"l": repair.repaired, "0": repair.control} | {s.id: s for s in repair.switches}
    arms = sorted({a for lane in lanes.values() for a in (lane.stressed, lane.unstressed)})
    col = {a: i for i, a in enumerate(arms)}
    success = family_means(records, arms, lambda r: float(r.success))
    tokens = family_means(records, arms, lambda r: float(r.tokens_input + r.tokens_output))
    n = success.shape[0]
    if n < 2:
        raise ValueError(f"repair '{repair.id}': a bootstrap needs two families, got {n}")
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    boot_s, boot_t = success[idx].mean(axis=1), tokens[idx].mean(axis=1)
    point_s, point_t = success.mean(axis=0), tokens.mean(axis=0)

    def mu(m: Matrix, x: str, stressed: bool) -> Matrix:
        lane = lanes[x]
        return m[..., col[lane.stressed if stressed else lane.unstressed]]

    def sigma(m: Matrix, x: str) -> Matrix:
        return (mu(m, x, True) - mu(m, "0", True)) - (mu(m, x, False) - mu(m, "0", False))

    ks = [s.id for s in repair.switches]
    delta_p = sigma(point_s, "l") - max(sigma(point_s, k) for k in ks)
    delta_b = sigma(boot_s, "l") - np.max(np.stack([sigma(boot_s, k) for k in ks]), axis=0)
    success_vs = {
        k: _estimate(
            float(mu(point_s, "l", True) - mu(point_s, k, True)),
            mu(boot_s, "l", True) - mu(boot_s, k, True),
        )
        for k in ks
    }
    tokens_vs = {
        k: _estimate(
            float(mu(point_t, "l", True) - mu(point_t, k, True)),
            mu(boot_t, "l", True) - mu(boot_t, k, True),
        )
        for k in ks
    }
    dominated = any(
        success_vs[k].value <= 0
        and tokens_vs[k].value >= 0
        and (success_vs[k].value < 0 or tokens_vs[k].value > 0)
        for k in ks
    )
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
        cost_superior=all(e.high < 0 for e in tokens_vs.values()),
        nondominated=not dominated,
    )


def _pp(e: Estimate) -> str:
    return f"{100 * e.value:+.1f} pp [{100 * e.low:+.1f}, {100 * e.high:+.1f}]"


def _tok(e: Estimate) -> str:
    return f"{e.value:+.0f} [{e.low:+.0f}, {e.high:+.0f}]"


def repairs_markdown(results: Sequence[RepairResult]) -> list[str]:
    """The estimands table and the decision matrix, as Markdown lines."""
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
            "yes" if r.success_superior else "no",
            "yes" if r.cost_superior else "no",
            "yes" if r.nondominated else "no",
        ]
        for r in results
        for k in r.switches
    ]
    return [
        "## Repairs against switches (seed 4.3; family-cluster bootstrap, 95%)",
        "",
        *table(
            ["repair", "pressure", "L", "Gamma", "Sigma", "switch k", "Sigma^k", "Delta"],
            estimands,
        ),
        "",
        "Decision matrix at the stressed cell (repaired lane minus switch; wall time and "
        "cost are not measured by the simulation and do not enter):",
        "",
        *table(
            [
                "repair",
                "switch",
                "success",
                "tokens",
                "success-superior",
                "cost-superior",
                "Pareto-nondominated",
            ],
            matrix,
        ),
        "",
    ]
