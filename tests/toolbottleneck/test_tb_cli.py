"""``prereg study compile``: prints or writes the variants and their digests; a refused
family exits 2 naming the file and the field and writes nothing. The module is wired
into a typer app here as prereg/cli.py wires it (register(app))."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from prereg.commands import study_cmds
from prereg.core.errors import BadInput, IntegrityError, PreregError
from prereg.experiments.toolbottleneck.stored import load_variant
from tests.conftest import tree_digest
from tests.toolbottleneck.helpers import BUNDLED, as_yaml, family_doc

FAMILY = BUNDLED / "meeting-room-conflict.yaml"


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """The root of a test app (prereg/cli.py's own callback in production)."""

    study_cmds.register(app)
    capsys.readouterr()
    try:
        app(args=[str(a) for a in args], standalone_mode=False)
        code = 0
    except PreregError as exc:  # as prereg/cli.py's main maps it
        print(exc.render())
        code = exc.exit_code
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_prints_every_variant_with_its_digest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "study", "compile", FAMILY, "--json")
    assert code == 0
    document = json.loads(out)
    assert document["family"] == "meeting-room-conflict"
    assert len(document["variants"]) == 18
    assert all(v["digest"].startswith("sha256:") for v in document["variants"])
    again = json.loads(_run(capsys, "study", "compile", FAMILY, "--json")[1])
    assert [v["digest"] for v in again["variants"]] == [v["digest"] for v in document["variants"]]


def test_compile_writes_one_file_per_variant_and_an_index(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = _run(capsys, "study", "compile", FAMILY, "--out", tmp_path, "--json")
    assert code == 0
    summary = json.loads(out)
    folder = tmp_path / "meeting-room-conflict"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{Path(p).name}" for p in summary["written"]]
    )
    index = json.loads((folder / "index.json").read_text())
    for row in index["variants"]:
        code_name = row["id"].split("/", 1)[1]
        variant = json.loads((folder / f"{code_name}.json").read_text())
        assert variant["digest"] == row["digest"]
    human = _run(capsys, "study", "compile", FAMILY)
    assert human[0] == 0 and "meeting-room-conflict" in human[1]


def test_a_refused_family_exits_2_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = family_doc()
    doc["sizes"]["catalogs"] = [12, 48]
    doc["sizes"]["shortlist"] = 16
    bad = tmp_path / "bad.yaml"
    bad.write_text(as_yaml(doc))
    out = tmp_path / "out"
    before = tree_digest(tmp_path)
    code, text, _ = _run(capsys, "study", "compile", bad, "--out", out)
    assert code == 2
    assert str(bad) in text and "sizes.shortlist" in text and "test-escalation" in text
    assert tree_digest(tmp_path) == before and not out.exists()
    missing = _run(capsys, "study", "compile", tmp_path / "nope.yaml")
    assert missing[0] == 2 and "no such file" in missing[1]


def test_written_variants_load_verified_and_an_edit_is_an_integrity_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert _run(capsys, "study", "compile", FAMILY, "--out", tmp_path)[0] == 0
    folder = tmp_path / "meeting-room-conflict"
    files = sorted(p for p in folder.glob("*.json") if p.name != "index.json")
    assert len(files) == 18
    for path in files:
        variant = load_variant(path)
        assert variant.family == "meeting-room-conflict"
    edited = folder / "capacity.V8.Wlow.Draw.json"
    text = edited.read_text()
    assert '"attendees": 14' in text
    edited.write_text(text.replace('"attendees": 14', '"attendees": 15', 1))
    with pytest.raises(IntegrityError) as info:
        load_variant(edited)
    assert info.value.exit_code == 3 and "does not match" in info.value.message
    edited.write_text('{"format": "prereg-toolbottleneck-variants/1"}')
    with pytest.raises(BadInput) as bad:
        load_variant(edited)
    assert bad.value.exit_code == 2 and bad.value.field is not None


def test_out_never_mixes_two_compilations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert _run(capsys, "study", "compile", FAMILY, "--out", tmp_path)[0] == 0
    assert _run(capsys, "study", "compile", FAMILY, "--out", tmp_path)[0] == 0  # the same again
    before = tree_digest(tmp_path)
    code, text, _ = _run(capsys, "study", "compile", FAMILY, "--out", tmp_path, "--seed", "3")
    assert code == 2 and "another compilation" in text
    assert tree_digest(tmp_path) == before
