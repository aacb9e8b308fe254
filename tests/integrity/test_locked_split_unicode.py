"""The locked split cannot be spent again through what a reader cannot see (issue 40, item 2).

Each bypass end to end in a fresh workspace: the bundled confirmatory claims the
music-library test split, then a copy of the experiment whose test prompts are altered
(a zero-width space, a Cyrillic look-alike letter, NFKC variants, upper case, a
one-character edit) registers a second confirmatory, or has the altered clusters
reassigned to dev for an exploratory registration. Before issue 40 every one of them
registered (exit 0) and ran; now each is refused: an undeclared invisible character at
``register`` (exit 2, naming the file, the task and the character), the others by
content (exit 4), nothing written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from prereg.experiments import fingerprints, load_experiment
from prereg.experiments.loader import folder_reader
from prereg.registry import registrations

CONFIRM = "drafts/music-library-confirmatory.yaml"
PILOT = "drafts/music-library-pilot.yaml"

Alter = Callable[[str], str]


def _cyrillic(prompt: str) -> str:
    """The first Latin a, e, o, p, c or x swapped for its Cyrillic look-alike."""
    for latin, cyrillic in zip("aeopcx", "аеорсх", strict=True):
        if latin in prompt:
            return prompt.replace(latin, cyrillic, 1)
    raise AssertionError(prompt)


def _zero_width(prompt: str) -> str:
    return prompt[:3] + "\u200b" + prompt[3:]


def _nfkc(prompt: str) -> str:
    """Full-width first letter, a no-break space and the fi ligature where it fits."""
    first = chr(ord(prompt[0]) + 0xFEE0) if prompt[0].isascii() and prompt[0].isalpha() else ""
    out = first + prompt[1:] if first else prompt
    return out.replace(" ", "\u00a0", 1).replace("fi", "\ufb01")


def _upper(prompt: str) -> str:
    return prompt.upper()


def _near(prompt: str) -> str:
    """One character changed (a typo) and one more space-separated word: exact
    fingerprints differ, shingles barely."""
    k = len(prompt) // 2
    swapped = "z" if prompt[k] != "z" else "q"
    return prompt[:k] + swapped + prompt[k + 1 :] + " thanks"


def _claim(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0


def _copy(ws: Path, name: str, alter: Alter, *, to_dev: bool = False, **spec: object) -> Path:
    """A copy of music-library named ``name`` with every test prompt altered."""
    source = ws / "experiments" / "music-library"
    target = ws / "experiments" / name
    shutil.copytree(source, target)
    experiment = load_experiment(folder_reader(source), "music-library")
    test = {t.id for t in experiment.tasks_in_split("test")}
    corpus = yaml.safe_load((target / "corpus.yaml").read_text())
    for task in corpus["tasks"]:
        if task["id"] in test:
            task["prompt"] = alter(task["prompt"])
    (target / "corpus.yaml").write_text(yaml.safe_dump(corpus, sort_keys=False, allow_unicode=True))
    doc = yaml.safe_load((target / "experiment.yaml").read_text())
    doc["name"] = name
    doc.update(spec)
    if to_dev:  # the former test clusters to dev
        assign: dict[str, list[str]] = {"dev": [], "validation": [], "test": []}
        for task in experiment.tasks:
            split = experiment.split_of(task)
            split = "dev" if split == "test" else split
            if task.cluster not in assign[split]:
                assign[split].append(task.cluster)
        doc["splits"] = {"assign": assign}
    (target / "experiment.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


def _draft(ws: Path, source: str, new_id: str, experiment: str) -> Path:
    doc = yaml.safe_load((ws / source).read_text())
    doc["id"] = new_id
    doc["experiment"] = experiment
    path = ws / "drafts" / f"{new_id}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _refused(ws: Path, cli, draft: Path, code: int) -> dict:  # type: ignore[no-untyped-def,type-arg]
    before = sorted(str(p.relative_to(ws)) for p in (ws / "registry").rglob("*"))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == code, result.stdout + result.stderr
    assert sorted(str(p.relative_to(ws)) for p in (ws / "registry").rglob("*")) == before
    error: dict = json.loads(result.stdout)  # type: ignore[type-arg]
    return error


def test_a_zero_width_space_in_each_test_prompt_is_refused_at_register(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _claim(ws, cli)
    _copy(ws, "music-zw", _zero_width)
    error = _refused(ws, cli, _draft(ws, CONFIRM, "zw-confirmatory", "music-zw"), 2)
    assert "U+200B ZERO WIDTH SPACE" in error["message"]
    assert "music-zw/corpus.yaml" in error["file"]
    assert error["field"].startswith("tasks[") and error["field"].endswith("].prompt")
    assert "task 't" in error["message"]


def test_a_declared_zero_width_space_registers_but_is_matched_by_content(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _claim(ws, cli)
    _copy(ws, "music-zw", _zero_width, format_characters=["U+200B"])
    error = _refused(ws, cli, _draft(ws, CONFIRM, "zw-confirmatory", "music-zw"), 4)
    assert "claimed, by content" in error["message"]


@pytest.mark.parametrize("alter", [_cyrillic, _nfkc, _upper], ids=["cyrillic", "nfkc", "case"])
def test_a_second_confirmatory_on_look_alike_prompts_is_refused(  # type: ignore[no-untyped-def]
    ws: Path, cli, alter: Alter
) -> None:
    _claim(ws, cli)
    _copy(ws, "music-alike", alter)
    error = _refused(ws, cli, _draft(ws, CONFIRM, "alike-confirmatory", "music-alike"), 4)
    assert "claimed, by content" in error["message"]


@pytest.mark.parametrize("alter", [_cyrillic, _nfkc, _upper], ids=["cyrillic", "nfkc", "case"])
def test_look_alike_test_prompts_reassigned_to_dev_cannot_be_explored(  # type: ignore[no-untyped-def]
    ws: Path, cli, alter: Alter
) -> None:
    _claim(ws, cli)
    _copy(ws, "music-dev", alter, to_dev=True)
    error = _refused(ws, cli, _draft(ws, PILOT, "dev-pilot", "music-dev"), 4)
    assert "change sides of the locked split" in error["message"]
    assert any("is in split dev" in d for d in error["details"])


def test_a_second_confirmatory_on_near_duplicate_prompts_is_refused(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _claim(ws, cli)
    _copy(ws, "music-near", _near)
    error = _refused(ws, cli, _draft(ws, CONFIRM, "near-confirmatory", "music-near"), 4)
    assert "near-duplicates of test prompts already claimed" in error["message"]
    assert "claimed by 'music-library-confirmatory'" in error["message"]
    assert all("~ test task 't" in d for d in error["details"])


def test_near_duplicate_test_prompts_reassigned_to_dev_are_refused(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _claim(ws, cli)
    _copy(ws, "music-near-dev", _near, to_dev=True)
    error = _refused(ws, cli, _draft(ws, PILOT, "near-pilot", "music-near-dev"), 4)
    assert "near-duplicates" in error["message"]


def test_the_bundled_experiment_still_registers_after_its_claim(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """No false near-duplicate: the pilot (dev) of the claimed experiment, and a copy with
    the test split untouched reassigned between dev and validation, register."""
    _claim(ws, cli)
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    podcast = ws / "drafts" / "podcast-selection-controls.yaml"
    assert cli("-w", ws, "register", podcast).code == 0


def test_a_claim_written_with_version_1_fingerprints_still_locks(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old workspace: its claim line names version-1 fingerprints (white space only).
    The registry recomputes the version-2 ones from the claimant's frozen experiment, so
    a look-alike copy made after the upgrade is refused all the same."""
    with monkeypatch.context() as patch:
        patch.setattr(fingerprints, "task_fingerprint", fingerprints.task_fingerprint_v1)
        patch.setattr(registrations, "_SPLIT_MAPS", {})
        patch.setattr(registrations, "_LOCKED_PROMPTS", {})
        _claim(ws, cli)
    claim = json.loads(next((ws / "registry" / "claims").glob("*.json")).read_bytes())
    experiment = load_experiment(
        folder_reader(ws / "experiments" / "music-library"), "music-library"
    )
    test = experiment.tasks_in_split("test")
    assert set(claim["tasks"]) == {fingerprints.task_fingerprint_v1(t) for t in test}
    monkeypatch.setattr(registrations, "_SPLIT_MAPS", {})
    monkeypatch.setattr(registrations, "_LOCKED_PROMPTS", {})
    _copy(ws, "music-alike", _cyrillic)
    error = _refused(ws, cli, _draft(ws, CONFIRM, "alike-confirmatory", "music-alike"), 4)
    assert "claimed, by content" in error["message"]
    # and the stored version-1 list still holds an unaltered copy
    _copy(ws, "music-same", lambda p: p)
    assert (
        "claimed"
        in _refused(ws, cli, _draft(ws, CONFIRM, "same-confirmatory", "music-same"), 4)["message"]
    )


def test_a_near_duplicate_copy_registered_before_the_claim_cannot_claim_at_run(  # type: ignore[no-untyped-def]
    ws: Path, cli
) -> None:
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    _copy(ws, "music-near", _near)
    copy = _draft(ws, CONFIRM, "near-confirmatory", "music-near")
    assert cli("-w", ws, "register", copy).code == 0  # nothing claimed yet
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0
    result = cli("-w", ws, "run", "near-confirmatory", "--max-units", "2", "--json")
    assert result.code == 4, result.stdout
    assert "near-duplicates of test prompts already claimed" in json.loads(result.stdout)["message"]
    assert not list((ws / "registry" / "claims").glob("*.json"))[1:]  # one claim only
