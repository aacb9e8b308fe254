"""The structural holdout (seed 001, section 4.3 and 5.5, appendix "Structural holdout",
Table 10 and Figure 10): the public-handoff controller against the model-run baseline on
held-out families at the frontier's 2- and 30-call cells, with canonical delivery as the
wrong-layer control.

The arms are the study's holdout arms (those naming ``controller`` or ``delivery``; their
records carry ``orchestration``, ``delivery``, ``certified_minimum``, the calls by issuer,
the model requests and whether the episode budget fired). An arm's call level is its
cells' certified minimum; the unstressed cell is the smallest level (2), the stressed one
the largest (30).

**Table 10**: per (orchestration, delivery, calls) the rows, VTS, mean model requests,
mean executed calls by issuer (controller, model) and in all, mean tokens (input +
output, the mechanism's units) and the episodes over the episode budget; arms of one
(orchestration, delivery, calls) (e.g. two encodings) are pooled, as the seed's 2-call
rows pool raw and compact.

**L, Gamma, Sigma, Delta** (seed 4.3, reading H2): with the controller/native arms the
repaired lane, model/native the no-repair lane and model/canonical the repair aimed at
another layer (the wrong-layer control, k = canonical delivery, pressure D):

    L = mu^0_0 - mu^0_1,  Gamma = mu^c_1 - mu^0_1,  Sigma = Gamma - (mu^c_0 - mu^0_0),
    Sigma^canonical = (mu^k_1 - mu^0_1) - (mu^k_0 - mu^0_0),  Delta = Sigma - Sigma^canonical

and the control's own figures (reading H3): its loss to repair L^canonical = mu^k_0 -
mu^0_0 (what the cell's own encoding costs against the canonical one, at 2 calls) and its
stress gain Gamma^canonical = mu^k_1 - mu^0_1, so Sigma^canonical = Gamma^canonical -
L^canonical. Where several arms share an (orchestration, delivery, calls) the raw-encoding
arm is read (as the seed's L and Sigma use the raw cell); an ambiguous choice is refused.

They are computed by :func:`prereg.reports.toolbottleneck.repairs.repair_result` (the
family-cluster bootstrap, exact up to 11 families, withheld below 10 families: "too
few"). The resampling unit is the family, the study's cluster everywhere else (seed
4.2; reading H5): the seed names its holdout's units only as "24 held-out intents", and
an intent-cluster sensitivity is not computed here. L, Gamma, L^canonical and
Gamma^canonical are differences of two rates (support [-100, 100] points); Sigma,
Sigma^canonical and Delta differences of differences (support [-200, 200]): Delta's
interval may pass 100, never 200 (:data:`SUPPORT`, checked by :func:`check_support`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prereg.experiments.toolbottleneck.cells import OtherRepair, RepairLane
from prereg.experiments.toolbottleneck.study import StudyRepair
from prereg.reports.render.markdown import table
from prereg.reports.toolbottleneck.estimates import estimate_cell
from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint
from prereg.reports.toolbottleneck.repairs import (
    Estimate,
    RepairResult,
    RepairRow,
    repair_result,
)
from prereg.runners.toolbottleneck.study import StudyRecord

#: each quantity's support, as a proportion (printed x 100 in points)
SUPPORT: dict[str, tuple[float, float]] = {
    "L": (-1.0, 1.0),
    "Gamma": (-1.0, 1.0),
    "Sigma": (-2.0, 2.0),
    "Sigma^canonical": (-2.0, 2.0),
    "Delta": (-2.0, 2.0),
    "L^canonical": (-1.0, 1.0),
    "Gamma^canonical": (-1.0, 1.0),
}
ORDER = [("model", "native"), ("model", "canonical"), ("controller", "native")]


class HoldoutError(ValueError):
    """The records cannot give the holdout's quantities (the reason is printed)."""


