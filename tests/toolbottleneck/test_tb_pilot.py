"""The development pilot (seed appendix J, Table 13): the trace selector's stump with each
intent held out against an independent reimplementation and hand-computed cases, the
router, and Table 13 recomputed from the pilot's records."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.sandbox import build_sandbox
from prereg.reports.toolbottleneck.pilot import (
    Block,
    fit_stump,
    pilot_table,
    select_loio,
    selector_minus_switch,
    table_rows,
    unavailable_lines,
)
from prereg.runners.toolbottleneck.pilot import ACTIONS, FEATURES, PilotRecord, route_menu
from tests.toolbottleneck.helpers import BUNDLED

FAMILIES = [
    "overdue-case-escalation",  # case-escalation
    "customer-complaint-escalation",  # case-escalation
    "invoice-payment-approval",  # invoice-approval
    "external-share-review",  # share-review
]


# -- an independent stump: plain loops over a hand-built table ------------------------


def ref_leaf(rows: list[int], y: list[list[int]], cost: list[list[float]]) -> tuple[int, int]:
    """(successes, action index) of the best action over ``rows``: most successes, then
    least summed cost, then the earliest action."""
    best: tuple[int, float, int] | None = None
    for a in range(len(y[0])):
        key = (-sum(y[i][a] for i in rows), sum(cost[i][a] for i in rows), a)
        if best is None or key < best:
            best = key
    assert best is not None
    return -best[0], best[2]


def ref_stump(
    x: list[list[float]], y: list[list[int]], cost: list[list[float]]
) -> tuple[int | None, float | None, int, int]:
    everyone = list(range(len(x)))
    score, a = ref_leaf(everyone, y, cost)
    best: tuple[int, int | None, float | None, int, int] = (score, None, None, a, a)
    for j in range(len(x[0])):
        values = sorted({row[j] for row in x})
        for lo, hi in zip(values, values[1:], strict=False):
            t = (lo + hi) / 2
            left = [i for i in everyone if x[i][j] <= t]
            right = [i for i in everyone if x[i][j] > t]
            sl, al = ref_leaf(left, y, cost)
            sr, ar = ref_leaf(right, y, cost)
            if sl + sr > best[0]:
                best = (sl + sr, j, t, al, ar)
    return best[1:]


def test_a_hand_computed_stump_splits_where_the_winner_changes() -> None:
    actions = ["probe", "retry", "switch"]
    x = np.array([[1.0], [2.0], [3.0], [4.0]])
    y = np.array([[0, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], dtype=float)
    cost = np.array([[0, 10, 20]] * 4, dtype=float)
    stump = fit_stump(x, y, cost, ["calls"], actions)
    assert (stump.feature, stump.threshold, stump.left, stump.right) == (
        "calls",
        2.5,
        "retry",
        "switch",
    )
    # no split beats the single best action: the constant rule, ties to the cheaper action
    y2 = np.array([[0, 1, 1]] * 4, dtype=float)
    const = fit_stump(x, y2, cost, ["calls"], actions)
    assert (const.feature, const.left) == (None, "retry")
    assert const.choose({"calls": 99.0}) == "retry"


def test_the_stump_matches_an_independent_search_on_random_tables() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        n, f, k = int(rng.integers(2, 12)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
        x = rng.integers(0, 5, size=(n, f)).astype(float)
        y = rng.integers(0, 2, size=(n, k)).astype(float)
        cost = rng.integers(0, 4, size=(n, k)).astype(float)
        names = [f"f{j}" for j in range(f)]
        actions = [f"a{j}" for j in range(k)]
        got = fit_stump(x, y, cost, names, actions)
        j, t, left, right = ref_stump(x.tolist(), y.astype(int).tolist(), cost.tolist())
        assert got.feature == (None if j is None else names[j])
        assert got.threshold == t
        assert got.left == actions[left]
        if j is not None:
            assert got.right == actions[right]


def _block(name: str, intent: str, calls: float, retry: bool, switch: bool) -> Block:
    features = dict.fromkeys(FEATURES, 0.0) | {"calls": calls}
    return Block(
        name,
        "inc",
        intent,
        features,
        {"probe": False, "retry": retry, "switch": switch},
        {"probe": 5, "retry": 5, "switch": 9},
        {"probe": 1, "retry": 1, "switch": 1},
    )


def test_leave_one_intent_out_fits_without_the_intent_it_serves() -> None:
    # retry wins at few calls, the switch at many; each intent's two blocks straddle
    bs = [
        _block("a1", "a", 1, True, False),
        _block("a2", "a", 5, False, True),
        _block("b1", "b", 2, True, False),
        _block("b2", "b", 6, False, True),
        _block("c1", "c", 3, True, False),
        _block("c2", "c", 7, False, True),
    ]
    sel = select_loio(bs, ["probe", "retry", "switch"])
    # by hand: without a the training values are 2, 3, 6, 7 (split 4.5); without b
    # 1, 3, 5, 7 (4.0); without c 1, 2, 5, 6 (3.5)
    assert sel.rules == {
        "a": "calls <= 4.5 -> retry, else switch",
        "b": "calls <= 4 -> retry, else switch",
        "c": "calls <= 3.5 -> retry, else switch",
    }
    assert sel.choices == {
        "a1": "retry",
        "a2": "switch",
        "b1": "retry",
        "b2": "switch",
        "c1": "retry",
        "c2": "switch",
    }
    # with one intent there is nothing to fit on with it held out
    one = select_loio([b for b in bs if b.intent == "a"], ["probe", "retry", "switch"])
    assert one.choices is None and one.reason is not None and "one intent" in one.reason


def test_the_selector_minus_switch_interval_is_for_the_pooled_difference() -> None:
    # twelve intents; the selector (retry) loses to the switch in intents 0-2 only, on
    # one block of two: the pooled difference is -3/24
    bs = []
    for i in range(12):
        bs.append(_block(f"{i}a", f"i{i:02d}", 1, retry=i >= 3, switch=True))
        bs.append(_block(f"{i}b", f"i{i:02d}", 1, retry=True, switch=True))
    choices = {b.block: "retry" for b in bs}
    v = selector_minus_switch(bs, choices, draws=2000)
    assert v["estimate"] == pytest.approx(-3 / 24) and v["intents"] == 12
    assert v["low"] is not None and v["high"] is not None
    assert -1 <= v["low"] <= v["estimate"] <= v["high"] <= 0  # no resample can gain
    # every intent alike: no spread, no interval
    same = selector_minus_switch(bs, {b.block: "switch" for b in bs}, draws=2000)
    assert same["estimate"] == 0.0 and same["low"] is None and "no spread" in same["reason"]


def test_a_restart_that_cannot_run_is_listed_with_its_reason_never_scored() -> None:
    def rec(block: str, intent: str, action: str, ok: bool | None, **kw: Any) -> PilotRecord:
        return PilotRecord(
            study="s",
            study_digest="sha256:0",
            block=block,
            incumbent="inc",
            task_id=block,
            family=block,
            intent=intent,
            repeat=0,
            action=action,
            available=ok is not None,
            success=ok,
            tokens=None if ok is None else 10,
            calls=None if ok is None else 1,
            **kw,
        )

    features = dict.fromkeys(FEATURES, 0.0)
    records = []
    for block, intent, probe in (("b1", "x", False), ("b2", "y", True)):
        records += [
            rec(block, intent, "probe", probe, features=features),
            rec(block, intent, "retry", True),
            rec(block, intent, "controller", None, reason="not yet available: reason"),
        ]
    data = pilot_table(records)
    rows = {r["action"]: r for r in data["rows"]}
    assert rows["controller"] == {
        "action": "controller",
        "label": "Public-handoff controller",
        "available": False,
        "reason": "not yet available: reason",
    }
    assert data["actions"] == ["probe", "retry"]  # never offered to the selector
    assert rows["retry"]["recovered"] == {"successes": 1, "n": 1, "rate": 1.0}
    _, text = table_rows(data)
    assert ["Public-handoff controller", "not yet available: reason"] == text[2][:2]
    assert unavailable_lines(data) == ["Public-handoff controller: not yet available: reason"]


# -- the router ----------------------------------------------------------------------


def test_the_router_keeps_the_one_route_the_request_names() -> None:
    family = load_family(BUNDLED / "overdue-case-escalation.yaml")
    sandbox = build_sandbox(family, Cell("capacity", 64, "low", 0, "raw"), seed=0)
    routed = route_menu(sandbox)
    route = family.route
    named = f"{route.workspace}/{route.region}/{route.collection}"
    assert named in sandbox.request
    assert 0 < len(routed.menu) < len(sandbox.menu)
    for fn in routed.menu:
        d = fn.schema()["description"]
        assert (
            f"workspace={route.workspace} region={route.region} collection={route.collection}"
        ) in d
        assert d.endswith(f"collection={route.collection}")
    # every operational tool is on the route: the router keeps them without being told
    assert {f.name for f in sandbox.operational} <= {f.name for f in routed.menu}
    # a request that names no route, or two, leaves the menu unchanged
    unnamed = replace(sandbox, request=sandbox.request.replace(named, "the usual place"))
    assert route_menu(unnamed).menu == sandbox.menu
    other = next(f.where for f in sandbox.menu if f.where != named)
    both = replace(sandbox, request=f"{sandbox.request} Or {other}.")
    assert route_menu(both).menu == sandbox.menu


# -- Table 13 from the records -------------------------------------------------------


def write_study(tmp: Path, families: list[str], repeats: int = 2) -> Path:
    (tmp / "families").mkdir(parents=True, exist_ok=True)
    for name in families:
        shutil.copy(BUNDLED / f"{name}.yaml", tmp / "families" / f"{name}.yaml")
    doc: dict[str, Any] = {
        "id": "pilot-test",
        "families": [f"families/{n}.yaml" for n in families],
        "seeds": [0],
        "repeats": repeats,
        "baseline": "v8",
        "policy": {"profile": "sim-truncating"},
        "arms": [
            {"id": "v8", "menu": 8, "workflow": "low", "encoding": "raw"},
            {"id": "v64", "menu": 64, "workflow": "low", "encoding": "raw"},
            {"id": "h2", "menu": 8, "workflow": "low", "encoding": "raw", "handoffs": 2},
        ],
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _pct(k: int, n: int) -> dict[str, Any]:
    return {"successes": k, "n": n, "rate": None if n == 0 else k / n}


def recompute(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Table 13 from the records, independently (the module docstring's definitions)."""
    by_block: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        by_block[r["block"]][r["action"]] = r
    blocks = list(by_block)
    strata = sorted({r["incumbent"] for r in records})
    run = [a for a in by_block[blocks[0]] if by_block[blocks[0]][a]["available"]]
    s = {b: {a: bool(by_block[b][a]["success"]) for a in run} for b in blocks}
    tok = {b: {a: by_block[b][a]["tokens"] for a in run} for b in blocks}
    inc = {b: by_block[b]["probe"]["incumbent"] for b in blocks}
    failed = [b for b in blocks if not s[b]["probe"]]
    out: dict[str, Any] = {}
    for a in run:
        out[a] = {
            "pooled": _pct(sum(s[b][a] for b in blocks), len(blocks)),
            "strata": {
                st: _pct(
                    sum(s[b][a] for b in blocks if inc[b] == st),
                    sum(1 for b in blocks if inc[b] == st),
                )
                for st in strata
            },
            "recovered": _pct(0 if a == "probe" else sum(s[b][a] for b in failed), len(failed)),
            "retain_then_act": _pct(sum(s[b]["probe"] or s[b][a] for b in blocks), len(blocks)),
            "mean_tokens_no_probe": None
            if a == "probe"
            else float(np.mean([tok[b][a] for b in blocks])),
            "mean_tokens_with_probe": float(
                np.mean([tok[b]["probe"] + (0 if a == "probe" else tok[b][a]) for b in blocks])
            ),
        }
    # the selector, with the independent stump, each intent held out
    intents = {b: by_block[b]["probe"]["intent"] for b in blocks}
    x = [[by_block[b]["probe"]["features"][f] for f in FEATURES] for b in blocks]
    y = [[int(s[b][a]) for a in run] for b in blocks]
    cost = [[0.0 if a == "probe" else float(tok[b][a]) for a in run] for b in blocks]
    chosen: dict[str, str] = {}
    for held in sorted(set(intents.values())):
        train = [i for i, b in enumerate(blocks) if intents[b] != held]
        j, t, left, right = ref_stump(
            [x[i] for i in train], [y[i] for i in train], [cost[i] for i in train]
        )
        for i, b in enumerate(blocks):
            if intents[b] == held:
                pick = left if j is None or t is None or x[i][j] <= t else right
                chosen[b] = run[pick]
    out["selector"] = {
        "pooled": _pct(sum(s[b][chosen[b]] for b in blocks), len(blocks)),
        "chose": {a: sum(1 for c in chosen.values() if c == a) for a in run},
    }
    oracle: dict[str, str | None] = {}
    for b in blocks:
        wins = sorted((tok[b][a], run.index(a), a) for a in run if s[b][a])
        oracle[b] = wins[0][2] if wins else None
    out["oracle"] = {
        "pooled": _pct(sum(o is not None for o in oracle.values()), len(blocks)),
        "chose": {a: sum(1 for c in oracle.values() if c == a) for a in run},
    }
    return out


