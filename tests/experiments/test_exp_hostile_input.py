"""Hostile experiment files (issue 12, "Bad input"): a BadInput naming file, line and field.

The loader reads experiment.yaml, the service, the corpus, the surfaces and MCP snapshot
files through one guarded path: duplicate keys, non-finite numbers, integers beyond
canonical JSON, tags, alias bombs, recursion, depth, coercions, oversized files and
files that are not regular files are each refused with exit 2, never a traceback, a
hang or a silently different experiment.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from prereg.cli import main
from prereg.core.errors import BadInput
from prereg.core.safeio import UnreadableFile, read_regular_file
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.loader import files as loader_module
from prereg.experiments.loader import folder_reader
from tests.conftest import CliResult, tree_digest

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


def copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(BUNDLED / name, target)
    return target


def edit(folder: Path, rel: str, old: str, new: str) -> Path:
    path = folder / rel
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


def load(folder: Path) -> Experiment:
    return load_experiment(folder_reader(folder), folder.name)


def refused(folder: Path) -> BadInput:
    with pytest.raises(BadInput) as info:
        load(folder)
    assert info.value.exit_code == 2
    return info.value


def line_of(path: Path, fragment: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if fragment in t)


def at(error: BadInput, rel: str, line: int) -> None:
    assert error.file is not None and error.file.startswith(f"{rel}:{line}:"), error.render()


# ---- YAML content -----------------------------------------------------------------------------


def test_duplicate_key_in_experiment_yaml(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(
        folder, "experiment.yaml", "corpus: corpus.yaml", "corpus: corpus.yaml\ncorpus: c.yaml"
    )
    error = refused(folder)
    at(error, "experiment.yaml", line_of(path, "corpus: c.yaml"))
    assert error.field == "corpus" and "duplicate key 'corpus'" in error.message


def test_duplicate_key_in_a_corpus_task(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "corpus.yaml", "  - id: t001\n", "  - id: t001\n    id: t999\n")
    error = refused(folder)
    at(error, "corpus.yaml", line_of(path, "id: t999"))
    assert error.field == "tasks[0].id"


def test_nan_in_a_seed_record(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "service.yaml", "year: 2019, rating: null}", "year: 2019, rating: .nan}")
    error = refused(folder)
    at(error, "service.yaml", line_of(path, ".nan"))
    assert error.field == "collections.tracks.records[0].rating"
    assert "not a finite number" in error.message


def test_infinity_in_split_fractions(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "experiment.yaml", "dev: 0.5", "dev: .inf")
    error = refused(folder)
    at(error, "experiment.yaml", line_of(path, ".inf"))
    assert error.field == "splits.fractions.dev"


def test_integer_beyond_canonical_json_in_split_seed(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "experiment.yaml", "seed: 20240611", "seed: 1" + "0" * 30)
    error = refused(folder)
    at(error, "experiment.yaml", line_of(path, "seed: 1000"))
    assert error.field == "splits.seed" and "outside the range" in error.message


def test_binary_tag_in_a_prompt(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    text = (folder / "corpus.yaml").read_text()
    first_prompt = next(t for t in text.splitlines() if t.strip().startswith("prompt:"))
    path = edit(folder, "corpus.yaml", first_prompt, "    prompt: !!binary aGVsbG8=")
    error = refused(folder)
    at(error, "corpus.yaml", line_of(path, "!!binary"))
    assert error.field == "tasks[0].prompt" and "'!!binary' is refused" in error.message


def test_an_alias_bomb_in_the_corpus_fails_fast(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    laughs = "".join(
        f"  l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]\n"
        if i
        else "  l0: &l0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
        for i in range(9)
    )
    path = folder / "corpus.yaml"
    path.write_text("x-anchors:\n" + laughs + path.read_text())
    error = refused(folder)
    # refused by the loader's bound, before any expansion (the message says so); a
    # regression that expanded the aliases would take tens of seconds and gigabytes
    assert "aliases expand this document" in error.message
    at(error, "corpus.yaml", line_of(path, "l6: &l6"))


def test_a_recursive_anchor_in_the_service(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "service.yaml", "collections:\n", "loop: &loop [*loop]\ncollections:\n")
    error = refused(folder)
    at(error, "service.yaml", line_of(path, "loop: &loop"))
    assert error.field == "loop[0]" and "recursive alias" in error.message


def test_deep_nesting_in_an_input_schema(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "corpus.yaml", "intents:\n", f"deep: {'[' * 900}{']' * 900}\nintents:\n")
    error = refused(folder)
    at(error, "corpus.yaml", line_of(path, "deep:"))
    assert "nested more than 64 levels" in error.message


@pytest.mark.parametrize(
    ("rel", "old", "new", "field"),
    [
        ("service.yaml", "destructive: true", "destructive: 'yes'", "destructive"),
        ("service.yaml", "required: true", "required: 1", "required"),
        ("experiment.yaml", "seed: 20240611", "seed: 20240611.0", "splits.seed"),
        ("experiment.yaml", "dev: 0.5, validation: 0.25", "dev: true, validation: 0", "dev"),
    ],
    ids=["str-to-bool", "int-to-bool", "float-to-int", "bool-to-float"],
)
def test_no_value_is_coerced(tmp_path: Path, rel: str, old: str, new: str, field: str) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, rel, old, new)
    error = refused(folder)
    assert error.field is not None and error.field.endswith(field), error.render()
    at(error, rel, line_of(path, new.split("\n")[0]))


def test_a_date_is_kept_as_the_text_written(tmp_path: Path) -> None:
    """A string field holding 2021-06-01 loads as that string (it was a date object)."""
    folder = copy(tmp_path, "music-library")
    edit(folder, "service.yaml", "genre: synthwave,", "genre: 2021-06-01,")
    experiment = load(folder)
    record = experiment.service.collections["tracks"].records[0]
    assert record["genre"] == "2021-06-01"


def test_a_non_string_key_in_a_record(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "service.yaml", "{id: trk-001,", "{id: trk-001, on: 1,")
    error = refused(folder)
    at(error, "service.yaml", line_of(path, "on: 1"))
    assert "a mapping key must be a string" in error.message and "True" in error.message


def test_escape_bytes_in_an_echoed_value_are_escaped(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    edit(folder, "experiment.yaml", "corpus: corpus.yaml", 'corpus: "c\\e[2Jorpus.yaml"')
    error = refused(folder)
    assert "\x1b" not in error.render() and "\\x1b[2J" in error.message
    assert "\x1b" not in json.dumps(error.to_json(), ensure_ascii=False)


def test_a_nul_character_in_a_referenced_path(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    path = edit(folder, "experiment.yaml", "corpus: corpus.yaml", 'corpus: "corpus\\0.yaml"')
    error = refused(folder)  # was a ValueError traceback (embedded null byte)
    at(error, "experiment.yaml", line_of(path, "corpus:"))
    assert error.field == "corpus" and "NUL" in error.message and "\\x00" in error.message


# ---- MCP snapshots (JSON) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('"protocolVersion"', '"big": 9007199254740993, "protocolVersion"', "outside the range"),
        ('"protocolVersion"', '"huge": 1e999, "protocolVersion"', "overflows to infinity"),
        ('"protocolVersion"', '"deep": ' + "[" * 100 + "]" * 100 + ', "protocolVersion"', "nested"),
        ('"protocolVersion"', '"protocolVersion": "x", "protocolVersion"', "duplicate key"),
    ],
    ids=["integer", "overflow", "depth", "duplicate"],
)
def test_snapshot_json_canonical_json_cannot_carry(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    folder = copy(tmp_path, "podcast-selection")
    snapshot = folder / "snapshots" / "podcatch.json"
    text = snapshot.read_text()
    assert old in text
    snapshot.write_text(text.replace(old, new, 1))
    error = refused(folder)
    at(error, "snapshots/podcatch.json", line_of(snapshot, new.split(",")[0][:12]))
    assert message in error.message and error.field


# ---- files that are not regular files, or too large ------------------------------------------


def test_a_symlink_loop_as_a_surface(tmp_path: Path) -> None:
    folder = copy(tmp_path, "music-library")
    surface = folder / "surfaces" / "baseline.yaml"
    surface.unlink()
    surface.symlink_to("baseline.yaml")
    error = refused(folder)
    assert error.field == "surfaces.baseline" and "symlink loop" in error.message
    at(error, "experiment.yaml", line_of(folder / "experiment.yaml", "baseline:"))


def test_an_experiment_file_over_the_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader_module, "MAX_EXPERIMENT_FILE_BYTES", 16 * 1024)
    folder = copy(tmp_path, "music-library")
    error = refused(folder)  # corpus.yaml is 22 KiB
    assert error.field == "corpus" and "over the 16 KiB limit" in error.message


def test_a_device_is_not_read() -> None:
    with pytest.raises(UnreadableFile) as info:
        read_regular_file("/dev/zero", limit=1024, what="a file")
    assert "character device" in info.value.reason


def test_a_growing_file_is_cut_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(UnreadableFile) as info:
        read_regular_file(path, limit=1024, what="a file")
    assert "over the 1 KiB limit" in info.value.reason


def _bounded() -> None:  # pragma: no cover - runs in the child
    """At most 2 GiB of address space: a regression fails instead of eating the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))


