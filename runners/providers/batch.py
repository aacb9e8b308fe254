"""Batch submission, polling and collection for single-turn (selection) runs.

Why batches: half the price, and a provider's batch path is a different
execution path whose effect must be visible (the InvokeRank seed saw a same-day
repeat move when its runs went through the Batch API), so every record a batch
produced says ``batch: true``.

The flow, for the units of a run that have no ``ok`` record yet:

1. each unit's first request is built by the driver exactly as the synchronous
   path would send it, under a ``custom_id`` derived from (digest, arm, task,
   repeat);
2. units already covered by a batch this registration submitted earlier and has
   not collected are not resubmitted: that batch is polled again (resume);
3. the others are submitted as one batch, and its id is stored in the run
   store's database (:mod:`batch_store`) *before* any waiting;
4. batches are polled every ``batch_poll_s`` with progress until they end (or
   ``batch_timeout_s`` passes: :class:`BatchPending`, rerun to resume);
5. results are read into turns by the same parser as the synchronous path and
   primed into the driver, which answers each unit's first turn from them; a
   unit whose request errored, expired or was cancelled gets an ``infra_error``
   record and is resubmitted by the next run.

Anthropic: Message Batches; results come from the batch's absolute
``results_url``, which is refused unless it has the same origin as the base URL
(the SDK sends the key to that URL). OpenAI: the Batch API over ``/v1/responses``
with a JSONL input file and output/error files.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

from prereg.core.errors import PreregError
from prereg.runners.drivers.base import Episode, InfraError
from prereg.runners.providers.batch_backend import (
    BatchBackend,
    BatchOutcome,
    BatchRequest,
    BatchStatus,
)
from prereg.runners.providers.batch_store import BatchStore
from prereg.runners.providers.credentials import effective_base_url, redact
from prereg.runners.providers.driver import ModelDriver, Parsed
from prereg.runners.providers.retry import with_retries

UnitKey = tuple[str, str, int]
T = TypeVar("T")


class BatchPending(PreregError):
    """A batch has not ended within the allowed wait; the next run resumes it."""

    exit_code = 1


class BatchFailed(PreregError):
    """A batch call failed for good (the endpoint refused connections until the retries
    ran out, an error status, a results URL refused): exit 1, like :class:`BatchPending`.

    Nothing is lost: a submitted batch's id is stored before any polling, no record is
    written before the results are read, and the next ``prereg run --batch`` resumes.
    """

    exit_code = 1


async def _calling(provider: str, stage: str, after: str, call: Callable[[], Awaitable[T]]) -> T:
    """``call()``; its InfraError (retries already spent) as BatchFailed saying what now."""
    try:
        return await call()
    except InfraError as exc:
        failure = str(exc).rstrip(". ")
        raise BatchFailed(redact(f"{failure} (while {stage}). {after}")) from None


def custom_id(digest: str, key: UnitKey) -> str:
    """A provider-safe id for a unit (``[A-Za-z0-9_-]``, 41 characters)."""
    arm, task, repeat = key
    raw = "\x1f".join((digest, arm, task, str(repeat)))
    return "u" + hashlib.sha256(raw.encode()).hexdigest()[:40]


async def _retrying(driver: ModelDriver, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
    return await with_retries(
        call, driver.settings.retry, stats=driver.stats, what=f"{driver.provider} batch: {what}"
    )


# ---- Anthropic ------------------------------------------------------------------------------


def same_origin(url: str, base: str) -> bool:
    a, b = urlsplit(url), urlsplit(base)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def provider_id(value: object, what: str) -> str:
    """An identifier the provider returned, kept verbatim: a batch is fetched by it later,
    so it cannot be redacted. One that carries a credential (redaction would change it)
    is refused instead (InfraError), before it is stored or printed."""
    text = str(value)
    if redact(text) != text:
        raise InfraError(
            f"the provider returned a {what} that contains a credential; refused, nothing "
            "stored (a hostile or misconfigured endpoint?)"
        )
    return text


class AnthropicBatches:
    def __init__(self, driver: ModelDriver) -> None:
        self.driver = driver

    async def submit(self, requests: Sequence[BatchRequest]) -> tuple[str, str | None]:
        client = await self.driver._ready_client()
        payload = [{"custom_id": r.custom_id, "params": r.body} for r in requests]
        batch = await _retrying(
            self.driver, "create", lambda: client.messages.batches.create(requests=payload)
        )
        return provider_id(batch.id, "batch id"), None

    async def status(self, batch_id: str) -> BatchStatus:
        client = await self.driver._ready_client()
        batch = await _retrying(
            self.driver, "retrieve", lambda: client.messages.batches.retrieve(batch_id)
        )
        counts = batch.request_counts
        done = counts.succeeded + counts.errored + counts.canceled + counts.expired
        total = done + counts.processing
        return BatchStatus(
            batch_id,
            batch.processing_status == "ended",
            str(batch.processing_status),
            done,
            total,
            results_url=batch.results_url,
        )

    async def results(self, status: BatchStatus) -> dict[str, BatchOutcome]:
        if not status.results_url:
            raise InfraError(f"anthropic batch {status.batch_id} ended without a results_url")
        base = effective_base_url("anthropic")
        if not same_origin(status.results_url, base):
            raise InfraError(
                redact(
                    f"anthropic batch {status.batch_id}: results_url {status.results_url} is not "
                    f"on the API's origin ({base}); refusing to send the key there"
                )
            )
        client = await self.driver._ready_client()
        out: dict[str, BatchOutcome] = {}

        async def read() -> None:
            decoder = await client.messages.batches.results(status.batch_id)
            async for line in decoder:
                result = line.result
                if result.type == "succeeded":
                    out[line.custom_id] = BatchOutcome(response=result.message)
                elif result.type == "errored":
                    error = getattr(result.error, "error", result.error)
                    detail = getattr(error, "message", None) or str(error)
                    out[line.custom_id] = BatchOutcome(error=f"errored: {detail}")
                else:
                    out[line.custom_id] = BatchOutcome(error=str(result.type))

        await _retrying(self.driver, "results", read)
        return out


# ---- OpenAI ---------------------------------------------------------------------------------

_OPENAI_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


class OpenAIBatches:
    endpoint = "/v1/responses"

    def __init__(self, driver: ModelDriver) -> None:
        self.driver = driver

    async def submit(self, requests: Sequence[BatchRequest]) -> tuple[str, str | None]:
        client = await self.driver._ready_client()
        lines = [
            json.dumps(
                {"custom_id": r.custom_id, "method": "POST", "url": self.endpoint, "body": r.body},
                ensure_ascii=False,
            )
            for r in requests
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = await _retrying(
            self.driver,
            "upload",
            lambda: client.files.create(
                file=("prereg-batch.jsonl", io.BytesIO(data), "application/jsonl"), purpose="batch"
            ),
        )
        batch = await _retrying(
            self.driver,
            "create",
            lambda: client.batches.create(
                input_file_id=uploaded.id, endpoint=self.endpoint, completion_window="24h"
            ),
        )
        return provider_id(batch.id, "batch id"), provider_id(uploaded.id, "file id")

    async def status(self, batch_id: str) -> BatchStatus:
        client = await self.driver._ready_client()
        batch = await _retrying(self.driver, "retrieve", lambda: client.batches.retrieve(batch_id))
        counts = batch.request_counts
        done = 0 if counts is None else counts.completed + counts.failed
        total = 0 if counts is None else counts.total
        return BatchStatus(
            batch_id,
            batch.status in _OPENAI_ENDED,
            str(batch.status),
            done,
            total,
            output_file_id=batch.output_file_id,
            error_file_id=batch.error_file_id,
        )

    async def _lines(self, file_id: str) -> list[dict[str, Any]]:
        client = await self.driver._ready_client()
        content = await _retrying(self.driver, "download", lambda: client.files.content(file_id))
        text = content.text if hasattr(content, "text") else content.read().decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    async def results(self, status: BatchStatus) -> dict[str, BatchOutcome]:
        out: dict[str, BatchOutcome] = {}
        for file_id in (status.output_file_id, status.error_file_id):
            if not file_id:
                continue
            for line in await self._lines(file_id):
                cid = str(line.get("custom_id"))
                response = line.get("response") or {}
                error = line.get("error")
                code = response.get("status_code")
                if error is None and code == 200 and isinstance(response.get("body"), dict):
                    out[cid] = BatchOutcome(response=response["body"])
                else:
                    body = response.get("body")
                    detail = error or (body.get("error") if isinstance(body, dict) else body)
                    out[cid] = BatchOutcome(error=f"status {code}: {json.dumps(detail)}")
        if status.status != "completed":
            for_missing = f"the batch ended with status {status.status}"
            out.setdefault("__batch__", BatchOutcome(error=for_missing))
        return out


# ---- the flow -------------------------------------------------------------------------------


@dataclass
class BatchReport:
    """What a batch phase did (the run command prints it)."""

    submitted: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    primed: int = 0
    failed: int = 0
    polls: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted,
            "resumed": self.resumed,
            "primed": self.primed,
            "failed": self.failed,
            "polls": self.polls,
        }


ProgressFn = Callable[[BatchStatus], None]


class _PrimedError:
    """Stands in for a parsed result: the unit's first turn raises this error."""

    def __init__(self, message: str) -> None:
        self.message = message


