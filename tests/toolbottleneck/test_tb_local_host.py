"""The local host (prereg.runners.drivers.local) playing ToolBottleneckBench units through
the model-host harness (issue 19, item 7; docs/toolbottleneck.md, readings 34 and 39-42).

References computed here, not read from the code under test: the grader's verdicts on
the played episode (:func:`verify`, called independently), the contract's limits from
the variant's answer key (certified minimum + 2, + 2), and each profile's first search
as BM25 worked out by hand (numpy) from the profile's documented values
(``local-default``: search_k 5, k1 1.2, b 0.75; ``local-hasty``: search_k 3, k1 1.2,
b 0): the top search_k tools with a positive score.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from prereg.experiments.toolbottleneck.cells import WorkflowLevel
from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.experiments.toolbottleneck.verify import verify
from prereg.runners.drivers.base import Episode
from prereg.runners.drivers.local import create, terms
from prereg.runners.toolbottleneck import harness as toolbottleneck_harness
from prereg.runners.toolbottleneck.harness import HostPlayed, HostUnit, offered, play_host
from prereg.runners.toolbottleneck.host import Contract
from tests.toolbottleneck.helpers import BUNDLED

#: The documented profile values the hand computation uses (local.py, PROFILES).
DOCUMENTED = {"local-default": (5, 1.2, 0.75), "local-hasty": (3, 1.2, 0.0)}


def _sandbox(family: str, menu: int, workflow: WorkflowLevel = "low", seed: int = 0) -> Sandbox:
    return build_sandbox(
        load_family(BUNDLED / f"{family}.yaml"),
        Cell("capacity", menu, workflow, 0, "raw"),
        seed=seed,
    )


def _play(
    sandbox: Sandbox, profile: str, seed: int = 1, slack: int = 2, mode: str = "fixed"
) -> HostPlayed:
    unit = HostUnit(profile, {}, None, seed, 7, "unit")
    contract = Contract(1024, 128_000, slack, 2, mode)  # type: ignore[arg-type]
    return asyncio.run(play_host(sandbox, create(profile), unit, contract))


def _hand_top(sandbox: Sandbox, k: int, k1: float, b: float) -> list[str]:
    """BM25 (Okapi, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) of the request's terms
    against each shown tool's name, title (the name) and description; the top k > 0."""
    tools = offered(sandbox.menu)
    docs = [terms(f"{t.name} {t.title} {t.description}") for t in tools]
    query = sorted(set(terms(sandbox.request)))
    n = len(docs)
    lengths = np.array([len(d) for d in docs], dtype=float)
    tf = np.array([[d.count(q) for q in query] for d in docs], dtype=float)
    df = (tf > 0).sum(axis=0)
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * lengths / lengths.mean())
    scores = (idf * tf * (k1 + 1) / (tf + norm[:, None])).sum(axis=1)
    order = sorted(range(n), key=lambda i: (-scores[i], i))
    return [tools[i].name for i in order if scores[i] > 0][:k]


def test_a_played_unit_is_graded_by_verify_and_measured_as_local() -> None:
    sandbox = _sandbox("overdue-case-escalation", 8)
    played = _play(sandbox, "local-default", mode="routed")
    again = verify(sandbox.key, played.episode)  # the grader, called independently
    assert played.verification == again
    assert played.call_limit == sandbox.key.certified_minimum + 2
    assert played.turn_limit == played.call_limit + 2
    assert len(played.episode.calls) <= played.call_limit
    # the host searched with the request's opaque key, on the request's route
    first = played.episode.calls[0]
    key = sandbox.request.split("case ")[1].split(" ")[0]
    assert first.arguments == {"query": key} and first.returned
    # measured: its own word counts and latency; nothing priced (invariant 7)
    assert played.tokens.input and played.tokens.output and played.tokens.reasoning is None
    assert played.latency_ms is not None and played.latency_ms >= 0
    assert played.cost_usd is None and played.model_returned is None


def test_a_request_it_cannot_fill_from_is_an_honest_failure() -> None:
    """No key, no capitalised phrase: whatever it calls, the episode is graded, no crash."""
    sandbox = _sandbox("invoice-payment-approval", 32)
    bare = replace(sandbox, request="should this one be paid? answer as json.")
    for profile in ("local-default", "local-careful", "local-hasty"):
        for seed in range(3):
            played = _play(bare, profile, seed=seed, mode="routed")
            v = played.verification
            assert v == verify(bare.key, played.episode)
            assert not v.success and v.first_unmet is not None and v.flag is not None
            assert len(played.episode.calls) <= played.call_limit


def test_the_call_limit_is_enforced_on_the_local_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The infeasibility stop is switched off so that the call limit binds on its own.
    Unconstrained (slack 20) the host makes n calls on this variant; the constructed
    answer key declares a certified minimum of n - 3, so the contract's call limit
    (certified + 2) is n - 1: the n-th call is refused and the episode ends at
    call_limit, after exactly the calls the unconstrained host made first."""
    monkeypatch.setattr(toolbottleneck_harness, "infeasible", lambda *a: False)
    sandbox = _sandbox("overdue-case-escalation", 32, seed=1)
    free = _play(sandbox, "local-default", seed=1, slack=20)
    n = len(free.episode.calls)
    assert n >= 4  # the case is constructed on a variant where the host calls this much
    tight = replace(sandbox, key=replace(sandbox.key, certified_minimum=n - 3))
    played = _play(tight, "local-default", seed=1)
    assert played.call_limit == (n - 3) + 2 == n - 1
    assert played.turn_limit == n + 1
    assert [c.function for c in played.episode.calls] == [
        c.function for c in free.episode.calls[: n - 1]
    ]
    assert played.episode.limits == frozenset({"call_limit"})
    assert played.verification.flag == "call_limit"
    assert played.episode.answer is None
    assert [e.text for e in played.trace if e.kind == "stop"] == ["call_limit"]
    assert played.verification == verify(tight.key, played.episode)


def test_two_profiles_search_as_their_documented_values_imply() -> None:
    sandbox = _sandbox("overdue-case-escalation", 128)
    tools = offered(sandbox.menu)
    firsts: dict[str, list[str]] = {}
    for profile, (k, k1, b) in DOCUMENTED.items():
        episode = Episode(
            prompt=sandbox.request,
            tools=tools,
            completion_cap=1024,
            model=profile,
            params={},
            seed=1,
            prompt_seed=7,
        )
        turn = asyncio.run(create(profile).next_turn(episode, []))
        assert turn.surfaced is not None
        expected = _hand_top(sandbox, k, k1, b)
        assert len(expected) == k  # more than k tools share a word with the request
        assert list(turn.surfaced[:k]) == expected
        firsts[profile] = expected
    assert firsts["local-default"][:3] != firsts["local-hasty"]


def test_fewer_tools_looked_at_end_the_hasty_profile_sooner() -> None:
    """On this variant the key names a meeting while the request's words favour other
    search tools: the default profile's lookup reaches a third tool, the hasty one (three
    tools per search) gives up after two calls. The two episodes differ, each graded."""
    sandbox = _sandbox("meeting-room-conflict", 8)
    played: dict[str, Any] = {p: _play(sandbox, p, mode="routed") for p in DOCUMENTED}
    calls = {p: [c.function for c in x.episode.calls] for p, x in played.items()}
    assert calls["local-default"] != calls["local-hasty"]
    assert len(calls["local-hasty"]) < len(calls["local-default"])
    for x in played.values():
        assert x.verification == verify(sandbox.key, x.episode)
    assert math.isfinite(sum(t.latency_ms or 0 for x in played.values() for t in x.turns))