def test_a_fifo_as_a_surface_is_refused_without_blocking(tmp_path: Path) -> None:
    """Through the CLI in a subprocess with a timeout: a regression must not hang the suite."""
    root = tmp_path / "ws"
    with pytest.raises(SystemExit):
        main(["init", str(root)])
    surface = root / "experiments" / "music-library" / "surfaces" / "baseline.yaml"
    surface.unlink()
    os.mkfifo(surface)
    before = tree_digest(root / "registry")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from prereg.cli import main; main()",
            "-w",
            str(root),
            "register",
            str(root / "drafts" / "music-library-pilot.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        preexec_fn=_bounded,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "surfaces.baseline" in result.stderr and "FIFO" in result.stderr
    assert "experiment.yaml:" in result.stderr
    assert tree_digest(root / "registry") == before


def test_a_corpus_problem_through_the_cli_writes_nothing(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    root = tmp_path / "ws"
    assert cli("init", root).code == 0
    corpus = root / "experiments" / "music-library" / "corpus.yaml"
    corpus.write_text(corpus.read_text().replace("  - id: t001\n", "  - id: t001\n    id: t2\n", 1))
    before = tree_digest(root / "registry")
    result = cli("-w", root, "register", root / "drafts" / "music-library-pilot.yaml")
    assert result.code == 2
    assert f"corpus.yaml:{line_of(corpus, 'id: t2')}:" in result.stderr
    assert "tasks[0].id" in result.stderr and "duplicate key 'id'" in result.stderr
    assert tree_digest(root / "registry") == before
