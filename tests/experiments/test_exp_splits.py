"""Splits: whole clusters, deterministic, proportional per intent, explicit assignment."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.core.errors import BadInput
from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from prereg.experiments.splits import assign_by_fractions

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"
FRACTIONS = {"dev": 0.5, "validation": 0.25, "test": 0.25}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.text("abcdefgh", min_size=1, max_size=6), st.sampled_from(["i1", "i2", "i3"])),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 2**31),
)
def test_assignment_is_a_function_of_seed_and_clusters(
    pairs: list[tuple[str, str]], seed: int
) -> None:
    # a cluster keeps one intent (the loader enforces it); keep the first one seen
    intent_of: dict[str, str] = {}
    for cluster, intent in pairs:
        intent_of.setdefault(cluster, intent)
    clean = list(intent_of.items())
    a = assign_by_fractions(clean, seed, FRACTIONS)
    b = assign_by_fractions(list(reversed(clean)), seed, FRACTIONS)
    assert a == b  # order of appearance does not matter
    assert set(a) == set(intent_of)  # every cluster is assigned exactly once
    for intent in set(intent_of.values()):
        members = [c for c, i in clean if i == intent]
        counts = Counter(a[c] for c in members)
        for split, fraction in FRACTIONS.items():
            # proportional within an intent up to rounding of one cluster
            assert abs(counts[split] - fraction * len(members)) <= 1


def test_seed_changes_the_assignment() -> None:
    clusters = [(f"c{i}", "i") for i in range(40)]
    assert assign_by_fractions(clusters, 1, FRACTIONS) != assign_by_fractions(
        clusters, 2, FRACTIONS
    )


def test_paraphrases_never_straddle_splits() -> None:
    exp = load_experiment(folder_reader(BUNDLED / "music-library"), "music-library")
    split_of_task = {t.id: s for s in exp.split_names for t in exp.tasks_in_split(s)}
    by_cluster: dict[str, set[str]] = {}
    for t in exp.tasks:
        by_cluster.setdefault(t.cluster, set()).add(split_of_task[t.id])
    assert all(len(s) == 1 for s in by_cluster.values())
    assert {s for splits in by_cluster.values() for s in splits} == {"dev", "validation", "test"}


def _with_splits(text: str) -> dict[str, bytes]:
    root = BUNDLED / "music-library"
    entry = (root / "experiment.yaml").read_text()
    start = entry.index("splits:")
    return {"experiment.yaml": (entry[:start] + text).encode()}


def test_explicit_assignment() -> None:
    clusters = [f"c{i:02d}" for i in range(1, 40)]
    text = (
        "splits:\n  assign:\n    dev: [" + ", ".join(clusters[:30]) + "]\n"
        "    validation: [" + ", ".join(clusters[30:35]) + "]\n"
        "    test: [" + ", ".join(clusters[35:]) + "]\n"
    )
    read = folder_reader(BUNDLED / "music-library")
    over = _with_splits(text)
    exp = load_experiment(lambda p: over.get(p) or read(p), "music-library")
    assert {t.cluster for t in exp.tasks_in_split("test")} == set(clusters[35:])


@pytest.mark.parametrize(
    "text, message",
    [
        ("splits:\n  assign:\n    dev: [c01, c01]\n", "already in split"),
        ("splits:\n  assign:\n    dev: [c99]\n", "unknown cluster 'c99'"),
        ("splits:\n  assign:\n    dev: [c01]\n", "not assigned"),
        ("splits:\n  fractions: {dev: 0.5, validation: 0.3, test: 0.3}\n", "sum to 1"),
        ("splits:\n  seed: 1\n", "exactly one of"),
    ],
)
def test_bad_split_specs(text: str, message: str) -> None:
    read = folder_reader(BUNDLED / "music-library")
    over = _with_splits(text)
    with pytest.raises(BadInput, match=message) as info:
        load_experiment(lambda p: over.get(p) or read(p), "music-library")
    assert info.value.file is not None and info.value.file.startswith("experiment.yaml")


def test_selection_experiment_loads_with_its_pool() -> None:
    exp = load_experiment(folder_reader(BUNDLED / "podcast-selection"), "podcast-selection")
    assert exp.surface_ids == {
        "focal",
        "focal-neutral",
        "tidewatch",
        "podcatch",
        "castaway",
        "earbud",
        "weather",
    }
    roles = [role for _, role in exp.offered("focal")]
    assert roles == ["focal", "competitor", "competitor", "decoy"]
    assert all(s.replay_only for s, role in exp.offered("focal") if role != "focal")
