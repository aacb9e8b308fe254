"""Reading a family file: every problem is a BadInput (exit 2) naming the file, the line
and the field; hostile text never reaches the terminal raw."""

from __future__ import annotations

from pathlib import Path

import pytest

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.family import load_family
from tests.toolbottleneck.helpers import as_yaml, family_doc


def _refused(tmp_path: Path, text: str) -> BadInput:
    path = tmp_path / "fam.yaml"
    path.write_text(text)
    with pytest.raises(BadInput) as info:
        load_family(path)
    assert info.value.exit_code == 2
    assert str(path) in (info.value.file or "")
    return info.value


def test_a_misspelt_field_is_named_with_its_line_and_a_suggestion(tmp_path: Path) -> None:
    doc = family_doc()
    doc["fatcs"] = doc.pop("facts")
    err = _refused(tmp_path, as_yaml(doc))
    # the missing 'facts' comes first; the misspelling is listed with its line and a hint
    assert err.field == "facts" and "required" in err.message
    assert any("fatcs: unknown field 'fatcs' (did you mean 'facts'?)" in d for d in err.details)
    assert any(d.startswith(f"{tmp_path / 'fam.yaml'}:") and "fatcs" in d for d in err.details)


def test_a_duplicate_key_and_a_non_string_value_type_are_refused(tmp_path: Path) -> None:
    text = as_yaml(family_doc())
    assert "decision: escalate" in text
    assert "duplicate" in _refused(tmp_path, text + "decision: hold\n").message.lower()
    err = _refused(tmp_path, text.replace("decision: escalate", "decision: 12"))
    assert err.field == "decision"


def test_control_characters_are_escaped_in_the_error(tmp_path: Path) -> None:
    doc = family_doc()
    doc["facts"]["status\x1b[31m"] = {"value": "x"}
    err = _refused(tmp_path, as_yaml(doc))
    assert "\x1b" not in err.render()


def test_missing_files_and_folders_are_bad_input(tmp_path: Path) -> None:
    for path, reason in ((tmp_path / "nope.yaml", "no such file"), (tmp_path, "folder")):
        with pytest.raises(BadInput) as info:
            load_family(path)
        assert reason in info.value.message and info.value.exit_code == 2
