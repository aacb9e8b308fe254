"""What a judge is asked and how its answer is read (issue 18): pure functions.

Which runs need a verdict (:func:`needs_verdict`): the completion judge decides the
Completed stage of runs whose first call executed (InvokeRank 3.2, 5.5: Completed is
judged, Executed is deterministic); the native judge decides whether the host's own
answer met the need on positive runs with no external call and a final answer (3.3).

The prompt (:func:`build_prompt`) is the registered rubric, then the run as data
between markers: the request, the task's success criteria, the calls and results, the
oracles' verdicts and the final answer. The answer (:func:`parse_answer`) must be one
JSON object with a boolean ``met`` (and, for the native judge, a known ``need``);
anything else is ``unparseable`` and counted as unjudged, never guessed. The native
rule is enforced after the judge returns (:func:`enforce`): an answer to a need for
private state, an action or fresh data is never self-service.

The local judge (:func:`local_answer`) is rule-based and offline: it answers in the
same JSON, from the run's oracles (the service's final state, no mutation, prohibited
operations, confirmation, the required answer phrases) and the answer text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prereg.experiments.models import Task
from prereg.registry.judges import Judge
from prereg.runners.record import RunRecord

NEEDS: tuple[str, ...] = ("knowledge", "private_state", "action", "fresh_data")
#: Needs the host's own answer can never meet (3.3: enforced in code after the judge).
NEVER_SELF_SERVED = frozenset({"private_state", "action", "fresh_data"})
_NO_CALL = frozenset({"answered_without_search", "searched_then_declined"})
#: Characters of any one untrusted text put into a judge prompt.
_MAX_TEXT = 4000


@dataclass(frozen=True)
class Parsed:
    met: bool
    need: str | None
    evidence: str | None


def final_answer(record: RunRecord) -> str | None:
    """The run's final answer text, or None when it gave none."""
    for event in reversed(record.trace):
        if event.kind == "final":
            return event.text or ""
    return None


def needs_verdict(record: RunRecord, judge: Judge) -> bool:
    """Whether ``judge`` decides something about ``record`` (module docstring)."""
    if record.status != "ok" or not judge.decides(record.arm):
        return False
    if judge.outcome == "completed":
        return record.funnel.executed is True
    return (
        record.polarity == "positive"
        and record.terminal_class in _NO_CALL
        and final_answer(record) is not None
    )


def sampled(record_id: str, judge: Judge) -> bool:
    """The judge's sample rule: every run, or a fixed share chosen by a hash of the run id
    (deterministic, so a resumed judge picks the same runs)."""
    if judge.sample is None:
        return True
    digest = hashlib.sha256(f"{judge.key}\0{record_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < judge.sample


def _clip(text: str) -> str:
    text = text.replace("<<<RUN", "<<RUN").replace("RUN>>>", "RUN>>")
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + " [...]"


def _criteria(task: Task) -> dict[str, Any]:
    goal = task.goal
    return {
        "state_changes": goal.model_dump(mode="json", include={"created", "updated", "deleted"}),
        "answer_includes": list(goal.answer_includes),
        "must_not_change_state": not goal.mutates,
    }


def build_prompt(judge: Judge, rubric: str, record: RunRecord, task: Task) -> str:
    """The judge's prompt: the rubric, the outcome to decide, the run as marked data."""
    calls = [
        {"tool": e.tool, "arguments": e.arguments}
        if e.kind == "tool_call"
        else {"result": _clip(json.dumps(e.result, default=str)), "is_error": e.is_error}
        for e in record.trace
        if e.kind in ("tool_call", "tool_result")
    ]
    run = {
        "request": _clip(task.prompt),
        "success_criteria": _criteria(task),
        "calls": calls,
        "oracles": record.oracles.model_dump(mode="json"),
        "final_answer": _clip(final_answer(record) or ""),
    }
    return (
        f"{rubric.strip()}\n\n# Decide: outcome {judge.outcome}\n\n<<<RUN\n"
        f"{json.dumps(run, ensure_ascii=False, indent=1, default=str)}\nRUN>>>\n"
    )


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def parse_answer(text: str, outcome: str) -> Parsed | None:
    """The verdict in ``text``, or None: unparseable (module docstring). Only a whole
    JSON object is read (code fences around it allowed): no keyword is searched for."""
    body = _FENCE.sub("", text.strip())
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("met"), bool):
        return None
    need = data.get("need")
    if outcome == "native_self_service" and need not in NEEDS:
        return None
    evidence = data.get("evidence")
    return Parsed(
        met=data["met"],
        need=need if isinstance(need, str) and need in NEEDS else None,
        evidence=evidence[:_MAX_TEXT] if isinstance(evidence, str) else None,
    )


def enforce(parsed: Parsed, outcome: str) -> tuple[bool, str | None]:
    """(the verdict, why it overrules the judge or None): the native rule of 3.3."""
    if outcome == "native_self_service" and parsed.met and parsed.need in NEVER_SELF_SERVED:
        return False, f"a need for {parsed.need} is never met by the host's own answer (3.3)"
    return parsed.met, None


def _includes(answer: str, phrases: Sequence[str]) -> bool:
    low = answer.casefold()
    return all(p.casefold() in low for p in phrases)


def local_answer(judge: Judge, record: RunRecord, task: Task) -> str:
    """The rule-based local judge's answer, in the rubric's JSON (module docstring)."""
    answer = final_answer(record)
    phrases = task.goal.answer_includes
    if judge.outcome == "completed":
        oracles = record.oracles.model_dump()
        failed = sorted(k for k, v in oracles.items() if v is False)
        met = answer is not None and not failed and _includes(answer, phrases)
        evidence = (
            "no final answer"
            if answer is None
            else f"oracles failed: {', '.join(failed)}"
            if failed
            else "final state and answer meet the criteria"
            if met
            else "the answer lacks a required phrase"
        )
        return json.dumps({"met": met, "evidence": evidence})
    # a change to make is an action; a task that permits service operations needs the
    # service's (the person's) data; one that rules nothing out needs only knowledge
    need = (
        "action" if task.goal.mutates else "knowledge" if task.permits is None else "private_state"
    )
    met = answer is not None and bool(answer.strip()) and _includes(answer, phrases)
    return json.dumps({"need": need, "met": met, "evidence": (answer or "")[:200]})
