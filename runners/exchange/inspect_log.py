"""``prereg import --from inspect LOG --registration ID``: Inspect AI samples as run records.

A registration whose host is ``driver: inspect`` (its runs are made by Inspect AI, not by
prereg) receives them. Everything is checked before anything is written, and a log that
does not match the registration is refused whole (exit 3, nothing written):

- the arm: the log's ``eval.metadata.prereg.arm`` (a prereg export), else
  ``eval.metadata.arm``, else the task's name, must be an arm of the registration, and
  the log's model must be the arm's ``host.model``;
- each sample must be a planned unit of that arm: its id a task id of the registration's
  split, its epoch a repeat (epoch 1 is repeat 0); no unit twice;
- the registered outcome must be ``success``, which the log's scorer decides: the score
  named ``success``, else the log's only scorer; C / 1 / true is a success, I / N / 0 /
  false a failure; any other value is bad input (exit 2);
- a sample that ended in an error is an infrastructure failure (no outcome);
- a confirmatory registration takes no sample that started before it was registered
  (exit 4: it was not pre-registered), and claims the locked split as ``run`` would.

The records carry evidence class ``inspect`` and driver ``inspect`` (never pooled with
runs of another class, invariant 8); what Inspect does not measure is null (the funnel
stages, the terminal class: invariant 7); the text kept (tool calls, their results and
whether the tool failed, the final answer, an error) is redacted of secrets like every
provider's (invariant 10). Record ids derive from the log's eval id and the sample, so
importing the same log again writes nothing and says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prereg.core.errors import BadInput, IntegrityError, ProtocolRefusal
from prereg.core.safeio import MAX_EXCHANGE_BYTES, check_input
from prereg.core.workspace import Workspace
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.registrations import Entry
from prereg.registry.units import RunPlan, RunUnit, expand_units, plan_from_registration
from prereg.registry.verify import verified_entry
from prereg.runners.extras import missing_extra
from prereg.runners.prepare import open_registry
from prereg.runners.providers.credentials import redact, redact_obj
from prereg.runners.record import RunRecord, TerminalFlag, Tokens, TraceEvent
from prereg.runners.scoring import configuration
from prereg.runners.store.choose import open_store, resolve_store
from prereg.runners.store.verify import anchor_runs, verified_records

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

MAX_LISTED = 20
DRIVER = "inspect"
#: Inspect score values read as a success / a failure (Inspect counts N, no answer, as 0).
#: (1, 1.0 and true are equal in Python, as are 0, 0.0 and false)
SUCCESS_VALUES: frozenset[object] = frozenset({"C", 1})
FAILURE_VALUES: frozenset[object] = frozenset({"I", "N", 0})
#: An Inspect sample limit -> the harness limit that fired (ToolBottleneckBench's flags).
LIMIT_FLAGS: dict[str, TerminalFlag] = {
    "token": "episode_budget",
    "cost": "episode_budget",
    "context": "completion_cap",
    "message": "turn_limit",
    "turn": "turn_limit",
}


@dataclass(frozen=True)
class Mapped:
    """The log read against the registration: the arm and one record per sample."""

    arm: str
    records: list[RunRecord]


def _refuse(message: str, path: Path, details: list[str]) -> IntegrityError:
    listed = details[:MAX_LISTED] + (
        [f"... and {len(details) - MAX_LISTED} more"] if len(details) > MAX_LISTED else []
    )
    return IntegrityError(f"{message}; nothing was imported", file=str(path), details=listed)


def read_log(path: Path) -> EvalLog:
    """The Inspect log at ``path`` (exit 2 if it is missing or not an Inspect log)."""
    try:
        from inspect_ai.log import read_eval_log  # lazy: optional extra prereg-agents[inspect]
    except ImportError as exc:
        raise missing_extra("inspect", "--from inspect", exc) from None
    # regular files only, bounded (the reader opens it by name): exit 2, never a hang
    check_input(path, limit=MAX_EXCHANGE_BYTES, what="an Inspect AI log")
    try:
        return read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad file here
        raise BadInput(f"not a readable Inspect AI log ({exc})", file=str(path)) from None


def arm_of(log: EvalLog) -> str:
    """The arm the log says it ran (see the module docstring for the order)."""
    meta = log.eval.metadata or {}
    ours = meta.get("prereg")
    if isinstance(ours, dict) and isinstance(ours.get("arm"), str):
        return str(ours["arm"])
    if isinstance(meta.get("arm"), str):
        return str(meta["arm"])
    return log.eval.task.rsplit("/", 1)[-1]


def _when(text: str | None, fallback: str | None) -> datetime | None:
    for value in (text, fallback):
        if value:
            moment = datetime.fromisoformat(value)
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def _tokens(sample: EvalSample) -> tuple[Tokens, float | None]:
    usages = list(sample.model_usage.values())
    if not usages:
        return Tokens(), None
    reasoning = [u.reasoning_tokens for u in usages if u.reasoning_tokens is not None]
    cached = [u.input_tokens_cache_read for u in usages if u.input_tokens_cache_read is not None]
    costs = [u.total_cost for u in usages]
    tokens = Tokens(
        input=sum(u.input_tokens for u in usages),
        output=sum(u.output_tokens for u in usages),
        reasoning=sum(reasoning) if reasoning else None,
        cached=sum(cached) if cached else None,
    )
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    return tokens, cost


def _trace(sample: EvalSample) -> tuple[list[TraceEvent], int, int]:
    """Tool calls, their results and the final answer as trace events; (trace, calls,
    turns). A result sits at the turn of the call it answers (by the call's id; the
    latest turn when the id names no call) and keeps its text and whether the tool
    failed (Inspect's ``error``), as a provider run's trace does."""
    events: list[TraceEvent] = []
    turns = 0
    calls = 0
    turn_of: dict[str, int] = {}
    for message in sample.messages:
        if message.role == "tool":
            events.append(
                TraceEvent(
                    kind="tool_result",
                    turn=turn_of.get(message.tool_call_id or "", max(turns - 1, 0)),
                    tool=None if message.function is None else redact(message.function),
                    result=redact(message.text),
                    is_error=message.error is not None,
                    text=None if message.error is None else redact(message.error.message),
                )
            )
            continue
        if message.role != "assistant":
            continue
        for call in message.tool_calls or []:
            turn_of[call.id] = turns
            calls += 1
            events.append(
                TraceEvent(
                    kind="tool_call",
                    turn=turns,
                    tool=redact(call.function),
                    arguments=redact_obj(call.arguments),
                )
            )
        turns += 1
    if sample.output.completion:
        events.append(
            TraceEvent(kind="final", turn=max(turns - 1, 0), text=redact(sample.output.completion))
        )
    return events, calls, turns


def verdict(sample: EvalSample, scorer: str, path: Path) -> bool:
    """The scorer's verdict on ``sample`` as a success (exit 2 on a non-binary value)."""
    score = (sample.scores or {}).get(scorer)
    where = f"sample {sample.id} epoch {sample.epoch}"
    if score is None:
        raise BadInput(f"{where} has no score '{scorer}'", file=str(path), field="scores")
    value = score.value
    if isinstance(value, str | int | float | bool):
        if value in SUCCESS_VALUES:
            return True
        if value in FAILURE_VALUES:
            return False
    raise BadInput(
        f"{where}: score '{scorer}' is {value!r}; a success outcome needs C, I, N, 1, 0, "
        "true or false",
        file=str(path),
        field=f"scores.{scorer}",
    )


def scorer_of(log: EvalLog, outcome: str, path: Path) -> str:
    """The score that decides ``outcome``: the one named so, else the only one."""
    names = sorted({name for s in log.samples or [] for name in (s.scores or {})})
    if outcome in names:
        return outcome
    if len(names) == 1:
        return names[0]
    if not names and log.status == "error" and log.error is not None:
        # the eval itself failed before scoring: say so, not "no score" (issue 43)
        raise BadInput(
            "the Inspect eval ended in an error before any sample was scored: "
            f"{redact(log.error.message) or 'no message'}; nothing was imported (run the "
            "eval again, or `inspect eval-retry` it, then import the new log)",
            file=str(path),
            field="error",
        )
    raise BadInput(
        f"cannot tell which score decides '{outcome}': the log has {names or 'none'} "
        f"(name one '{outcome}', or keep a single scorer)",
        file=str(path),
        field="scores",
    )


def _record_id(digest: str, arm: str, log: EvalLog, sample: EvalSample) -> str:
    key = f"{digest}\x1f{arm}\x1f{log.eval.eval_id}\x1f{sample.id}\x1f{sample.epoch}"
    return "inspect-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _failure(sample: EvalSample) -> tuple[TerminalFlag, str]:
    """(terminal flag, first unmet obligation) of a failed sample."""
    if sample.limit is not None:
        return LIMIT_FLAGS.get(sample.limit.type, "wrong_conclusion"), "termination"
    return "wrong_conclusion", "answer"


def build_record(
    log: EvalLog, sample: EvalSample, unit: RunUnit, plan: RunPlan, scorer: str, path: Path
) -> RunRecord:
    """The run record of one sample on its planned unit."""
    started = _when(sample.started_at, log.stats.started_at or log.eval.created)
    finished = _when(sample.completed_at, log.stats.completed_at) or started
    if started is None or finished is None:
        raise BadInput(f"sample {sample.id} epoch {sample.epoch} has no start time", file=str(path))
    tokens, cost = _tokens(sample)
    trace, calls, turns = _trace(sample)
    common: dict[str, Any] = {
        "record_id": _record_id(plan.digest, unit.arm, log, sample),
        "registration_id": plan.registration_id,
        "registration_digest": plan.digest,
        "experiment": plan.experiment,
        "arm": unit.arm,
        "surface": unit.surface,
        "task_id": unit.task.id,
        "intent": unit.task.intent,
        "cluster": unit.task.cluster,
        "split": unit.split,
        "polarity": unit.task.polarity,
        "repeat": unit.repeat,
        "rotation": unit.rotation,
        "driver": DRIVER,
        "evidence_class": DRIVER,
        "model_requested": log.eval.model,
        "model_returned": redact(sample.output.model) or None,
        "started_at": started,
        "finished_at": max(finished, started),
        "latency_ms": None if sample.total_time is None else sample.total_time * 1000,
        "tokens": tokens,
        "cost_usd": cost,
        "calls": calls,
        "turns": turns,
        "trace": trace,
        "config": configuration(plan, unit.arm),
    }
    if sample.error is not None:
        return RunRecord(
            **common, status="infra_error", error=redact(sample.error.message) or "error"
        )
    if verdict(sample, scorer, path):
        return RunRecord(**common, success=True)
    flag, obligation = _failure(sample)
    return RunRecord(**common, success=False, terminal_flag=flag, first_unmet_obligation=obligation)


def map_log(log: EvalLog, entry: Entry, units: list[RunUnit], plan: RunPlan, path: Path) -> Mapped:
    """Check the log against the registration and map each sample onto its unit."""
    reg = entry.registration
    drivers = sorted({reg.config_of(a.id).host.driver for a in reg.arms})
    if drivers != [DRIVER]:
        raise _refuse(
            f"'{entry.id}' runs driver {', '.join(drivers)}: Inspect runs import only into a "
            "registration whose host is driver inspect (evidence classes are never pooled)",
            path,
            [],
        )
    arm = arm_of(log)
    arms = [a.id for a in reg.arms]
    if arm not in arms:
        raise _refuse(f"the log's arm '{arm}' is not an arm of '{entry.id}' ({arms})", path, [])
    model = reg.config_of(arm).host.model
    if log.eval.model != model:
        raise _refuse(
            f"the log ran model '{log.eval.model}'; arm '{arm}' is registered with '{model}'",
            path,
            [],
        )
    if reg.outcome != "success":
        raise _refuse(
            f"'{entry.id}' analyses '{reg.outcome}', which an Inspect log does not record "
            "(its scorer decides success)",
            path,
            [],
        )
    planned = {(u.task.id, u.repeat + 1): u for u in units if u.arm == arm}
    samples = log.samples or []
    wrong = [
        f"sample {s.id} epoch {s.epoch}: not a unit of arm '{arm}' (task ids of split "
        f"{reg.split}, epochs 1 to {plan.repeats})"
        for s in samples
        if (str(s.id), s.epoch) not in planned
    ]
    seen: set[tuple[str, int]] = set()
    for s in samples:
        key = (str(s.id), s.epoch)
        if key in seen:
            wrong.append(f"sample {s.id} epoch {s.epoch}: twice in the log")
        seen.add(key)
    if wrong:
        raise _refuse(f"{len(wrong)} sample(s) are not units '{entry.id}' plans", path, wrong)
    if not samples:
        raise BadInput("the log holds no samples", file=str(path), field="samples")
    scorer = scorer_of(log, reg.outcome, path)
    records = [
        build_record(log, s, planned[(str(s.id), s.epoch)], plan, scorer, path) for s in samples
    ]
    return Mapped(arm, records)


def _predating(entry: Entry, records: list[RunRecord]) -> list[str]:
    registered = _when(entry.registered_at, None)
    assert registered is not None
    return [
        f"{r.task_id} epoch {r.repeat + 1}: started {r.started_at.isoformat()}"
        for r in records
        if r.started_at < registered
    ]


def import_inspect(
    ws: Workspace, path: Path, registration_id: str, store: str | None = None
) -> dict[str, Any]:
    """Check the log against the registration, then append its new records."""
    log = read_log(path)
    runs = resolve_store(ws.runs, store)
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    plan = plan_from_registration(entry.registration, entry.digest)
    units = expand_units(plan, registry.load_experiment(entry))
    mapped = map_log(log, entry, units, plan, Path(path))
    if entry.registration.kind == "confirmatory":
        early = _predating(entry, mapped.records)
        if early:
            raise ProtocolRefusal(
                f"{len(early)} sample(s) started before '{entry.id}' was registered "
                f"({entry.registered_at}): a confirmatory registration takes only runs "
                "made after it; nothing was imported",
                file=str(path),
                details=early[:MAX_LISTED],
            )
    stored, _ = verified_records(runs, registry, entry)  # never extend a tampered chain
    stored_ids = {r.record_id for r in stored}
    new = [r for r in mapped.records if r.record_id not in stored_ids]
    done = {r.unit_key for r in stored if r.status == "ok"}
    doubled = [
        f"{r.arm}/{r.task_id}/r{r.repeat}: already has an ok record"
        for r in new
        if r.status == "ok" and r.unit_key in done
    ]
    if doubled:
        raise _refuse(f"{len(doubled)} unit(s) would have two ok records", Path(path), doubled)
    if new and plan.split == LOCKED_SPLIT:
        registry.claim_locked_split(entry)
    target = open_store(runs)
    try:
        for record in new:
            target.append(record)
    finally:
        target.close()
    if new:
        anchor_runs(runs, registry, entry)
    return {
        "file": str(path),
        "from": "inspect",
        "registration_id": entry.id,
        "arm": mapped.arm,
        "records": len(mapped.records),
        "imported": len(new),
        "already_stored": len(mapped.records) - len(new),
        "ok": sum(r.status == "ok" for r in new),
        "infra_error": sum(r.status == "infra_error" for r in new),
        "evidence_class": DRIVER,
    }
