"""The pilot's response cache (issue 43, item 2): ``prereg run --cache``.

Through the real SDK clients against the local fake provider: a cached rerun of a pilot
(the same draft under another id) sends no request to the fake, and its records are
labelled evidence class ``cached``; a registration mixing cached and fresh records is
refused by ``analyse``; a confirmatory registration refuses ``--cache``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.store.sqlite import RunStore
from tests.providers.fakes import ANTHROPIC_KEY, FakeProviders, provider_env
from tests.providers.test_prov_e2e import DRAFT, MODELS


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeProviders(rate_limit_every=0) as server:
        provider_env(monkeypatch, server)
        yield server


def register(cli: Any, ws: Path, driver: str, *, reg_id: str) -> str:
    """The end-to-end tests' pilot with one rotation, so the repeats of a prompt send
    the very same requests (only the unit tells them apart)."""
    draft = ws / "drafts" / f"{reg_id}.yaml"
    text = DRAFT.format(id=reg_id, driver=driver, model=MODELS[driver], turns=6, host_extra="")
    draft.write_text(text.replace("rotations: 2", "rotations: 1"))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 0, result.stderr
    return reg_id


def _entries(ws: Path) -> list[Path]:
    return sorted((ws / ".cache" / "responses").rglob("*.json"))


def _calls(record: Any) -> list[tuple[str | None, Any]]:
    return [(e.tool, e.arguments) for e in record.trace if e.kind == "tool_call"]


def _by_unit(ws: Path, reg_id: str) -> dict[tuple[str, str, int], Any]:
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    return {(r.arm, r.task_id, r.repeat): r for r in records}


@pytest.mark.parametrize("driver", ["anthropic", "openai"])
def test_a_cached_rerun_sends_nothing_and_is_labelled_cached(
    ws: Path, cli: Any, fake: FakeProviders, driver: str
) -> None:
    first = register(cli, ws, driver, reg_id="pilot-a")
    result = cli("-w", ws, "run", first, "--cache", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["pilot"]["cache"] is True
    sent = fake.model_requests
    assert sent > 0
    assert len(_entries(ws)) == sent  # one entry per request answered
    a = _by_unit(ws, first)
    assert {r.evidence_class for r in a.values()} == {"cached"}
    assert all(r.cost_usd for r in a.values())  # fresh responses: measured, priced
    # every turn of every unit was sent: the repeats of a prompt, whose requests are the
    # same, did not answer each other from the cache (the unit is in the key)
    assert sent == sum(r.turns for r in a.values())

    second = register(cli, ws, driver, reg_id="pilot-b")  # the same pilot, another digest
    result = cli("-w", ws, "run", second, "--cache", "--json")
    assert result.code == 0, result.stderr
    assert fake.model_requests == sent  # nothing sent
    assert result.json()["spend_usd"] == 0
    b = _by_unit(ws, second)
    assert set(b) == set(a)
    for unit, record in b.items():
        assert record.evidence_class == "cached"
        assert record.cost_usd == 0 and record.latency_ms is None
        # the same responses: the same calls and outcome, unit by unit (repeats included)
        assert _calls(record) == _calls(a[unit]) and record.calls == a[unit].calls
        assert record.success == a[unit].success
    # the cached records analyse on their own (one evidence class)
    assert cli("-w", ws, "analyse", second, "--json").code == 0
    for path in _entries(ws):  # no secret is kept on disk
        assert ANTHROPIC_KEY.encode() not in path.read_bytes()


def test_cached_and_fresh_records_never_pool(ws: Path, cli: Any, fake: FakeProviders) -> None:
    reg_id = register(cli, ws, "anthropic", reg_id="pilot-mixed")
    assert cli("-w", ws, "run", reg_id, "--limit", "2").code == 0  # fresh
    assert cli("-w", ws, "run", reg_id, "--cache").code == 0  # the rest, cached
    classes = {r.evidence_class for r in _by_unit(ws, reg_id).values()}
    assert classes == {"api", "cached"}
    result = cli("-w", ws, "analyse", reg_id, "--json")
    assert result.code == 3
    assert "never pooled" in result.json()["message"]


def test_cache_is_refused_where_it_cannot_apply(ws: Path, cli: Any, fake: FakeProviders) -> None:
    reg_id = register(cli, ws, "anthropic", reg_id="pilot-batch")
    result = cli("-w", ws, "run", reg_id, "--cache", "--batch", "--json")
    assert result.code == 2 and result.json()["field"] == "cache"
    assert cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml").code == 0
    result = cli("-w", ws, "run", "music-library-pilot", "--cache", "--json")  # local host
    assert result.code == 2 and result.json()["field"] == "cache"
    assert fake.model_requests == 0