@dataclass(frozen=True)
class ArmRow:
    """One row of Table 10 (means over the episodes; ``tokens`` in the mechanism's units)."""

    orchestration: str
    delivery: str
    calls: int
    arms: tuple[str, ...]
    rows: int
    vts: float
    requests: float
    controller_calls: float
    model_calls: float
    executed: float
    tokens: float
    over_budget: int


@dataclass(frozen=True)
class Holdout:
    table: list[ArmRow]
    families: int
    #: quantity -> estimate (proportions); empty when ``withheld`` says why
    quantities: dict[str, Estimate]
    withheld: str | None
    activation_p: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "table": [vars(r) | {"arms": list(r.arms)} for r in self.table],
            "families": self.families,
            "quantities": {k: vars(e) for k, e in self.quantities.items()},
            "support": {k: list(v) for k, v in SUPPORT.items()},
            "withheld": self.withheld,
            "activation_p": self.activation_p,
        }


@dataclass(frozen=True)
class HoldoutRow:
    """One holdout episode as the analysis reads it (from a study record, or from a
    registered run record: :mod:`prereg.reports.toolbottleneck.registered`)."""

    arm: str
    task_id: str
    family: str
    success: bool
    orchestration: str
    delivery: str
    #: the cell's call level: its certified minimum
    level: int
    encoding: str
    calls: int
    controller_calls: int
    model_calls: int
    requests: int
    tokens: float
    over_budget: bool


Records = Sequence[StudyRecord | HoldoutRow]


def holdout_records(records: Records) -> list[HoldoutRow]:
    """The holdout arms' episodes (study records without ``orchestration`` are others')."""
    out = []
    for r in records:
        if isinstance(r, HoldoutRow):
            out.append(r)
        elif r.orchestration is not None:
            out.append(
                HoldoutRow(
                    arm=r.arm,
                    task_id=r.task_id,
                    family=r.family,
                    success=r.success,
                    orchestration=r.orchestration,
                    delivery=str(r.delivery),
                    level=int(r.certified_minimum or 0),
                    encoding=str(r.cell.get("D")),
                    calls=r.calls,
                    controller_calls=int(r.controller_calls or 0),
                    model_calls=int(r.model_calls or 0),
                    requests=int(r.requests or 0),
                    tokens=float(r.tokens_input + r.tokens_output),
                    over_budget=bool(r.over_budget),
                )
            )
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def table10(records: Records) -> list[ArmRow]:
    """Table 10's rows in the seed's order (orchestration and delivery, then calls)."""
    groups: dict[tuple[str, str, int], list[HoldoutRow]] = defaultdict(list)
    for r in holdout_records(records):
        groups[(r.orchestration, r.delivery, r.level)].append(r)

    def key(k: tuple[str, str, int]) -> tuple[int, int, str, str]:
        rank = ORDER.index(k[:2]) if k[:2] in ORDER else len(ORDER)
        return (k[2], rank, k[0], k[1])

    out = []
    for k in sorted(groups, key=key):
        rs = groups[k]
        out.append(
            ArmRow(
                orchestration=k[0],
                delivery=k[1],
                calls=k[2],
                arms=tuple(sorted({r.arm for r in rs})),
                rows=len(rs),
                vts=_mean([float(r.success) for r in rs]),
                requests=_mean([float(r.requests) for r in rs]),
                controller_calls=_mean([float(r.controller_calls) for r in rs]),
                model_calls=_mean([float(r.model_calls) for r in rs]),
                executed=_mean([float(r.calls) for r in rs]),
                tokens=_mean([r.tokens for r in rs]),
                over_budget=sum(1 for r in rs if r.over_budget),
            )
        )
    return out