async def wait_for(
    backend: BatchBackend,
    batch_id: str,
    *,
    poll_s: float,
    timeout_s: float,
    report: BatchReport,
    progress: ProgressFn | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> BatchStatus:
    """Poll until the batch ends; BatchPending after ``timeout_s``."""
    start = clock()
    while True:
        status = await backend.status(batch_id)
        report.polls += 1
        if progress is not None:
            progress(status)
        if status.ended:
            return status
        if clock() - start + poll_s > timeout_s:
            raise BatchPending(
                f"batch {batch_id} is still {status.status} ({status.done}/{status.total} "
                "requests done); its id is stored: run `prereg run --batch` again to resume "
                "without resubmitting"
            )
        await sleep(poll_s)


async def prefetch_first_turns(
    driver: ModelDriver,
    episodes: Sequence[tuple[UnitKey, Episode]],
    *,
    digest: str,
    batches: BatchStore,
    progress: ProgressFn | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> BatchReport:
    """Submit (or resume) and collect the first turn of every episode; prime the driver.

    Returns after every batch involved has ended and been read. Batches are marked
    collected by :func:`mark_collected` once the records are written.
    """
    backend: BatchBackend = driver.batch_backend()
    report = BatchReport()
    by_id = {custom_id(digest, key): episode for key, episode in episodes}
    covering: dict[str, str] = {}
    for stored in batches.batches(digest, driver.provider, "submitted"):
        for cid in stored.custom_ids:
            if cid in by_id and cid not in covering:
                covering[cid] = stored.batch_id
    waiting = list(dict.fromkeys(covering.values()))
    report.resumed.extend(waiting)
    fresh = [cid for cid in by_id if cid not in covering]
    if fresh:
        requests = [BatchRequest(cid, driver.build_request(by_id[cid], [], [])) for cid in fresh]
        batch_id, file_id = await _calling(
            driver.provider,
            f"submitting {len(requests)} request(s)",
            "No batch id came back, so none is stored and no record was written; run "
            "`prereg run --batch` again when the API is reachable",
            lambda: backend.submit(requests),
        )
        batches.record(
            batch_id,
            provider=driver.provider,
            digest=digest,
            model=driver.model,
            custom_ids=fresh,
            input_file_id=file_id,
        )
        report.submitted.append(batch_id)
        waiting.append(batch_id)
        for cid in fresh:
            covering[cid] = batch_id
    for batch_id in waiting:
        resume = (
            f"Batch {batch_id} is stored and no record was written: run `prereg run "
            "--batch` again when the API is reachable to resume it without resubmitting"
        )
        status = await _calling(
            driver.provider,
            f"polling batch {batch_id}",
            resume,
            partial(
                wait_for,
                backend,
                batch_id,
                poll_s=driver.settings.batch_poll_s,
                timeout_s=driver.settings.batch_timeout_s,
                report=report,
                progress=progress,
                sleep=sleep,
                clock=clock,
            ),
        )
        outcomes = await _calling(
            driver.provider,
            f"reading the results of batch {batch_id}",
            resume,
            partial(backend.results, status),
        )
        ended_note = outcomes.pop("__batch__", None)
        for cid, owner in covering.items():
            if owner != batch_id:
                continue
            episode = by_id[cid]
            outcome = outcomes.get(cid)
            if outcome is None:
                reason = ended_note.error if ended_note is not None else "no result returned"
                outcome = BatchOutcome(error=reason)
            if outcome.response is not None:
                try:
                    parsed: Parsed | _PrimedError = driver.parse(outcome.response, batch=True)
                except InfraError as exc:
                    parsed = _PrimedError(str(exc))
                if isinstance(parsed, Parsed) and parsed.paused:
                    # a paused turn needs a follow-up request, which a batch cannot make
                    parsed = _PrimedError(
                        "the provider paused the turn (pause_turn); it "
                        "cannot be continued from a batch result"
                    )
            else:
                parsed = _PrimedError(f"{outcome.error}")
            if isinstance(parsed, _PrimedError):
                report.failed += 1
                driver.prime_error(
                    episode,
                    InfraError(redact(f"{driver.provider} batch {batch_id}: {parsed.message}")),
                )
            else:
                report.primed += 1
                driver.prime(episode, parsed)
    driver.batch_only = True
    return report


def mark_collected(batches: BatchStore, report: BatchReport) -> None:
    """After the records of a batch phase are written: its batches are done with."""
    for batch_id in report.submitted + report.resumed:
        batches.mark_collected(batch_id)
