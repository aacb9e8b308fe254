"""Orchestration: spend cap, infra failures retried, concurrency does not change results."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from run_helpers import ScriptedDriver, experiment, plan

from prereg.registry.units import Budgets
from prereg.runners.drivers.base import Episode, Exchange, FinalAnswer, InfraError, Turn
from prereg.runners.drivers.local import create as local
from prereg.runners.orchestrate import run_plan
from prereg.runners.store.sqlite import RunStore


def go(p: Any, store: RunStore, driver: Any, **kw: Any) -> Any:
    return asyncio.run(run_plan(p, experiment(), store, driver, **kw))


def test_spend_cap_stops_the_run_and_keeps_partial_results(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    # every unit answers in one turn costing $0.10; the cap is $0.45
    driver = ScriptedDriver([FinalAnswer("hello")], cost=0.10)
    p = plan(budgets=Budgets(spend_usd=0.45, call_limit=5, turn_limit=5))
    summary = go(p, store, driver, concurrency=1)
    assert summary.stopped == "spend_cap"
    assert summary.completed == 5  # 0.0, 0.1, ... 0.4 < 0.45 start a unit
    assert abs(summary.spend_usd - 0.5) < 1e-9
    assert summary.remaining == summary.planned - 5
    assert len(store.records()) == 5  # partial results are kept
    again = go(p, store, driver, concurrency=1)  # the cap counts earlier spend
    assert again.completed == 0 and again.stopped == "spend_cap"
    # with concurrency the overshoot is bounded by the units in flight
    store2 = RunStore(tmp_path / "c")
    concurrent = go(p, store2, driver, concurrency=4)
    assert 5 <= concurrent.completed <= 5 + 3


class Flaky:
    """Fails (as infrastructure) on chosen tasks, answers directly on the others."""

    name = "flaky"
    evidence_class = "api"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing

    async def next_turn(self, episode: Episode, history: list[Exchange]) -> Turn:
        if any(t in episode.label for t in self.failing):
            raise InfraError("connection reset by peer")
        return Turn(FinalAnswer("answer"))

    async def aclose(self) -> None:
        return None


def test_infra_failures_are_recorded_and_retried(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    p = plan()
    first = go(p, store, Flaky({"/t001/", "/t021/"}))
    exp = experiment()
    dev_ids = {t.id for t in exp.tasks_in_split("dev")}
    failing = len({"t001", "t021"} & dev_ids) * 2  # two arms
    assert first.failed == failing and first.completed == first.planned - failing
    assert first.remaining == failing
    infra = store.records(status="infra_error")
    assert len(infra) == failing and all("connection reset" in (r.error or "") for r in infra)
    second = go(p, store, Flaky(set()))
    assert second.completed == failing and second.skipped_existing == first.planned - failing
    assert second.remaining == 0
    assert len(store.completed_keys(p.digest)) == first.planned
    assert len(store.records()) == first.planned + failing  # failures kept as evidence


def test_concurrency_does_not_change_results(tmp_path: Path) -> None:
    p = plan(driver="local", repeats=2)

    def outcomes(store: RunStore) -> list[Any]:
        return sorted((r.arm, r.task_id, r.repeat, r.success, r.calls) for r in store.records())

    a = RunStore(tmp_path / "a")
    b = RunStore(tmp_path / "b")
    go(p, a, local(), concurrency=1)
    go(p, b, local(), concurrency=16)
    assert outcomes(a) == outcomes(b)


def test_max_units_zero_runs_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    summary = go(plan(), store, ScriptedDriver([FinalAnswer("x")]), max_units=0)
    assert summary.completed == 0 and summary.stopped == "max_units"
    assert store.records() == []


class SlowFirstAppend(RunStore):
    """A store whose first append waits (as for another process's write lock) until some
    other unit has taken a turn, or 10 s."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.waiting = threading.Event()
        self.release = threading.Event()
        self.released_in_time: bool | None = None

    def append(self, record: Any) -> Any:
        if self.released_in_time is None:
            self.waiting.set()
            self.released_in_time = self.release.wait(10)
        return super().append(record)


class SecondWaits:
    """The first unit answers at once; any later unit answers once the store is waiting
    to append the first record, and then releases it (possible only while the event loop
    keeps running during that append)."""

    name = "gated"
    evidence_class = "api"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, store: SlowFirstAppend) -> None:
        self.store, self.turns = store, 0

    async def next_turn(self, episode: Episode, history: list[Exchange]) -> Turn:
        self.turns += 1
        if self.turns > 1:
            for _ in range(1000):
                if self.store.waiting.is_set():
                    break
                await asyncio.sleep(0.01)
            self.store.release.set()
        return Turn(FinalAnswer("answer"))

    async def aclose(self) -> None:
        return None


def test_a_waiting_append_does_not_hold_the_other_units(tmp_path: Path) -> None:
    # an append waiting for the store (another worker process's write lock, a PostgreSQL
    # round trip) runs off the event loop: the other units' requests go on meanwhile
    store = SlowFirstAppend(tmp_path)
    summary = go(plan(), store, SecondWaits(store), concurrency=2, max_units=2)
    assert store.released_in_time is True
    assert summary.completed == 2 and len(store.records()) == 2


def test_a_slot_plays_its_next_unit_while_its_last_record_is_appended(tmp_path: Path) -> None:
    # one slot: its first record's append waits until a later unit has taken a turn,
    # which happens only if the slot does not wait for that append before its next unit
    store = SlowFirstAppend(tmp_path)
    summary = go(plan(), store, SecondWaits(store), concurrency=1, max_units=2)
    assert store.released_in_time is True
    assert summary.completed == 2 and len(store.records()) == 2
    assert [r.chain.index for r in store.records() if r.chain] == [0, 1]