def test_table_13_recomputed_from_the_pilots_records(cli, tmp_path: Path) -> None:
    study = write_study(tmp_path / "s", FAMILIES)
    out = tmp_path / "pilot"
    result = cli(
        "study", "pilot", study, "--out", out, "--incumbent", "v64", "--incumbent", "v8", "--json"
    )
    assert result.code == 0, result.stderr
    summary = result.json()
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    report = json.loads((out / "report.json").read_text())
    assert report["table13"] == summary["table13"]
    table = report["table13"]
    # 4 families x 1 seed x 2 repeats x 2 incumbents, eight actions each
    assert table["blocks"] == 16 and len(records) == 16 * 8
    assert table["strata"] == ["v64", "v8"]
    expected = recompute(records)
    rows = {r["action"]: r for r in table["rows"]}
    for action in ACTIONS:
        got, want = rows[action], expected[action]
        assert got["available"] is True
        for key in ("pooled", "strata", "recovered", "retain_then_act"):
            assert got[key] == want[key], (action, key)
        for key in ("mean_tokens_no_probe", "mean_tokens_with_probe"):
            if want[key] is None:
                assert got[key] is None
            else:
                assert got[key] == pytest.approx(want[key])
        assert got["selector_chose"] == expected["selector"]["chose"][action]
        assert got["oracle_chose"] == expected["oracle"]["chose"][action]
    assert rows["selector"]["pooled"] == expected["selector"]["pooled"]
    assert rows["oracle"]["pooled"] == expected["oracle"]["pooled"]
    # the restarts ran as the seed lists them: the router narrows the menu, the larger
    # cap is 4,096, the combined repairs take both, the switch is the other profile
    by = {(r["block"], r["action"]): r for r in records}
    for block in {r["block"] for r in records}:
        probe = by[(block, "probe")]
        assert (
            by[(block, "cap")]["completion_cap"]
            == 4096
            == by[(block, "combined")]["completion_cap"]
        )
        assert by[(block, "router")]["menu"] < probe["menu"]
        assert by[(block, "combined")]["menu"] == by[(block, "router")]["menu"]
        assert by[(block, "switch")]["profile"] == "sim-steady" != probe["profile"]
    # restarts are reset independently: the retry is not the probe replayed
    assert any(
        r["action"] == "retry" and r["tokens"] != p["tokens"]
        for r in records
        for p in records
        if p["action"] == "probe" and p["block"] == r["block"]
    )
    # the selector minus the switch, pooled over blocks; three intents: no interval
    versus = table["selector_minus_switch"]
    rate = expected["selector"]["pooled"]["successes"] - expected["switch"]["pooled"]["successes"]
    assert versus["estimate"] == pytest.approx(rate / 16)
    assert versus["intents"] == 3 and versus["low"] is None and versus["high"] is None
    assert versus["reason"] == "too few intents (3 < 10)"
    md = (out / "report.md").read_text()
    assert "no interval" in md
    assert "seed Table 13" in md and "Simulated policy" in md


