"""``prereg run --workers N``: units split over worker processes, each run once, the spend
cap kept across them, one chain anchored once; the result is the one-process run's."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prereg.core.workspace import Workspace
from prereg.registry.registrations import Registry
from prereg.runners.api import run_registration
from prereg.runners.drivers.local import LocalHost, create
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.share import WorkerShare, rate_part, split
from prereg.runners.store.sqlite import RunStore
from prereg.runners.workers import split_rate_limits
from tests.conftest import CliResult

PILOT = "music-library-pilot"


def test_shares_partition_the_plan_and_the_cap_headroom() -> None:
    for count in range(1, 6):
        shares = [WorkerShare(k, count, spent_before=0.3) for k in range(count)]
        for position in range(200):  # every unit is exactly one worker's
            assert sum(s.takes(position) for s in shares) == 1
        caps = [s.cap(1.0) for s in shares]
        # the workers' parts of the headroom add up to the headroom, no more
        assert sum(c - 0.3 for c in caps if c is not None) == pytest.approx(0.7)
        assert all(s.cap(None) is None for s in shares)
        assert all(s.cap(0.1) == 0.3 for s in shares)  # past the cap already: nothing more
        for total in (0, 1, 7, 32, 33):
            parts = [split(total, count, k) for k in range(count)]
            assert sum(parts) == total and max(parts) - min(parts) <= 1
    with pytest.raises(ValueError):
        WorkerShare(2, 2)


def test_rate_limits_are_split_so_the_workers_together_keep_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prereg.runners.drivers.anthropic import create as anthropic_driver
    from prereg.runners.drivers.openai import create as openai_driver

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    for count in (2, 3, 5):
        limited, free = [], []
        for k in range(count):
            one = openai_driver("gpt-5-mini", settings=ProviderSettings(rpm=7, tpm=10_001))
            other = anthropic_driver("claude-sonnet-4-5", settings=ProviderSettings())
            split_rate_limits([one, other], count, k)
            limited.append(one.limiter)
            free.append(other.limiter)
        assert sum(lim.rpm for lim in limited) == 7  # together: the limit, no more
        assert sum(lim.tpm for lim in limited) == 10_001
        assert all(lim.unlimited for lim in free)  # no limit: none invented
    assert [rate_part(1, 2, k) for k in range(2)] == [1, 1]  # the parent starts one instead
    assert rate_part(None, 3, 0) is None


def _outcomes(root: Path) -> list[tuple[Any, ...]]:
    records = RunStore(root / "runs").records()
    return sorted((r.arm, r.task_id, r.repeat, r.status, r.success, r.calls) for r in records)


def _registered(cli: Callable[..., CliResult], root: Path) -> Path:
    assert cli("init", root).code == 0
    assert cli("-w", root, "register", root / "drafts" / f"{PILOT}.yaml").code == 0
    return root


def test_two_workers_run_every_unit_once_as_one_process_does(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    one = _registered(cli, tmp_path / "one")
    two = _registered(cli, tmp_path / "two")
    assert cli("-w", one, "run", PILOT, "--json").code == 0
    result = cli("-w", two, "run", PILOT, "--workers", "2", "-c", "6", "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["workers"] == 2 and summary["duplicates"] == 0
    assert summary["completed"] == summary["planned"] == 168 and summary["remaining"] == 0
    assert _outcomes(two) == _outcomes(one)  # the local host is deterministic per unit
    assert cli("-w", two, "verify", "--json").code == 0  # one chain, links in order
    anchors = Registry(two / "registry").anchors(summary["registration_digest"])
    assert [a["count"] for a in anchors] == [168]  # pinned once, after both workers


def test_max_units_is_split_and_the_next_run_resumes(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    root = _registered(cli, tmp_path / "ws")
    first = cli("-w", root, "run", PILOT, "--workers", "2", "--max-units", "5", "--json")
    assert first.code == 0, first.stderr
    assert first.json()["completed"] == 5 and first.json()["stopped"] == "max_units"
    second = cli("-w", root, "run", PILOT, "--workers", "3", "--json")
    assert second.code == 0, second.stderr
    data = second.json()
    assert data["skipped_existing"] == 5 and data["completed"] == 163 and data["remaining"] == 0
    keys = [(r.arm, r.task_id, r.repeat) for r in RunStore(root / "runs").records()]
    assert len(keys) == len(set(keys)) == 168


def test_workers_refuse_batch_and_a_price_file(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    root = _registered(cli, tmp_path / "ws")
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: x\n")
    for extra, says in ((["--batch"], "--batch"), (["--prices", str(prices)], "PREREG_PRICES")):
        result = cli("-w", root, "run", PILOT, "--workers", "2", *extra)
        assert result.code == 2 and says in result.stderr, result.stderr
    assert not (root / "runs" / "runs.sqlite").exists()


PROVIDER_DRAFT = """\
id: capped
title: Podcast selection on a provider host, under a small spend cap
hypothesis: Descriptive metadata raises selection of the focal integration.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {id: descriptive, surface: focal}
  - {id: neutral, surface: focal-neutral}
