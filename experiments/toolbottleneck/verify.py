"""Verified task success (seed 3.4) and the failure record, as pure functions of an episode.

Seed: ``Y = A and S and P and Q and E and X and G and B and C``. The seed names the
nine obligations by letter only; prereg reads them as follows (docs/toolbottleneck.md,
"Verified success"), checked in the order of the formula:

- ``availability`` (A): every function of the reference program was on the menu the
  model was first shown (false only in Discovery, where the menu is the shortlist);
- ``selection`` (S): every function of the reference program was called at least once
  (undefined, None, when A fails: nothing can be selected that was not shown);
- ``protocol`` (P): every call named a function listed at that call and passed exactly
  its one string argument (an invalid argument counts against the agent, never repaired);
- ``dependencies`` (Q): every argument was in the request or returned by an earlier call
  (the certified program's dependency order), and every record the reference program
  reads was read (its required steps);
- ``evidence`` (E): the answer's ``sources`` cite, by observation label ``source-k``,
  reading calls whose records are exactly the evidence records;
- ``conclusion`` (X): the answer's decision and facts equal the family's (type-exact);
- ``final_state`` (G): the records ended in exactly the permitted final state;
- ``budgets`` (B): the episode ended with an answer and no harness limit fired;
- ``contract`` (C): the answer is raw JSON (no fence, no prose) with exactly the keys
  of the requested schema (``decision``, ``facts``, ``sources``).

A failed episode's terminal flag follows the seed's precedence over everything that
happened, not the order it happened in: (i) completion cap, (ii) episode budget or call
limit, (iii) turn limit, (iv) infeasibility stop, (v) wrong conclusion (X or G false),
(vi) contract break. So a truncated episode that also hit the call limit is flagged at
the cap. The failure record is (first unmet obligation, terminal flag).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prereg.experiments.toolbottleneck.family import FactValue
from prereg.experiments.toolbottleneck.world import Returned, strings_in

Limit = Literal["completion_cap", "episode_budget", "call_limit", "turn_limit", "infeasible"]
#: The harness limits in the seed's precedence; (ii) is two limits of equal rank, the
#: episode budget listed first as in :data:`prereg.runners.record.TERMINAL_FLAGS`.
LIMITS: tuple[Limit, ...] = (
    "completion_cap",
    "episode_budget",
    "call_limit",
    "turn_limit",
    "infeasible",
)
Flag = Literal[
    "completion_cap",
    "episode_budget",
    "call_limit",
    "turn_limit",
    "infeasible",
    "wrong_conclusion",
    "contract_break",
]
Obligation = Literal[
    "availability",
    "selection",
    "protocol",
    "dependencies",
    "evidence",
    "conclusion",
    "final_state",
    "budgets",
    "contract",
]
#: Check order: the order of the seed's conjunction A S P Q E X G B C.
OBLIGATIONS: tuple[Obligation, ...] = (
    "availability",
    "selection",
    "protocol",
    "dependencies",
    "evidence",
    "conclusion",
    "final_state",
    "budgets",
    "contract",
)
ANSWER_KEYS = frozenset({"decision", "facts", "sources"})
_LABEL = re.compile(r"^source-([1-9][0-9]*)$")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.DOTALL)


@dataclass(frozen=True)
class AnswerKey:
    """What a variant says a passing episode must achieve (from its compiled document)."""

    required_functions: frozenset[str]
    required_records: frozenset[str]
    evidence_records: frozenset[str]
    decision: str
    facts: Mapping[str, FactValue]
    permitted_final_state: Mapping[tuple[str, str], FactValue]
    request_literals: frozenset[str]
    menu: frozenset[str]
    certified_minimum: int


@dataclass(frozen=True)
class EpisodeCall:
    """One call as the harness saw it. ``operation`` is None for a name nothing lists;
    ``returned`` holds the decoded result objects (empty for a miss or a refusal)."""

    function: str
    arguments: Any
    listed: bool
    operation: str | None
    returned: tuple[Returned, ...] = ()


@dataclass(frozen=True)
class Episode:
    """Everything the grader reads: calls and results, the answer, the state, the limits."""

    calls: tuple[EpisodeCall, ...]
    answer: str | None
    final_state: Mapping[tuple[str, str], FactValue]
    limits: frozenset[Limit] = frozenset()


@dataclass(frozen=True)
class Verification:
    """The nine verdicts (None: undefined), success and the failure record."""

    verdicts: tuple[tuple[Obligation, bool | None], ...]
    success: bool
    first_unmet: Obligation | None
    flag: Flag | None

    def verdict(self, name: Obligation) -> bool | None:
        return dict(self.verdicts)[name]


def answer_key(document: Mapping[str, Any]) -> AnswerKey:
    """The answer key of a compiled variant document (:mod:`.compile`).

    The request's only literal is the lookup key the first reference call searches for
    (the request names the primary record's key; every other value is returned by a call).
    """
    comps = document["components"]
    wf, core = comps["workflow"], comps["core"]
    program = wf["program"]
    record_ids = {r["id"] for r in wf["records"]}
    args = [next(iter(c["args"].values())) for c in program]
    return AnswerKey(
        required_functions=frozenset(c["function"] for c in program),
        required_records=frozenset(a for a in args if a in record_ids),
        evidence_records=frozenset(wf["evidence"]["sources"]),
        decision=str(wf["reference_answer"]["decision"]),
        facts=dict(wf["reference_answer"]["facts"]),
        permitted_final_state={
            (c["record"], c["field"]): c["value"] for c in core["permitted_final_state"]
        },
        request_literals=frozenset({args[0]}) if args else frozenset(),
        menu=frozenset(f["name"] for f in comps["menu"]["functions"]),
        certified_minimum=int(wf["certified_minimum"]),
    )


def parse_answer(text: str | None) -> tuple[Any, bool]:
    """(the answer's JSON value or None, whether it was raw JSON). A fenced block is read
    for its content (E and X judge content) but is not raw (C judges the form)."""
    if text is None:
        return None, False
    stripped = text.strip()
    try:
        return json.loads(stripped), True
    except ValueError:
        pass
    fenced = _FENCE.match(stripped)
    if fenced is not None:
        try:
            return json.loads(fenced.group(1)), False
        except ValueError:
            return None, False
    return None, False


def same_value(a: Any, b: Any) -> bool:
    """Type-exact equality of JSON values (True is not 1, 1 is not 1.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def well_formed(call: EpisodeCall) -> bool:
    """P for one call: a listed function, exactly its one string argument."""
    if not call.listed or call.operation is None:
        return False
    expected = "query" if call.operation == "search" else "id"
    args = call.arguments
    return isinstance(args, dict) and set(args) == {expected} and isinstance(args[expected], str)


def _arg(call: EpisodeCall) -> str | None:
    args = call.arguments
    if isinstance(args, dict) and len(args) == 1:
        value = next(iter(args.values()))
        return value if isinstance(value, str) else None
    return None


def dependencies_met(key: AnswerKey, calls: Sequence[EpisodeCall]) -> bool:
    """Q: every argument revealed before its use, and every required record read."""
    known = set(key.request_literals)
    read: set[str] = set()
    for call in calls:
        value = _arg(call)
        if value is None or value not in known:
            return False
        known |= strings_in(call.returned)
        if call.operation == "read":
            read.update(item.id for item in call.returned)
    return key.required_records <= read


def cited_records(answer: Any, calls: Sequence[EpisodeCall]) -> frozenset[str] | None:
    """Records the answer's sources cite (labels of reading calls); None if any label
    is malformed or names a call that read nothing."""
    sources = answer.get("sources") if isinstance(answer, dict) else None
    if not isinstance(sources, list) or not sources:
        return None
    out: set[str] = set()
    for label in sources:
        match = _LABEL.match(label) if isinstance(label, str) else None
        if match is None or int(match.group(1)) > len(calls):
            return None
        call = calls[int(match.group(1)) - 1]
        if call.operation != "read" or not call.returned:
            return None
        out.update(item.id for item in call.returned)
    return frozenset(out)


def _conclusion(key: AnswerKey, answer: Any) -> bool:
    if not isinstance(answer, dict):
        return False
    return same_value(answer.get("decision"), key.decision) and same_value(
        answer.get("facts"), dict(key.facts)
    )


def verdicts(key: AnswerKey, episode: Episode) -> tuple[tuple[Obligation, bool | None], ...]:
    """The nine verdicts in check order."""
    calls = episode.calls
    answer, raw = parse_answer(episode.answer)
    available = key.required_functions <= key.menu
    called = {c.function for c in calls}
    selection = (key.required_functions <= called) if available else None
    values: dict[Obligation, bool | None] = {
        "availability": available,
        "selection": selection,
        "protocol": all(well_formed(c) for c in calls),
        "dependencies": dependencies_met(key, calls),
        "evidence": cited_records(answer, calls) == key.evidence_records,
        "conclusion": _conclusion(key, answer),
        "final_state": same_value(
            _state_doc(episode.final_state), _state_doc(key.permitted_final_state)
        ),
        "budgets": not episode.limits and episode.answer is not None,
        "contract": raw and isinstance(answer, dict) and set(answer) == ANSWER_KEYS,
    }
    return tuple((name, values[name]) for name in OBLIGATIONS)


def _state_doc(state: Mapping[tuple[str, str], FactValue]) -> dict[str, Any]:
    return {f"{rid}\x00{name}": value for (rid, name), value in state.items()}


def first_unmet(checks: Iterable[tuple[Obligation, bool | None]]) -> Obligation | None:
    """The first obligation in check order that is not met (an undefined one is not met)."""
    return next((name for name, met in checks if met is not True), None)


def terminal_flag(
    limits: Iterable[Limit], checks: Iterable[tuple[Obligation, bool | None]]
) -> Flag:
    """The flag of a failed episode by the seed's precedence (module docstring)."""
    hit = set(limits)
    for limit in LIMITS:
        if limit in hit:
            return limit
    values = dict(checks)
    if values.get("conclusion") is False or values.get("final_state") is False:
        return "wrong_conclusion"
    return "contract_break"


def verify(key: AnswerKey, episode: Episode) -> Verification:
    """Verified task success and the failure record of one episode."""
    checks = verdicts(key, episode)
    unmet = first_unmet(checks)
    if unmet is None:
        return Verification(checks, True, None, None)
    return Verification(checks, False, unmet, terminal_flag(episode.limits, checks))
