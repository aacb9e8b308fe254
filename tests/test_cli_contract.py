"""The CLI contract across commands: ``--json`` prints exactly one JSON document.

Each command module tests its own output in depth; this checks the contract that
DESIGN.md sets for all of them at once, so a new command cannot quietly break it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PILOT = "drafts/music-library-pilot.yaml"


def _one_document(stdout: str) -> object:
    decoder = json.JSONDecoder()
    text = stdout.strip()
    value, end = decoder.raw_decode(text)
    assert text[end:].strip() == "", f"more than one JSON document: {text[end:][:80]!r}"
    return value


def test_every_reporting_command_prints_one_json_document(ws: Path, cli, tmp_path: Path) -> None:
    second = ws / "drafts" / "pilot-b.yaml"
    second.write_text(
        (ws / PILOT)
        .read_text()
        .replace("id: music-library-pilot", "id: pilot-b")
        .replace("seed: 7", "seed: 8")
    )
    export = tmp_path / "runs.jsonl"
    commands = [
        ["init", ws],
        ["register", ws / PILOT],
        ["register", second],
        ["verify"],
        ["list"],
        ["show", "music-library-pilot"],
        ["split", "show", "music-library"],
        ["run", "music-library-pilot", "--no-progress"],
        ["run", "pilot-b", "--no-progress"],
        ["export", "music-library-pilot", "--format", "jsonl", "--out", export],
        ["import", export],
        ["analyse", "music-library-pilot"],
        ["compare", "music-library-pilot", "pilot-b"],
        ["plan", "--sigma-d", "0.28", "--prompts", "58", "--sims", "0"],
        ["study", "compile", ws / "experiments/toolbottleneck/families/meeting-room-conflict.yaml"],
    ]
    for args in commands:
        result = cli("-w", ws, *args, "--json")
        assert result.code == 0, (args, result.stderr)
        document = _one_document(result.stdout)
        assert isinstance(document, dict), args


@pytest.mark.parametrize(
    "args",
    [
        ["show", "no-such-registration"],
        ["register", "drafts/absent.yaml"],
        ["analyse", "no-such-registration"],
        ["run", "no-such-registration"],
        ["plan", "--sigma-d", "-1", "--prompts", "10"],
    ],
)
def test_errors_under_json_are_one_document_with_the_exit_code(
    ws: Path, cli, args: list[str]
) -> None:
    result = cli("-w", ws, *args, "--json")
    assert result.code == 2, (args, result.stdout, result.stderr)
    document = _one_document(result.stdout)
    assert isinstance(document, dict) and document["exit_code"] == 2
    assert result.stderr.strip(), "a person reading stderr gets the message too"
