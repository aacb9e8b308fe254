"""What a provider's batch API is to prereg: submit requests, poll a batch, read results.

The types live below :mod:`prereg.runners.providers.driver` so that the provider driver
base class can declare :meth:`~prereg.runners.providers.driver.ModelDriver.batch_backend`;
the two backends (Anthropic Message Batches, the OpenAI Batch API) and the flow that
uses them are in :mod:`prereg.runners.providers.batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class BatchRequest:
    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class BatchStatus:
    batch_id: str
    ended: bool
    status: str
    done: int
    total: int
    results_url: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None


@dataclass(frozen=True)
class BatchOutcome:
    """One request's result: a provider response, or why there is none."""

    response: Any = None
    error: str | None = None


class BatchBackend(Protocol):
    async def submit(self, requests: Sequence[BatchRequest]) -> tuple[str, str | None]: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, status: BatchStatus) -> dict[str, BatchOutcome]: ...
