"""``prereg study new-family`` (issue 42, item 5): a scaffold from a short description
compiles and lints as written, says what to fill in, never overwrites a file (exit 2)
and refuses a bad description naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml

from prereg.commands import study_cmds
from prereg.core.errors import BadInput, PreregError
from prereg.experiments.toolbottleneck.authoring import scaffold
from prereg.experiments.toolbottleneck.compile import compile_family
from prereg.experiments.toolbottleneck.family import load_family, parse_family
from prereg.experiments.toolbottleneck.lint import lint_family
from tests.conftest import tree_digest


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """The root of a test app (prereg/cli.py's own callback in production)."""

    study_cmds.register(app)
    capsys.readouterr()
    try:
        app(args=[str(a) for a in args], standalone_mode=False)
        code = 0
    except PreregError as exc:
        print(exc.render())
        code = exc.exit_code
    return code, capsys.readouterr().out


@pytest.mark.parametrize("act", [False, True])
def test_a_scaffold_compiles_and_lints_clean_as_written(act: bool) -> None:
    made = scaffold(
        "vendor-onboarding",
        "vendor-check",
        "accounting",
        ["vendor", "tax-form", "bank-account"],
        ["act"] if act else [],
    )
    doc = yaml.safe_load(made.text)
    # what the description asked for, read from the YAML itself
    assert doc["id"] == "vendor-onboarding"
    assert (doc["intent"], doc["domain"]) == ("vendor-check", "accounting")
    assert doc["sources"] == ["vendor", "tax-form", "bank-account"]
    kinds = {(t["kind"], t["operation"]) for t in doc["tools"]}
    want = {(k, op) for k in doc["sources"] for op in ("search", "read")}
    assert kinds == (want | {("vendor", "act")} if act else want)
    assert ("action" in doc) is act
    # the seed's 2, 4, 6 reads: 1, 2, 3 records
    assert [len(doc["layouts"][lv]) for lv in ("low", "medium", "high")] == [1, 2, 3]
    assert "TODO" in made.text and "{ref}" in doc["request"] and "{route}" in doc["request"]
    family = parse_family(made.text, "s.yaml")
    compiled = compile_family(family)
    minima = {v.cell.code: v.component("workflow")["certified_minimum"] for v in compiled.variants}
    extra = 1 if act else 0
    assert minima["capacity.V8.Wlow.Draw"] == 2 + extra
    assert minima["capacity.V8.Whigh.Draw"] == 6 + extra
    assert minima["frontier.H14"] == 30
    assert lint_family(family, "s.yaml") == []


def test_the_command_writes_the_file_once_and_never_overwrites(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["study", "new-family", "desk-move", "--intent", "desk-check", "--domain", "calendar"]
    code, out = _run(capsys, *args, "--records", "desk,floor,team", "--out", tmp_path, "--json")
    assert code == 0
    summary = json.loads(out)
    target = tmp_path / "desk-move.yaml"
    assert summary["written"] == str(target) and summary["operations"] == ["search", "read"]
    assert summary["records"] == ["desk", "floor", "team"]
    assert target.read_text() == summary["yaml"]
    assert load_family(target).id == "desk-move"
    before = tree_digest(tmp_path)
    code, out = _run(capsys, *args, "--out", target)
    assert code == 2 and str(target) in out and "--out" in out and "overwrite" in out
    code, out = _run(capsys, *args, "--out", tmp_path)
    assert code == 2 and "desk-move.yaml" in out
    assert tree_digest(tmp_path) == before
    code, out = _run(capsys, *args, "--out", tmp_path / "missing" / "x.yaml")
    assert code == 2 and "does not exist" in out


def test_without_out_the_yaml_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(
        capsys, "study", "new-family", "a-b", "--intent", "i", "--domain", "d", "--operation", "act"
    )
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc["id"] == "a-b" and doc["action"]["tool"] == "set_primary_record_state"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["Bad_Name", "--intent", "i", "--domain", "d"], "NAME"),
        (["ok", "--intent", "I!", "--domain", "d"], "--intent"),
        (["ok", "--intent", "i", "--domain", "d d"], "--domain"),
        (["ok", "--intent", "i", "--domain", "d", "--records", "a,b"], "--records"),
        (["ok", "--intent", "i", "--domain", "d", "--records", "a,a,b"], "--records"),
        (["ok", "--intent", "i", "--domain", "d", "--operation", "delete"], "--operation"),
    ],
)
def test_a_bad_description_exits_2_naming_the_option(
    capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    code, out = _run(capsys, "study", "new-family", *args)
    assert code == 2 and out.startswith(f"{field}: ")
    with pytest.raises(BadInput):
        scaffold("x", "i", "d", ["a"], [])
