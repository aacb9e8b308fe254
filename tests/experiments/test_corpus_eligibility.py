"""Neutral eligibility proposals (issue 41, item 2; InvokeRank 3.4): quotes checked
verbatim against the competitor's pinned snapshot, agreement-only combination, the human
decision recorded append-only, and the record's tamper detection. Expected values are
written out by hand from the bundled podcast-selection pool's surface files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from prereg.experiments.eligibility import (
    FAKE_JUDGES,
    Judgement,
    PairState,
    check,
    find_quote,
    propose,
    proposed_sets,
    state,
    yaml_block,
)
from prereg.experiments.loader import folder_reader, load_experiment

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "podcast-selection"
# quoted from experiments/bundled/podcast-selection/surfaces/{castaway,earbud}.yaml
CASTAWAY_FIND = "Find podcasts by name, host or topic."
EARBUD_HISTORY = "Record that you played an episode, or show what you played."


@pytest.fixture(scope="module")
def podcast() -> Any:
    return load_experiment(folder_reader(BUNDLED), "podcast-selection")


# ---- quotes ---------------------------------------------------------------------------------


def test_a_verbatim_quote_is_found_in_its_field(podcast: Any) -> None:
    castaway = podcast.surfaces["castaway"]
    assert find_quote(castaway, CASTAWAY_FIND) == ("tools[castaway_find_podcast].description", None)
    # a part of a field, at least 12 characters
    assert find_quote(castaway, "by name, host or topic")[0] == (
        "tools[castaway_find_podcast].description"
    )
    # a whole short field (a tool's name) counts
    assert find_quote(castaway, "castaway_follow")[0] == "tools[castaway_follow].name"
    # the server's own text counts too
    assert find_quote(castaway, "keep track of episodes")[0] == "server.description"
    # line breaks and repeated spaces are collapsed (a model re-wraps), nothing else
    assert find_quote(castaway, "Find podcasts\n  by name,   host or topic.")[0] is not None


@pytest.mark.parametrize(
    ("quote", "says"),
    [
        ("Find podcasts by name, host, or topic.", "not in the competitor"),  # paraphrase
        ("Search podcasts by name or host.", "not in the competitor"),  # fabricated
        ("Find podcаsts by name, host or topic.", "not in the competitor"),  # Cyrillic a
        ("podcast", "one shorter than 12"),  # a fragment too short to evidence anything
        ("   ", "empty"),
    ],
)
def test_planted_bad_quotes_are_rejected(podcast: Any, quote: str, says: str) -> None:
    where, why = find_quote(podcast.surfaces["castaway"], quote)
    assert where is None and why is not None and says in why


def test_a_quote_from_another_competitor_is_rejected(podcast: Any) -> None:
    # found in earbud's snapshot, not castaway's: quotes are per competitor
    assert find_quote(podcast.surfaces["earbud"], EARBUD_HISTORY)[0] is not None
    assert find_quote(podcast.surfaces["castaway"], EARBUD_HISTORY)[0] is None


def test_answers_after_the_quote_check(podcast: Any) -> None:
    earbud = podcast.surfaces["earbud"]

    def j(eligible: bool | None, quote: str | None) -> str:
        return check(Judgement("a", "episodes", "earbud", eligible, quote), earbud).answer

    assert j(True, EARBUD_HISTORY) == "yes"
    assert j(True, None) == "invalid"  # a yes needs a quote
    assert j(True, "Lists every episode ever released.") == "invalid"  # fabricated
    assert j(False, None) == "no"  # absence cannot be quoted
    assert j(False, "Lists every episode ever released.") == "invalid"  # still fabricated
    assert j(None, None) == "invalid"


# ---- agreement ------------------------------------------------------------------------------


def _planted(table: dict[tuple[str, str], tuple[bool | None, str | None]]) -> Any:
    def judge(intent: str, definition: str, surface: Any) -> tuple[bool | None, str | None]:
        return table.get((intent, surface.id), (False, None))

    return judge


def test_agreement_only_and_disagreement_flagged(podcast: Any) -> None:
    a = _planted(
        {
            ("find-podcast", "castaway"): (True, CASTAWAY_FIND),
            ("mark-played", "earbud"): (True, EARBUD_HISTORY),
            ("episodes", "castaway"): (True, "The episodes of a podcast."),
            ("subscriptions", "earbud"): (True, "Show or change which podcasts you subscribe to."),
        }
    )
    b = _planted(
        {
            ("find-podcast", "castaway"): (True, "castaway_find_podcast"),
            # b says no: a disagreement
            ("episodes", "castaway"): (True, "Lists the episodes of any podcast."),  # fabricated
            ("subscriptions", "earbud"): (True, "earbud_subscriptions"),
        }
    )
    pairs = {(p.intent, p.competitor): p for p in propose(podcast, {"a": a, "b": b})}
    # 6 intents x 2 competitors (the decoy is never judged)
    assert len(pairs) == 12 and {c for _, c in pairs} == {"castaway", "earbud"}
    assert pairs[("find-podcast", "castaway")].status == "eligible"
    assert pairs[("subscriptions", "earbud")].status == "eligible"
    assert pairs[("mark-played", "earbud")].status == "disagree"
    assert pairs[("mark-played", "earbud")].flagged
    # one valid yes and one fabricated quote: unresolved, flagged, never eligible
    episodes = pairs[("episodes", "castaway")]
    assert episodes.status == "unresolved" and episodes.flagged
    assert episodes.answers["b"].reason is not None
    assert "not in the competitor" in episodes.answers["b"].reason
    # both no
    assert pairs[("podcast-chat", "earbud")].status == "ineligible"
    assert not pairs[("podcast-chat", "earbud")].flagged
    with pytest.raises(ValueError, match="two families"):
        propose(podcast, {"a": a})


def test_the_offline_fakes_by_hand(podcast: Any) -> None:
    pairs = {(p.intent, p.competitor): p for p in propose(podcast, FAKE_JUDGES)}
    # mark-played ("Mark an episode as played."): words {mark, played, episode}.
    # earbud's names and titles (earbud_podcast_search, Podcast search, earbud_subscriptions,
    # Subscriptions, earbud_history, Listening history) share none of them: no;
    # its history description shares "played" and "episode": yes, quoted whole.
    p = pairs[("mark-played", "earbud")]
    assert p.answers["fake-names"].answer == "no"
    assert p.answers["fake-descriptions"].answer == "yes"
    assert p.answers["fake-descriptions"].judgement.quote == EARBUD_HISTORY
    assert p.status == "disagree"
    # find-podcast + "Find a podcast by topic or host.": words {find, podcast, topic, host}.
    # castaway_find_podcast ({castaway, find, podcast}) and its title "Find a podcast"
    # both share 2 words: the first listed (the name) is quoted
    assert pairs[("find-podcast", "castaway")].answers["fake-names"].judgement.quote == (
        "castaway_find_podcast"
    )
    assert pairs[("find-podcast", "castaway")].status == "eligible"


# ---- state of the record -------------------------------------------------------------------


def _proposal(pairs: list[tuple[str, str, str]], surfaces: dict[str, str]) -> dict[str, Any]:
    return {
        "seq": 1,
        "surfaces": surfaces,
        "pairs": [{"intent": i, "competitor": c, "status": s} for i, c, s in pairs],
    }


def test_decisions_override_the_agreement_and_the_newest_wins() -> None:
    proposal = _proposal(
        [
            ("x", "r1", "eligible"),
            ("x", "r2", "disagree"),
            ("y", "r1", "ineligible"),
            ("y", "r2", "eligible"),
            ("z", "r1", "unresolved"),
        ],
        {"r1": "d1", "r2": "d2"},
    )
    decisions = [
        {"intent": "x", "competitor": "r2", "decision": "reject", "reason": "first"},
        {"intent": "x", "competitor": "r2", "decision": "accept", "reason": "second thoughts"},
        {"intent": "y", "competitor": "r2", "decision": "reject", "reason": "read-only"},
        {"intent": "y", "competitor": "r1", "decision": "accept", "reason": "it can"},
    ]
    pairs = state(proposal, decisions, {"r1": "d1", "r2": "d2"})
    got = {(p.intent, p.competitor): (p.eligible, p.needs_review) for p in pairs}
    assert got == {
        ("x", "r1"): (True, False),
        ("x", "r2"): (True, False),  # the newest decision: accept
        ("y", "r1"): (True, False),  # both families said no; the person accepted
        ("y", "r2"): (False, False),  # both said yes; the person rejected
        ("z", "r1"): (False, True),  # flagged, undecided
    }
    # z has an undecided flag: no set proposed for it yet
    assert proposed_sets(pairs) == {"x": ["r1", "r2"], "y": ["r1"], "z": None}
    assert yaml_block(proposed_sets(pairs)) == "eligible:\n  x: [r1, r2]\n  y: [r1]\n"


def test_a_changed_surface_makes_its_pairs_stale() -> None:
    proposal = _proposal(
        [("x", "r1", "eligible"), ("x", "r2", "eligible")], {"r1": "d1", "r2": "d2"}
    )
    pairs = state(proposal, [], {"r1": "d1", "r2": "CHANGED"})
    assert [p.stale for p in pairs] == [False, True]
    assert proposed_sets(pairs) == {"x": None}
    assert PairState("x", "r1", "eligible", None, None, False).eligible


# ---- the command and its record ------------------------------------------------------------


@pytest.fixture
def elig_ws(ws: Path) -> Path:
    target = ws / "experiments" / "podcast-selection"
    if not target.exists():
        shutil.copytree(BUNDLED, target)
    return ws


def _log(ws: Path) -> Path:
    return ws / "registry" / "eligibility" / "podcast-selection.jsonl"


def test_propose_decide_and_the_yaml_block(cli: Any, elig_ws: Path) -> None:
    ws = elig_ws
    r = cli("-w", ws, "corpus", "eligibility", "podcast-selection", "--propose", "--json")
    assert r.code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["written"] == [{"seq": 1, "event": "eligibility-proposal"}]
    assert "mark-played:earbud" in data["needs_review"]
    assert data["eligible"]["mark-played"] is None  # an undecided flag: no set yet
    assert set(data["proposal"]["families"]) == set(FAKE_JUDGES)
    pair = next(
        p for p in data["pairs"] if (p["intent"], p["competitor"]) == ("mark-played", "earbud")
    )
    assert pair["answers"]["fake-descriptions"]["quote"] == EARBUD_HISTORY

    # a decision needs a reason; a bad pair is exit 2; nothing is written either way
    before = _log(ws).read_bytes()
    for args in (
        ("--accept", "mark-played:earbud"),
        ("--accept", "mark-played:weather", "--reason", "r"),  # a decoy is no competitor
        ("--accept", "nope:earbud", "--reason", "r"),
        ("--accept", "mark-played", "--reason", "r"),
        ("--propose", "--accept", "mark-played:earbud", "--reason", "r"),
    ):
        bad = cli("-w", ws, "corpus", "eligibility", "podcast-selection", *args, "--json")
        assert bad.code == 2, args
    assert _log(ws).read_bytes() == before

    r = cli(
        "-w", ws, "corpus", "eligibility", "podcast-selection",
        "--accept", "mark-played:earbud", "--reason", "its history tool marks played", "--json",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["written"] == [{"seq": 2, "event": "eligibility-decision"}]
    assert "mark-played:earbud" not in data["needs_review"]
    assert "earbud" in data["eligible"]["mark-played"]
    yaml = cli("-w", ws, "corpus", "eligibility", "podcast-selection", "--yaml")
    assert yaml.code == 0
    assert yaml.stdout == data["yaml"]
    # the printed block loads as the corpus's field
    folder = ws / "experiments" / "podcast-selection"
    corpus = folder / "corpus.yaml"
    corpus.write_text(corpus.read_text(encoding="utf-8") + "\n" + yaml.stdout, encoding="utf-8")
    loaded = load_experiment(folder_reader(folder), "podcast-selection")
    assert loaded.eligible_competitors("mark-played") == set(data["eligible"]["mark-played"])


@pytest.mark.parametrize("tamper", ["edit", "delete-first", "swap"])
def test_the_record_is_append_only(cli: Any, elig_ws: Path, tamper: str) -> None:
    ws = elig_ws
    cli("-w", ws, "corpus", "eligibility", "podcast-selection", "--propose")
    for pair in ("mark-played:earbud", "subscriptions:castaway"):
        r = cli(
            "-w", ws, "corpus", "eligibility", "podcast-selection",
            "--reject", pair, "--reason", "checked by hand",
        )  # fmt: skip
        assert r.code == 0, r.stderr
    assert cli("-w", ws, "verify").code == 0  # the intact record is no problem
    lines = _log(ws).read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    if tamper == "edit":  # a decision flipped, chain links untouched
        lines[1] = lines[1].replace(b'"decision":"reject"', b'"decision":"accept"')
    elif tamper == "delete-first":
        lines = lines[1:]
    else:
        lines[1], lines[2] = lines[2], lines[1]
    _log(ws).write_bytes(b"".join(lines))
    r = cli("-w", ws, "corpus", "eligibility", "podcast-selection", "--json")
    assert r.code == 3
    assert "podcast-selection.jsonl" in json.loads(r.stdout or r.stderr)["file"]
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    assert any(
        p["kind"] == "audit-log" and "podcast-selection.jsonl" in p["entry"]
        for p in json.loads(checked.stdout)["problems"]
    ), checked.stdout
