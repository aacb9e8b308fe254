"""``prereg compare A B`` for InvokeRank (issue 41, item 1; seed 6.6): both registrations'
scores per shared arm, intent and overall in one table, with the stability rule (the 90%
intervals overlap) beside the 90% paired prompt bootstrap of the change. The bootstrap is
checked against hand counts and an exact enumeration of its resamples."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from prereg.core.workspace import Workspace
from prereg.registry.registrations import Registry
from prereg.registry.verify import verified_entry
from prereg.reports.analysis import Options, build_report
from prereg.reports.compare import (
    Against,
    IRComparison,
    Side,
    _arm_rows,
    _overlap,
    _stability,
    invokerank_table,
)
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.load import load_runs
from prereg.reports.model import Interval
from prereg.reports.observations import from_record
from prereg.stats.invokerank.paired import paired_prompt_bootstrap


def test_the_paired_change_by_hand() -> None:
    # intent 0: prompts (A 1/2, B 2/2), (A 0/2, B 1/2); intent 1: (A 3/4, B 1/4)
    res = paired_prompt_bootstrap(
        [2, 2, 4], [1, 0, 3], [2, 2, 4], [2, 1, 1], [0, 0, 1], weights=[3, 1], resamples=50
    )
    d0 = 3 / 4 - 1 / 4
    d1 = 1 / 4 - 3 / 4
    assert res.change.tolist() == pytest.approx([d0, d1])
    assert res.rollup == pytest.approx(0.75 * d0 + 0.25 * d1)
    assert res.prompts.tolist() == [2, 1]
    # intent 1 has one prompt: every resample draws it, so its change never moves
    assert res.low[1] == pytest.approx(d1) and res.high[1] == pytest.approx(d1)


def test_the_interval_against_an_exact_enumeration_of_the_resamples() -> None:
    # one intent, 4 prompts with unequal runs: all 4^4 resamples equally likely
    na, ya = np.array([2, 3, 2, 1]), np.array([1, 3, 0, 1])
    nb, yb = np.array([2, 3, 2, 1]), np.array([2, 1, 1, 0])
    exact = []
    for pick in itertools.product(range(4), repeat=4):
        p = list(pick)
        exact.append(yb[p].sum() / nb[p].sum() - ya[p].sum() / na[p].sum())
    values = np.sort(np.array(exact))
    res = paired_prompt_bootstrap(na, ya, nb, yb, [0, 0, 0, 0], resamples=40_000, seed=11)
    assert res.change[0] == pytest.approx(yb.sum() / nb.sum() - ya.sum() / na.sum())
    for bound, tail in ((res.low[0], 0.05), (res.high[0], 0.95)):
        below = np.mean(values < bound - 1e-12)
        at_or_below = np.mean(values <= bound + 1e-12)
        # the percentile bound sits where the exact distribution crosses the tail
        assert below <= tail + 0.01 and at_or_below >= tail - 0.01
    assert res.rollup_low == pytest.approx(res.low[0]) and res.rollup_high == res.high[0]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"reached_a": [3, 0]}, "exceeds"),
        ({"runs_b": [0, 2], "reached_b": [0, 1]}, "a run in A and in B"),
        ({"cell": [1, 1]}, "0 .. C-1"),
        ({"weights": [0.0]}, "weights"),
        ({"level": 1.0}, "level"),
        ({"runs_b": [2]}, "rows"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs: dict[str, Any], fragment: str) -> None:
    base: dict[str, Any] = {
        "runs_a": [2, 2],
        "reached_a": [1, 0],
        "runs_b": [2, 2],
        "reached_b": [2, 1],
        "cell": [0, 0],
    }
    args = {**base, **kwargs}
    extra = {k: args.pop(k) for k in ("weights", "level") if k in args}
    with pytest.raises(ValueError, match=fragment):
        paired_prompt_bootstrap(*args.values(), **extra)


def _iv(low: float | None, high: float | None, reason: str | None = None) -> Interval:
    return Interval(low=low, high=high, level=0.9, method="m", reason=reason)


def test_the_stability_rule_by_hand() -> None:
    a, b, apart = _iv(0.40, 0.48), _iv(0.37, 0.46), _iv(0.50, 0.60)
    assert _overlap(a, b) is True and _overlap(a, apart) is False
    assert _overlap(a, _iv(None, None, "too few prompts (3 < 4)")) is None
    # the seed's same-day repeat on the Claude API: overlap, paired change +0.3 to +4.9
    assert _stability(("IR", "IR"), True, (a, b, _iv(0.003, 0.049))) == (
        "stable by overlap, but the paired change excludes 0"
    )
    assert _stability(("IR", "IR"), True, (a, b, _iv(-0.021, 0.018))).startswith("stable:")
    assert _stability(("IR", "IR"), False, (a, apart, None)).startswith("not stable")
    withheld = _iv(None, None, "too few prompts (3 < 4)")
    assert "too few prompts" in _stability(("IR", "IR"), None, (a, withheld, None))
    assert _stability(("IR", "IR_DS"), None, (a, b, None)).startswith("not compared")


DRAFT = """
id: {id}
title: Same-day repeat (local host, small)
hypothesis: The placebo arm selects the focal integration as often as the reference arm.
falsification: The paired bootstrap's 95% interval excludes 0.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {{id: reference, surface: focal}}
  - {{id: placebo, surface: focal, control: placebo}}
