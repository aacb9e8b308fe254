"""The failure census against hand counts and against the seed's own published tables.

Seed 5.3: 3,725 failures of 20,408 graded episodes; 1,068 at the cap (28.7%), 1,863 over
the episode budget or call limit (50.0%), 477 infeasible (12.8%), 204 wrong conclusions
(5.5%), 113 contract breaks (3.0%); harness limits end 91.5% (78.7% without
infeasibility stops). Appendix H: 480 sentinel groups of three runs, pass@1 89.7%,
all three 82.7%, any 94.8%, disagreement 12.1%. Counts rebuilt from those figures must
give them back (to the published rounding).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from prereg.reports.toolbottleneck.census import (
    census,
    census_markdown,
    census_tables,
    obligation_by_flag,
    sentinel_repeats,
    truncation,
    truncation_stratum,
)
from prereg.runners.record import RunRecord

DIGEST = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Row:
    arm: str
    task_id: str
    success: bool | None
    terminal_flag: str | None = None
    first_unmet_obligation: str | None = None
    calls: int = 1
    repeat: int = 0
    status: str = "ok"


def _fail(flag: str, n: int, arm: str = "a") -> list[Row]:
    return [Row(arm, f"{flag}-{i}", False, flag, "answer") for i in range(n)]


def test_census_reproduces_the_seeds_failure_census() -> None:
    rows = (
        _fail("completion_cap", 1068)
        + _fail("episode_budget", 1800)
        + _fail("call_limit", 63)
        + _fail("infeasible", 477)
        + _fail("wrong_conclusion", 204)
        + _fail("contract_break", 113)
        + [Row("a", f"ok-{i}", True) for i in range(20408 - 3725)]
        + [Row("a", f"infra-{i}", None, status="infra_error") for i in range(9)]
    )
    c = census(rows)
    assert (c.episodes, c.failures, c.infra) == (20408, 3725, 9)
    published = {
        "completion_cap": 28.7,
        "infeasible": 12.8,
        "wrong_conclusion": 5.5,
        "contract_break": 3.0,
    }
    for flag, pct in published.items():
        assert 100 * (c.share(flag) or 0) == pytest.approx(pct, abs=0.05)
    budget_or_calls = (c.share("episode_budget") or 0) + (c.share("call_limit") or 0)
    assert 100 * budget_or_calls == pytest.approx(50.0, abs=0.05)
    assert c.flags["turn_limit"] == 0
    assert 100 * (c.harness_limit_share or 0) == pytest.approx(91.5, abs=0.05)
    assert 100 * (c.harness_limit_share_without_infeasible or 0) == pytest.approx(78.7, abs=0.05)


def test_sentinel_repeats_reproduce_the_seeds_appendix_h() -> None:
    # 397 groups pass all three runs, 43 pass two, 15 pass one, 25 pass none (480 groups)
    counts = [3] * 397 + [2] * 43 + [1] * 15 + [0] * 25
    rows = [
        Row("routed", f"t{g}", k < wins, repeat=k)
        for g, wins in enumerate(counts)
        for k in range(3)
    ]
    rows.append(Row("routed", "single", True))  # one run only: not a sentinel unit
    rep = sentinel_repeats(rows)
    assert (rep.units, rep.runs) == (480, 1440)
    assert 100 * (rep.pass_at_1 or 0) == pytest.approx(89.7, abs=0.05)
    assert 100 * (rep.all_runs or 0) == pytest.approx(82.7, abs=0.05)
    assert 100 * (rep.any_run or 0) == pytest.approx(94.8, abs=0.05)
    assert 100 * (rep.disagreement or 0) == pytest.approx(12.1, abs=0.05)


def _stratum_rows() -> list[Row]:
    cut, wrong = "completion_cap", "wrong_conclusion"
    pairs = [  # (base success, base flag, stressed success, stressed flag)
        (True, None, True, None),
        (True, None, False, cut),
        (True, None, False, wrong),
        (False, cut, True, None),
        (False, cut, False, cut),
        (False, wrong, True, None),
    ]
    rows = []
    for i, (s0, f0, s1, f1) in enumerate(pairs):
        rows.append(Row("V8", f"p{i}", s0, f0))
        rows.append(Row("V128", f"p{i}", s1, f1))
    rows.append(Row("V128", "unpaired", False, cut))
    rows.append(Row("V8", "infra", None, status="infra_error"))
    rows.append(Row("V128", "infra", True))
    return rows


def test_truncation_stratum_and_bounds_by_hand() -> None:
    s = truncation_stratum(_stratum_rows(), "V8", "V128")
    assert s.pairs == 6
    assert s.effect == pytest.approx(0.0)  # 3 successes in each arm
    assert (s.losses, s.gains, s.losses_truncated) == (2, 2, 1)
    assert s.untruncated_pairs == 3  # p0, p2, p5: 0, -1, +1
    assert s.stratum_effect == pytest.approx(0.0)
    # lower: base's cut failures succeed (p3, p4), stressed's fail: 0-1-1+0-1+1 = -2
    # upper: stressed's cut failures succeed (p1, p4), base's fail: 0+0-1+1+1+1 = +2
    assert s.bounds == pytest.approx((-2 / 6, 2 / 6))
    # alike: p4 (cut in both arms) contributes 0 at both ends
    assert s.bounds_alike == pytest.approx((-1 / 6, 1 / 6))


def test_truncation_and_obligation_by_flag_by_hand() -> None:
    rows = [
        Row("a", "t1", False, "completion_cap", "selection", calls=0),
        Row("a", "t2", False, "completion_cap", "selection", calls=0),
        Row("a", "t3", False, "completion_cap", "evidence", calls=3),
        Row("a", "t4", False, "call_limit", "evidence", calls=5),
        Row("a", "t5", False, "wrong_conclusion", "conclusion", calls=4),
        Row("a", "t6", True, calls=4),
        Row("a", "t7", None, status="infra_error", calls=0),
    ]
    t = truncation(rows)
    assert (t.episodes, t.truncated, t.before_first_call) == (6, 3, 2)
    assert t.rate == pytest.approx(0.5)
    assert obligation_by_flag(rows) == {
        ("selection", "completion_cap"): 2,
        ("evidence", "completion_cap"): 1,
        ("evidence", "call_limit"): 1,
        ("conclusion", "wrong_conclusion"): 1,
    }


def _record(arm: str, task: str, success: bool, flag: str | None, calls: int) -> RunRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return RunRecord(
        record_id=f"rec-{arm}-{task}",
        registration_id="reg",
        registration_digest=DIGEST,
        experiment="x",
        arm=arm,
        surface="s",
        task_id=task,
        intent="i",
        cluster="c",
        split="dev",
        polarity="positive",
        repeat=0,
        rotation=0,
        driver="local",
        evidence_class="local",
        started_at=now,
        finished_at=now,
        success=success,
        terminal_flag=flag,
        first_unmet_obligation=None if success else "tool_use",
        calls=calls,
    )


def test_run_records_feed_the_tables() -> None:
    records = [
        _record("V8", "t1", True, None, 2),
        _record("V128", "t1", False, "completion_cap", 0),
        _record("V8", "t2", True, None, 2),
        _record("V128", "t2", True, None, 2),
    ]
    tables = census_tables(records, pairs=[("V8", "V128")])
    titles = [t[0] for t in tables]
    assert titles[0].startswith("Failure census")
    by_title = {t[0]: t for t in tables}
    trunc = by_title["Truncation at the completion cap"][2]
    assert trunc == [["V128", 2, 1, "50.0%", 1], ["V8", 2, 0, "0.0%", 0]]
    stratum = by_title["Truncation stratum and worst-case bounds (paired on task and repeat)"]
    assert stratum[2][0][2] == "-50.0 pp"  # 1 of 2 pairs lost
    text = census_markdown(tables)
    assert "| V128 | 2 | 1 |" in text
