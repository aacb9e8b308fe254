"""Repairs as the seed defines them (issue 42; seed 4.3, 5.4, appendix H).

Hand-made rows, checked against arithmetic by hand and against an independent numpy
re-implementation of the seed's formulas over the exact bootstrap distribution
(enumerated here as every *ordered* resample, n^n of them, or every multiset by
itertools with math.factorial probabilities: neither is the module's enumeration).
Holm is checked against statsmodels' multipletests.

Two families, one task each, two repeats per arm (cell means 0, 0.5 or 1):

    arm (lane, cell)        f1    f2
    C0 control, unstressed  1     1
    C1 control, stressed    0     0.5
    R0 repaired, unstr.     1     1
    R1 repaired, stressed   1     0.5
    O0 other repair, unstr. 1     0.5      (a W repair run on the V cells)
    O1 other repair, str.   0.5   1
    K1 switch, stressed     0.5   1

L = mean(C0 - C1) = 0.75; Gamma = mean(R1 - C1) = 0.5; Sigma = Gamma - mean(R0 - C0) =
0.5; Sigma^k = mean(O1 - C1) - mean(O0 - C0) = 0.5 - (-0.25) = 0.75; Delta = -0.25. At the
stressed cell the repaired lane and the switch both succeed 0.75 of the time; the repair
spends 100 tokens, the switch 200.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import yaml
from statsmodels.stats.multitest import multipletests

from prereg.core.errors import BadInput
from prereg.core.yamlio import load_model
from prereg.experiments.toolbottleneck.study import StudyFile, StudyRepair
from prereg.reports.toolbottleneck.repairs import (
    NOT_MEASURED,
    RepairRow,
    analyse_repairs,
    repair_result,
    repair_tables,
    repairs_markdown,
)

CELLS = {
    "c0": (1.0, 1.0),
    "c1": (0.0, 0.5),
    "r0": (1.0, 1.0),
    "r1": (1.0, 0.5),
    "o0": (1.0, 0.5),
    "o1": (0.5, 1.0),
    "k1": (0.5, 1.0),
}
TOKENS = {"r1": 100, "k1": 200}


def _rows(
    cells: Mapping[str, Sequence[float]] = CELLS,
    tokens: Mapping[str, float] = TOKENS,
    wall: Mapping[str, float] | None = None,
    cost: Mapping[str, float] | None = None,
    repeats: int = 2,
) -> list[RepairRow]:
    """One task per family; a cell mean m gives round(m * repeats) successes."""
    out = []
    for arm, means in cells.items():
        for f, mean in enumerate(means):
            wins = round(mean * repeats)
            for k in range(repeats):
                out.append(
                    RepairRow(
                        arm,
                        f"f{f}-s0",
                        f"f{f}",
                        k < wins,
                        float(tokens.get(arm, 50)),
                        None if wall is None else wall.get(arm, 1.0),
                        None if cost is None else cost.get(arm, 0.01),
                    )
                )
    return out


def _repair(**extra: Any) -> StudyRepair:
    doc: dict[str, Any] = {
        "id": "routed",
        "pressure": "V",
        "repaired": {"stressed": "r1", "unstressed": "r0"},
        "control": {"stressed": "c1", "unstressed": "c0"},
        "other_repairs": [{"id": "wp", "pressure": "W", "stressed": "o1", "unstressed": "o0"}],
        "switches": [{"id": "k", "stressed": "k1", "unstressed": "c0"}],
    }
    doc.update(extra)
    return StudyRepair.model_validate(doc)


# --- by hand -----------------------------------------------------------------------------


def test_the_estimands_by_hand_and_specificity_against_the_other_pressures_repair() -> None:
    r = repair_result(_rows(), _repair())
    assert r.families == 2 and r.exact
    assert r.loss.value == pytest.approx(0.75)
    assert r.gain.value == pytest.approx(0.5)
    assert r.specific.value == pytest.approx(0.5)
    assert r.others["wp"][0] == "W"
    assert r.others["wp"][1].value == pytest.approx(0.75)
    assert r.delta is not None and r.delta.value == pytest.approx(-0.25)
    # two families: every interval is withheld with its reason, never printed
    for e in (r.loss, r.gain, r.specific, r.others["wp"][1], r.delta):
        assert e.low is None and e.high is None and "too few families (2 < 10)" in str(e.reason)


def test_a_switch_never_enters_specificity() -> None:
    """Without other pressures' repairs Delta is not computed, whatever the switches."""
    r = repair_result(_rows(), _repair(other_repairs=None))
    assert r.others == {} and r.delta is None
    spec = repair_tables([r])[1]
    assert spec[2][0][-1].startswith("not computed: no repair aimed at another pressure")


