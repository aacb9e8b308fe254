"""Bounded retries with exponential backoff and full jitter, ours and counted.

Why not the SDKs' own retries: they are invisible (a run cannot say how many
attempts a turn took) and their policy changes between SDK versions. The drivers
construct every client with ``max_retries=0`` and retry here, so the policy is
registered-in-code, the attempts are counted, and a failure that survives the
retries becomes one precise, redacted :class:`InfraError`.

What is retried: HTTP 408, 409, 429 and 5xx (529 overloaded included), timeouts
and connection errors; a server's ``x-should-retry`` header overrides the status
rule either way, as the SDKs do. What is never done: a fallback to another model
(a fallback answers with a different model, which would silently change what a
run measured). ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)
are honoured exactly; without them the delay is full jitter,
``uniform(0, min(max_delay, base_delay * 2**attempt))``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from prereg.runners.drivers.base import InfraError
from prereg.runners.providers.credentials import redact

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})
_MAX_MESSAGE = 600


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. ``max_attempts`` counts the first attempt."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    #: A server asking for a longer wait than this is not waited for: the unit
    #: fails now (infra_error) and is retried by the next ``prereg run``.
    max_retry_after: float = 600.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("delays must be non-negative")


@dataclass
class RetryStats:
    """Counters over a driver's lifetime (reported by the run command)."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    by_cause: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "attempts": self.attempts,
            "retries": self.retries,
            "failures": self.failures,
            "by_cause": dict(self.by_cause),
        }


class ProviderError(InfraError):
    """A provider request failed for good (not retryable, or retries exhausted)."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        self.status = status
        self.attempts = attempts
        super().__init__(redact(message))


class RetriesExhausted(ProviderError):
    """Every allowed attempt failed with a retryable error."""


@dataclass(frozen=True)
class Failure:
    """What went wrong with one attempt, as far as retrying is concerned."""

    retryable: bool
    cause: str  # "429", "500", "timeout", "connection", ...
    status: int | None
    retry_after: float | None
    message: str


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first (bounded)."""
    chain = [exc]
    while len(chain) < 8 and chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return chain


def _refused(exc: BaseException) -> bool:
    """A connection the peer refused or reset, whatever the SDK called it: the openai
    SDK's aiohttp transport reports a refused connection as a connect *timeout*."""
    chain = _causes(exc)[1:]
    timed_out = any(isinstance(c, asyncio.TimeoutError | TimeoutError) for c in chain)
    return not timed_out and any(isinstance(c, ConnectionError) for c in chain)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    root = _causes(exc)[-1]
    if root is not exc and str(root) and str(root) not in text:
        text += f" (cause: {type(root).__name__}: {root})"
    request_id = getattr(exc, "request_id", None)
    if request_id:
        text += f" (request id {request_id})"
    text = redact(text)
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


def classify(exc: BaseException) -> Failure | None:
    """Classify an SDK or transport exception; None if it is not one (let it propagate).

    Duck-typed over both SDKs: status errors carry ``status_code`` and ``response``;
    connection and timeout errors are recognised by class name, which is stable
    across ``anthropic`` and ``openai`` (``APIConnectionError``, ``APITimeoutError``).
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        retry_after = parse_retry_after(headers)
        should = None if headers is None else headers.get("x-should-retry")
        retryable = status in RETRYABLE_STATUS or status >= 500
        if should == "true":
            retryable = True
        elif should == "false":
            retryable = False
        return Failure(retryable, str(status), status, retry_after, _error_text(exc))
    if _refused(exc) or "APIConnectionError" in names and "APITimeoutError" not in names:
        return Failure(True, "connection", None, None, _error_text(exc))
    if "APITimeoutError" in names or isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return Failure(True, "timeout", None, None, _error_text(exc))
    if isinstance(exc, ConnectionError):
        return Failure(True, "connection", None, None, _error_text(exc))
    if "APIResponseValidationError" in names or "APIError" in names:
        return Failure(False, "api", None, None, _error_text(exc))
    return None


def backoff_delay(
    attempt: int, policy: RetryPolicy, retry_after: float | None, rng: random.Random | None = None
) -> float:
    """Delay before retry number ``attempt`` (0-based): retry-after if given, else jitter."""
    if retry_after is not None:
        return retry_after
    ceiling = min(policy.max_delay, policy.base_delay * (2**attempt))
    return (rng or random).uniform(0.0, ceiling)


Sleep = Callable[[float], Awaitable[Any]]


async def with_retries(
    send: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str,
    stats: RetryStats | None = None,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[Failure, float], None] | None = None,
) -> T:
    """Await ``send()`` until it succeeds or the policy gives up.

    Raises :class:`ProviderError` (not retryable) or :class:`RetriesExhausted`;
    both carry a redacted message and never chain the SDK exception (whose request
    object holds the authentication headers).
    """
    stats = stats if stats is not None else RetryStats()
    stats.requests += 1
    for attempt in range(policy.max_attempts):
        stats.attempts += 1
        try:
            return await send()
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised if unknown
            failure = classify(exc)
            if failure is None:
                raise
        stats.by_cause[failure.cause] += 1
        if not failure.retryable:
            stats.failures += 1
            raise ProviderError(
                f"{what} failed: {failure.message}", status=failure.status, attempts=attempt + 1
            ) from None
        if attempt + 1 >= policy.max_attempts:
            stats.failures += 1
            raise RetriesExhausted(
                f"{what} failed after {attempt + 1} attempts: {failure.message}",
                status=failure.status,
                attempts=attempt + 1,
            ) from None
        if failure.retry_after is not None and failure.retry_after > policy.max_retry_after:
            stats.failures += 1
            raise RetriesExhausted(
                f"{what} failed: the server asked to retry after {failure.retry_after:.0f} s, "
                f"longer than the {policy.max_retry_after:.0f} s allowed: {failure.message}",
                status=failure.status,
                attempts=attempt + 1,
            ) from None
        delay = backoff_delay(attempt, policy, failure.retry_after, rng)
        stats.retries += 1
        if on_retry is not None:
            on_retry(failure, delay)
        await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
