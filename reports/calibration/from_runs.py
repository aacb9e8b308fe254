"""``prereg calibrate --from-runs ID``: the simulated population calibrated to a pilot.

The pilot's runs give, through the estimators of :mod:`prereg.reports.planning.pilot` (the ones
``prereg plan --from-runs`` uses): sigma_d at the calibrated registration's runs per arm
(rescaled from the pilot's repeats), the between-run SD (method of moments over the
repeats as replicate runs), the intraclass correlation of repeats, and the control arm's
success rate as the base rate. Explicit options win over the pilot; the registration's
``plan:`` gives what neither sets. An estimate the pilot cannot give (one repeat: no
between-run SD; no variation: no ICC) is left to the plan or the defaults, with a note;
an ICC that cannot produce the pilot's sigma_d (the population's constraint, see
:mod:`prereg.stats.calibration_model`) is dropped with a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.registry.calibration import Figures
from prereg.reports.planning.from_runs import pilot_estimates
from prereg.stats.calibration_model import population

#: base rates are kept this far inside (0, 1) (a pilot at 0 or 1 leaves nothing to vary)
RATE_MARGIN = 0.02


@dataclass(frozen=True)
class PilotFigures:
    figures: Figures
    pilot: dict[str, Any]
    notes: list[str]


def pilot_figures(
    ws: Workspace, reg_id: str, runs_per_arm: int, prompts: int, given: Figures, seed: int = 0
) -> PilotFigures:
    """``given`` completed with the pilot's estimates (see the module docstring)."""
    info, est, _ = pilot_estimates(ws, reg_id, runs_per_arm, seed)
    origins = dict(given.origins)
    notes: list[str] = []
    values: dict[str, float | None] = {
        "sigma_d": given.sigma_d,
        "sigma_run": given.sigma_run,
        "icc": given.icc,
        "base_rate": given.base_rate,
    }
    estimates = {
        "sigma_d": est.sigma_d.at(runs_per_arm),
        "sigma_run": est.between_run.sigma_run,
        "icc": est.icc.rho,
        "base_rate": est.rates.get(est.control, math.nan),
    }
    for name, value in estimates.items():
        if values[name] is not None:
            continue
        if not math.isfinite(value) or (name == "sigma_d" and value <= 0.0):
            notes.append(f"the pilot gives no {name} (not estimable from its runs)")
            continue
        if name == "base_rate":
            value = min(1.0 - RATE_MARGIN, max(RATE_MARGIN, value))
        if name == "icc" and value <= 0.0:
            notes.append("the pilot's ICC is 0; the model's default is used")
            continue
        values[name], origins[name] = float(value), "pilot"
    figures = replace(
        given,
        sigma_d=values["sigma_d"],
        sigma_run=values["sigma_run"],
        icc=values["icc"],
        base_rate=values["base_rate"],
        origins=origins,
    )
    if figures.icc is not None and origins.get("icc") == "pilot" and figures.sigma_d is not None:
        try:
            population(
                max(prompts, 1),
                runs_per_arm,
                figures.sigma_d,
                sigma_run=figures.sigma_run or 0.0,
                base_rate=figures.base_rate or 0.5,
                icc=figures.icc,
            )
        except ValueError as exc:
            if "icc" not in str(exc):
                raise BadInput(
                    f"the pilot's figures cannot be simulated: {exc}", field="--from-runs"
                ) from None
            notes.append(f"the pilot's ICC {figures.icc:.3f} is dropped: {exc}")
            origins.pop("icc")
            figures = replace(figures, icc=None, origins=origins)
    return PilotFigures(figures, info, notes)