def test_the_decision_matrix_by_hand() -> None:
    r = repair_result(_rows(), _repair())
    (v,) = r.versus
    assert (v.incumbent, v.switch) == ("c1", "k")
    assert v.success.value == pytest.approx(0.0)
    assert v.tokens.value == pytest.approx(-100)
    (verdict,) = r.verdicts
    # two families: superiority is not decided; Pareto (point estimates) is
    assert verdict.success_superior is None and verdict.cost_superior is None
    assert verdict.nondominated  # as good on success, cheaper on tokens
    text = "\n".join(repairs_markdown([r]))
    assert "| routed | k |" in text and "not decided: too few families (2 &lt; 10)" in text


def test_a_switch_as_good_on_success_and_cheaper_dominates() -> None:
    r = repair_result(_rows(tokens={"r1": 300, "k1": 200}), _repair())
    assert r.verdicts[0].nondominated is False


def test_unmeasured_wall_time_and_cost_read_not_measured_and_never_zero() -> None:
    r = repair_result(_rows(), _repair())
    assert r.versus[0].wall is None and r.versus[0].cost is None and r.cost_basis == "tokens"
    matrix = repair_tables([r])[3][2][0]
    assert matrix[4:6] == [NOT_MEASURED, NOT_MEASURED] and matrix[7].endswith("(tokens)")
    # one record without a cost is enough: a null is never read as zero
    rows = _rows(cost={"r1": 0.5, "k1": 0.1})
    rows[0] = RepairRow(rows[0].arm, rows[0].task_id, rows[0].family, rows[0].success, 1.0)
    assert repair_result(rows, _repair()).versus[0].cost is None


def test_measured_cost_enters_the_pareto_comparison() -> None:
    same = {"r1": 200, "k1": 200}
    r = repair_result(
        _rows(tokens=same, wall={"r1": 2.0, "k1": 2.0}, cost={"r1": 0.5, "k1": 0.1}), _repair()
    )
    assert r.cost_basis == "cost" and r.versus[0].cost is not None
    assert r.versus[0].cost.value == pytest.approx(0.4)
    assert r.verdicts[0].nondominated is False  # equal elsewhere, dearer: dominated
    r = repair_result(_rows(wall={"r1": 1.0, "k1": 3.0}, cost={"r1": 0.1, "k1": 0.5}), _repair())
    assert r.verdicts[0].nondominated is True
    assert r.versus[0].wall is not None and r.versus[0].wall.value == pytest.approx(-2.0)


def test_one_family_is_reported_as_not_computed() -> None:
    rows = [x for x in _rows() if x.family == "f0"]
    results, failed = analyse_repairs(rows, [_repair()])
    assert results == [] and failed[0][0] == "routed" and "two families" in failed[0][1]
    tables = repair_tables(results, failed)
    assert tables == [("Repair routed", [], [], failed[0][1])]


# --- an independent reference ------------------------------------------------------------

ARMS = ["c0", "c1", "r0", "r1", "o0", "o1", "p0", "p1", "k1"]


def _random_cells(n: int, seed: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.3, 1.0, size=n)
    out = {}
    for arm in ARMS:
        shift = {"c1": -0.3, "r1": -0.1, "o1": -0.25, "p1": -0.2, "k1": -0.05}.get(arm, 0.0)
        values = np.clip(base + shift + rng.normal(0, 0.2, size=n), 0, 1)
        out[arm] = [round(4 * v) / 4 for v in values]  # four repeats: multiples of 1/4
    return out


def _repair_two_others(margin: float | None = 0.2) -> StudyRepair:
    return _repair(
        other_repairs=[
            {"id": "wp", "pressure": "W", "stressed": "o1", "unstressed": "o0"},
            {"id": "ig", "pressure": "D", "stressed": "p1", "unstressed": "p0"},
        ],
        equivalence_margin=margin,
    )


