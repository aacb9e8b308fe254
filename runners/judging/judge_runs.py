"""``prereg judge ID``: judge every run of a registration that needs a verdict (issue 18).

Resumable and exactly once: the runs that already have a verdict of a judge (the same
judge digest: configuration and rubric) are skipped, and the verdict store's unique
index refuses a second verdict whatever process writes it. Concurrent: ``concurrency``
requests at once (asyncio). The registration and its run records are verified first
(ledger, digest, the runs' hash chains); a run record is only read, never written.

Provider judges go through the host drivers' own machinery (the SDK client, retries,
rate limits, redaction, the price table) with the prompt as a single-turn episode and
no tools. The spend cap is the registration's ``budgets.spend_usd``, shared with its
runs: what the runs and earlier verdicts spent counts against it. An infrastructure
failure records nothing (the run is judged again next time); a reached cap stops.

The runs are read from the run store ``--store`` names (SQLite or PostgreSQL, like
``run`` and ``analyse``); verdicts and gold labels always live in the workspace's
``runs/verdicts.sqlite``, where ``analyse`` and ``verify`` read them. :func:`load_gold`
is ``--gold FILE`` (see :mod:`prereg.runners.judging.gold`). Both check the verdict and gold
chains against the ledger's anchors first and pin their new heads at the end
(:mod:`prereg.runners.judging.anchors`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment, load_experiment
from prereg.registry.addenda import add_judge
from prereg.registry.hosts import PROVIDER_DRIVERS
from prereg.registry.judges import Judge
from prereg.registry.registrations import Entry, Registry
from prereg.registry.verify import verified_entry
from prereg.runners.drivers import openai_chat
from prereg.runners.drivers.base import Driver, Episode, FinalAnswer, InfraError
from prereg.runners.drivers.table import FACTORIES
from prereg.runners.exchange.export import check_export_target
from prereg.runners.judging.anchors import anchor_judgements, verified_judgements
from prereg.runners.judging.ask import (
    build_prompt,
    enforce,
    local_answer,
    needs_verdict,
    parse_answer,
    sampled,
)
from prereg.runners.judging.gold import GoldLabel, GoldRow, read_gold
from prereg.runners.judging.verdicts import DuplicateVerdict, Verdict, VerdictStore
from prereg.runners.prepare import open_registry
from prereg.runners.providers.credentials import KEY_VARIABLES, MissingKey, api_key, is_provider
from prereg.runners.providers.prices import load_prices, worst_case_usd
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.providers.spend import SpendCapReached, SpendMeter
from prereg.runners.record import RunRecord
from prereg.runners.store.choose import StoreLocation, open_store
from prereg.runners.store.verify import verified_records

#: The output cap of one judge request (a verdict is one short JSON object).
JUDGE_COMPLETION_CAP = 1024


class JudgeProgress:
    """Callbacks a judging pass reports to (the CLI draws its own bar with them)."""

    def start(self, total: int, already: int) -> None:
        """``total`` verdicts will be asked; ``already`` were stored before."""

    def judged(self, verdict: Verdict | None, cost: float) -> None:
        """One request ended: its stored verdict, or None (an infra failure)."""

    def stop(self) -> None:
        """The pass ended (normally or not)."""


@dataclass(frozen=True)
class BoundJudge:
    """A registered judge with its frozen rubric and its digest."""

    judge: Judge
    rubric: str
    rubric_digest: str
    digest: str


@dataclass
class JudgeSummary:
    registration_id: str
    registration_digest: str
    judges: dict[str, dict[str, int]] = field(default_factory=dict)
    judged: int = 0
    unparseable: int = 0
    failed: int = 0
    duplicates: int = 0
    remaining: int = 0
    spend_usd: float = 0.0
    elapsed_s: float = 0.0
    stopped: str | None = None
    #: the first infrastructure errors (redacted by the drivers), for the operator
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def bound_judges(registry: Registry, entry: Entry) -> list[BoundJudge]:
    """The registration's judges (registered, then added post hoc), each with its rubric
    as stored: frozen at register, or with the addendum that added the judge."""
    out = []
    for j in entry.judges:
        text = registry.read_object(j.rubric_digest).decode("utf-8", errors="replace")
        out.append(BoundJudge(j.judge, text, j.rubric_digest, j.digest))
    return out


def add_post_hoc_judge(
    ws: Workspace, registration_id: str, path: Path, reason: str
) -> dict[str, Any]:
    """Add a judge to a verified registration after it was frozen (a post-hoc rubric
    revision, :mod:`prereg.registry.addenda`); the ledger line written."""
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    return add_judge(registry, entry, path, reason)


@dataclass(frozen=True)
class _Job:
    bound: BoundJudge
    record: RunRecord


def _load(
    ws: Workspace, registration_id: str, store: StoreLocation | None = None
) -> tuple[Entry, Experiment, list[BoundJudge], list[RunRecord]]:
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    if not entry.judges:
        raise BadInput(
            f"registration '{entry.id}' registers no judge (add 'judge:' to a new "
            "registration, or add one post hoc with `prereg judge ID --add-judge FILE`)",
            field="judge",
        )
    experiment = load_experiment(registry.experiment_reader(entry), entry.experiment)
    records, _ = verified_records(ws.runs if store is None else store, registry, entry)
    # the verdict and gold chains against the ledger's anchors, before anything is added
    verified_judgements(registry, entry, ws.runs)
    own = [r for r in records if r.registration_digest == entry.digest]
    return entry, experiment, bound_judges(registry, entry), own


def pending_jobs(
    judges: list[BoundJudge], records: list[RunRecord], store: VerdictStore, digest: str
) -> list[_Job]:
    """Every (judge, run) that needs a verdict and has none yet, in record order."""
    jobs = []
    for bound in judges:
        done = store.judged(digest, bound.digest)
        jobs += [
            _Job(bound, r)
            for r in records
            if r.record_id not in done
            and needs_verdict(r, bound.judge)
            and sampled(r.record_id, bound.judge)
        ]
    return jobs


def _check_credentials(judge: Judge) -> None:
    """Refused before anything is sent or written (exit 2, naming the variable)."""
    if judge.driver == openai_chat.NAME:
        openai_chat.resolve_base_url(judge.params)
    elif is_provider(judge.driver):
        try:
            api_key(judge.driver)
        except MissingKey as exc:
            raise BadInput(str(exc), field=KEY_VARIABLES[judge.driver]) from None


def _drivers(
    judges: list[BoundJudge], spend: SpendMeter, prices: str | None
) -> dict[str, Driver | None]:
    out: dict[str, Driver | None] = {}
    for bound in judges:
        judge = bound.judge
        if judge.driver not in PROVIDER_DRIVERS:
            out[bound.digest] = None  # the rule-based local judge
            continue
        _check_credentials(judge)
        settings = ProviderSettings.from_env(judge.driver.replace("-", "_"), {})
        if prices is not None:
            settings = settings.with_overrides({"prices_path": prices})
        out[bound.digest] = FACTORIES[judge.driver](
            judge.model,
            dict(judge.params),
            allow_sampling=judge.allow_sampling,
            settings=settings,
            spend=spend,
            prices=load_prices(settings.prices_path),
        )
    return out


def estimate(
    ws: Workspace,
    registration_id: str,
    prices: str | None = None,
    runs_store: StoreLocation | None = None,
) -> dict[str, Any]:
    """``--dry-run``: the verdicts still needed per judge and an upper bound on spend
    (prompt tokens at four characters a token, rounded up, plus the output cap)."""
    entry, experiment, judges, records = _load(ws, registration_id, runs_store)
    with VerdictStore(ws.runs) as store:
        jobs = pending_jobs(judges, records, store, entry.digest)
    table = load_prices(prices)
    per: dict[str, dict[str, Any]] = {}
    for job in jobs:
        judge = job.bound.judge
        row = per.setdefault(
            judge.key,
            {
                "driver": judge.driver,
                "model": judge.model_name,
                "requests": 0,
                "spend_bound_usd": 0.0,
            },
        )
        row["requests"] += 1
        price = table.price(judge.driver, judge.model) if judge.driver in PROVIDER_DRIVERS else None
        if judge.driver in PROVIDER_DRIVERS and price is None:
            row["spend_bound_usd"] = None
        elif price is not None and row["spend_bound_usd"] is not None:
            prompt = build_prompt(
                judge, job.bound.rubric, job.record, experiment.task(job.record.task_id)
            )
            row["spend_bound_usd"] += worst_case_usd(
                price, -(-len(prompt) // 4), JUDGE_COMPLETION_CAP
            )
    return {
        "registration_id": entry.id,
        "registration_digest": entry.digest,
        "dry_run": True,
        "verdicts_needed": len(jobs),
        "judges": per,
        "spend_cap_usd": entry.registration.budgets.spend_usd,
    }


async def _answer(
    job: _Job, prompt: str, driver: Driver | None, task: Any
) -> tuple[str, str | None, float | None]:
    """(raw answer, model returned, cost): the local rules, or one provider request."""
    judge = job.bound.judge
    if driver is None:
        return local_answer(judge, job.record, task), judge.model_name, None
    episode = Episode(
        prompt=prompt,
        tools=(),
        completion_cap=JUDGE_COMPLETION_CAP,
        model=judge.model,
        params=judge.params,
        seed=0,
        prompt_seed=0,
        label=f"judge {judge.key} {job.record.record_id}",
    )
    turn = await driver.next_turn(episode, [])
    action = turn.action
    text = action.text if isinstance(action, FinalAnswer) else repr(action)[:4000]
    return text, turn.model_returned, turn.cost_usd


def _verdict(
    entry: Entry,
    job: _Job,
    prompt: str,
    raw: str,
    model: str | None,
    cost: float | None,
    started: datetime,
) -> Verdict:
    judge = job.bound.judge
    parsed = parse_answer(raw, judge.outcome)
    met, overruled = (None, None) if parsed is None else enforce(parsed, judge.outcome)
    return Verdict(
        verdict_id=uuid.uuid4().hex,
        record_id=job.record.record_id,
        registration_id=entry.id,
        registration_digest=entry.digest,
        judge=judge.key,
        judge_digest=job.bound.digest,
        outcome=judge.outcome,
        rubric=judge.rubric,
        rubric_version=judge.rubric_version,
        rubric_digest=job.bound.rubric_digest,
        driver=judge.driver,
        model_requested=judge.model_name,
        model_returned=model,
        prompt=prompt,
        raw_response=raw,
        parse="unparseable" if parsed is None else "ok",
        met=met,
        need=None if parsed is None else parsed.need,
        evidence=None if parsed is None else parsed.evidence,
        overruled=overruled,
        cost_usd=cost,
        started_at=started,
        finished_at=datetime.now(UTC),
    )


def judge_registration(
    ws: Workspace,
    registration_id: str,
    *,
    concurrency: int = 4,
    max_verdicts: int | None = None,
    progress: JudgeProgress | None = None,
    prices: str | None = None,
    drivers: Mapping[str, Driver | None] | None = None,
    runs_store: StoreLocation | None = None,
) -> JudgeSummary:
    """Judge (or resume judging) a registration's runs; see the module docstring."""
    if concurrency < 1:
        raise BadInput("--concurrency must be at least 1", field="concurrency")
    entry, experiment, judges, records = _load(ws, registration_id, runs_store)
    store = VerdictStore(ws.runs)
    try:
        jobs = pending_jobs(judges, records, store, entry.digest)
        runs = open_store(ws.runs if runs_store is None else runs_store)
        try:
            spent = runs.spent_usd(entry.digest)
        finally:
            runs.close()
        spend = SpendMeter(
            entry.registration.budgets.spend_usd, spent + store.spent_usd(entry.digest)
        )
        built = dict(drivers) if drivers is not None else _drivers(judges, spend, prices)
        todo = jobs if max_verdicts is None else jobs[:max_verdicts]
        summary = JudgeSummary(entry.id, entry.digest)
        for bound in judges:
            summary.judges[bound.judge.key] = {"needed": 0, "judged": 0, "unparseable": 0}
        for job in jobs:
            summary.judges[job.bound.judge.key]["needed"] += 1
        started = time.monotonic()
        if progress is not None:
            already = sum(len(store.judged(entry.digest, b.digest)) for b in judges)
            progress.start(len(todo), already)
        try:
            asyncio.run(
                _run_all(entry, experiment, todo, built, store, summary, concurrency, progress)
            )
        finally:
            if progress is not None:
                progress.stop()
        summary.spend_usd = round(sum(v.cost_usd or 0.0 for v in store.verdicts(entry.digest)), 6)
        summary.remaining = len(pending_jobs(judges, records, store, entry.digest))
        summary.elapsed_s = round(time.monotonic() - started, 3)
    finally:
        store.close()
    anchor_judgements(open_registry(ws), entry, ws.runs)  # pin what this pass stored
    return summary


