"""Content fingerprints see what a reader sees (issue 40, item 2; DESIGN.md invariant 14).

Properties of the reader's form (:func:`prereg.experiments.unicode.fold.fold`) and of the
task fingerprint built on it: idempotent; unchanged by inserting any invisible (Cf)
character anywhere, by swapping a letter for a TR39 confusable of it, by NFKC variants,
by case and by white space. And the near-duplicate index: finds what a pairwise scan
finds, and matches no two distinct bundled prompts.
"""

from __future__ import annotations

import sys
import unicodedata
from functools import cache
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.experiments.fingerprints import (
    FORMAT,
    prompt_fingerprint,
    task_fingerprint,
    task_fingerprint_v1,
)
from prereg.experiments.models import Task
from prereg.experiments.unicode import fold as folding
from prereg.experiments.unicode.shingles import THRESHOLD, ShingleIndex, jaccard, shingles

BUNDLED = Path(folding.__file__).resolve().parents[1] / "bundled"


@cache
def _cf() -> list[str]:
    return sorted(c for c in folding.invisible() if unicodedata.category(c) == "Cf")


@cache
def _confusable_letters() -> list[tuple[str, str]]:
    """(letter, look-alike) for every TR39 source that maps to one ASCII letter."""
    out = []
    for source, target in folding._read_confusables().items():
        if len(source) == 1 and len(target) == 1 and target.isascii() and target.isalpha():
            if (
                unicodedata.category(source)[0] == "L"
                and unicodedata.normalize("NFD", source) == source
            ):
                out.append((target, source))
    return sorted(out)


prompts = st.text(alphabet=st.characters(codec="utf-8", max_codepoint=0x2FFFF), max_size=60)
ascii_prompts = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80)


@settings(max_examples=400, deadline=None)
@given(prompts)
def test_the_fold_is_idempotent(text: str) -> None:
    once = folding.fold(text)
    assert folding.fold(once) == once


@settings(max_examples=300, deadline=None)
@given(ascii_prompts)
def test_the_ascii_fast_path_is_the_full_fold(text: str) -> None:
    assert folding.fold(text) == folding._fold(text)


@settings(max_examples=400, deadline=None)
@given(prompts, st.data())
def test_inserting_any_cf_character_leaves_the_fingerprint(text: str, data: st.DataObject) -> None:
    cf = data.draw(st.sampled_from(_cf()))
    at = data.draw(st.integers(0, len(text)))
    assert prompt_fingerprint(text[:at] + cf + text[at:]) == prompt_fingerprint(text)


def test_every_cf_character_is_invisible_to_the_fold() -> None:
    cf = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert cf and all(folding.fold(f"play{c}list") == folding.fold("playlist") for c in cf)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_swapping_a_letter_for_its_confusable_leaves_the_fingerprint(data: st.DataObject) -> None:
    letter, alike = data.draw(st.sampled_from(_confusable_letters()))
    words = data.draw(
        st.lists(st.sampled_from(["play", "the", "Lumen", "Drift", "list"]), max_size=5)
    )
    text = " ".join([*words, f"x{letter}y", *words])
    assert prompt_fingerprint(text.replace(letter, alike)) == prompt_fingerprint(text)


def test_the_bypasses_of_the_issue_share_a_fingerprint() -> None:
    plain = "Which songs by Lumen Drift do I have in my library?"
    for variant in (
        "Which s\u200bongs by Lumen Drift do I have in my library?",  # zero-width space
        "Which songs by Lumen Drift do I have in my librаry?",  # Cyrillic a
        "Which songs by Lumen Drift dо I have in my library?",  # Cyrillic o
        "Ｗhich songs by Lumen Drift do I have in my library?",  # full-width W
        "Which\u00a0songs by Lumen Drift do I have in my library?",  # no-break space
        "WHICH SONGS BY LUMEN DRIFT DO I HAVE IN MY LIBRARY?",  # case
        "  Which songs by Lumen\tDrift do I have in my library? ",  # white space
        "Which songs by Lumen Drift do \u0399 have in my library?",  # Greek capital iota
        "Which songs by Lumen Drift do I have in my \u2060library?",  # word joiner
        "Which songs by Lumen Drift do I have in my library\u202e?",  # bidi override
    ):
        assert prompt_fingerprint(variant) == prompt_fingerprint(plain), variant


def test_distinct_prompts_keep_distinct_fingerprints() -> None:
    assert prompt_fingerprint("Rate Glass Harbor five stars.") != prompt_fingerprint(
        "Rate Glass Harbor four stars."
    )


def test_the_fingerprint_is_versioned() -> None:
    task = Task(id="t1", intent="i", cluster="c", prompt="Play  Lumen Drift")
    assert FORMAT.endswith("/2")
    assert task_fingerprint(task) != task_fingerprint_v1(task)
    assert task_fingerprint(task) == prompt_fingerprint("play lumen drift")


def test_the_confusables_data_is_the_named_version() -> None:
    data = (Path(folding.__file__).parent / "confusables.txt").read_text(encoding="utf-8")
    assert f"# Version: {folding.CONFUSABLES_VERSION}" in data
    assert folding._read_confusables()["а"] == "a"  # Cyrillic a -> Latin a


def _bundled_prompts() -> list[str]:
    out: list[str] = []
    for corpus in sorted(BUNDLED.glob("*/corpus.yaml")):
        out += [t["prompt"] for t in yaml.safe_load(corpus.read_text())["tasks"]]
    return out


def test_no_two_distinct_bundled_prompts_are_near_duplicates() -> None:
    prompts_ = sorted({folding.fold(p): p for p in _bundled_prompts()}.values())
    assert len(prompts_) == len(_bundled_prompts())  # no two bundled prompts fold alike
    index = ShingleIndex(enumerate(prompts_))
    for i, prompt in enumerate(prompts_):
        assert [m.key for m in index.matches(prompt)] == [i], prompt


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.text(alphabet="abcde fgh", min_size=1, max_size=30), min_size=1, max_size=25),
    st.text(alphabet="abcde fgh", max_size=30),
)
def test_the_index_finds_what_a_pairwise_scan_finds(texts: list[str], probe: str) -> None:
    index = ShingleIndex(enumerate(texts))
    expected = {
        i for i, t in enumerate(texts) if jaccard(shingles(t), shingles(probe)) >= THRESHOLD
    }
    assert {m.key for m in index.matches(probe)} == expected