def _ordered_resamples(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered resample of n families (n^n index tuples), equal probability."""
    idx = np.array(list(itertools.product(range(n), repeat=n)))
    return idx, np.full(len(idx), 1.0 / len(idx))


def _multiset_resamples(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every multiset by itertools, probability n! / prod(k!) / n^n by math.factorial."""
    counts, prob = [], []
    for combo in itertools.combinations_with_replacement(range(n), n):
        k = np.bincount(combo, minlength=n)
        counts.append(k)
        prob.append(math.factorial(n) / math.prod(math.factorial(int(x)) for x in k) / n**n)
    return np.array(counts, dtype=float), np.array(prob)


def _reference(cells: dict[str, list[float]], n: int, margin: float) -> dict[str, Any]:
    """The seed's formulas on family means, over the exact bootstrap distribution."""
    F = {a: np.array(v) for a, v in cells.items()}
    if n <= 6:
        idx, prob = _ordered_resamples(n)
        M = {a: F[a][idx].mean(axis=1) for a in F}
    else:
        counts, prob = _multiset_resamples(n)
        M = {a: counts @ F[a] / n for a in F}
    P = {a: F[a].mean() for a in F}

    def quantities(m: dict[str, Any]) -> dict[str, Any]:
        def sig(s1: str, s0: str) -> Any:
            return (m[s1] - m["c1"]) - (m[s0] - m["c0"])

        out = {
            "L": m["c0"] - m["c1"],
            "Gamma": m["r1"] - m["c1"],
            "Sigma": sig("r1", "r0"),
            "wp": sig("o1", "o0"),
            "ig": sig("p1", "p0"),
            "vs": m["r1"] - m["k1"],
        }
        out["Delta"] = out["Sigma"] - np.maximum(out["wp"], out["ig"])
        return out

    point, draws = quantities(P), quantities(M)

    def inv_cdf(x: np.ndarray, q: float, strictly: bool = False) -> float:
        order = np.argsort(x)
        cdf = np.cumsum(prob[order])
        ok = cdf > q + 1e-12 if strictly else cdf >= q - 1e-12
        return float(x[order][np.argmax(ok)])

    def p_above(x: np.ndarray, t: float) -> float:
        return float(prob[x >= t - 1e-12].sum())

    ref: dict[str, Any] = {"point": point}
    ref["interval"] = {k: (inv_cdf(d, 0.025), inv_cdf(d, 0.975)) for k, d in draws.items()}
    ps = [p_above(draws[k] - point[k], point[k]) for k in ("L", "Gamma", "Sigma")]
    ref["p_activation"] = max(ps)
    g, gd = point["Gamma"], draws["Gamma"]
    ref["tost"] = lambda m: max(p_above(gd - g, g + m), p_above(g - gd, m - g))
    ref["tost_p"] = ref["tost"](margin)
    ref["smallest"] = max(inv_cdf(gd, 0.95) - 2 * g, 2 * g - inv_cdf(gd, 0.05, strictly=True))
    return ref


@pytest.mark.parametrize("n", [4, 10])
def test_every_figure_against_an_independent_exact_bootstrap(n: int) -> None:
    cells = _random_cells(n, seed=n)
    rows = _rows(cells, repeats=4)
    r = repair_result(rows, _repair_two_others(0.2))
    ref = _reference(cells, n, 0.2)
    assert r.exact and r.families == n
    shown = {
        "L": r.loss,
        "Gamma": r.gain,
        "Sigma": r.specific,
        "wp": r.others["wp"][1],
        "ig": r.others["ig"][1],
        "Delta": r.delta,
        "vs": r.versus[0].success,
    }
    for key, e in shown.items():
        assert e is not None
        assert e.value == pytest.approx(ref["point"][key], abs=1e-12), key
        if n < 10:
            assert e.low is None and "too few families" in str(e.reason), key
        else:
            assert (e.low, e.high) == pytest.approx(ref["interval"][key], abs=1e-12), key
    assert r.activation.p == pytest.approx(ref["p_activation"], abs=1e-9)
    assert r.equivalence.p == pytest.approx(ref["tost_p"], abs=1e-9)
    if n < 10:
        assert r.equivalence.smallest is None and r.equivalence.equivalent is None
    else:
        m = r.equivalence.smallest
        assert m is not None
        assert m == pytest.approx(ref["smallest"], abs=1e-12)
        # the infimum: the tests reject just above it and not below it
        assert ref["tost"](m + 1e-9) <= 0.05 < ref["tost"](m - 1e-3)
        assert r.equivalence.equivalent == (ref["tost_p"] <= 0.05)


def test_holm_across_repairs_against_statsmodels() -> None:
    n = 10
    repairs, rows = [], []
    for j in range(4):
        cells = _random_cells(n, seed=100 + j)
        if j == 0:  # a repair that clearly activates
            cells["r1"] = list(cells["c0"])
            cells["c1"] = [max(0.0, v - 0.5) for v in cells["c0"]]
        rename = {a: f"{a}-{j}" for a in cells}
        rows += _rows({rename[a]: v for a, v in cells.items()}, repeats=4)
        repairs.append(
            StudyRepair.model_validate(
                {
                    "id": f"rep{j}",
                    "pressure": "VWDR"[j],
                    "repaired": {"stressed": f"r1-{j}", "unstressed": f"r0-{j}"},
                    "control": {"stressed": f"c1-{j}", "unstressed": f"c0-{j}"},
                }
            )
        )
    results, failed = analyse_repairs(rows, repairs)
    assert not failed and len(results) == 4
    raw = [r.activation.p for r in results]
    reject, adjusted, _, _ = multipletests(raw, alpha=0.05, method="holm")
    assert [r.activation.holm for r in results] == pytest.approx(list(adjusted), abs=1e-12)
    assert [r.activation.activates for r in results] == list(reject)
    assert results[0].activation.activates is True
    table = repair_tables(results)[0]
    assert table[1][5:8] == ["p (activation)", "Holm p", "activates"]


# --- the decision matrix over every incumbent ---------------------------------------------


def test_the_decision_matrix_counts_every_incumbent() -> None:
    """Three incumbents A, B, C ran the repair; each is compared with the other two's
    no-repair lanes and the listed switch S. A's repair beats everyone clearly, B's and C's
    do not: success-superior 1 of 3, computed, not listed by hand."""
    n = 10
    rng = np.random.default_rng(7)
    cells: dict[str, list[float]] = {}
    for name, repaired_rate in (("a", 1.0), ("b", 0.5), ("c", 0.5)):
        cells[f"{name}-c0"] = [1.0] * n
        cells[f"{name}-c1"] = [0.25] * n
        cells[f"{name}-r0"] = [1.0] * n
        cells[f"{name}-r1"] = [repaired_rate - (0.25 if i % 3 == 0 else 0.0) for i in range(n)]
    cells["s-1"] = [float(rng.choice([0.25, 0.5])) for _ in range(n)]
    repair = StudyRepair.model_validate(
        {
            "id": "routed",
            "pressure": "V",
            "repaired": {"stressed": "a-r1", "unstressed": "a-r0"},
            "control": {"stressed": "a-c1", "unstressed": "a-c0"},
            "incumbents": [
                {
                    "id": x,
                    "repaired": {"stressed": f"{x}-r1", "unstressed": f"{x}-r0"},
                    "control": {"stressed": f"{x}-c1", "unstressed": f"{x}-c0"},
                }
                for x in ("b", "c")
            ],
            "switches": [{"id": "s", "stressed": "s-1", "unstressed": "a-c0"}],
        }
    )
    r = repair_result(_rows(cells, repeats=4), repair)
    by = {v.incumbent: v for v in r.verdicts}
    assert set(by) == {"a-c1", "b", "c"} and all(v.switches == 3 for v in by.values())
    compared = {(v.incumbent, v.switch) for v in r.versus}
    assert ("b", "a-c1") in compared and ("a-c1", "b") in compared and ("c", "s") in compared

    # the reference: each difference's exact 95% percentile interval above zero
    counts, prob = _multiset_resamples(n)

    def low(x: str, y: str) -> float:
        d = counts @ (np.array(cells[x]) - np.array(cells[y])) / n
        order = np.argsort(d)
        return float(d[order][np.argmax(np.cumsum(prob[order]) >= 0.025 - 1e-12)])

    repaired = {"a-c1": "a-r1", "b": "b-r1", "c": "c-r1"}
    control = {"a-c1": "a-c1", "b": "b-c1", "c": "c-c1"}
    expected = {
        i: all(low(repaired[i], control[j]) > 0 for j in control if j != i)
        and low(repaired[i], "s-1") > 0
        for i in repaired
    }
    assert {i: v.success_superior for i, v in by.items()} == expected
    assert sum(expected.values()) == 1
    counts_row = repair_tables([r])[4][2][0]
    assert counts_row[:3] == ["routed", "3", f"{sum(expected.values())} of 3"]


# --- the registration fields --------------------------------------------------------------


def test_absent_added_fields_are_not_in_the_document() -> None:
    old = {
        "id": "routed",
        "pressure": "V",
        "repaired": {"stressed": "r1", "unstressed": "r0"},
        "control": {"stressed": "c1", "unstressed": "c0"},
        "switches": [{"id": "k", "stressed": "k1", "unstressed": "k0"}],
    }
    assert StudyRepair.model_validate(old).model_dump(mode="json") == old
    new = _repair_two_others(0.036).model_dump(mode="json")
    assert new["equivalence_margin"] == 0.036 and len(new["other_repairs"]) == 2


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"other_repairs": [{"id": "x", "pressure": "V", "stressed": "a", "unstressed": "a"}]},
            "other_repairs[0].pressure",
        ),
        ({"equivalence_margin": 1.5}, "equivalence_margin"),
        ({"equivalence_margin": 0}, "equivalence_margin"),
    ],
)
def test_bad_repair_fields_are_refused(change: dict[str, Any], field: str) -> None:
    doc: dict[str, Any] = {
        "id": "s",
        "families": ["f.yaml"],
        "arms": [{"id": "a", "menu": 8, "workflow": "low", "encoding": "raw"}],
        "repairs": [
            {
                "id": "r",
                "pressure": "V",
                "repaired": {"stressed": "a", "unstressed": "a"},
                "control": {"stressed": "a", "unstressed": "a"},
                **change,
            }
        ],
    }
    with pytest.raises(BadInput) as info:
        load_model(StudyFile, yaml.safe_dump(doc), "study.yaml")
    assert field in str(info.value.field), str(info.value)


