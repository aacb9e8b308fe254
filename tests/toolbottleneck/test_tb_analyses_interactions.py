"""The interaction decomposition (issue 42, item 4; seed appendix D, "Interaction").

Recomputed here with numpy from the raw episodes: the unit cells, each unit's
interaction, the independence expectation, the all-fail units and their share, the
forced-sign units and the interaction without them, the rescued units, and the 95%
percentile family-cluster intervals of the two ratio estimates by exact enumeration of
every multiset of the families (itertools). A hand-made case checks the definitions.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest

from prereg.reports.toolbottleneck.capsweep import SweepArm
from prereg.reports.toolbottleneck.interactions import decompose, decomposition_tables
from tests.toolbottleneck.test_tb_analyses_capsweep import Ep, family

LEVELS = {"V": (8, 128), "W": ("low", "high"), "D": ("raw", "linked")}


def _arms(configs: list[str]) -> dict[str, SweepArm]:
    out = {}
    for c in configs:
        for v in LEVELS["V"]:
            for w in LEVELS["W"]:
                for d in LEVELS["D"]:
                    out[f"{c}-v{v}-{w}-{d}"] = SweepArm(c, 1024, v, w, d)
    return out


def _records(arms: dict[str, SweepArm], families: int, repeats: int, seed: int = 5) -> list[Ep]:
    rng = np.random.default_rng(seed)
    out = []
    for arm, a in sorted(arms.items()):
        p = 0.9 - 0.35 * (a.menu == 128) - 0.1 * (a.workflow == "high")
        for f in range(families):
            for s in range(2):
                for rep in range(repeats):
                    ok = bool(rng.random() < p)
                    out.append(
                        Ep(arm, f"fam{f}-s{s}", rep, "ok", ok, None if ok else "call_limit", "x", 3)
                    )
    return out


def ref_units(records: list[Ep], arms: dict[str, SweepArm], pair: tuple[str, str]) -> list[dict]:
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        runs[(r.task_id, r.arm)].append(float(r.success))
    fam_mean: dict[tuple[str, str], float] = {}
    by_fam: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (t, arm), v in runs.items():
        by_fam[(family(t), arm)].append(float(np.mean(v)))
    fam_mean = {k: float(np.mean(v)) for k, v in by_fam.items()}
    third = ({"V", "W", "D"} - set(pair)).pop()
    get = {"V": lambda a: a.menu, "W": lambda a: a.workflow, "D": lambda a: a.encoding}
    units = []
    families = sorted({f for f, _ in fam_mean})
    configs = sorted({a.configuration for a in arms.values()})
    for c in configs:
        for lvl in LEVELS[third]:

            def arm_at(x: int, y: int, c: str = c, lvl: object = lvl) -> str:
                return next(
                    k
                    for k, a in arms.items()
                    if a.configuration == c
                    and get[third](a) == lvl
                    and get[pair[0]](a) == LEVELS[pair[0]][x]
                    and get[pair[1]](a) == LEVELS[pair[1]][y]
                )

            for f in families:
                m = {(x, y): fam_mean[(f, arm_at(x, y))] for x in (0, 1) for y in (0, 1)}
                units.append(
                    {"f": f, "m00": m[0, 0], "m10": m[1, 0], "m01": m[0, 1], "m11": m[1, 1]}
                )
    for u in units:
        u["I"] = u["m11"] - u["m10"] - u["m01"] + u["m00"]
        c = u["m00"] - u["m10"] - u["m01"]
        u["forced"] = c > 0 or c + 1 < 0
    return units


def ref_ratio_interval(units: list[dict], keep: str | None) -> tuple[float, float]:
    fams = sorted({u["f"] for u in units})
    num = np.array(
        [sum(u["I"] for u in units if u["f"] == f and (keep is None or not u[keep])) for f in fams]
    )
    den = np.array(
        [sum(1 for u in units if u["f"] == f and (keep is None or not u[keep])) for f in fams],
        dtype=float,
    )
    n = len(fams)
    vals, probs = [], []
    for combo in itertools.combinations_with_replacement(range(n), n):
        k = np.bincount(combo, minlength=n)
        if k @ den == 0:
            continue
        vals.append((k @ num) / (k @ den))
        probs.append(math.factorial(n) / np.prod([math.factorial(x) for x in k]) / n**n)
    v, p = np.array(vals), np.array(probs)
    p = p / p.sum()
    order = np.argsort(v, kind="stable")
    v, cdf = v[order], np.cumsum(p[order])
    return (
        float(v[min(int(np.searchsorted(cdf, 0.025 - 1e-12)), v.size - 1)]),
        float(v[min(int(np.searchsorted(cdf, 0.975 - 1e-12)), v.size - 1)]),
    )


def test_the_decomposition_against_numpy_with_ten_families() -> None:
    arms = _arms(["cfg-a", "cfg-b"])
    records = _records(arms, families=10, repeats=1)
    results = {d.name: d for d in decompose(records, arms, family)}
    assert list(results) == ["V x W", "V x D", "W x D"]
    for name, pair in (("V x W", ("V", "W")), ("V x D", ("V", "D")), ("W x D", ("W", "D"))):
        d = results[name]
        units = ref_units(records, arms, pair)
        assert d.units == len(units) == 10 * 2 * 2 and d.families == 10
        observed = float(np.mean([u["I"] for u in units]))
        assert d.observed.value == pytest.approx(observed)
        assert (d.observed.low, d.observed.high) == pytest.approx(ref_ratio_interval(units, None))
        p = np.mean([[u["m00"], u["m10"], u["m01"]] for u in units], axis=0)
        assert d.independence == pytest.approx((p[0] - p[1]) * (p[0] - p[2]) / p[0])
        fail = [u for u in units if u["m10"] == u["m01"] == u["m11"] == 0]
        assert d.all_fail == len(fail)
        total = sum(u["I"] for u in units)
        assert d.all_fail_share == pytest.approx(sum(u["I"] for u in fail) / total)
        free = [u for u in units if not u["forced"]]
        assert d.forced == len(units) - len(free)
        assert d.without_forced is not None
        assert d.without_forced.value == pytest.approx(np.mean([u["I"] for u in free]))
        assert (d.without_forced.low, d.without_forced.high) == pytest.approx(
            ref_ratio_interval(units, "forced")
        )
        rescued = [u for u in units if u["m11"] > 0 and min(u["m10"], u["m01"]) < u["m11"]]
        assert d.rescued == len(rescued)
    table = decomposition_tables(list(results.values()))[0]
    assert table.rows[0][0] == "V x W" and table.rows[0][1] == "40"


def test_the_definitions_on_a_hand_made_case() -> None:
    """One configuration, one repeat, one task per family, two families, V x W at raw and
    linked. Family a: base succeeds, both single stresses fail, the joint fails (I = +1,
    every stressed cell fails, sign forced). Family b: base fails, both single stresses
    succeed, the joint succeeds (I = -1, forced negative); in linked every cell succeeds
    for both families (I = 0, not forced; joint rescues nothing)."""
    arms = _arms(["cfg"])
    outcome = {
        ("fam0", "raw"): {(8, "low"): 1, (128, "low"): 0, (8, "high"): 0, (128, "high"): 0},
        ("fam1", "raw"): {(8, "low"): 0, (128, "low"): 1, (8, "high"): 1, (128, "high"): 1},
    }
    records = []
    for arm, a in arms.items():
        for f in ("fam0", "fam1"):
            ok = bool(outcome.get((f, a.encoding), {}).get((a.menu, a.workflow), 1))
            records.append(Ep(arm, f"{f}-s0", 0, "ok", ok, None if ok else "call_limit", "x", 3))
    d = next(x for x in decompose(records, arms, family) if x.name == "V x W")
    assert d.units == 4
    assert d.observed.value == pytest.approx((1 - 1 + 0 + 0) / 4)
    assert d.observed.reason == "too few families (2 < 10)" and d.observed.low is None
    assert d.all_fail == 1
    assert d.all_fail_share is None  # the coefficient sums to zero: no share
    assert d.forced == 2
    assert d.without_forced is not None and d.without_forced.value == pytest.approx(0.0)
    # rescued: fam1 raw (joint 1, a single... both singles succeed: no), none else
    assert d.rescued == 0
    # pooled cells: p00 = 3/4, p10 = 3/4, p01 = 3/4 -> independence 0
    assert d.independence == pytest.approx(0.0)
    row = decomposition_tables([d])[0].rows[0]
    assert row[2] == "+0.0; too few families (2 < 10): no interval"