host: {driver: openai, model: gpt-5-mini}
budgets: {completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: 6,
          spend_usd: CAP}
design: {repeats: 2, rotations: 2, seed: 3}
outcome: success
primary: {test: mcnemar_exact, alpha: 0.05, sides: two-sided}
"""


def test_workers_on_a_provider_host_stay_under_the_spend_cap(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.providers.fake_chat import ChatBrain, FakeChat
    from tests.providers.fakes import provider_env

    cap = 0.004
    root = tmp_path / "ws"
    assert cli("init", root).code == 0
    draft = root / "drafts" / "capped.yaml"
    draft.write_text(PROVIDER_DRAFT.replace("CAP", str(cap)))
    assert cli("-w", root, "register", draft).code == 0
    with FakeChat(ChatBrain()) as server:
        provider_env(monkeypatch, server)
        result = cli("-w", root, "run", "capped", "--workers", "2", "-c", "4", "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    records = RunStore(root / "runs").records()
    spent = sum(r.cost_usd or 0.0 for r in records)
    assert 0 < spent <= cap and summary["spend_usd"] == pytest.approx(spent, abs=1e-6)
    assert summary["stopped"] == "spend_cap" and summary["remaining"] > 0
    ok = [(r.arm, r.task_id, r.repeat) for r in records if r.status == "ok"]
    assert ok and len(ok) == len(set(ok))


def test_a_process_that_exits_after_its_run_settles_its_heap_first(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """``exits_after`` (the prereg program, a worker process): the drivers' SDKs are
    loaded and what is alive then frozen before the first unit, so no full collection
    walks them mid-run; a library caller (the default) freezes nothing."""
    seen: list[tuple[str, int]] = []

    class Preloading(LocalHost):
        def preload(self) -> None:
            seen.append(("preload", gc.get_freeze_count()))

        async def next_turn(self, episode: Any, history: Any) -> Any:
            seen.append(("turn", gc.get_freeze_count()))
            return await super().next_turn(episode, history)

    root = _registered(cli, tmp_path / "ws")
    driver = create()
    driver.__class__ = Preloading
    gc.unfreeze()
    try:
        run_registration(Workspace(root), PILOT, driver=driver, max_units=1)
        assert seen[0][0] == "turn" and gc.get_freeze_count() == 0
        seen.clear()
        run_registration(Workspace(root), PILOT, driver=driver, max_units=1, exits_after=True)
        # frozen before the checks, and again once the SDKs are loaded, before any unit
        assert seen[0][0] == "preload" and seen[0][1] > 0
        assert seen[1][0] == "turn" and seen[1][1] >= seen[0][1]
    finally:
        gc.unfreeze()