def test_duplicate_repair_ids_and_unknown_arms_are_refused() -> None:
    one = (
        "  - id: r\n    pressure: {p}\n    repaired: {{stressed: a, unstressed: a}}\n"
        "    control: {{stressed: a, unstressed: {u}}}\n"
    )
    head = (
        "id: s\nfamilies: [f.yaml]\narms:\n  - {id: a, menu: 8, workflow: low, encoding: raw}\n"
        "repairs:\n"
    )
    with pytest.raises(BadInput) as info:
        load_model(StudyFile, head + one.format(p="V", u="a") + one.format(p="W", u="a"), "s.yaml")
    assert "repairs" in str(info.value.field) and "duplicate" in str(info.value)
    with pytest.raises(BadInput) as info:
        load_model(StudyFile, head + one.format(p="V", u="b"), "s.yaml")
    assert "repairs[0].control.unstressed" in str(info.value.field)
    # several repairs of one pressure, each its own entry: accepted
    other = one.format(p="V", u="a").replace("id: r", "id: r2")
    assert (
        len(load_model(StudyFile, head + one.format(p="V", u="a") + other, "s.yaml").repairs) == 2
    )


# --- every printed figure passes the report's checker, at the edges of its support ---------


class _Collect:
    def __init__(self) -> None:
        self.found: list[tuple[str, str, str]] = []

    def add(self, path: str, rule: str, message: str) -> None:
        self.found.append((path, rule, message))