def test_the_pilot_is_deterministic(cli, tmp_path: Path) -> None:
    study = write_study(tmp_path / "s", FAMILIES[:2], repeats=1)
    a = cli("study", "pilot", study, "--out", tmp_path / "a", "--json")
    b = cli("study", "pilot", study, "--out", tmp_path / "b", "--json")
    assert a.code == b.code == 0
    assert (tmp_path / "a" / "records.jsonl").read_bytes() == (
        tmp_path / "b" / "records.jsonl"
    ).read_bytes()


def test_a_one_intent_pilot_withholds_the_selector_with_its_reason(cli, tmp_path: Path) -> None:
    study = write_study(tmp_path / "s", FAMILIES[:2], repeats=1)  # one intent
    result = cli("study", "pilot", study, "--out", tmp_path / "p")
    assert result.code == 0, result.stderr
    assert "one intent" in result.stdout
    data = json.loads((tmp_path / "p" / "report.json").read_text())["table13"]
    selector = next(r for r in data["rows"] if r["action"] == "selector")
    assert selector["available"] is False and "one intent" in selector["reason"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--incumbent", "nope"], "arms"),
        (["--incumbent", "h2"], "arms.h2"),
        (["--switch", "no-such-profile"], "--switch"),
        (["--switch", "sim-truncating"], "--switch"),  # the incumbent's own policy
    ],
)
def test_bad_pilot_input_exits_2_naming_the_field(
    cli, tmp_path: Path, args: list[str], field: str
) -> None:
    study = write_study(tmp_path / "s", FAMILIES[:2], repeats=1)
    out = tmp_path / "p"
    result = cli("study", "pilot", study, "--out", out, *args)
    assert result.code == 2, result.stdout
    assert field in result.stderr and "study.yaml" in result.stderr
    assert not out.exists()
