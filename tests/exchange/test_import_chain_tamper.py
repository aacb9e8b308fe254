"""A cell edited after export is tampering: exit 3, whatever the edit leaves (issue 43, item 6).

The chain check runs before row validation on import: an export of each format (JSON Lines,
CSV, Parquet) has one cell edited, by the formats' own libraries (``json``, ``csv``,
pyarrow), so that the record no longer hashes to its chain link. ``prereg import`` exits
3 (IntegrityError) naming the file and the row, writes nothing, whether the edited record
would still validate or not (a failure turned into a success with its terminal flag left
set is a record the model refuses: before this change that edit exited 2, bad input).
A file that does not read as rows (not JSON, a missing column, not Parquet) is still bad
input, exit 2.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tree_digest
from tests.exchange.conftest import REG_ID, prereg

pq = pytest.importorskip("pyarrow.parquet", reason="needs prereg-agents[parquet] (dev extra)")

FORMATS = ["jsonl", "csv", "parquet"]


@pytest.fixture(scope="module")
def exports(ran: Path) -> dict[str, Path]:
    out = {}
    for fmt in FORMATS:
        path = ran.parent / f"chain-tamper-export.{fmt}"
        code, text = prereg("-w", ran, "export", REG_ID, "--out", path, "-f", fmt, "--force")
        assert code == 0, text
        out[fmt] = path
    return out


@pytest.fixture
def registered_only(tmp_path: Path, ran: Path) -> Path:
    """A workspace holding the same registration (same digest) and no runs."""
    root = tmp_path / "fresh"
    assert prereg("init", root)[0] == 0
    assert prereg("-w", root, "register", ran / "drafts" / "completed.yaml")[0] == 0
    return root


# -- one cell edited, in each format, with that format's own library ------------------------


def _edit_jsonl(source: Path, target: Path, edit: Callable[[dict[str, Any]], None]) -> int:
    """Edit the first record ``edit`` changes; returns its line number (from 1)."""
    lines = source.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        record = json.loads(line)
        before = json.dumps(record, sort_keys=True)
        edit(record)
        if json.dumps(record, sort_keys=True) != before:
            lines[number - 1] = json.dumps(record, ensure_ascii=False)
            target.write_text("\n".join(lines) + "\n", encoding="utf-8")
            return number
    raise AssertionError("no record to edit")


def _edit_csv(source: Path, target: Path, edit: Callable[[dict[str, Any]], None]) -> int:
    """As :func:`_edit_jsonl`, on CSV cells; returns the line the edited row ends on."""
    with source.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fieldnames = list(reader.fieldnames or [])
        rows = list(reader)
    for i, row in enumerate(rows):
        before = dict(row)
        edit(row)
        if row != before:
            buffer = io.StringIO(newline="")
            writer = csv.DictWriter(buffer, fieldnames=fieldnames)
            writer.writeheader()
            writer.writerows(rows)
            target.write_bytes(buffer.getvalue().encode("utf-8"))
            return _line_of_row(target, i)
    raise AssertionError("no row to edit")


def _edit_parquet(source: Path, target: Path, edit: Callable[[dict[str, Any]], None]) -> int:
    """As :func:`_edit_jsonl`, on a Parquet row (the schema kept); returns its row number."""
    table = pq.read_table(source)
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        before = dict(row)
        edit(row)
        if row != before:
            pq.write_table(type(table).from_pylist(rows, schema=table.schema), target)
            return i + 1
    raise AssertionError("no row to edit")


def _line_of_row(path: Path, index: int) -> int:
    """The line CSV row ``index`` (from 0, after the header) ends on, as the csv module
    counts (a quoted cell may span lines)."""
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        next(reader)
        for i, _ in enumerate(reader):
            if i == index:
                return reader.line_num
    raise AssertionError(f"no row {index}")


EDIT = {"jsonl": _edit_jsonl, "csv": _edit_csv, "parquet": _edit_parquet}


def _failure_made_success(fmt: str) -> Callable[[dict[str, Any]], None]:
    """A failed episode marked a success, its terminal flag left: a record that does not
    validate (a success has no terminal flag)."""
    false: Any = "false" if fmt == "csv" else False
    true: Any = "true" if fmt == "csv" else True

    def edit(record: dict[str, Any]) -> None:
        if record["success"] == false:
            record["success"] = true

    return edit


def _intent_renamed(record: dict[str, Any]) -> None:
    """A text cell changed: a record that still validates."""
    record["intent"] = record["intent"] + "-edited"


def _import(ws: Path, path: Path) -> tuple[int, dict[str, Any]]:
    """``prereg import PATH --json``: its exit code and JSON; a refusal writes nothing."""
    before = tree_digest(ws / "runs"), tree_digest(ws / "registry")
    code, out = prereg("-w", ws, "import", path, "--json")
    if code != 0:
        assert (tree_digest(ws / "runs"), tree_digest(ws / "registry")) == before
    return code, json.loads(out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_edit_that_leaves_an_invalid_record_exits_3_naming_the_row(
    fmt: str, exports: dict[str, Path], registered_only: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"edited.{fmt}"
    row = EDIT[fmt](exports[fmt], path, _failure_made_success(fmt))
    code, error = _import(registered_only, path)
    assert code == 3, error
    assert error["error"] == "IntegrityError"
    assert error["file"] == f"{path}:{row}"
    assert "nothing was imported" in error["message"]
    assert any(
        d.startswith(f"row {row}:") and "does not match its hash" in d for d in error["details"]
    )


def _link_key_renamed(fmt: str) -> Callable[[dict[str, Any]], None]:
    """The chain link's ``index`` key renamed (a flipped bit found by the tamper property
    test: 'index' -> 'hndex')."""

    def edit(record: dict[str, Any]) -> None:
        if fmt == "csv":
            link = json.loads(record["chain"])
            link["hndex"] = link.pop("index")
            record["chain"] = json.dumps(link)
        elif fmt == "jsonl":
            record["chain"]["hndex"] = record["chain"].pop("index")

    return edit


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_edited_chain_link_exits_3_naming_the_row(
    fmt: str, exports: dict[str, Path], registered_only: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"link.{fmt}"
    row = EDIT[fmt](exports[fmt], path, _link_key_renamed(fmt))
    code, error = _import(registered_only, path)
    assert code == 3, error
    assert error["file"] == f"{path}:{row}"
    assert any("chain link is not one prereg writes" in d for d in error["details"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_edit_that_leaves_a_valid_record_exits_3_naming_the_row(
    fmt: str, exports: dict[str, Path], registered_only: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"renamed.{fmt}"
    row = EDIT[fmt](exports[fmt], path, _intent_renamed)
    code, error = _import(registered_only, path)
    assert code == 3, error
    assert error["file"] == f"{path}:{row}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_intact_export_still_imports(
    fmt: str, exports: dict[str, Path], registered_only: Path
) -> None:
    code, summary = _import(registered_only, exports[fmt])
    assert code == 0, summary
    assert summary["imported"] == 100


def test_a_line_that_is_not_json_is_still_bad_input(
    exports: dict[str, Path], registered_only: Path, tmp_path: Path
) -> None:
    lines = exports["jsonl"].read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4][:-1]  # the closing brace cut off
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, error = _import(registered_only, path)
    assert code == 2, error
    assert error["file"] == f"{path}:5"


def test_a_missing_column_is_still_bad_input(
    exports: dict[str, Path], registered_only: Path, tmp_path: Path
) -> None:
    table = pq.read_table(exports["parquet"]).drop_columns(["registration_digest"])
    path = tmp_path / "short.parquet"
    pq.write_table(table, path)
    code, error = _import(registered_only, path)
    assert code == 2, error
    assert "registration_digest" in error["message"]


def test_a_file_that_is_not_parquet_is_still_bad_input(
    registered_only: Path, tmp_path: Path
) -> None:
    path = tmp_path / "not.parquet"
    path.write_bytes(b"PAR1 this is not a Parquet file")
    code, error = _import(registered_only, path)
    assert code == 2, error
