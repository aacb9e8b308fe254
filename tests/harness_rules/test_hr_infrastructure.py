"""The infrastructure-failure policy (issue 13, item 6; seed 001, 4.2).

Two registrations differ only in ``harness.infrastructure``; the local host is made to
fail on infrastructure for the semantic arm on three tasks, identically in both. The
agent records are the same; the denominators are not, as documented: ``retry`` leaves
the three units out (missing, retried by the next run), ``count_as_failure`` keeps them
as failures of their arm, in the arm's rate, the pairs and the registered test.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.drivers.base import Episode, Exchange, InfraError, Turn
from prereg.runners.drivers.local import LocalHost
from prereg.runners.store.sqlite import RunStore
from tests.harness_rules.helpers import draft

FAILING = ("t003", "t004", "t010")  # dev tasks of music-library


@pytest.fixture
def failing_host(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The local host raises (an infrastructure failure) for the semantic arm on FAILING
    while ``failing`` holds those tasks; empty it to let the next attempt through."""
    failing = set(FAILING)
    original = LocalHost.next_turn

    async def next_turn(self: LocalHost, episode: Episode, history: Sequence[Exchange]) -> Turn:
        arm, task, _ = episode.label.split("/")
        if arm == "semantic" and task in failing:
            raise InfraError("injected: the host is unreachable")
        return await original(self, episode, history)

    monkeypatch.setattr(LocalHost, "next_turn", next_turn)
    return failing


def _register_and_run(ws: Path, cli: Any, name: str, harness: dict[str, Any] | None) -> Any:
    over = {} if harness is None else {"harness": harness}
    assert cli("-w", ws, "register", draft(ws, name, **over), "--json").code == 0
    result = cli("-w", ws, "run", name, "--json")
    assert result.code == 0, result.stderr
    return result.json()


def _analyse(ws: Path, cli: Any, name: str, *flags: str) -> Any:
    result = cli("-w", ws, "analyse", name, "--json", *flags)
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


def test_retry_and_count_as_failure_give_the_documented_denominators(
    ws: Path, cli: Any, failing_host: set[str]
) -> None:
    retry = _register_and_run(ws, cli, "infra-retry", None)
    itt = _register_and_run(
        ws, cli, "infra-itt", {"infrastructure": "count_as_failure", "attempts": 1}
    )
    assert retry["failed"] == itt["failed"] == 3
    assert retry["remaining"] == 3 and itt["remaining"] == 0  # settled after 1 attempt

    # the same agent records in both: every ok unit has the same outcome
    store = RunStore(ws / "runs")
    outcomes = {
        name: {
            r.unit_key: r.success for r in store.records(registration_id=name) if r.status == "ok"
        }
        for name in ("infra-retry", "infra-itt")
    }
    assert outcomes["infra-retry"] == outcomes["infra-itt"]
    n = len({task for _, task, _ in outcomes["infra-retry"]})  # tasks of the dev split

    # retry: incomplete (refused without --allow-incomplete), the three units left out
    assert cli("-w", ws, "analyse", "infra-retry", "--json").code == 4
    a = _analyse(ws, cli, "infra-retry", "--allow-incomplete")
    b = _analyse(ws, cli, "infra-itt")
    arms_a = {x["id"]: x for x in a["arms"]}
    arms_b = {x["id"]: x for x in b["arms"]}
    assert arms_a["semantic"]["measured"] == n - 3 and arms_b["semantic"]["measured"] == n
    assert arms_a["semantic"]["successes"] == arms_b["semantic"]["successes"]
    assert arms_a["semantic"]["counted_as_failure"] == 0
    assert arms_b["semantic"]["counted_as_failure"] == 3
    assert arms_a["semantic"]["runs_ok"] == arms_b["semantic"]["runs_ok"] == n - 3
    for key in ("measured", "successes", "runs_ok", "infra_errors", "counted_as_failure"):
        assert arms_a["baseline"][key] == arms_b["baseline"][key]
    # the registered test pairs by task: the three tasks drop out under retry only
    assert a["primary"]["n"] == n - 3 and b["primary"]["n"] == n
    comp_a, comp_b = a["completeness"], b["completeness"]
    assert (comp_a["complete"], comp_a["missing"], comp_a["infra_errors_open"]) == (False, 3, 3)
    assert (comp_b["complete"], comp_b["missing"], comp_b["counted_as_failure"]) == (True, 0, 3)
    assert comp_a["infrastructure"] == "retry"
    assert comp_b["infrastructure"] == "count_as_failure" and comp_b["attempts"] == 1
    assert "3 unit(s) counted as failures" in comp_b["denominators"]
    assert "left out of every denominator" in comp_a["denominators"]
    # the report states the policy next to completeness
    md = (ws / "reports" / "infra-itt" / "report.md").read_text()
    assert r"count\_as\_failure after 1 attempt(s)" in md  # Markdown-escaped
    assert "3 unit(s) counted as failures, kept in every rate, pair and test" in md


def test_units_are_retried_until_their_attempts_are_spent(
    ws: Path, cli: Any, failing_host: set[str]
) -> None:
    harness = {"infrastructure": "count_as_failure", "attempts": 2}
    first = _register_and_run(ws, cli, "infra-two", harness)
    assert first["failed"] == 3 and first["remaining"] == 3  # one attempt of two
    second = cli("-w", ws, "run", "infra-two", "--json").json()
    assert second["failed"] == 3 and second["completed"] == 0 and second["remaining"] == 0
    third = cli("-w", ws, "run", "infra-two", "--json").json()
    assert third["failed"] == 0 and third["completed"] == 0  # settled: not run again
    report = _analyse(ws, cli, "infra-two")
    assert report["completeness"]["counted_as_failure"] == 3
    assert report["runs"]["infra_errors"] == 6


def test_a_unit_that_completes_on_a_retry_is_its_record(
    ws: Path, cli: Any, failing_host: set[str]
) -> None:
    harness = {"infrastructure": "count_as_failure", "attempts": 2}
    _register_and_run(ws, cli, "infra-heals", harness)
    failing_host.clear()  # the host is back
    second = cli("-w", ws, "run", "infra-heals", "--json").json()
    assert second["completed"] == 3 and second["failed"] == 0
    report = _analyse(ws, cli, "infra-heals")
    assert report["completeness"]["counted_as_failure"] == 0
    semantic = next(x for x in report["arms"] if x["id"] == "semantic")
    assert semantic["infra_errors"] == 3 and semantic["counted_as_failure"] == 0


@pytest.mark.parametrize(
    ("harness", "words"),
    [
        ({"infrastructure": "count_as_failure"}, "needs the number of attempts"),
        ({"infrastructure": "retry", "attempts": 2}, "is for infrastructure: count_as_failure"),
        ({"infrastructure": "drop"}, "retry"),
    ],
)
def test_bad_policies_are_refused(ws: Path, cli: Any, harness: dict[str, Any], words: str) -> None:
    result = cli("-w", ws, "register", draft(ws, "bad-policy", harness=harness), "--json")
    assert result.code == 2
    error = result.json()
    assert error["field"].startswith("harness") and words in error["message"], error
