"""The S-vs-T comparison (InvokeRank 7.9; issue 41, item 5): the synthetic tool mix beside
the telemetry's, the total variation distance and Spearman's rank correlation against hand
computations (and scipy), each withheld with its reason when too few; end to end through
``prereg telemetry compare`` with S's counts recomputed from the exported records."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import scipy.stats

from prereg.reports.invokerank.telemetry import (
    MIN_CALLS,
    compare,
    synthetic_counts,
    telemetry_counts,
)

KW: dict[str, Any] = dict(
    integration="focal", host="h", t_basis="all calls", s_evidence_class="api"
)


def test_total_variation_and_rank_correlation_by_hand() -> None:
    # S: a 15, b 10, c 5 (shares 1/2, 1/3, 1/6); T: a 5, b 10, c 15; d listed, never called.
    r = compare(
        {"a": 15, "b": 10, "c": 5}, {"a": 5, "b": 10, "c": 15}, tools=["a", "b", "c", "d"], **KW
    )
    assert [t.tool for t in r.tools] == ["a", "b", "c", "d"]
    assert [t.s_calls for t in r.tools] == [15, 10, 5, 0]
    assert [t.t_share for t in r.tools] == pytest.approx([1 / 6, 1 / 3, 1 / 2, 0])
    # TVD = (|1/2 - 1/6| + 0 + |1/6 - 1/2| + 0) / 2 = 1/3
    assert r.total_variation == pytest.approx(1 / 3)
    # ranks S (d, c, b, a) = 1..4, T (d, a, b, c) = 1..4: d 1/1, a 4/2, b 3/3, c 2/4;
    # sum d^2 = 0 + 4 + 0 + 4 = 8; rho = 1 - 6 * 8 / (4 * 15) = 0.2
    assert r.spearman == pytest.approx(0.2)
    ref = scipy.stats.spearmanr([0.5, 1 / 3, 1 / 6, 0], [1 / 6, 1 / 3, 1 / 2, 0]).statistic
    assert r.spearman == pytest.approx(ref)
    assert r.total_variation_withheld is None and r.spearman_withheld is None


def test_ties_use_average_ranks_like_scipy() -> None:
    s = {"a": 10, "b": 10, "c": 5, "d": 5, "e": 0}
    t = {"a": 12, "b": 3, "c": 3, "d": 10, "e": 2}
    r = compare(s, t, **KW)
    keys = ["a", "b", "c", "d", "e"]
    ref = scipy.stats.spearmanr([s[k] for k in keys], [t[k] for k in keys]).statistic
    assert r.spearman == pytest.approx(ref)
    # TVD by hand: S 1/3 1/3 1/6 1/6 0, T 12/30 3/30 3/30 10/30 2/30
    diffs = [abs(10 / 30 - 12 / 30), abs(10 / 30 - 3 / 30), abs(5 / 30 - 3 / 30)]
    diffs += [abs(5 / 30 - 10 / 30), abs(0 - 2 / 30)]
    assert r.total_variation == pytest.approx(sum(diffs) / 2)


def test_too_few_calls_withholds_both_with_the_reason() -> None:
    # the seed's case: 8 real calls on one host
    r = compare({"a": 20, "b": 20}, {"a": 5, "b": 3}, **KW)
    assert r.total_variation is None and r.spearman is None
    assert r.total_variation_withheld == f"too few telemetry (T) calls (8 < {MIN_CALLS})"
    assert r.spearman_withheld == r.total_variation_withheld
    # the shares are still listed, each side apart
    assert [t.t_calls for t in r.tools] == [5, 3]
    empty = compare({}, {}, **KW)
    assert empty.total_variation_withheld is not None
    assert "synthetic (S) calls (0" in empty.total_variation_withheld
    assert all(t.s_share == 0 and t.t_share == 0 for t in empty.tools)


def test_rank_correlation_needs_three_tools_and_variation() -> None:
    two = compare({"a": 20, "b": 20}, {"a": 30, "b": 10}, **KW)
    assert two.total_variation == pytest.approx(0.25)  # (|.5-.75| + |.5-.25|) / 2
    assert two.spearman is None and "too few tools" in str(two.spearman_withheld)
    flat = compare({"a": 10, "b": 10, "c": 10}, {"a": 30, "b": 10, "c": 0}, **KW)
    # S 1/3 1/3 1/3, T 3/4 1/4 0: (5/12 + 1/12 + 4/12) / 2
    assert flat.total_variation == pytest.approx((5 / 12 + 1 / 12 + 4 / 12) / 2)
    assert flat.spearman is None and "tied" in str(flat.spearman_withheld)


def _row(
    tool: str, count: int = 1, host: str = "h", first: bool | None = None, integ: str = "focal"
) -> Any:
    return SimpleNamespace(integration=integ, host=host, tool=tool, count=count, first=first)


def test_telemetry_counts_one_host_and_first_calls_when_marked() -> None:
    rows = [_row("a", 3), _row("b"), _row("a", host="other"), _row("a", integ="rival")]
    counts, basis = telemetry_counts(rows, "focal", "h")
    assert dict(counts) == {"a": 3, "b": 1} and basis == "all calls"
    marked = [_row("a", 3, first=True), _row("b", 2, first=False), _row("c")]
    counts, basis = telemetry_counts(marked, "focal", "h")
    # marked: only rows with first true (an unmarked row is not a first call)
    assert dict(counts) == {"a": 3} and basis == "first calls"


def test_synthetic_counts_are_first_calls_to_the_focal_integration() -> None:
    def obs(terminal: str | None, tool: str | None, ok: bool = True) -> Any:
        return SimpleNamespace(
            ok=ok, terminal_class=terminal, first_call=None if tool is None else (tool, {})
        )

    runs = [
        obs("focal", "a"),
        obs("focal", "a"),
        obs("focal", "b"),
        obs("competitor", "rival_a"),
        obs("answered_without_search", None),
        obs("focal", "a", ok=False),  # an infrastructure failure is no observation
    ]
    assert dict(synthetic_counts(runs)) == {"a": 2, "b": 1}


# ---- end to end ---------------------------------------------------------------------------

DRAFT = "drafts/podcast-selection-judged.yaml"
REG = "podcast-selection-judged"


def test_compare_through_the_cli_against_the_exported_records(
    cli: Any, ws: Path, tmp_path: Path
) -> None:
    assert cli("-w", ws, "register", ws / DRAFT).code == 0
    assert cli("-w", ws, "run", REG).code == 0
    tools = ["podshelf_search_podcasts", "podshelf_subscribe", "podshelf_mark_played"]
    rows = [
        {"integration": "focal", "host": "sim", "tool": tools[i % 3], "outcome": "ok",
         "hour": "2026-10-05T14:00:00Z", "count": i + 1}
        for i in range(6)
    ] + [{"integration": "focal", "host": "elsewhere", "tool": tools[0], "outcome": "ok",
          "hour": "2026-10-05T14:00:00Z", "count": 50}]  # fmt: skip
    tele = tmp_path / "tele.jsonl"
    tele.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert cli("-w", ws, "telemetry", "import", tele).code == 0

    r = cli(
        "-w", ws, "telemetry", "compare", REG, "--arm", "descriptive", "--host", "sim", "--json"
    )
    assert r.code == 0, r.stderr
    data = r.json()

    # S recomputed from the export: the first tool call of each ok run whose terminal
    # class is focal, in arm descriptive
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", REG, "--out", out).code == 0
    expected: dict[str, int] = {}
    for line in out.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if (
            rec["arm"] == "descriptive"
            and rec["status"] == "ok"
            and rec["terminal_class"] == "focal"
        ):
            first = next(e["tool"] for e in rec["trace"] if e["kind"] == "tool_call")
            expected[first] = expected.get(first, 0) + 1
    got_s = {t["tool"]: t["s_calls"] for t in data["tools"] if t["s_calls"]}
    assert got_s == expected
    # T: host sim only; 1+4 search, 2+5 subscribe, 3+6 mark played = 21 calls
    got_t = {t["tool"]: t["t_calls"] for t in data["tools"] if t["t_calls"]}
    assert got_t == {tools[0]: 5, tools[1]: 7, tools[2]: 9}
    assert data["t_calls"] == 21 and data["t_basis"] == "all calls"
    assert data["s_evidence_class"] == "local"
    assert math.isclose(sum(t["t_share"] for t in data["tools"]), 1.0)
    # a tiny design: 21 real calls are too few, both figures withheld with the reason
    assert data["total_variation"] is None
    assert "too few telemetry (T) calls (21 < 30)" in data["total_variation_withheld"]
    human = cli("-w", ws, "telemetry", "compare", REG, "--arm", "descriptive", "--host", "sim")
    assert "too few telemetry (T) calls" in " ".join(human.stdout.split())
    bad = cli("-w", ws, "telemetry", "compare", REG, "--arm", "nope", "--host", "sim", "--json")
    assert bad.code == 2
