"""Retries, rate limiting, spend holds, prices, settings and redaction (no server needed)."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.runners.providers.credentials import REDACTED, redact, redact_obj
from prereg.runners.providers.prices import Priced, cost_usd, load_prices, packaged_prices
from prereg.runners.providers.ratelimit import RateLimiter
from prereg.runners.providers.retry import (
    ProviderError,
    RetriesExhausted,
    RetryPolicy,
    RetryStats,
    backoff_delay,
    classify,
    parse_retry_after,
    with_retries,
)
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.providers.spend import SpendCapReached, SpendMeter


class FakeResponse:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


class StatusError(Exception):
    """Shaped like the SDKs' APIStatusError."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"Error code: {status}")
        self.status_code = status
        self.response = FakeResponse(headers or {})


class APIConnectionError(Exception):
    pass


class APITimeoutError(APIConnectionError):
    pass


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    when = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 < parse_retry_after({"retry-after": format_datetime(when)}) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_classification() -> None:
    assert classify(StatusError(429)).retryable
    assert classify(StatusError(529)).retryable and classify(StatusError(408)).retryable
    assert not classify(StatusError(400)).retryable
    assert not classify(StatusError(503, {"x-should-retry": "false"})).retryable
    assert classify(StatusError(400, {"x-should-retry": "true"})).retryable
    assert classify(APITimeoutError()).cause == "timeout"
    assert classify(APIConnectionError()).cause == "connection"
    assert classify(ValueError("a bug")) is None


def test_full_jitter_is_bounded_and_exponential() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(1)
    for attempt, ceiling in ((0, 1.0), (1, 2.0), (2, 4.0), (5, 8.0)):
        delays = [backoff_delay(attempt, policy, None, rng) for _ in range(200)]
        assert 0 <= min(delays) and max(delays) <= ceiling
        assert max(delays) > ceiling * 0.8  # full jitter spans the whole range
    assert backoff_delay(3, policy, 12.5, rng) == 12.5  # retry-after wins, exactly


def _flaky(errors: list[BaseException]) -> Any:
    calls = {"n": 0}

    async def send() -> str:
        calls["n"] += 1
        if errors:
            raise errors.pop(0)
        return "ok"

    return send, calls


def test_with_retries_counts_and_sleeps() -> None:
    slept: list[float] = []

    async def sleep(d: float) -> None:
        slept.append(d)

    send, calls = _flaky([StatusError(429, {"retry-after-ms": "300"}), StatusError(502)])
    stats = RetryStats()
    result = asyncio.run(
        with_retries(
            send,
            RetryPolicy(max_attempts=3, base_delay=0.5),
            what="req",
            stats=stats,
            sleep=sleep,
            rng=random.Random(0),
        )
    )
    assert result == "ok" and calls["n"] == 3
    assert slept[0] == 0.3 and 0 <= slept[1] <= 1.0
    assert stats.as_dict() == {
        "requests": 1,
        "attempts": 3,
        "retries": 2,
        "failures": 0,
        "by_cause": {"429": 1, "502": 1},
    }


def test_with_retries_gives_up() -> None:
    async def sleep(d: float) -> None:
        return None

    send, _ = _flaky([StatusError(500)] * 5)
    with pytest.raises(RetriesExhausted, match="after 3 attempts"):
        asyncio.run(with_retries(send, RetryPolicy(max_attempts=3), what="req", sleep=sleep))
    send, calls = _flaky([StatusError(401)])
    with pytest.raises(ProviderError) as info:
        asyncio.run(with_retries(send, RetryPolicy(), what="req", sleep=sleep))
    assert not isinstance(info.value, RetriesExhausted) and calls["n"] == 1
    send, calls = _flaky([StatusError(429, {"retry-after": "7200"})])
    with pytest.raises(RetriesExhausted, match="retry after 7200 s"):
        asyncio.run(with_retries(send, RetryPolicy(max_retry_after=600), what="req", sleep=sleep))
    send, _ = _flaky([ValueError("not ours")])
    with pytest.raises(ValueError):
        asyncio.run(with_retries(send, RetryPolicy(), what="req", sleep=sleep))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_rate_limiter_requests_per_minute() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=3, clock=clock, sleep=clock.sleep)

    async def admit(n: int) -> list[float]:
        times = []
        for _ in range(n):
            await limiter.acquire()
            times.append(clock.now)
        return times

    assert asyncio.run(admit(7)) == [0, 0, 0, 60, 60, 60, 120]


def test_rate_limiter_tokens_per_minute_with_settlement() -> None:
    clock = Clock()
    limiter = RateLimiter(tpm=1000, clock=clock, sleep=clock.sleep)

    async def scenario() -> list[float]:
        times = []
        first = await limiter.acquire(800)  # estimate
        limiter.settle(first, 300)  # measured: 300
        times.append(clock.now)
        await limiter.acquire(600)  # 300 + 600 fits now
        times.append(clock.now)
        clock.now = 10.0
        await limiter.acquire(500)  # 900 + 500 > 1000: wait for the first
        times.append(clock.now)
        await limiter.acquire(5000)  # bigger than the budget: alone in a window
        times.append(clock.now)
        return times

    assert asyncio.run(scenario()) == [0.0, 0.0, 60.0, 120.0]


