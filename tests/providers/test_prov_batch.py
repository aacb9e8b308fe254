"""Batches through the real SDK clients: create, poll, results, resume, errors."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.drivers import anthropic as anthropic_driver
from prereg.runners.drivers import openai as openai_driver
from prereg.runners.drivers.base import InfraError, ToolCall
from prereg.runners.providers.batch import (
    BatchFailed,
    BatchPending,
    custom_id,
    prefetch_first_turns,
)
from prereg.runners.providers.batch_store import BatchStore
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.store.sqlite import RunStore
from tests.providers.fakes import FakeProviders, episode, provider_env
from tests.providers.test_prov_e2e import register

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeProviders(batch_polls=3) as server:
        provider_env(monkeypatch, server)
        yield server


def episodes(n: int = 3) -> list[tuple[tuple[str, str, int], Any]]:
    return [
        (("arm", f"t{i:03d}", 0), episode(f"Prompt number {i}?", label=f"arm/t{i:03d}/0"))
        for i in range(n)
    ]


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


async def first_turns(driver: Any, eps: list[Any], store: BatchStore) -> tuple[Any, list[Any]]:
    try:
        report = await prefetch_first_turns(driver, eps, digest=DIGEST, batches=store)
        turns = []
        for _, ep in eps:
            try:
                turns.append(await driver.next_turn(ep, []))
            except InfraError as exc:
                turns.append(exc)
        return report, turns
    finally:
        await driver.aclose()


@pytest.mark.parametrize(
    "module,model", [(anthropic_driver, "claude-haiku-4-5"), (openai_driver, "gpt-5-mini")]
)
def test_batch_create_poll_results(
    fake: FakeProviders, tmp_path: Path, module: Any, model: str
) -> None:
    store = BatchStore(tmp_path / "runs")
    polls: list[Any] = []
    driver = module.create(model, {})
    eps = episodes()

    async def go() -> tuple[Any, list[Any]]:
        try:
            report = await prefetch_first_turns(
                driver, eps, digest=DIGEST, batches=store, progress=polls.append
            )
            return report, [await driver.next_turn(ep, []) for _, ep in eps]
        finally:
            await driver.aclose()

    report, turns = run(go())
    assert len(report.submitted) == 1 and report.primed == 3 and report.failed == 0
    assert [p.ended for p in polls] == [False, False, True]  # polled until it ended
    for turn in turns:
        assert isinstance(turn.action, ToolCall) and turn.action.name == "search_tracks"
        assert turn.model_returned == model + "-20991231"
        assert turn.latency_ms is None  # not measured per request on the batch path
        assert turn.cost_usd is not None and turn.usage is not None
    # the batch id was stored, with the units' custom ids, before any polling
    (stored,) = store.batches(DIGEST, module.create(model, {}).provider)
    assert stored.batch_id == report.submitted[0] and stored.state == "submitted"
    assert set(stored.custom_ids) == {custom_id(DIGEST, key) for key, _ in eps}
    # no synchronous model request was sent
    assert not fake.model_bodies("anthropic") and not fake.model_bodies("openai")


def test_anthropic_batch_wire_and_absolute_results_url(fake: FakeProviders, tmp_path: Path) -> None:
    driver = anthropic_driver.create("claude-haiku-4-5", {})
    run(first_turns(driver, episodes(2), BatchStore(tmp_path / "runs")))
    create = next(s for s in fake.seen if s.method == "POST" and s.path == "/v1/messages/batches")
    request = create.body["requests"][0]
    assert request["params"]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert request["params"]["max_tokens"] == 256
    assert any(s.path.endswith("/results") for s in fake.seen)


def test_batch_cost_is_discounted(fake: FakeProviders, tmp_path: Path) -> None:
    driver = openai_driver.create("gpt-5-mini", {})
    _, (turn,) = run(first_turns(driver, episodes(1), BatchStore(tmp_path / "runs")))
    # brain: 230 input, 28 output tokens at $0.25 / $2 per M, half price in a batch
    assert turn.cost_usd == pytest.approx((230 * 0.25 + 28 * 2) / 1e6 / 2)


def test_openai_batch_uses_files_and_the_responses_endpoint(
    fake: FakeProviders, tmp_path: Path
) -> None:
    driver = openai_driver.create("gpt-5-mini", {})
    run(first_turns(driver, episodes(2), BatchStore(tmp_path / "runs")))
    (batch,) = fake.openai_batches.values()
    assert batch["endpoint"] == "/v1/responses"
    lines = batch["lines"]
    assert {line["url"] for line in lines} == {"/v1/responses"}
    assert all(line["body"]["parallel_tool_calls"] is False for line in lines)
    assert any(s.path == "/v1/files" for s in fake.seen)


def test_errored_requests_become_infra_errors(fake: FakeProviders, tmp_path: Path) -> None:
    eps = episodes(3)
    fake.batch_errors.add(custom_id(DIGEST, eps[1][0]))
    for module, model in ((anthropic_driver, "claude-haiku-4-5"), (openai_driver, "gpt-5-mini")):
        report, turns = run(
            first_turns(module.create(model, {}), eps, BatchStore(tmp_path / f"runs-{model}"))
        )
        assert report.primed == 2 and report.failed == 1
        assert isinstance(turns[1], InfraError) and "batch" in str(turns[1])
        assert isinstance(turns[0].action, ToolCall)


def test_interrupted_batch_resumes_by_id_without_resubmitting(
    fake: FakeProviders, tmp_path: Path
) -> None:
    store = BatchStore(tmp_path / "runs")
    eps = episodes(2)
    impatient = ProviderSettings.from_env("anthropic", {"batch_timeout_s": 0.001})
    with pytest.raises(BatchPending, match="run `prereg run --batch` again"):
        run(
            first_turns(
                anthropic_driver.create("claude-haiku-4-5", {}, settings=impatient), eps, store
            )
        )
    (pending,) = store.batches(DIGEST, "anthropic", "submitted")
    creates = sum(1 for s in fake.seen if s.method == "POST" and s.path == "/v1/messages/batches")
    report, turns = run(first_turns(anthropic_driver.create("claude-haiku-4-5", {}), eps, store))
    assert report.resumed == [pending.batch_id] and report.submitted == []
    assert (
        creates
        == 1
        == sum(1 for s in fake.seen if s.method == "POST" and s.path == "/v1/messages/batches")
    )
    assert all(isinstance(t.action, ToolCall) for t in turns)


def test_results_url_on_another_origin_is_refused(fake: FakeProviders, tmp_path: Path) -> None:
    fake.results_origin = "http://198.51.100.7:9"
    with pytest.raises(BatchFailed, match="refusing to send the key"):
        run(
            first_turns(
                anthropic_driver.create("claude-haiku-4-5", {}),
                episodes(1),
                BatchStore(tmp_path / "runs"),
            )
        )
    assert not any(s.path.endswith("/results") for s in fake.seen)


def test_batch_only_driver_never_falls_back_to_a_synchronous_request(
    fake: FakeProviders, tmp_path: Path
) -> None:
    driver = openai_driver.create("gpt-5-mini", {})
    eps = episodes(1)

    async def go() -> None:
        try:
            await prefetch_first_turns(
                driver, eps, digest=DIGEST, batches=BatchStore(tmp_path / "runs")
            )
            other = episode("not in the batch", label="arm/t999/0")
            with pytest.raises(InfraError, match="no batch result"):
                await driver.next_turn(other, [])
        finally:
            await driver.aclose()

    run(go())
    assert not fake.model_bodies("openai")


# ---- the endpoint down (issue 12, item 8) ---------------------------------------------------


def closed_url() -> str:
    """A local address where nothing listens: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def endpoint(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("OPENAI_BASE_URL", url)


def strays(root: Path) -> list[str]:
    """Temporary files and SQLite journals left behind."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if ".tmp" in p.name or p.name.endswith(("-wal", "-shm", "-journal"))
    )


#: how a refused connection reads through either transport: the SDK's "Connection error."
#: (httpx), or the refusal itself as the cause (the openai SDK's aiohttp transport calls a
#: refused connection a connect timeout; prereg names the cause: retry._error_text)
REFUSED = r"Connection error|Connect call failed|Connection refused"


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_an_unreachable_endpoint_is_batch_failed_and_stores_nothing(
    fake: FakeProviders, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    monkeypatch.setenv("PREREG_HTTP", transport)
    endpoint(monkeypatch, closed_url())
    store = BatchStore(tmp_path / "runs")
    for module, model in ((anthropic_driver, "claude-haiku-4-5"), (openai_driver, "gpt-5-mini")):
        with pytest.raises(BatchFailed, match=REFUSED) as refused:
            run(first_turns(module.create(model, {}), episodes(2), store))
        assert "none is stored" in str(refused.value) and refused.value.exit_code == 1
    assert store.batches(DIGEST) == []
    assert not fake.seen  # nothing reached the provider


@pytest.mark.parametrize("driver", ["anthropic", "openai"])
@pytest.mark.parametrize("down_at", ["submit", "poll"])
def test_batch_run_with_the_endpoint_down_exits_1_cleanly_and_resumes(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch, driver: str, down_at: str
) -> None:
    with FakeProviders(batch_polls=3) as fake:
        provider_env(monkeypatch, fake)
        reg_id = register(cli, ws, driver, turns=1)
        pending: list[str] = []
        if down_at == "poll":  # a batch submitted, then the run interrupted before it ended
            monkeypatch.setenv("PREREG_BATCH_TIMEOUT_S", "0.001")
            assert cli("-w", ws, "run", reg_id, "--batch", "--json").code == 1
            with BatchStore(ws / "runs") as batches:
                pending = [b.batch_id for b in batches.batches(provider=driver)]
            assert len(pending) == 1
            monkeypatch.setenv("PREREG_BATCH_TIMEOUT_S", "20")
        up = fake.anthropic_url if driver == "anthropic" else fake.openai_url

        endpoint(monkeypatch, closed_url())
        down = cli("-w", ws, "run", reg_id, "--batch", "--json")
        assert down.code == 1, down.stdout
        error = down.json()
        assert error["error"] == "BatchFailed"
        assert re.search(REFUSED, error["message"])
        assert "run `prereg run --batch` again" in error["message"]
        assert "Traceback" not in down.stderr and down.stderr.startswith("error: ")
        assert strays(ws) == []
        with BatchStore(ws / "runs") as batches, RunStore(ws / "runs") as records:
            stored = [b.batch_id for b in batches.batches(provider=driver)]
            assert stored == pending  # nothing new stored, nothing lost
            assert records.records() == []
        assert cli("-w", ws, "verify").code == 0

        endpoint(monkeypatch, up)
        again = cli("-w", ws, "run", reg_id, "--batch", "--json")
        assert again.code == 0, again.stderr
        assert again.json()["completed"] == 24
        assert again.json()["batch"]["resumed"] == pending
        created = fake.anthropic_batches if driver == "anthropic" else fake.openai_batches
        assert len(created) == 1  # a stored batch is resumed, never resubmitted
