"""The experiment loader: bundled experiments load; bad files get precise errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from prereg.core.errors import BadInput
from prereg.experiments import load_experiment

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


def folder_reader(
    root: Path, overrides: dict[str, bytes] | None = None, missing: set[str] | None = None
) -> Callable[[str], bytes]:
    def read(rel: str) -> bytes:
        if missing and rel in missing:
            raise FileNotFoundError(rel)
        if overrides and rel in overrides:
            return overrides[rel]
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(rel)
        return path.read_bytes()

    return read


def patched(name: str, rel: str, old: str, new: str) -> Callable[[str], bytes]:
    root = BUNDLED / name
    text = (root / rel).read_text()
    assert old in text, f"fixture text {old!r} not in {rel}"
    return folder_reader(root, {rel: text.replace(old, new, 1).encode()})


def test_music_library_loads_with_its_contract() -> None:
    exp = load_experiment(folder_reader(BUNDLED / "music-library"), "music-library")
    assert exp.name == "music-library"
    assert exp.files[0] == "experiment.yaml"
    assert set(exp.files) == {
        "experiment.yaml",
        "service.yaml",
        "corpus.yaml",
        "surfaces/baseline.yaml",
        "surfaces/semantic.yaml",
    }
    assert exp.surface_ids == frozenset({"baseline", "semantic"})
    assert exp.split_names == ("dev", "validation", "test")
    tasks = [t for s in exp.split_names for t in exp.tasks_in_split(s)]
    assert sorted(t.id for t in tasks) == sorted(t.id for t in exp.tasks)
    # the minimum size for the bundled corpus
    assert len(exp.tasks) >= 48
    assert len({t.cluster for t in exp.tasks}) >= 30
    assert len({t.intent for t in exp.tasks}) >= 5
    assert any(t.polarity == "negative" for t in exp.tasks)
    assert any(t.prohibits for t in exp.tasks)


def test_every_file_is_read_through_the_reader() -> None:
    seen: list[str] = []
    base = folder_reader(BUNDLED / "music-library")

    def read(rel: str) -> bytes:
        seen.append(rel)
        return base(rel)

    exp = load_experiment(read, "music-library")
    assert set(seen) == set(exp.files)


def test_missing_referenced_file_names_the_file_and_field() -> None:
    read = folder_reader(BUNDLED / "music-library", missing={"corpus.yaml"})
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    err = info.value
    assert err.field == "corpus"
    assert err.file is not None and err.file.startswith("experiment.yaml:")
    assert "corpus.yaml" in err.message and "not found" in err.message


def test_missing_entry_file() -> None:
    with pytest.raises(BadInput, match="experiment.yaml"):
        load_experiment(folder_reader(BUNDLED / "nope"), "nope")


def test_name_must_match() -> None:
    with pytest.raises(BadInput) as info:
        load_experiment(folder_reader(BUNDLED / "music-library"), "music")
    assert info.value.field == "name"


def test_unknown_field_in_corpus_names_line_and_field() -> None:
    read = patched(
        "music-library",
        "corpus.yaml",
        "    cluster: c02\n    prompt: Find me",
        "    cluster: c02\n    promt: x\n    prompt: Find me",
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    err = info.value
    assert err.file is not None and err.file.startswith("corpus.yaml:")
    line = int(err.file.split(":")[1])
    text = read("corpus.yaml").decode().splitlines()
    assert text[line - 1].strip().startswith("promt:")
    assert err.field == "tasks[2].promt"
    assert "did you mean 'prompt'" in err.message


def test_task_naming_unknown_operation() -> None:
    read = patched(
        "music-library",
        "corpus.yaml",
        "permits: [list_playlists, get_playlist, rename_playlist]",
        "permits: [list_playlists, get_playlist, rename_playlst]",
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.field is not None and info.value.field.endswith(".permits[2]")
    assert "rename_playlst" in info.value.message


def test_tool_mapping_to_unknown_parameter() -> None:
    read = patched(
        "music-library",
        "surfaces/semantic.yaml",
        "args: {query: {arg: text}, genre: {arg: genre}}",
        "args: {query: {arg: text}, genere: {arg: genre}}",
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.file is not None and info.value.file.startswith("surfaces/semantic.yaml:")
    assert info.value.field == "tools[0].args.genere"


def test_invalid_json_schema_is_refused() -> None:
    read = patched(
        "music-library",
        "surfaces/baseline.yaml",
        "query: {type: string, description: Words to search for}",
        "query: {type: strin, description: Words to search for}",
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.field == "tools[0].input_schema"


def test_cluster_mixing_intents_is_refused() -> None:
    read = patched(
        "music-library",
        "corpus.yaml",
        "intent: track-details\n    cluster: c05",
        "intent: track-details\n    cluster: c01",
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.field is not None and info.value.field.endswith(".cluster")
    assert "mixes intent" in info.value.message


def test_destructive_operation_needs_confirmation() -> None:
    read = patched(
        "music-library",
        "service.yaml",
        "    destructive: true\n    confirmation: {param: confirm, equals_field: name}\n"
        "  delete_playlist:",
        "    destructive: true\n  delete_playlist:",
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.field == "operations.clear_playlist.confirmation"


def test_path_escaping_the_folder_is_refused() -> None:
    read = patched(
        "music-library", "experiment.yaml", "corpus: corpus.yaml", "corpus: ../other/corpus.yaml"
    )
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.field == "corpus"


def test_malformed_yaml_names_line() -> None:
    read = patched("music-library", "corpus.yaml", "  - id: t001", "  - id: [t001")
    with pytest.raises(BadInput) as info:
        load_experiment(read, "music-library")
    assert info.value.file is not None and info.value.file.startswith("corpus.yaml:")
    assert "malformed YAML" in info.value.message