def test_extreme_figures_print_inside_their_support_and_pass_the_checker() -> None:
    """Sigma near +200 points and Delta near +200 (a difference of two differences) at 10
    families: every table passes the report checker's rules for study tables."""
    from prereg.reports.invariants import _study_table
    from prereg.reports.toolbottleneck.model import StudyTable

    n = 10
    dip = [0.25 if i % 4 == 0 else 0.0 for i in range(n)]
    dip2 = [0.25 if i % 3 == 1 else 0.0 for i in range(n)]
    cells = {
        "c0": [1.0] * n,
        "c1": [0.0 + d for d in dip],
        "r0": [0.0 + d for d in dip],
        "r1": [1.0] * n,
        "o0": [1.0 - d for d in dip2],
        "o1": [0.0] * n,
        "k1": [0.5 + d for d in dip],
    }
    r = repair_result(_rows(cells, repeats=4), _repair(equivalence_margin=0.1))
    assert r.specific.value > 1.8 and r.delta is not None and r.delta.value > 1.5
    assert r.specific.high is not None and r.specific.high <= 2.0
    collect = _Collect()
    for i, (title, header, rows, note) in enumerate(repair_tables([r])):
        _study_table(
            collect, StudyTable(title=title, columns=header, rows=rows, note=note), f"/{i}"
        )  # type: ignore[arg-type]
    assert collect.found == []
    spec = repair_tables([r])[1][2][0]
    assert " pp" not in spec[2] and spec[2].startswith("+")  # Sigma: its own support