host: {{driver: local}}
budgets: {{completion_cap: 1024, episode_tokens: 32000, call_limit: 8, turn_limit: 10}}
design: {{repeats: 2, rotations: 2, seed: {seed}}}
outcome: selected
primary:
  {{test: paired_bootstrap, compare: [placebo, reference], alpha: 0.05, sides: two-sided,
   draws: 2000}}
"""


def _records(cli: Any, ws: Path, reg: str, tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / f"{reg}.jsonl"
    assert cli("-w", ws, "export", reg, "-o", out).code == 0
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def _invokerank_arms(ws: Path, reg: str) -> dict[str, dict[str, Any]]:
    """Each arm's InvokeRank in the registration's own report (what ``analyse --json``
    prints under ``invokerank``, built without writing the report's files)."""
    registry = Registry(ws / "registry")
    loaded = load_runs(Workspace(ws.resolve()), registry, verified_entry(registry, reg))
    report = build_report(loaded, registry.head().to_json(), Options(allow_incomplete=True))
    assert report.invokerank is not None
    return {a.arm: a.model_dump(mode="json") for a in report.invokerank.arms}


def _hand_change(
    records: dict[str, list[dict[str, Any]]], ref: str, other: str, arm: str, intent: str
) -> tuple[float, int]:
    """The paired change other - ref in the Selection-level plug-in, recomputed from the
    exported records (equal intent weights), and the prompts both ran."""
    sides = [
        [
            r
            for r in records[reg]
            if r["arm"] == arm and r["polarity"] == "positive" and r["status"] == "ok"
        ]
        for reg in (ref, other)
    ]
    tasks = {r["task_id"] for r in sides[0]} & {r["task_id"] for r in sides[1]}
    intents = sorted({r["intent"] for r in sides[0] if r["task_id"] in tasks})
    rates = []
    for pos in sides:
        per = {}
        for name in intents:
            mine = [r for r in pos if r["intent"] == name and r["task_id"] in tasks]
            per[name] = sum(bool(r["funnel"]["selected"]) for r in mine) / len(mine)
        rates.append(per)
    if intent == "overall":
        return float(np.mean([rates[1][i] - rates[0][i] for i in intents])), len(tasks)
    prompts = len(
        {r["task_id"] for r in sides[0] if r["intent"] == intent and r["task_id"] in tasks}
    )
    return rates[1][intent] - rates[0][intent], prompts


def _check_reading(
    ia: dict[str, Any], ib: dict[str, Any], overlap: bool | None, stability: str
) -> None:
    """The rule's reading follows from the row's own printed intervals."""
    if ia["low"] is None or ib["low"] is None:
        assert overlap is None and stability.startswith("not decided")
    else:
        assert overlap is (ia["low"] <= ib["high"] and ib["low"] <= ia["high"])
        assert stability.startswith("stable") == overlap


OLD_KEYS = {
    "a", "b", "requirements", "differences", "changes", "invokerank", "label",
    "prereg_version", "ledger_head",
}  # fmt: skip


def test_compare_registrations_invokerank_end_to_end(ws: Path, cli: Any, tmp_path: Path) -> None:
    regs = {"ir-day": 3, "ir-repeat": 4, "ir-week": 5}
    reports = {}
    for reg, seed in regs.items():
        draft = tmp_path / f"{reg}.yaml"
        draft.write_text(DRAFT.format(id=reg, seed=seed))
        assert cli("-w", ws, "register", draft).code == 0
        assert cli("-w", ws, "run", reg, "--json").code == 0
        reports[reg] = _invokerank_arms(ws, reg)
    records = {r: _records(cli, ws, r, tmp_path) for r in regs}

    def score(reg: str, arm: str, intent: str) -> tuple[float, dict[str, Any]]:
        x = reports[reg][arm]
        if intent == "overall":
            return x["q"], x["intervals"][0]
        i = next(i for i in x["intents"] if i["intent"] == intent)
        return i["q"], i["intervals"][0]

    # --- two registrations: the JSON keeps its shape, extended -------------------------
    result = cli("-w", ws, "compare", "ir-day", "ir-repeat", "--json")
    assert result.code == 0, result.stderr
    two = result.json()
    assert set(two) == OLD_KEYS | {"registrations", "others", "invokerank_table"}
    assert two["registrations"] == ["ir-day", "ir-repeat"] and two["others"] == []
    ir = two["invokerank"]
    assert ir is not None and "overlap" in ir["rule"]
    for row in ir["rows"]:
        qa, ia = score("ir-day", row["arm"], row["intent"])
        qb, ib = score("ir-repeat", row["arm"], row["intent"])
        assert (row["score_a"], row["score_b"]) == (qa, qb)
        assert row["interval_a"]["low"] == ia["low"] and row["interval_b"]["high"] == ib["high"]
        change, prompts = _hand_change(records, "ir-day", "ir-repeat", row["arm"], row["intent"])
        assert row["change"] == pytest.approx(change) and row["prompts"] == prompts
        _check_reading(row["interval_a"], row["interval_b"], row["overlap"], row["stability"])
        civ = row["change_interval"]
        if civ["low"] is None:
            assert civ["reason"]  # withheld with its reason, never a bare point
    assert [(r["arm"], r["intent"]) for r in two["invokerank_table"]["rows"]] == [
        (r["arm"], r["intent"]) for r in ir["rows"]
    ]
    markdown = cli("-w", ws, "compare", "ir-day", "ir-repeat", "--markdown")
    assert markdown.code == 0
    assert "## InvokeRank: both registrations' scores" in markdown.stdout
    assert "| arm | intent | ir-day score |" in markdown.stdout
    terminal = cli("-w", ws, "compare", "ir-day", "ir-repeat")
    assert terminal.code == 0 and "InvokeRank stability rule" in terminal.stdout
    # 5 tasks: the arms' 95% intervals are withheld with their reason, never "null"
    assert all(c["interval"]["low"] is None for c in two["changes"])
    assert "null" not in terminal.stdout and "no 95% interval: too few" in " ".join(
        terminal.stdout.split()
    )
    both = cli("-w", ws, "compare", "ir-day", "ir-repeat", "--json", "--markdown")
    assert both.code == 2

    # --- three registrations: one table, each read against the reference ----------------
    result = cli("-w", ws, "compare", "ir-day", "ir-repeat", "ir-week", "--json")
    assert result.code == 0, result.stderr
    three = result.json()
    assert three["registrations"] == ["ir-day", "ir-repeat", "ir-week"]
    assert three["b"]["registration"] == "ir-repeat" and three["invokerank"] == ir
    assert [o["side"]["registration"] for o in three["others"]] == ["ir-week"]
    table = three["invokerank_table"]
    assert table["reference"] == "ir-day" and "reference" in table["reading"]
    assert table["rows"]
    for row in table["rows"]:
        qa, ia = score("ir-day", row["arm"], row["intent"])
        assert row["reference"]["score"] == qa and row["reference"]["interval"]["low"] == ia["low"]
        assert len(row["against"]) == 2
        for other, cell in zip(("ir-repeat", "ir-week"), row["against"], strict=True):
            assert cell is not None and cell["registration"] == other
            qx, ix = score(other, row["arm"], row["intent"])
            assert cell["score"] == qx and cell["interval"]["high"] == ix["high"]
            change, prompts = _hand_change(records, "ir-day", other, row["arm"], row["intent"])
            assert cell["change"] == pytest.approx(change) and cell["prompts"] == prompts
            _check_reading(ia, cell["interval"], cell["overlap"], cell["stability"])
            civ = cell["change_interval"]
            assert civ["low"] is not None or civ["reason"]
            if civ["low"] is not None:
                assert civ["low"] <= cell["change"] <= civ["high"]
    # the week registration is read against the reference as `compare ir-day ir-week` reads it
    pair = cli("-w", ws, "compare", "ir-day", "ir-week", "--json").json()
    assert three["others"][0]["invokerank"] == pair["invokerank"]
    assert three["others"][0]["changes"] == pair["changes"]

    markdown = cli("-w", ws, "compare", "ir-day", "ir-repeat", "ir-week", "--markdown")
    assert markdown.code == 0, markdown.stderr
    assert "## InvokeRank: every registration's scores" in markdown.stdout
    header = next(x for x in markdown.stdout.splitlines() if x.startswith("| arm | intent"))
    for fragment in ("ir-day score (reference)", "ir-repeat score", "ir-week score",
                     "stability against ir-day"):  # fmt: skip
        assert fragment in header
    assert header.count("|") - 1 == 4 + 5 * 2
    terminal = cli("-w", ws, "compare", "ir-day", "ir-repeat", "ir-week")
    assert terminal.code == 0, terminal.stderr
    assert "Reading: each registration is read against the first" in " ".join(
        terminal.stdout.split()
    )
    assert "ir-week differs:" in terminal.stdout or "ir-repeat differs:" in terminal.stdout

    # bad input: a registration named twice (exit 2); one that fails a requirement (exit 4)
    twice = cli("-w", ws, "compare", "ir-day", "ir-repeat", "ir-repeat")
    assert twice.code == 2 and "named twice" in twice.stderr
    other = tmp_path / "ir-success.yaml"
    other.write_text(
        DRAFT.format(id="ir-success", seed=6).replace("outcome: selected", "outcome: success")
    )
    assert cli("-w", ws, "register", other).code == 0
    refused = cli("-w", ws, "compare", "ir-day", "ir-repeat", "ir-success")
    assert refused.code == 4 and "ir-success: outcomes differ" in " ".join(refused.stderr.split())


def _obs(arm: str, task: str, intent: str, repeat: int, selected: bool) -> Any:
    return from_record(
        {
            "arm": arm,
            "task_id": task,
            "intent": intent,
            "repeat": repeat,
            "funnel": {"surfaced": True, "selected": selected},
            "evidence_class": "replay",
            "terminal_class": "focal" if selected else "answered_without_search",
        }
    )


def _side(shift: int) -> tuple[Any, Any]:
    """8 prompts in each of 2 intents, 3 runs each; prompt j selected in runs below a bar."""
    runs = [
        _obs("a", f"{i}{j}", i, k, (j * 3 + k + shift + (i == "y")) % 5 < 2)
        for i in "xy"
        for j in range(8)
        for k in range(3)
    ]
    section = invokerank_section(runs, [ArmMeta("a", "focal")], seed=2)
    assert section is not None
    loaded = SimpleNamespace(
        used=tuple(runs),
        task_order=[f"{i}{j}" for i in "xy" for j in range(8)],
        entry=SimpleNamespace(registration=SimpleNamespace(intent_weights=None)),
    )
    return section.arms[0], loaded


def test_rows_with_intervals_apply_the_rule_to_the_printed_intervals() -> None:
    xa, a = _side(0)
    xb, b = _side(2)
    rows = {r.intent: r for r in _arm_rows("a", xa, xb, a, b, seed=5)}  # type: ignore[arg-type]
    assert list(rows) == ["overall", "x", "y"]
    rate = {}
    for name, side in (("a", a), ("b", b)):
        for intent in "xy":
            mine = [o for o in side.used if o.intent == intent]
            rate[name, intent] = sum(bool(o.funnel["selected"]) for o in mine) / len(mine)
    for intent in "xy":
        assert rows[intent].change == pytest.approx(rate["b", intent] - rate["a", intent])
        assert rows[intent].prompts == 8
    overall = rows["overall"]
    assert overall.change == pytest.approx(np.mean([rate["b", i] - rate["a", i] for i in "xy"]))
    assert (overall.score_a, overall.score_b) == (xa.q, xb.q)
    for r in rows.values():
        ia, ib, civ = r.interval_a, r.interval_b, r.change_interval
        assert ia is not None and ib is not None and ia.low is not None and ib.low is not None
        assert r.overlap is (ia.low <= (ib.high or 0) and ib.low <= (ia.high or 0))
        assert civ is not None and civ.low is not None and civ.high is not None
        assert civ.low <= (r.change or 0) <= civ.high
        if not r.overlap:
            assert r.stability.startswith("not stable")
        elif civ.low > 0 or civ.high < 0:
            assert "excludes 0" in r.stability
        else:
            assert r.stability.startswith("stable:")


def _bare_side(name: str) -> Side:
    return Side(
        registration=name,
        digest="sha256:0",
        kind="exploratory",
        complete=True,
        verdict="inconclusive",
        mode="fixed",
        arms={},
        discordant=None,
        primary_pvalue=None,
        models_requested=[],
        models_returned=[],
        evidence_class="replay",
        configurations={},
    )


def test_the_table_of_every_registration_reads_each_against_the_reference() -> None:
    xa, a = _side(0)
    others = {"B": _side(2), "C": _side(4)}
    against = [
        Against(
            side=_bare_side(name),
            differences=[],
            changes=[],
            invokerank=IRComparison.model_construct(
                rows=_arm_rows("a", xa, xo, a, o, seed=5)  # type: ignore[arg-type]
            ),
        )
        for name, (xo, o) in others.items()
    ]
    # D has no InvokeRank section: its cells are empty, never a made-up score
    against.append(Against(side=_bare_side("D"), differences=[], changes=[], invokerank=None))
    reference = SimpleNamespace(arms=[SimpleNamespace(arm="a")])
    table = invokerank_table(reference, ["A", "B", "C", "D"], against)  # type: ignore[arg-type]
    assert table is not None and table.reference == "A"
    assert [(r.arm, r.intent) for r in table.rows] == [("a", "overall"), ("a", "x"), ("a", "y")]

    def rate(side: Any, intent: str) -> float:
        mine = [o for o in side.used if o.intent == intent]
        return sum(bool(o.funnel["selected"]) for o in mine) / len(mine)

    for row in table.rows:
        expected_ref = xa.q if row.intent == "overall" else next(
            i.q for i in xa.intents if i.intent == row.intent
        )  # fmt: skip
        assert row.reference.score == expected_ref and row.reference.registration == "A"
        assert row.against[2] is None
        for (name, (xo, o)), cell in zip(others.items(), row.against[:2], strict=True):
            assert cell is not None and cell.registration == name
            expected = xo.q if row.intent == "overall" else next(
                i.q for i in xo.intents if i.intent == row.intent
            )  # fmt: skip
            assert cell.score == expected
            intents = ["x", "y"] if row.intent == "overall" else [row.intent]
            hand = float(np.mean([rate(o, i) - rate(a, i) for i in intents]))
            assert cell.change == pytest.approx(hand)
            assert cell.prompts == (16 if row.intent == "overall" else 8)
            ia, ib, civ = row.reference.interval, cell.interval, cell.change_interval
            assert ia is not None and ib is not None and ia.low is not None and ib.low is not None
            assert cell.overlap is (ia.low <= (ib.high or 0) and ib.low <= (ia.high or 0))
            assert civ is not None and civ.low is not None and civ.high is not None
            if not cell.overlap:
                assert cell.stability.startswith("not stable")
            elif civ.low > 0 or civ.high < 0:
                assert "excludes 0" in cell.stability
            else:
                assert cell.stability.startswith("stable:")
    # no reference section: no table
    assert invokerank_table(None, ["A", "B"], against[:1]) is None