async def _run_all(
    entry: Entry,
    experiment: Experiment,
    jobs: list[_Job],
    drivers: Mapping[str, Driver | None],
    store: VerdictStore,
    summary: JudgeSummary,
    concurrency: int,
    progress: JudgeProgress | None,
) -> None:
    gate = asyncio.Semaphore(concurrency)
    stop = asyncio.Event()

    async def one(job: _Job) -> None:
        async with gate:
            if stop.is_set():
                return
            task = experiment.task(job.record.task_id)
            prompt = build_prompt(job.bound.judge, job.bound.rubric, job.record, task)
            began = datetime.now(UTC)
            try:
                raw, model, cost = await _answer(job, prompt, drivers.get(job.bound.digest), task)
            except SpendCapReached as exc:
                summary.stopped = f"spend cap reached: {exc}"
                stop.set()
                return
            except InfraError as exc:
                summary.failed += 1
                if len(summary.errors) < 5:
                    summary.errors.append(f"{job.bound.judge.key}: {exc}"[:500])
                if progress is not None:
                    progress.judged(None, 0.0)
                return
            verdict = _verdict(entry, job, prompt, raw, model, cost, began)
            try:
                store.append(verdict)
            except DuplicateVerdict:
                summary.duplicates += 1
                return
            counts = summary.judges[job.bound.judge.key]
            counts["judged"] += 1
            summary.judged += 1
            if verdict.parse == "unparseable":
                counts["unparseable"] += 1
                summary.unparseable += 1
            if progress is not None:
                progress.judged(verdict, cost or 0.0)

    try:
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        for driver in {id(d): d for d in drivers.values() if d is not None}.values():
            await driver.aclose()


