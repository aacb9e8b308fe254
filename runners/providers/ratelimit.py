"""A client-side rate limiter: requests and tokens per minute, for asyncio.

Why client-side: a provider's 429s are retried, but a run that leans on them
spends its retry budget on avoidable failures and, on a batch of concurrent
units, turns a rate limit into a wall of infra errors (the InvokeRank seed lost
most of a batch that way). Keeping below the limits in the client is cheaper.

The limiter is a sliding 60-second window over what was admitted. A request
states its estimated tokens (prompt estimate + completion cap) before it is
sent; once the provider reports the real usage the reservation is settled to
the measured count, so the window tracks what was actually consumed. A request
larger than the whole token budget is admitted alone in an empty window rather
than waiting forever.

State is guarded by a threading lock (not an asyncio lock), so one limiter can
be shared by units running in different event loops or threads; waiting is an
``await`` of the injected ``sleep``, so tests drive it with a fake clock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

WINDOW_S = 60.0


@dataclass
class Reservation:
    """One admitted request; ``tokens`` is corrected by :meth:`RateLimiter.settle`."""

    at: float
    tokens: int


class RateLimiter:
    """Admit requests under ``rpm`` requests and ``tpm`` tokens per minute (None: no limit)."""

    def __init__(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if rpm is not None and rpm <= 0:
            raise ValueError("rpm must be positive")
        if tpm is not None and tpm <= 0:
            raise ValueError("tpm must be positive")
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        self._sleep = sleep
        self._window: deque[Reservation] = deque()
        self._lock = threading.Lock()
        self.waited_s = 0.0

    @property
    def unlimited(self) -> bool:
        return self.rpm is None and self.tpm is None

    def _expire(self, now: float) -> None:
        while self._window and now - self._window[0].at >= WINDOW_S:
            self._window.popleft()

    def _wait_needed(self, tokens: int, now: float) -> float:
        """Seconds until a request of ``tokens`` fits (0: now). Caller holds the lock."""
        self._expire(now)
        waits = [0.0]
        if self.rpm is not None and len(self._window) >= self.rpm:
            oldest = self._window[len(self._window) - self.rpm]
            waits.append(oldest.at + WINDOW_S - now)
        if self.tpm is not None and self._window:
            used = sum(r.tokens for r in self._window)
            if used + tokens > self.tpm:
                # free the oldest reservations until the request fits (or the window is empty)
                excess = used + tokens - self.tpm
                for r in self._window:
                    excess -= r.tokens
                    if excess <= 0:
                        waits.append(r.at + WINDOW_S - now)
                        break
                else:
                    waits.append(self._window[-1].at + WINDOW_S - now)
        return max(waits)

    async def acquire(self, tokens: int = 0) -> Reservation:
        """Wait until the request fits, then record it in the window."""
        tokens = max(int(tokens), 0)
        while True:
            with self._lock:
                now = self._clock()
                wait = 0.0 if self.unlimited else self._wait_needed(tokens, now)
                if wait <= 0:
                    reservation = Reservation(now, tokens)
                    if not self.unlimited:
                        self._window.append(reservation)
                    return reservation
            self.waited_s += wait
            await self._sleep(wait)

    def settle(self, reservation: Reservation, tokens: int | None) -> None:
        """Replace the estimate with the measured tokens (None: keep the estimate)."""
        if tokens is None:
            return
        with self._lock:
            reservation.tokens = max(int(tokens), 0)

    def in_window(self) -> tuple[int, int]:
        """(requests, tokens) currently counted in the window."""
        with self._lock:
            self._expire(self._clock())
            return len(self._window), sum(r.tokens for r in self._window)