def test_rate_limiter_shared_by_concurrent_tasks() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=2, clock=clock, sleep=clock.sleep)

    async def many() -> list[float]:
        async def one() -> float:
            await limiter.acquire()
            return clock.now

        return sorted(await asyncio.gather(*(one() for _ in range(5))))

    times = asyncio.run(many())
    assert times.count(0.0) == 2 and max(times) >= 120


def test_spend_meter_holds_and_settles() -> None:
    meter = SpendMeter(cap_usd=1.0, spent_usd=0.25)
    a = meter.reserve(0.5)
    with pytest.raises(SpendCapReached, match="in flight"):
        meter.reserve(0.3)
    meter.settle(a, 0.1)
    assert meter.spent_usd == pytest.approx(0.35) and meter.reserved_usd == 0
    b = meter.reserve(0.6)
    meter.release(b)
    assert meter.remaining_usd == pytest.approx(0.65)
    with pytest.raises(SpendCapReached, match="cannot be priced"):
        meter.reserve(None)
    SpendMeter(None).reserve(None)  # no cap: nothing to hold


def test_prices_snapshot_matching_and_costs() -> None:
    table = packaged_prices()
    assert table.version and table.date and table.origin == "packaged"
    assert table.price("anthropic", "claude-haiku-4-5-20251001") == table.price(
        "anthropic", "claude-haiku-4-5"
    )
    assert table.price("openai", "gpt-4o-2024-08-06") == table.price("openai", "gpt-4o")
    assert table.price("openai", "gpt-5.1") is None  # a neighbour is never borrowed
    assert table.price("openai", "gpt-5-mini").input == 0.25  # longest listed name wins
    price = table.price("openai", "gpt-4o")
    billed = Priced(uncached_input=1000, cached_input=1000, cache_write=0, output=1000)
    assert cost_usd(price, billed) == pytest.approx((2500 + 1250 + 10000) / 1e6)
    assert cost_usd(price, billed, discount=0.5) == pytest.approx((2500 + 1250 + 10000) / 2e6)
    assert cost_usd(None, billed) is None


def test_price_override_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "prices.yaml"
    own.write_text(
        "version: mine-1\ndate: '2026-12-01'\nproviders:\n  anthropic:\n"
        "    batch_discount: 0.5\n    models:\n"
        "      claude-sonnet-5-5: {input: 3, output: 15}\n"
    )
    table = load_prices(own)
    assert table.version == "mine-1" and table.origin == str(own)
    assert table.price("anthropic", "claude-sonnet-5-5").output == 15
    monkeypatch.setenv("PREREG_PRICES", str(own))
    assert load_prices().version == "mine-1"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: x\ndate: y\nproviders:\n  openai:\n    models:\n"
        "      gpt: {input: -1, output: 2}\n"
    )
    with pytest.raises(BadInput) as info:
        load_prices(bad)
    assert info.value.file == str(bad) and "input" in (info.value.field or "")
    with pytest.raises(BadInput, match="not found"):
        load_prices(tmp_path / "missing.yaml")


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREREG_RPM", "100")
    monkeypatch.setenv("PREREG_OPENAI_RPM", "40")
    monkeypatch.setenv("PREREG_TPM", "90000")
    monkeypatch.setenv("PREREG_MAX_ATTEMPTS", "3")
    settings = ProviderSettings.from_env("openai", {"timeout_s": 5.0})
    assert (settings.rpm, settings.tpm, settings.retry.max_attempts, settings.timeout_s) == (
        40,
        90000,
        3,
        5.0,
    )
    assert ProviderSettings.from_env("anthropic").rpm == 100
    monkeypatch.setenv("PREREG_TPM", "lots")
    with pytest.raises(BadInput, match="PREREG_TPM"):
        ProviderSettings.from_env("openai")


def test_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "plainvalue-777")
    text = (
        "key plainvalue-777 and sk-ant-api03-abcdefghijkl and sk-proj-ABCDEFGHIJKLMNOPQRST "
        "Authorization: Bearer abc.def.ghi-123 x-api-key: zzzzzzzzzz task-0123456789abcdefgh"
    )
    out = redact(text)
    for secret in ("plainvalue-777", "sk-ant-api03", "sk-proj-ABC", "abc.def.ghi", "zzzzzzzzzz"):
        assert secret not in out
    assert out.count(REDACTED) == 5 and "task-0123456789abcdefgh" in out
    assert redact_obj({"a": ["plainvalue-777", 3], "plainvalue-777": None}) == {
        "a": [REDACTED, 3],
        REDACTED: None,
    }