@dataclass
class GoldSummary:
    """What ``--gold FILE`` stored."""

    registration_id: str
    registration_digest: str
    file: str
    file_digest: str
    rows: int
    added: int
    already_stored: int
    annotators: list[str]
    runs: dict[str, int]  # judged outcome -> runs with a label in the table now

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _outcome(row: GoldRow, records: Mapping[str, RunRecord], judges: list[BoundJudge]) -> str:
    """The judged outcome the row's run needs, else BadInput naming the row."""
    record = records.get(row.record_id)
    if record is None:
        raise BadInput(
            f"no run '{row.record_id}' of this registration (a gold label names a run id "
            "of the registration's verified runs)"[:400],
            field="run_id",
        )
    for bound in judges:
        if needs_verdict(record, bound.judge):
            return bound.judge.outcome
    raise BadInput(
        f"run '{row.record_id}' needs no judged outcome of the registered judges (not an ok "
        "run whose call executed, nor a positive no-tool run with an answer)",
        field="run_id",
    )


def _where(path: Path, row: GoldRow, exc: BadInput) -> BadInput:
    return BadInput(exc.message, file=f"{path}:{row.line}", field=exc.field)


def load_gold(
    ws: Workspace, registration_id: str, path: Path, runs_store: StoreLocation | None = None
) -> GoldSummary:
    """``prereg judge ID --gold FILE``: check every row, then append the new labels in one
    transaction (nothing is written when any row is bad; see :mod:`prereg.runners.judging.gold`)."""
    entry, _, judges, records = _load(ws, registration_id, runs_store)
    rows, file_digest = read_gold(path)
    by_id = {r.record_id: r for r in records if r.registration_digest == entry.digest}
    now = datetime.now(UTC)
    with VerdictStore(ws.runs) as store:
        stored = {(g.record_id, g.annotator): g for g in store.gold(entry.digest)}
        new: list[GoldLabel] = []
        for row in rows:
            try:
                outcome = _outcome(row, by_id, judges)
            except BadInput as exc:
                raise _where(path, row, exc) from None
            old = stored.get((row.record_id, row.annotator))
            if old is not None:
                if old.label != row.label:
                    raise BadInput(
                        f"run {row.record_id} was labelled {str(old.label).lower()} by "
                        f"annotator {row.annotator} (from {old.source} line {old.line}); a "
                        "gold label cannot be changed after the fact, only added",
                        file=f"{path}:{row.line}",
                        field="label",
                    )
                continue
            new.append(
                GoldLabel(
                    record_id=row.record_id,
                    registration_id=entry.id,
                    registration_digest=entry.digest,
                    outcome=outcome,
                    label=row.label,
                    annotator=row.annotator,
                    source=path.name,
                    source_digest=file_digest,
                    line=row.line,
                    loaded_at=now,
                )
            )
        if new:
            try:
                store.append_gold(new)
            except DuplicateVerdict:  # another process loaded the same labels meanwhile
                raise BadInput(
                    "another process stored labels of these runs meanwhile; nothing was "
                    "written from this file: load it again",
                    file=str(path),
                ) from None
        labels = store.gold(entry.digest)
    anchor_judgements(open_registry(ws), entry, ws.runs)
    runs: dict[str, int] = {}
    for outcome in sorted({g.outcome for g in labels}):
        runs[outcome] = len({g.record_id for g in labels if g.outcome == outcome})
    return GoldSummary(
        registration_id=entry.id,
        registration_digest=entry.digest,
        file=str(path),
        file_digest=file_digest,
        rows=len(rows),
        added=len(new),
        already_stored=len(rows) - len(new),
        annotators=sorted({g.annotator for g in labels}),
        runs=runs,
    )


