"""One worker's share of a run split over worker processes (``prereg run --workers N``).

On a store that shares no claims between processes (SQLite, one machine), the parent
gives each of its N worker processes a fixed share: the units at plan positions
``index, index + N, index + 2N, ...`` (positions in the whole plan, so the split does not
depend on which units an earlier run finished, or on which worker starts first) and an
equal part of the spend cap's headroom. No unit is run by two workers and the workers
together never pass the cap; the price is that a worker that reaches its part of the cap
stops while another may still have headroom (the next run carries on). On PostgreSQL
the workers claim units from the store and hold spend in its shared ledger instead, and
take no share.

Client-side rate limits (``PREREG_RPM``, ``PREREG_TPM``) are split among the workers on
either store: each worker's limiter admits its part, so together they keep the limit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerShare:
    """Worker ``index`` of ``count``; ``spent_before``: the spend recorded under the
    registration when the parent started the workers."""

    index: int
    count: int
    spent_before: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"worker {self.index} of {self.count} does not exist")

    def takes(self, position: int) -> bool:
        """Whether the unit at ``position`` of the plan is this worker's."""
        return position % self.count == self.index

    def cap(self, cap_usd: float | None) -> float | None:
        """This worker's spend cap: what was recorded before, plus its equal part of the
        headroom left under the registered cap (None: no cap)."""
        if cap_usd is None:
            return None
        headroom = max(cap_usd - self.spent_before, 0.0)
        return self.spent_before + headroom / self.count


def split(total: int, count: int, index: int) -> int:
    """Worker ``index``'s part of ``total`` (concurrency, a unit limit) split as evenly
    as whole numbers allow: the parts sum to ``total``."""
    return total // count + (1 if index < total % count else 0)


def rate_part(limit: int | None, count: int, index: int) -> int | None:
    """Worker ``index``'s part of a per-minute rate limit (None: no limit); at least one
    (the parent starts no more workers than the smallest limit allows)."""
    return None if limit is None else max(split(limit, count, index), 1)
