"""A registered live integration: its calls run on the live MCP server, the rest replay."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from prereg.core.errors import BadInput, IntegrityError
from prereg.registry.units import LiveSpec
from prereg.runners.orchestrate import run_plan
from prereg.runners.store.sqlite import RunStore
from tests.controls.helpers import PODCATCH_SERVER, SERVERS, plan, podcast, single
from tests.controls.test_ctl_snapshots import CallFirst

PODCATCH = (sys.executable, str(PODCATCH_SERVER))
TIDEWATCH = (sys.executable, str(SERVERS / "tidewatch.py"))


def _run(tmp_path: Path, live: LiveSpec, surface: str = "podcatch", **call) -> list:
    p = replace(plan(single(surface, design={"repeats": 1, "rotations": 1, "seed": 1})), live=live)
    store = RunStore(tmp_path / "runs")
    driver = CallFirst("podcatch_search", call or {"query": "astronomy"})
    try:
        asyncio.run(run_plan(p, podcast(), store, driver, concurrency=3))
        return store.records(registration_id=p.registration_id)
    finally:
        store.close()


def test_live_calls_execute_on_the_live_server_and_completed_is_not_measured(tmp_path) -> None:
    records = _run(tmp_path, LiveSpec(surface="podcatch", command=PODCATCH, timeout_s=30))
    live = [r for r in records if r.arm == "arm" and r.status == "ok"]
    assert live and all(r.offer.first_server == "podcatch" for r in live)
    for r in live:
        podcatch = next(s for s in r.offer.servers if s.key == "podcatch")
        assert podcatch.live is True and podcatch.role == "focal"
        assert r.funnel.selected and r.funnel.invoked and r.funnel.executed
        assert r.funnel.completed is None  # the store's oracles cannot judge it
        result = next(e for e in r.trace if e.kind == "tool_result")
        assert result.is_error is False and "Orbit Notes" in json.dumps(result.result)
    # the other arm does not offer podcatch: the same call names no offered tool
    other = [r for r in records if r.arm == "other"]
    assert other and all(r.offer.first_server is None for r in other)
    assert all(not s.live for r in other for s in r.offer.servers)


def test_an_empty_live_result_is_not_executed(tmp_path) -> None:
    records = _run(
        tmp_path, LiveSpec(surface="podcatch", command=PODCATCH), query="nothing matches"
    )
    live = [r for r in records if r.arm == "arm"]
    assert live and all(r.funnel.invoked and r.funnel.executed is False for r in live)


def test_a_live_server_that_no_longer_serves_the_snapshot_is_refused(tmp_path) -> None:
    with pytest.raises(IntegrityError, match="no longer serves the registered snapshot"):
        _run(tmp_path, LiveSpec(surface="podcatch", command=TIDEWATCH))
    store = RunStore(tmp_path / "runs")
    try:
        assert store.records(registration_id="ctl") == []  # nothing was written
    finally:
        store.close()


def test_only_a_snapshot_surface_can_be_live(tmp_path) -> None:
    with pytest.raises(BadInput, match="only an MCP snapshot surface has a live server"):
        _run(tmp_path, LiveSpec(surface="focal", command=PODCATCH), surface="focal")
    with pytest.raises(BadInput, match="not a surface of the experiment"):
        _run(tmp_path, LiveSpec(surface="nowhere", command=PODCATCH))


def test_host_live_is_registered_and_validated(ws: Path, cli) -> None:
    draft = (ws / "drafts" / "podcast-selection-controls.yaml").read_text()
    base = draft.replace("id: podcast-selection-controls", "id: live-one").replace(
        "host: {driver: local}", "host:\n  driver: local\n  live: LIVE"
    )
    both = base.replace(
        "LIVE", "{surface: podcatch, command: [python, x.py], url: 'http://127.0.0.1:1/mcp'}"
    )
    (ws / "drafts" / "both.yaml").write_text(both)
    result = cli("-w", ws, "register", ws / "drafts" / "both.yaml", "--json")
    assert result.code == 2 and "exactly one of" in result.stdout
    good = base.replace("LIVE", json.dumps({"surface": "podcatch", "command": list(PODCATCH)}))
    (ws / "drafts" / "good.yaml").write_text(good)
    result = cli("-w", ws, "register", ws / "drafts" / "good.yaml", "--json")
    assert result.code == 0, result.stdout
    shown = cli("-w", ws, "show", "live-one", "--json").json()
    assert "podcatch.py" in json.dumps(shown)  # the command is in the digested document
