"""Authored tool schemas: a key that is not a JSON Schema keyword fails loading."""

from __future__ import annotations

from pathlib import Path

import pytest

from prereg.core.errors import BadInput
from prereg.experiments import load_experiment
from prereg.experiments.schema_lint import unknown_keywords

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "music-library"


def _reader(overrides: dict[str, bytes]):
    def read(rel: str) -> bytes:
        if rel in overrides:
            return overrides[rel]
        path = BUNDLED / rel
        if not path.is_file():
            raise FileNotFoundError(rel)
        return path.read_bytes()

    return read


def test_flow_mapping_split_at_a_comma_is_caught() -> None:
    surface = (BUNDLED / "surfaces" / "semantic.yaml").read_text()
    quoted = 'description: "Song title, artist, album or genre words"'
    assert quoted in surface
    broken = surface.replace(quoted, "description: Song title, artist, album or genre words")
    with pytest.raises(BadInput) as info:
        load_experiment(_reader({"surfaces/semantic.yaml": broken.encode()}), "music-library")
    message = info.value.render()
    assert "surfaces/semantic.yaml:" in message
    assert "'artist' is not a JSON Schema keyword" in message
    assert "input_schema.properties.text.artist" in message


def test_unknown_keywords_walks_nested_schemas() -> None:
    schema = {
        "type": "object",
        "x-vendor": 1,
        "properties": {
            "a": {"type": "array", "items": {"type": "string", "colour": 1}},
            "b": {"anyOf": [{"type": "string"}, {"typo": True}]},
        },
        "$defs": {"d": {"maximun": 3}},
    }
    found = sorted(unknown_keywords(schema), key=str)
    assert found == sorted(
        [
            (("properties", "a", "items"), "colour"),
            (("properties", "b", "anyOf", 1), "typo"),
            (("$defs", "d"), "maximun"),
        ],
        key=str,
    )


def test_bundled_surfaces_are_clean() -> None:
    experiment = load_experiment(_reader({}), "music-library")
    for surface in experiment.surfaces.values():
        for tool in surface.tools:
            assert list(unknown_keywords(tool.input_schema)) == [], tool.name
