"""Spend cap accounting inside a driver: reserve the worst case, settle the measured cost.

Why in the driver as well as in the orchestration: the orchestration stops
starting units once the recorded spend reaches the cap, but a multi-turn unit
already running can keep spending. The driver therefore reserves, before each
request, an upper bound of what that request can cost (estimated prompt tokens
at the dearest input rate plus the full completion cap at the output rate) and
refuses the request if the spend so far plus everything reserved would pass
the cap. After the response the reservation is replaced by the measured cost.
A refused request raises :class:`SpendCapReached`, an infrastructure failure:
the unit is recorded ``infra_error`` and no model behaviour is invented.

One process knows only its own reservations. Where several worker processes run one
registration against a shared store (PostgreSQL), the orchestration runs each unit
inside :func:`shared_spend`, and every capped :class:`SpendMeter` then also holds each
request in the store's :class:`SpendLedger`, which checks the cap atomically against
the spend recorded under the registration plus every live worker's holds. Drivers do
not change: they keep calling ``reserve``, ``settle`` and ``release`` on their meter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from prereg.runners.drivers.base import InfraError

#: (arm, task_id, repeat): the run unit a hold is charged to.
UnitKey = tuple[str, str, int]


class SpendCapReached(InfraError):
    """The registered spend cap would be exceeded by the next request."""


class SpendLedger(Protocol):
    """Spend holds of one registration shared by every worker (kept by a shared store).

    ``reserve`` is atomic across workers: it adds the hold only if the spend recorded
    under the registration, plus the holds of every live worker (requests in flight at
    their worst case, measured costs whose unit's record is not stored yet), plus
    ``amount`` stays within ``cap``. A hold charged to a unit ends when that unit's
    record (carrying the measured cost) is stored, or when its worker's lease ends.
    """

    def reserve(self, unit: UnitKey, amount: float, cap: float) -> tuple[int | None, float, float]:
        """(hold id, or None when refused; recorded spend; live holds before this one)."""
        ...

    def settle(self, hold: int, cost: float) -> None:
        """The request ended: the hold now counts its measured ``cost``."""
        ...

    def release(self, hold: int) -> None:
        """The request failed before anything was billed: drop the hold."""
        ...


@runtime_checkable
class SharesSpend(Protocol):
    """A store's claims that also keep a :class:`SpendLedger` (a store shared by workers)."""

    def spend_ledger(self) -> SpendLedger: ...


@dataclass(frozen=True)
class _Shared:
    ledger: SpendLedger
    unit: UnitKey


_SHARED: ContextVar[_Shared | None] = ContextVar("prereg_shared_spend", default=None)


@contextmanager
def shared_spend(ledger: SpendLedger | None, unit: UnitKey) -> Iterator[None]:
    """Within this block (an asyncio task and the tasks it starts), capped meters also
    hold their requests in ``ledger``, charged to ``unit``; None: nothing shared."""
    if ledger is None:
        yield
        return
    token = _SHARED.set(_Shared(ledger, unit))
    try:
        yield
    finally:
        _SHARED.reset(token)


@dataclass
class Hold:
    amount: float
    open: bool = True
    #: the shared ledger holding it too, and its id there (None: this process only)
    ledger: SpendLedger | None = None
    ledger_id: int | None = None


class SpendMeter:
    """Spend under one registration: ``spent`` (measured) + ``reserved`` (in flight)."""

    def __init__(self, cap_usd: float | None, spent_usd: float = 0.0) -> None:
        if cap_usd is not None and cap_usd < 0:
            raise ValueError("cap_usd must be non-negative")
        self.cap_usd = cap_usd
        self.spent_usd = float(spent_usd)
        self.reserved_usd = 0.0
        self._lock = threading.Lock()

    def reserve(self, worst_case_usd: float | None) -> Hold:
        """Hold ``worst_case_usd`` or raise SpendCapReached. None: nothing to hold (no cap)."""
        amount = max(float(worst_case_usd or 0.0), 0.0)
        with self._lock:
            if self.cap_usd is not None:
                if worst_case_usd is None:
                    raise SpendCapReached(
                        "the registration has a spend cap but this request cannot be priced "
                        "(the model is not in the price table)"
                    )
                total = self.spent_usd + self.reserved_usd + amount
                if total > self.cap_usd:
                    raise SpendCapReached(
                        f"spend cap ${self.cap_usd:.4f} would be exceeded: spent "
                        f"${self.spent_usd:.4f}, in flight ${self.reserved_usd:.4f}, this "
                        f"request up to ${amount:.4f}"
                    )
            self.reserved_usd += amount
        hold = Hold(amount)
        shared = _SHARED.get()
        if self.cap_usd is not None and shared is not None:
            self._hold_shared(hold, shared, self.cap_usd)
        return hold

    def _hold_shared(self, hold: Hold, shared: _Shared, cap: float) -> None:
        """Hold the request in the shared ledger too; undo the local hold if refused."""
        try:
            hold_id, recorded, held = shared.ledger.reserve(shared.unit, hold.amount, cap)
        except BaseException:
            self._drop(hold)
            raise
        if hold_id is None:
            self._drop(hold)
            raise SpendCapReached(
                f"spend cap ${cap:.4f} would be exceeded: recorded ${recorded:.4f}, held "
                f"by the workers of this registration ${held:.4f}, this request up to "
                f"${hold.amount:.4f}"
            )
        hold.ledger, hold.ledger_id = shared.ledger, hold_id

    def _drop(self, hold: Hold, spent_usd: float = 0.0) -> bool:
        """Close ``hold`` locally, moving ``spent_usd`` from in flight to spent at once;
        False when it was already closed."""
        with self._lock:
            if not hold.open:
                return False
            hold.open = False
            self.reserved_usd = max(self.reserved_usd - hold.amount, 0.0)
            self.spent_usd += spent_usd
            return True

    def settle(self, hold: Hold, cost_usd: float | None) -> None:
        """Release the hold and add the measured cost (None: the worst case is kept)."""
        cost = hold.amount if cost_usd is None else max(cost_usd, 0.0)
        if not self._drop(hold, cost):
            return
        if hold.ledger is not None and hold.ledger_id is not None:
            hold.ledger.settle(hold.ledger_id, cost)

    def release(self, hold: Hold) -> None:
        """Drop a hold whose request failed before the provider billed anything."""
        if self._drop(hold) and hold.ledger is not None and hold.ledger_id is not None:
            hold.ledger.release(hold.ledger_id)

    @property
    def remaining_usd(self) -> float | None:
        if self.cap_usd is None:
            return None
        with self._lock:
            return max(self.cap_usd - self.spent_usd - self.reserved_usd, 0.0)