def lanes(records: Records) -> dict[tuple[str, str], RepairLane]:
    """(orchestration, delivery) -> its (stressed = largest calls, unstressed = smallest)
    arms; HoldoutError when an arm is missing or the choice is ambiguous."""
    held = holdout_records(records)
    levels = sorted({r.level for r in held})
    if len(levels) < 2:
        raise HoldoutError(
            f"the holdout needs two call levels (2 and 30), found {levels or 'none'}"
        )
    arms: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    raw: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for r in held:
        k = (r.orchestration, r.delivery, r.level)
        arms[k].add(r.arm)
        if r.encoding == "raw":
            raw[k].add(r.arm)
    out = {}
    for o, d in ORDER:
        pick = []
        for calls in (levels[-1], levels[0]):
            k = (o, d, calls)
            found = raw[k] or arms[k]
            if len(found) != 1:
                what = "no arm" if not found else f"arms {sorted(found)}"
                raise HoldoutError(f"{o}/{d} at {calls} calls: {what} (one arm is read)")
            pick.append(next(iter(found)))
        out[(o, d)] = RepairLane(stressed=pick[0], unstressed=pick[1])
    return out


def analyse_holdout(records: Records, *, draws: int = 10_000, seed: int = 0) -> Holdout:
    """Table 10 and the quantities with their family-cluster intervals (withheld, with
    the reason, when the records cannot give them)."""
    rows = table10(records)
    held = holdout_records(records)
    families = len({r.family for r in held})
    try:
        lane = lanes(records)
    except HoldoutError as exc:
        return Holdout(rows, families, {}, str(exc), None)
    if families < 2:
        return Holdout(rows, families, {}, f"a bootstrap needs two families, got {families}", None)
    model, canonical = lane[("model", "native")], lane[("model", "canonical")]
    controller = lane[("controller", "native")]
    main = StudyRepair(
        id="public-handoff-controller",
        pressure="W",
        repaired=controller,
        control=model,
        other_repairs=[
            OtherRepair(
                id="canonical-delivery",
                pressure="D",
                stressed=canonical.stressed,
                unstressed=canonical.unstressed,
            )
        ],
    )
    # the control's own loss and gain, as the stress gains of two auxiliary entries
    loss_c = StudyRepair(
        id="canonical-loss",
        pressure="D",
        repaired=RepairLane(stressed=canonical.unstressed, unstressed=canonical.unstressed),
        control=RepairLane(stressed=model.unstressed, unstressed=model.unstressed),
    )
    gain_c = StudyRepair(id="canonical-gain", pressure="D", repaired=canonical, control=model)
    held_rows = [RepairRow(r.arm, r.task_id, r.family, r.success, r.tokens) for r in held]
    res: RepairResult = repair_result(held_rows, main, draws=draws, seed=seed)
    loss_res = repair_result(held_rows, loss_c, draws=draws, seed=seed)
    gain_res = repair_result(held_rows, gain_c, draws=draws, seed=seed)
    assert res.delta is not None
    quantities = {
        "L": res.loss,
        "Gamma": res.gain,
        "Sigma": res.specific,
        "Sigma^canonical": res.others["canonical-delivery"][1],
        "Delta": res.delta,
        "L^canonical": loss_res.gain,
        "Gamma^canonical": gain_res.gain,
    }
    for name, e in quantities.items():
        check_support(name, e)
    return Holdout(rows, res.families, quantities, None, res.activation.p)


def check_support(name: str, e: Estimate) -> None:
    """The rule for every printed interval (docs/statistics.md): the estimate and its
    interval lie inside the quantity's support (Delta's is [-2, 2]), low <= estimate <=
    high; a violation is a bug of prereg (AssertionError), never printed."""
    lo, hi = SUPPORT[name]
    eps = 1e-9
    assert lo - eps <= e.value <= hi + eps, f"{name}: estimate {e.value} outside [{lo}, {hi}]"
    if e.low is not None and e.high is not None:
        assert lo - eps <= e.low <= e.high <= hi + eps, (
            f"{name}: interval [{e.low}, {e.high}] outside [{lo}, {hi}]"
        )
        assert e.low - eps <= e.value <= e.high + eps, f"{name}: estimate outside its interval"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


#: the quantities printed with the " pp" unit (a difference of two rates); the others
#: (differences of differences, support [-200, 200]) are printed without it
RATE_DIFFERENCES = ("L", "Gamma", "L^canonical", "Gamma^canonical")


