"""Verified task success and the failure record (seed 3.4) on constructed episodes.

The reference program of a compiled variant, replayed call by call, is the one episode
that must pass; each test then breaks exactly one obligation and checks that it alone
fails, that it is the first unmet one, and the terminal flag the seed's precedence gives.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import Any

import pytest

from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.experiments.toolbottleneck.verify import (
    OBLIGATIONS,
    AnswerKey,
    Episode,
    EpisodeCall,
    Limit,
    Obligation,
    answer_key,
    terminal_flag,
    verify,
)
from prereg.experiments.toolbottleneck.workflow import build_workflow, run
from tests.toolbottleneck.helpers import family, family_doc

#: The seed's precedence (section 3.4), written out by hand: lower rank wins.
SEED_RANK = {
    "completion_cap": 1,
    "episode_budget": 2,
    "call_limit": 2,
    "turn_limit": 3,
    "infeasible": 4,
}


def _reference(level: str = "medium") -> tuple[AnswerKey, Episode, dict[str, Any]]:
    fam = family(family_doc())
    variant = compile_cell(fam, Cell("capacity", 8, level, 0, "raw"))  # type: ignore[arg-type]
    wf = build_workflow(fam, 0, fam.layouts.of(level), 0, level)  # type: ignore[arg-type]
    trace = run(wf.world, wf.program, frozenset(fam.facts))
    calls = tuple(
        EpisodeCall(
            function=c.function,
            arguments={wf.world.functions[c.function].arg: c.arg},
            listed=True,
            operation=wf.world.functions[c.function].operation,
            returned=results,
        )
        for c, results in zip(wf.program, trace.results, strict=True)
    )
    answer = dict(variant.component("workflow")["reference_answer"])
    episode = Episode(calls, json.dumps(answer), dict(trace.changes))
    return answer_key(variant.document), episode, answer


def _alone(result: Any, name: str) -> None:
    """``name`` is the only obligation not met, so it is the first unmet one."""
    unmet = [n for n, met in result.verdicts if met is not True]
    assert unmet == [name]
    assert result.first_unmet == name
    assert result.success is False


def test_the_reference_episode_meets_all_nine_obligations() -> None:
    key, episode, _ = _reference()
    result = verify(key, episode)
    assert [n for n, _ in result.verdicts] == list(OBLIGATIONS)
    assert all(met is True for _, met in result.verdicts)
    assert result.success and result.first_unmet is None and result.flag is None


def test_availability_alone() -> None:
    key, episode, _ = _reference()
    missing = sorted(key.required_functions)[0]
    result = verify(replace(key, menu=key.menu - {missing}), episode)
    assert result.verdict("selection") is None  # undefined without availability
    assert [n for n, met in result.verdicts if met is False] == ["availability"]
    assert result.first_unmet == "availability"
    assert result.flag == "contract_break"


def test_selection_alone() -> None:
    # a key whose reference program also uses a listed function the episode never called
    key, episode, _ = _reference()
    extra = sorted(key.menu - key.required_functions)[0]
    result = verify(replace(key, required_functions=key.required_functions | {extra}), episode)
    _alone(result, "selection")


def test_protocol_alone_an_argument_under_the_wrong_name() -> None:
    key, episode, _ = _reference()
    read = next(c for c in episode.calls if c.operation == "read")
    bad = EpisodeCall(read.function, {"query": read.arguments["id"]}, True, "read", ())
    result = verify(key, replace(episode, calls=(*episode.calls, bad)))
    _alone(result, "protocol")
    assert result.flag == "contract_break"


def test_protocol_alone_a_function_no_longer_listed() -> None:
    key, episode, _ = _reference()
    calls = list(episode.calls)
    calls[-1] = replace(calls[-1], listed=False)
    _alone(verify(key, replace(episode, calls=tuple(calls))), "protocol")


def test_dependencies_alone_a_guessed_argument() -> None:
    key, episode, _ = _reference()
    search = episode.calls[0]
    guess = EpisodeCall(search.function, {"query": "CAS-GUESSED"}, True, "search", ())
    _alone(verify(key, replace(episode, calls=(*episode.calls, guess))), "dependencies")


def test_evidence_alone_citing_a_search() -> None:
    key, episode, answer = _reference()
    assert episode.calls[0].operation == "search"
    cited = {**answer, "sources": ["source-1"]}
    result = verify(key, replace(episode, answer=json.dumps(cited)))
    _alone(result, "evidence")
    assert result.flag == "contract_break"


def test_evidence_alone_citing_one_source_of_two() -> None:
    key, episode, answer = _reference("medium")
    assert len(answer["sources"]) == 2
    cited = {**answer, "sources": answer["sources"][:1]}
    _alone(verify(key, replace(episode, answer=json.dumps(cited))), "evidence")


def test_conclusion_alone_is_a_wrong_conclusion() -> None:
    key, episode, answer = _reference()
    result = verify(key, replace(episode, answer=json.dumps({**answer, "decision": "hold"})))
    _alone(result, "conclusion")
    assert result.flag == "wrong_conclusion"


def test_conclusion_is_type_exact() -> None:
    key, episode, answer = _reference()
    facts = dict(answer["facts"])
    facts["status"] = ["overdue"]
    result = verify(key, replace(episode, answer=json.dumps({**answer, "facts": facts})))
    _alone(result, "conclusion")


def test_final_state_alone_is_a_wrong_conclusion() -> None:
    key, episode, _ = _reference()
    assert key.permitted_final_state  # the family requires its action
    result = verify(key, replace(episode, final_state={}))
    _alone(result, "final_state")
    assert result.flag == "wrong_conclusion"


def test_budgets_alone_flags_the_limit() -> None:
    key, episode, _ = _reference()
    result = verify(key, replace(episode, limits=frozenset({"turn_limit"})))
    _alone(result, "budgets")
    assert result.flag == "turn_limit"


def test_contract_alone_a_fenced_answer_or_an_extra_key() -> None:
    key, episode, answer = _reference()
    fenced = "```json\n" + json.dumps(answer) + "\n```"
    result = verify(key, replace(episode, answer=fenced))
    _alone(result, "contract")
    assert result.flag == "contract_break"
    extra = json.dumps({**answer, "note": "done"})
    _alone(verify(key, replace(episode, answer=extra)), "contract")


def test_a_truncated_episode_that_also_hit_the_call_limit_is_flagged_at_the_cap() -> None:
    key, episode, _ = _reference()
    truncated = replace(episode, answer=None, limits=frozenset({"call_limit", "completion_cap"}))
    result = verify(key, truncated)
    assert not result.success
    assert result.flag == "completion_cap"
    assert result.first_unmet == "evidence"  # every call was made; the answer never came


def test_a_truncation_before_any_call_reads_as_a_selection_failure_at_the_cap() -> None:
    # the seed's finding: the "selection" label of an episode cut off before its first call
    key, episode, _ = _reference()
    result = verify(key, Episode((), None, {}, frozenset({"completion_cap"})))
    assert result.first_unmet == "selection"
    assert result.flag == "completion_cap"


@pytest.mark.parametrize("size", [1, 2, 3])
def test_the_flag_of_any_set_of_limits_is_the_one_of_highest_precedence(size: int) -> None:
    wrong: tuple[tuple[Obligation, bool | None], ...] = (
        ("conclusion", False),
        ("final_state", True),
    )
    right: tuple[tuple[Obligation, bool | None], ...] = (
        ("conclusion", True),
        ("final_state", True),
    )
    for combo in itertools.combinations(SEED_RANK, size):
        limits: list[Limit] = list(combo)  # type: ignore[arg-type]
        flag = terminal_flag(limits, wrong)
        best = min(SEED_RANK[x] for x in combo)
        assert SEED_RANK[flag] == best
        if best == 2 and "episode_budget" in combo:
            assert flag == "episode_budget"  # (ii)'s two limits: the budget is named first
    assert terminal_flag([], wrong) == "wrong_conclusion"
    assert terminal_flag([], right) == "contract_break"