def gold_template(
    ws: Workspace,
    registration_id: str,
    out: Path,
    runs_store: StoreLocation | None = None,
    *,
    force: bool = False,
) -> dict[str, Any]:
    """``--gold-template FILE``: a CSV (run_id, label, annotator) listing the runs of the
    registered gold draws (``judge[i].gold_sample``), labels and annotators left empty for
    people to fill in; BadInput when no judge registers a draw."""
    entry, experiment, judges, records = _load(ws, registration_id, runs_store)
    drawn = [b for b in judges if b.judge.gold_sample is not None]
    if not drawn:
        raise BadInput(
            f"registration '{entry.id}' registers no gold draw (judge[i].gold_sample)",
            field="judge.gold_sample",
        )
    check_export_target(ws, out, force)
    del experiment
    ids: list[str] = []
    for record in records:
        if record.registration_digest != entry.digest:
            continue
        for bound in drawn:
            sample = bound.judge.gold_sample
            if (
                sample is not None
                and needs_verdict(record, bound.judge)
                and sampled(record.record_id, bound.judge)
                and sample.drawn(record.task_id)
            ):
                ids.append(record.record_id)
                break
    chosen = set(ids)
    body = "run_id,label,annotator\n" + "".join(f"{rid},,\n" for rid in ids)
    write_atomic(out, body.encode(), what="the gold template")
    return {
        "registration_id": entry.id,
        "registration_digest": entry.digest,
        "out": str(out),
        "runs": len(ids),
        "tasks": len({r.task_id for r in records if r.record_id in chosen}),
    }
