"""What the registration did not ask for: shown under "Exploratory", never in the verdict.

Every quantity here is descriptive and measured-only: a funnel stage that no run
of an arm measured is null for that arm (never estimated); so is a selection
rate when no task rules anything out. Counts are over completed (``ok``) runs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from prereg import stats
from prereg.reports.model import Provenance
from prereg.reports.observations import STAGES, Obs, outcome_place
from prereg.reports.pairs import runset


def funnel(observations: Sequence[Obs], arm: str) -> dict[str, Any] | None:
    """Stage counts over the arm's positive tasks, with conditional rates and loss shares.

    Loss shares (``prereg.stats.loss_shares``) need a contiguous run of measured
    stages from the first; with a gap (a stage not measured between two that are)
    they are null rather than computed over a broken chain.
    """
    runs = [o for o in observations if o.arm == arm and o.polarity == "positive"]
    stages: dict[str, Any] = {}
    previous: int | None = None
    conditional: list[float | None] = []
    names: list[str] = []
    contiguous = True
    for stage in STAGES:
        place = outcome_place(stage)
        measured = [v for o in runs if (v := o.outcomes[place]) is not None]
        if not measured:
            stages[stage] = None
            if previous is not None:
                contiguous = False
            previous = None
            continue
        if conditional and previous is None:
            contiguous = False
        reached = int(sum(measured))
        if previous is None:
            cond: float | None = reached / len(measured)
        else:
            cond = reached / previous if previous > 0 else None
        conditional.append(cond)
        names.append(stage)
        stages[stage] = {
            "reached": reached,
            "of": len(measured),
            "rate": reached / len(measured),
            "conditional_rate": cond,
        }
        previous = reached
    if not conditional:
        return None
    shares = None
    rates = [c for c in conditional if c is not None]
    if contiguous and len(rates) == len(conditional) and any(c < 1.0 for c in rates):
        shares = {
            name: (None if s != s else float(s))
            for name, s in zip(names, stats.loss_shares(rates), strict=True)
        }
    return {
        "positive_runs": len(runs),
        "stages": stages,
        "loss_shares": shares,
        "loss_shares_function": "prereg.stats.loss_shares(conditional stage rates)",
    }


def negatives(observations: Sequence[Obs], arm: str) -> dict[str, Any] | None:
    runs = [o for o in observations if o.arm == arm and o.polarity == "negative"]
    if not runs:
        return None
    selected = [o.funnel.get("selected") for o in runs]
    measured = [v for v in selected if v is not None]
    success = [o.success for o in runs if o.success is not None]
    return {
        "runs": len(runs),
        "success": int(sum(success)) if success else None,
        "false_invokes": int(sum(measured)) if measured else None,
        "false_invokes_measured": len(measured),
    }


def selection(observations: Sequence[Obs], arm: str) -> dict[str, Any] | None:
    rates = [
        o.selection_rate for o in observations if o.arm == arm and o.selection_rate is not None
    ]
    if not rates:
        return None
    return {
        "mean": sum(rates) / len(rates),
        "runs": len(rates),
        "note": "null on tasks that rule nothing out; not a success measure",
    }


def terminal(observations: Sequence[Obs], arm: str) -> dict[str, Any]:
    mine = [o for o in observations if o.arm == arm]
    classes = Counter(o.terminal_class for o in mine if o.terminal_class is not None)
    flags = Counter(o.terminal_flag for o in mine if o.terminal_flag is not None)
    return {"terminal_classes": dict(classes) or None, "terminal_flags": dict(flags) or None}


def _by_arm(observations: Sequence[Obs]) -> dict[str, list[Obs]]:
    """The observations of each arm, in their order (each block reads one arm's runs only,
    so it gets those instead of filtering every run once per arm and block)."""
    out: dict[str, list[Obs]] = defaultdict(list)
    for o in observations:
        out[o.arm].append(o)
    return out


def exploratory_block(
    observations: Sequence[Obs], arms: Sequence[str], reasons: Sequence[str]
) -> dict[str, Any]:
    units = [o.unit for o in observations if o.arm in arms]
    mine = _by_arm(observations)  # each arm's own runs: four blocks per arm, one pass
    return {
        "note": (
            "Not registered: descriptive, computed after the fact, and never an input "
            "to the verdict."
        ),
        "report_labelled_exploratory_because": list(reasons),
        "provenance": Provenance(
            function="counts over run records (prereg.reports.exploratory); loss shares by "
            "prereg.stats.loss_shares",
            registration_field=None,
            runs=runset(
                units,
                "status ok; every arm; funnel over positive tasks, negatives over negative tasks",
            ),
        ).model_dump(mode="json"),
        "funnel": {arm: funnel(mine.get(arm, []), arm) for arm in arms},
        "negatives": {arm: negatives(mine.get(arm, []), arm) for arm in arms},
        "selection_rate": {arm: selection(mine.get(arm, []), arm) for arm in arms},
        "terminal": {arm: terminal(mine.get(arm, []), arm) for arm in arms},
    }