def _points(name: str, e: Estimate) -> str:
    """``E pp [L, H]`` (``E [L, H]`` for Sigma, Sigma^canonical and Delta), or the
    estimate and why no interval is printed."""
    return estimate_cell(e, unit=" pp" if name in RATE_DIFFERENCES else "")


TABLE10_TITLE = "Structural holdout arms (Table 10)"
QUANTITIES_TITLE = "Structural holdout: L, Gamma, Sigma and Delta of the controller"
TABLE10_NOTE = (
    "Held-out families at the frontier's call levels: the public-handoff controller (a "
    "deterministic program that follows the public handoffs and issues the calls) against "
    "the model-run baseline, records delivered in the cell's own encoding (native) or a "
    "canonical one (canonical: the wrong-layer control). Arm means: VTS (%), model "
    "requests, executed calls by issuer (controller, model) and in all, tokens, episodes "
    "over the episode budget."
)
TABLE10_COLUMNS = [
    "Orchestration",
    "Delivery",
    "Calls",
    "Rows",
    "VTS",
    "Req.",
    "Ctrl.",
    "Model",
    "Exec.",
    "Tokens",
    "Over budget",
]


def holdout_tables(result: Holdout) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, columns, rows, note) of Table 10 and of the quantities (every cell a
    string; the quantities' table says why when they are withheld)."""
    rows = [
        [
            r.orchestration.capitalize(),
            r.delivery,
            str(r.calls),
            str(r.rows),
            _pct(r.vts),
            f"{r.requests:.1f}",
            f"{r.controller_calls:.1f}",
            f"{r.model_calls:.1f}",
            f"{r.executed:.1f}",
            f"{r.tokens:,.0f}",
            str(r.over_budget),
        ]
        for r in result.table
    ]
    out = [(TABLE10_TITLE, TABLE10_COLUMNS, rows, TABLE10_NOTE)]
    if result.withheld is not None:
        note = f"Withheld: {result.withheld}."
        return out + [(QUANTITIES_TITLE, ["Quantity", "Estimate"], [], note)]
    note = (
        f"Points with 95% family-cluster percentile intervals over {result.families} "
        "held-out families (the controller's lane against the model-run native lane, the "
        "2-call cell unstressed, the 30-call cell stressed; canonical delivery the "
        "wrong-layer control, readings H2 and H3). L, Gamma, L^canonical and "
        "Gamma^canonical in pp; Sigma, Sigma^canonical and Delta are differences of two "
        "differences in points, their support is [-200, 200]."
    )
    if result.activation_p is not None:
        few = result.families < 10
        demo = " (a demonstration: too few families for a decision)" if few else ""
        note += f" Activation p (L, Gamma, Sigma > 0): {result.activation_p:.3f}{demo}."
    body = [[name, _points(name, e)] for name, e in result.quantities.items()]
    return out + [(QUANTITIES_TITLE, ["Quantity", "Estimate"], body, note)]


def holdout_markdown(result: Holdout) -> list[str]:
    """Table 10 and the quantities as Markdown lines. Simulated policy: the figures
    describe a mechanism, never a model."""
    out: list[str] = []
    for title, columns, rows, note in holdout_tables(result):
        out += [f"### {title}", "", note, ""]
        if rows:
            out += table(columns, rows)
            out.append("")
    return out


def holdout_figure(result: Holdout) -> StudyFigure | None:
    """The numbers Figure 10 draws (``tb_holdout``), the same as Table 10's rows: per
    row, ``value`` the mean calls the model issued and ``x`` those the controller issued,
    the row's VTS in its label (arm means: no interval). None without rows."""
    if not result.table:
        return None
    points = [
        StudyPoint(
            label=f"{r.orchestration}/{r.delivery}, {r.calls} calls (VTS {_pct(r.vts)}%)",
            value=r.model_calls,
            x=r.controller_calls,
            reason="no interval: arm means",
        )
        for r in result.table
    ]
    return StudyFigure(name="tb_holdout", points=points)
