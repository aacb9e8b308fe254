"""The local host: BM25 search, seeded correlated repeats, response to metadata, rates."""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from run_helpers import experiment, plan

from prereg.runners.drivers.local import BM25, LocalParams, create, numbers, phrases
from prereg.runners.orchestrate import run_plan
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore


def run_all(
    tmp: Path,
    name: str,
    arms: tuple[tuple[str, str], ...],
    repeats: int,
    seed: int = 7,
    rotations: int = 1,
    splits: tuple[str, ...] = ("dev", "validation", "test"),
) -> list[RunRecord]:
    exp = experiment(name)
    store = RunStore(tmp)
    for split in splits:
        p = plan(
            experiment=name,
            split=split,
            arms=arms,
            repeats=repeats,
            seed=seed,
            rotations=rotations,
            driver="local",
        )
        asyncio.run(run_plan(p, exp, store, create(), concurrency=4))
    return store.records()


MUSIC_ARMS = (("baseline", "baseline"), ("semantic", "semantic"))


@pytest.fixture(scope="module")
def music(tmp_path_factory: pytest.TempPathFactory) -> list[RunRecord]:
    return run_all(tmp_path_factory.mktemp("music"), "music-library", MUSIC_ARMS, repeats=6)


def test_bm25_matches_a_hand_computation() -> None:
    index = BM25([["a", "b"], ["b", "c", "c"]])
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / 2.5)
    assert index.scores(["c"]) == pytest.approx([0.0, idf * 2 * 2.2 / (2 + norm)])
    assert index.scores(["zzz"]) == [0.0, 0.0]


def test_phrases_and_numbers() -> None:
    assert [p.text for p in phrases("Add Sugar Static to the Road Trip playlist.")] == [
        "Sugar Static",
        "Road Trip",
    ]
    got = phrases("Set the description of Old Favourites to: songs I grew up with.")
    assert [(p.text, p.tail) for p in got] == [
        ("Old Favourites", False),
        ("songs I grew up with", True),
    ]
    assert [p.text for p in phrases("What songs are on the album Salt and Timber?")] == [
        "Salt and Timber"
    ]
    assert [p.text for p in phrases('Play "quiet storm" now')] == ["quiet storm"]
    assert phrases("Create a new playlist called Focus Flow.")[0].before == "called"
    assert numbers("Give Honeycomb Avenue three stars, not 12") == [3, 12]


def test_measurements(music: list[RunRecord]) -> None:
    for r in music:
        assert r.evidence_class == "local" and r.driver == "local"
        assert r.cost_usd is None  # nothing is priced
        assert r.latency_ms is not None and r.latency_ms >= 0
        assert r.tokens.input is not None and r.tokens.output is not None
        assert r.tokens.reasoning is None and r.tokens.cached is None


def test_both_arms_strictly_between_zero_and_one(music: list[RunRecord]) -> None:
    for arm, _ in MUSIC_ARMS:
        outcomes = [r.success for r in music if r.arm == arm]
        rate = sum(outcomes) / len(outcomes)
        assert 0.2 < rate < 0.8, (arm, rate)
    # and on the registered pilot's own split (dev)
    for arm, _ in MUSIC_ARMS:
        dev = [r.success for r in music if r.arm == arm and r.split == "dev"]
        assert 0 < sum(dev) < len(dev)


def test_repeats_vary_and_are_correlated(music: list[RunRecord]) -> None:
    by_prompt: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in music:
        by_prompt[(r.arm, r.task_id)].append(bool(r.success))
    mixed = [v for v in by_prompt.values() if 0 < sum(v) < len(v)]
    assert len(mixed) >= 5  # repeats vary
    agree = total = 0
    for v in by_prompt.values():
        for i in range(len(v)):
            for j in range(i + 1, len(v)):
                agree += v[i] == v[j]
                total += 1
    p = sum(r.success for r in music) / len(music)
    independent = p * p + (1 - p) * (1 - p)
    assert agree / total > independent + 0.15  # ... and are correlated


def test_reproducible_for_a_seed(tmp_path: Path) -> None:
    def key(records: list[RunRecord]) -> list[Any]:
        return sorted(
            (
                r.arm,
                r.task_id,
                r.repeat,
                r.success,
                r.terminal_flag,
                [(e.kind, e.tool, str(e.arguments)) for e in r.trace],
            )
            for r in records
        )

    a = run_all(tmp_path / "a", "music-library", MUSIC_ARMS, repeats=2, splits=("dev",))
    b = run_all(tmp_path / "b", "music-library", MUSIC_ARMS, repeats=2, splits=("dev",))
    c = run_all(tmp_path / "c", "music-library", MUSIC_ARMS, repeats=2, splits=("dev",), seed=8)
    assert key(a) == key(b)
    assert key(a) != key(c)


def test_neutral_metadata_lowers_selection_and_the_decoy_is_ignored(tmp_path: Path) -> None:
    arms = (("descriptive", "focal"), ("neutral", "focal-neutral"))
    records = run_all(tmp_path, "podcast-selection", arms, repeats=5, rotations=4)
    positive = [r for r in records if r.polarity == "positive"]

    def rate(arm: str, value: Any) -> float:
        chosen = [value(r) for r in positive if r.arm == arm]
        chosen = [v for v in chosen if v is not None]
        return sum(chosen) / len(chosen)

    selected = {arm: rate(arm, lambda r: r.funnel.selected) for arm, _ in arms}
    selection = {arm: rate(arm, lambda r: r.selection_rate) for arm, _ in arms}
    assert selected["descriptive"] > 0.2
    assert selected["neutral"] < selected["descriptive"] - 0.2
    assert selection["neutral"] < selection["descriptive"] - 0.2
    decoy_calls = sum(
        1
        for r in records
        for e in r.trace
        if e.kind == "tool_call" and (e.tool or "").startswith("skycast")
    )
    assert decoy_calls <= 0.01 * len(records)


def test_params_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown local host params"):
        create(params={"temperature_x": 1})
    assert LocalParams.from_params({"search_k": 3}).search_k == 3
