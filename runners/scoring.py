"""Scoring: from an episode to a run record (oracles, funnel, selection, failure record).

Definitions (kept next to the code that implements them):

- Funnel (InvokeRank, 3.2), about the *first* external call: surfaced = a focal
  tool entered the host's candidate set before it (True when the host loads every
  tool; None when not measured); selected = the first call went to a focal tool;
  invoked = its arguments validate against that tool's input schema; executed =
  it ran and returned a non-error, non-empty result; completed = executed and the
  task succeeded. A stage whose parent is false is false, so nesting holds. A call
  to a replay-only tool (competitor, decoy, snapshot) is refused, so it is never
  Executed; a first call that ran on the registered live server has Completed
  null (the store-based oracles cannot see a live server's state).
- The offer (``offer``): which integrations the unit listed, in order, with the
  digest of each surface as offered (after a control's transformation), what of
  their server text the driver transmits, the integration the first call went
  to, and clone_swap's cell.
- Terminal class (InvokeRank, 3.3): where the first external call went (focal,
  competitor, other_external: a decoy or a name nothing offered), else searched_then_declined /
  answered_without_search, else unresolved (no call and no answer).
- selected_operations: distinct operations the calls reached for, in first-reached
  order. selection_rate: share of calls whose operations the task all permits
  (a call to a tool that runs no operation of the service permits nothing); null
  when the task rules nothing out or no call was made.
- unnecessary_calls: calls that could not have helped: failed or refused calls,
  exact repeats of an earlier successful call, and every call on a negative task.
- Failure record (ToolBottleneckBench, 3.4): the first unmet obligation in check
  order, and the terminal flag in precedence order: completion cap; episode budget
  or call limit; turn limit; infeasibility stop; wrong conclusion (final state or
  answer wrong); contract break (anything else).
- The error of an infrastructure failure record is redacted (any exception's text
  may echo a key a server sent back), whichever layer raised it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from datetime import datetime
from typing import Any

from prereg.experiments.oracles import Verdicts, judge
from prereg.registry.digest import canonical_json
from prereg.registry.units import RunPlan, RunUnit
from prereg.runners.drivers.base import Driver, server_text
from prereg.runners.harness import EpisodeResult
from prereg.runners.providers.credentials import redact
from prereg.runners.record import (
    CloneCell,
    Configuration,
    Funnel,
    Offer,
    OfferedServer,
    Oracles,
    RunRecord,
    Tokens,
    TraceEvent,
)

_LIMIT_PRECEDENCE = ("completion_cap", "episode_budget", "call_limit", "turn_limit", "infeasible")


def _sum_or_none(values: list[float | int | None]) -> Any:
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def _tokens(result: EpisodeResult) -> Tokens:
    fields: dict[str, Any] = {}
    for name in ("input", "output", "reasoning", "cached"):
        values = [None if t.usage is None else getattr(t.usage, name) for t in result.turns]
        fields[name] = _sum_or_none(values)
    return Tokens(**fields)


def funnel(result: EpisodeResult, driver: Driver, success: bool) -> Funnel:
    first = result.calls[0] if result.calls else None
    if driver.loads_all_tools:
        surfaced: bool | None = bool(result.focal_tools)
    elif result.surfaced_before_first_call is not None:
        surfaced = bool(result.surfaced_before_first_call & result.focal_tools)
    else:
        surfaced = None
    selected = first is not None and first.role == "focal"
    invoked = selected and first is not None and first.valid
    executed = invoked and first is not None and first.ok and not first.empty
    completed: bool | None = executed and success
    if executed and first is not None and first.live:
        # the oracles read the experiment's store; a live server's state is not theirs
        # to judge, so Completed is not measured (null), never guessed
        completed = None
    return Funnel(
        surfaced=surfaced,
        selected=selected,
        invoked=invoked,
        executed=executed,
        completed=completed,
    )


def terminal_class(result: EpisodeResult) -> str:
    if result.calls:
        role = result.calls[0].role
        return {"focal": "focal", "competitor": "competitor"}.get(role or "", "other_external")
    if result.answer is None:
        return "unresolved"
    return "searched_then_declined" if result.searched else "answered_without_search"


def configuration(plan: RunPlan, arm: str) -> Configuration:
    """The arm's resolved configuration as the record carries it (with its digest).

    Built once per distinct configuration (keyed by its JSON): its digest runs the RFC 8785
    canonicaliser, which was a few per cent of a provider unit's CPU when paid per record.
    The instance is shared by the records of the arm; nothing changes a record's fields
    in place."""
    data = plan.config(arm).as_json()
    return _configuration(json.dumps(data, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=256)
def _configuration(key: str) -> Configuration:
    data = json.loads(key)
    digest = "sha256:" + hashlib.sha256(canonical_json(data)).hexdigest()
    return Configuration(**data, digest=digest)


def offer_record(unit: RunUnit, driver: Driver, result: EpisodeResult | None) -> Offer | None:
    """The unit's offer as recorded: listed servers (with the digests of the surfaces as
    offered), the host's server-text capability, the first call's integration and, for
    clone_swap, the 2 x 2 cell."""
    if result is None or result.offer is None:
        return None
    offer = result.offer
    servers = [
        OfferedServer(
            key=s.key,
            surface=s.source,
            role=s.role,
            name=s.surface.name,
            digest=s.digest,
            snapshot_digest=s.surface.snapshot_digest,
            transform=s.surface.transform,
            tools=len(s.surface.tools),
            live=s.key in result.live_servers,
        )
        for s in result.servers
    ]
    clone = None
    if offer.clones and offer.labels is not None:
        a, b = offer.clones[unit.cell & 1]
        clone = CloneCell(
            cell=unit.cell,
            label_a=a.surface.name,
            label_b=b.surface.name,
            first="b" if unit.cell & 2 else "a",
        )
    first = result.calls[0].server if result.calls else None
    return Offer(
        control=offer.control,
        servers=servers,
        server_text=server_text(driver),
        first_server=first,
        clone=clone,
    )


def obligations(unit: RunUnit, result: EpisodeResult, v: Verdicts) -> list[tuple[str, bool]]:
    """(obligation, met) in check order; None verdicts do not apply and are left out."""
    task = unit.task
    out: list[tuple[str, bool]] = []
    if task.polarity == "negative":
        out.append(("no_tool", not result.calls))
    if task.solution.steps:
        out.append(("tool_use", bool(result.calls)))
    for name in ("prohibited_operations", "confirmation", "no_mutation", "final_state", "answer"):
        verdict = getattr(v, name)
        if verdict is not None:
            out.append((name, bool(verdict)))
    out.append(("termination", result.stop is None and result.answer is not None))
    return out


def score(
    plan: RunPlan,
    unit: RunUnit,
    driver: Driver,
    result: EpisodeResult,
    started_at: datetime,
    finished_at: datetime,
) -> RunRecord:
    task = unit.task
    assert result.store is not None
    reached = [op for call in result.calls for op in call.operations]
    verdicts = judge(task, result.before, result.after, result.store.log, reached, result.answer)
    checks = obligations(unit, result, verdicts)
    unmet = [name for name, met in checks if not met]
    success = not unmet
    if success:
        flag = None
    elif result.stop is not None:
        flag = result.stop
        assert flag in _LIMIT_PRECEDENCE
    elif verdicts.final_state is False or verdicts.answer is False:
        flag = "wrong_conclusion"
    else:
        flag = "contract_break"

    selected_ops: list[str] = []
    for op in reached:
        if op not in selected_ops:
            selected_ops.append(op)
    rate = None
    if task.rules_out_anything and result.calls:
        good = sum(
            1 for c in result.calls if c.operations and all(task.allows(op) for op in c.operations)
        )
        rate = good / len(result.calls)

    seen: set[str] = set()
    unnecessary = 0
    for call in result.calls:
        key = call.tool + json.dumps(call.arguments, sort_keys=True, default=str)
        if task.polarity == "negative" or not call.ok or key in seen:
            unnecessary += 1
        if call.ok:
            seen.add(key)

    models = [t.model_returned for t in result.turns if t.model_returned]
    return RunRecord(
        **unit_identity(plan, unit, driver),
        model_requested=requested_model(plan, unit, driver),
        model_returned=models[-1] if models else None,
        started_at=started_at,
        finished_at=finished_at,
        latency_ms=_sum_or_none([t.latency_ms for t in result.turns]),
        tokens=_tokens(result),
        cost_usd=_sum_or_none([t.cost_usd for t in result.turns]),
        retries=_sum_or_none([t.retries for t in result.turns]),
        funnel=funnel(result, driver, success),
        terminal_class=terminal_class(result),
        terminal_flag=flag,
        first_unmet_obligation=unmet[0] if unmet else None,
        oracles=Oracles(**verdicts.as_dict()),
        selected_operations=selected_ops,
        selection_rate=rate,
        unnecessary_calls=unnecessary,
        calls=len(result.calls),
        turns=len(result.turns),
        success=success,
        status="ok",
        error=None,
        trace=result.trace,
        batch=plan.batch,
        offer=offer_record(unit, driver, result),
        config=configuration(plan, unit.arm),
        server=api_server(driver),
    )


def requested_model(plan: RunPlan, unit: RunUnit, driver: Driver) -> str | None:
    """What the unit asked for: the arm's registered ``host.model``, else the profile a
    driver plays when none is named (the local host's ``local-default``, its
    ``profile``). Configuration, not a measurement: ``model_returned`` stays what a host
    reported (null for the local host)."""
    model = plan.config(unit.arm).model
    if model is not None:
        return model
    value = getattr(driver, "profile", None)
    return value if isinstance(value, str) and value else None


def api_server(driver: Driver) -> str | None:
    """The server a driver names (``host:port``, no credentials): drivers that call a
    server of the user's choosing (openai-chat) expose it as ``server``."""
    value = getattr(driver, "server", None)
    return value if isinstance(value, str) and value else None


