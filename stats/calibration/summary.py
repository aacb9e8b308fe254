"""The calibration's table: one row per test, quantity and scenario, and the result.

Each row is a rate over the simulated data sets (type I error, power or coverage) with
its Monte Carlo standard error and verdict (:mod:`prereg.stats.calibration.mc_error`).
The registered multiplicity family (``family``) gets one row: the chance, with no effect
on any member (the global null), that its rule rejects at least one member, which is its
family-wise error and, with every hypothesis null, its false discovery rate too; nominal:
the registered q. A family of contrasts is simulated on the registration's arms with no
effect on any arm, every contrast computed from the same simulated runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg.stats.calibration.mc_error import _rate, verdict
from prereg.stats.calibration.outcome import _Acc
from prereg.stats.calibration.plans import FamilyPlan, MonitorPlan, PlannedTest
from prereg.stats.calibration.scenarios import _scenarios
from prereg.stats.calibration_model import BoolArray, Population


@dataclass(frozen=True)
class CalibrationRow:
    """One calibrated figure: a test's type I error, power or interval coverage."""

    label: str
    test: str
    quantity: str  # "type I error", "power" or "coverage"
    scenario: str  # "null", "planned effect", "margin" or "equivalence"
    nominal: float | None
    estimate: float
    mc_se: float
    verdict: str
    sims: int
    truth: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "test": self.test,
            "quantity": self.quantity,
            "scenario": self.scenario,
            "nominal": self.nominal,
            "estimate": self.estimate,
            "mc_se": self.mc_se,
            "verdict": self.verdict,
            "sims": self.sims,
            "truth": self.truth,
            "note": self.note,
        }


@dataclass(frozen=True)
class CalibrationResult:
    rows: tuple[CalibrationRow, ...]
    population: Population
    effect: float
    effects: dict[str, float]
    sims: int
    seed: int | None
    draws: int
    method: str
    notes: tuple[str, ...] = ()


def _row(
    label: str,
    test: str,
    quantity: str,
    scenario: str,
    nominal: float | None,
    parts: list[BoolArray],
    truth: float | None = None,
    note: str = "",
) -> CalibrationRow:
    est, se, n = _rate(parts)
    return CalibrationRow(
        label=label,
        test=test,
        quantity=quantity,
        scenario=scenario,
        nominal=nominal,
        estimate=est,
        mc_se=se,
        verdict=verdict(quantity, est, nominal, n),
        sims=n,
        truth=truth,
        note=note,
    )


def _rows_of(
    plan: PlannedTest,
    index: int,
    acc: dict[tuple[int, str], _Acc],
    truths: dict[str, float],
    sign: int,
    power_target: float | None,
) -> list[CalibrationRow]:
    rows: list[CalibrationRow] = []
    level = 1.0 - 2.0 * plan.alpha if plan.test == "tost_paired" else plan.interval_level
    either = "rejections in either direction" if plan.sides == "two-sided" else ""
    for key, scenario in _scenarios(plan):
        a, truth = acc[(index, key)], truths[key]
        if scenario == "null":
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "type I error",
                    scenario,
                    plan.alpha,
                    a.reject,
                    None,
                    either,
                )
            )
        elif scenario == "margin":
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "type I error",
                    scenario,
                    plan.alpha,
                    a.reject,
                    truth,
                    "equivalence declared with the true difference on the margin",
                )
            )
        elif scenario == "equivalence":
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "power",
                    scenario,
                    None,
                    a.reject,
                    truth,
                    "equivalence declared with no difference",
                )
            )
        else:
            hits = [
                r & (d == sign) if plan.sides == "two-sided" else r
                for r, d in zip(a.reject, a.direction, strict=True)
            ]
            rows.append(
                _row(
                    plan.label,
                    plan.test,
                    "power",
                    scenario,
                    power_target,
                    hits,
                    truth,
                    "rejections in the planned direction",
                )
            )
        if a.covered:
            note = (
                f"{a.undefined} data set(s) without an interval count as misses"
                if a.undefined
                else ""
            )
            rows.append(
                _row(plan.label, plan.test, "coverage", scenario, level, a.covered, truth, note)
            )
    return rows


def _monitor_rows(
    monitor: MonitorPlan, mon: dict[str, _Acc], sign: int, power_target: float | None
) -> list[CalibrationRow]:
    null, alt = mon["null"], mon["planned effect"]
    used_null, used = np.concatenate(null.used), np.concatenate(alt.used)
    hits = [r & (d == sign) for r, d in zip(alt.reject, alt.direction, strict=True)]
    name = "beta-mixture e-process"
    return [
        _row(
            monitor.label,
            name,
            "type I error",
            "null",
            1.0 / monitor.threshold,
            null.reject,
            None,
            f"crossing in either direction; nominal: Ville's bound 1/{monitor.threshold:g}; "
            f"mean prompts used {float(used_null.mean()):.1f}",
        ),
        _row(
            monitor.label,
            name,
            "power",
            "planned effect",
            power_target,
            hits,
            None,
            f"crossing in the planned direction; mean prompts used {float(used.mean()):.1f}",
        ),
    ]


def _family_row(fam: FamilyPlan, acc: _Acc) -> CalibrationRow:
    est, se, n = _rate(acc.reject)
    fdr = fam.method in ("bh", "e-bh")
    quantity = "false discovery rate" if fdr else "family-wise error"
    simulated = sum(member is not None for member in fam.members)
    note = (
        f"global null (no effect on any member): any rejection by {fam.method} at q "
        f"{fam.q:g} over {len(fam.members)} member(s), {simulated} simulated"
        + (f"; the contrasts on {fam.arms} arms simulated together" if fam.arms else "")
        + ("; FDR = FWER when every hypothesis is null" if fdr else "")
        + (f"; {fam.note}" if fam.note else "")
    )
    return CalibrationRow(
        label=fam.label,
        test=f"{fam.method} over {fam.family}",
        quantity=quantity,
        scenario="global null",
        nominal=fam.q,
        estimate=est,
        mc_se=se,
        verdict=verdict("type I error", est, fam.q, n),
        sims=n,
        note=note,
    )
