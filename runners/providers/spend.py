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
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prereg.runners.drivers.base import InfraError


class SpendCapReached(InfraError):
    """The registered spend cap would be exceeded by the next request."""


@dataclass
class Hold:
    amount: float
    open: bool = True


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
            return Hold(amount)

    def settle(self, hold: Hold, cost_usd: float | None) -> None:
        """Release the hold and add the measured cost (None: the worst case is kept)."""
        with self._lock:
            if not hold.open:
                return
            hold.open = False
            self.reserved_usd = max(self.reserved_usd - hold.amount, 0.0)
            self.spent_usd += hold.amount if cost_usd is None else max(cost_usd, 0.0)

    def release(self, hold: Hold) -> None:
        """Drop a hold whose request failed before the provider billed anything."""
        with self._lock:
            if hold.open:
                hold.open = False
                self.reserved_usd = max(self.reserved_usd - hold.amount, 0.0)

    @property
    def remaining_usd(self) -> float | None:
        if self.cap_usd is None:
            return None
        with self._lock:
            return max(self.cap_usd - self.spent_usd - self.reserved_usd, 0.0)