def unit_identity(plan: RunPlan, unit: RunUnit, driver: Driver) -> dict[str, Any]:
    """The fields every run record of ``unit`` carries whoever played it (a fresh record
    id, the registration, the unit's task, arm, split, repeat and rotation, the driver
    and its evidence class): one place, so the scored, infrastructure and study records
    cannot drift apart."""
    task = unit.task
    return {
        "record_id": uuid.uuid4().hex,
        "registration_id": plan.registration_id,
        "registration_digest": plan.digest,
        "experiment": plan.experiment,
        "arm": unit.arm,
        "surface": unit.surface,
        "task_id": task.id,
        "intent": task.intent,
        "cluster": task.cluster,
        "split": unit.split,
        "polarity": task.polarity,
        "repeat": unit.repeat,
        "rotation": unit.rotation,
        "driver": driver.name,
        "evidence_class": driver.evidence_class,
    }


def infra_record(
    plan: RunPlan,
    unit: RunUnit,
    driver: Driver,
    error: str,
    started_at: datetime,
    finished_at: datetime,
    result: EpisodeResult | None = None,
) -> RunRecord:
    """A record of an infrastructure failure: kept, never scored, retried next run."""
    error = redact(error)
    trace = list(result.trace) if result is not None else []
    trace.append(TraceEvent(kind="error", turn=len(result.turns) if result else 0, text=error))
    return RunRecord(
        **unit_identity(plan, unit, driver),
        model_requested=requested_model(plan, unit, driver),
        started_at=started_at,
        finished_at=finished_at,
        success=None,
        status="infra_error",
        error=error,
        trace=trace,
        batch=plan.batch,
        offer=offer_record(unit, driver, result),
        config=configuration(plan, unit.arm),
        server=api_server(driver),
    )
