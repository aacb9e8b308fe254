"""``--format parquet`` and ``--out -`` (issue 16, item 4), against the JSON Lines export.

The Parquet file is read with pyarrow directly (not prereg's reader) and compared with the
JSON Lines export of the same store; then imported into a workspace that holds only the
registration, whose own JSON Lines export must be byte for byte the original's.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.runners.exchange.export import export_parquet
from tests.conftest import tree_digest
from tests.exchange.conftest import REG_ID, prereg

pq = pytest.importorskip("pyarrow.parquet", reason="needs prereg-agents[parquet] (dev extra)")


@pytest.fixture(scope="module")
def parquet_file(ran: Path) -> Path:
    out = ran.parent / "export.parquet"
    code, text = prereg("-w", ran, "export", REG_ID, "--out", out, "--format", "parquet")
    assert code == 0, text
    return out


def test_the_parquet_table_holds_the_jsonl_records(
    parquet_file: Path, jsonl_export: list[dict[str, Any]]
) -> None:
    table = pq.read_table(parquet_file)
    assert table.num_rows == len(jsonl_export) == 100
    rows = table.to_pylist()
    assert [r["record_id"] for r in rows] == [r["record_id"] for r in jsonl_export]
    for row, record in zip(rows, jsonl_export, strict=True):
        assert row["success"] is record["success"]  # a boolean column, not text
        assert row["completed"] is record["funnel"]["completed"]
        assert row["tokens_input"] == record["tokens"]["input"]
        assert row["repeat"] == record["repeat"]
        assert row["cost_usd"] == record["cost_usd"]  # null stays null (local host)
        assert row["registration_digest"] == record["registration_digest"]
    assert str(table.schema.field("success").type) == "bool"
    assert str(table.schema.field("repeat").type) == "int64"


@pytest.fixture
def registered_only(tmp_path: Path, ran: Path) -> Path:
    """A workspace holding the same registration (same digest) and no runs."""
    root = tmp_path / "fresh"
    assert prereg("init", root)[0] == 0
    assert prereg("-w", root, "register", ran / "drafts" / "completed.yaml")[0] == 0
    return root


def test_a_parquet_export_imports_back_to_the_same_records(
    parquet_file: Path, registered_only: Path, ran: Path, jsonl_export: list[dict[str, Any]]
) -> None:
    code, text = prereg("-w", registered_only, "import", parquet_file, "--json")
    assert code == 0, text
    again = registered_only.parent / "again.jsonl"
    assert prereg("-w", registered_only, "export", REG_ID, "--out", again)[0] == 0
    assert again.read_bytes() == (ran.parent / "export.jsonl").read_bytes()


def test_an_edited_parquet_export_is_refused(
    parquet_file: Path, registered_only: Path, tmp_path: Path
) -> None:
    table = pq.read_table(parquet_file)
    rows = table.to_pylist()
    flipped = next(i for i, r in enumerate(rows) if r["success"] is False)
    rows[flipped]["success"] = True
    rows[flipped]["terminal_flag"] = None
    rows[flipped]["first_unmet_obligation"] = None
    edited = tmp_path / "edited.parquet"
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), edited)
    before = tree_digest(registered_only / "runs")
    code, _ = prereg("-w", registered_only, "import", edited)
    assert code == 3
    assert tree_digest(registered_only / "runs") == before


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_out_dash_writes_the_file_bytes_to_standard_output(ran: Path, fmt: str) -> None:
    """Through a real pipe, as a shell would run it."""
    to_file = ran.parent / f"dash.{fmt}"
    assert prereg("-w", ran, "export", REG_ID, "--out", to_file, "-f", fmt, "--force")[0] == 0
    done = subprocess.run(
        [sys.executable, "-m", "prereg", "-w", str(ran), "export", REG_ID, "-f", fmt]
        + ["--out", "-"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == to_file.read_bytes()
    assert b"wrote 100 record(s)" in done.stderr  # the summary goes to stderr
    assert not (Path.cwd() / "-").exists()


def test_parquet_to_a_terminal_is_refused(ran: Path) -> None:
    class Terminal(io.BytesIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    with pytest.raises(BadInput, match="not to a terminal") as caught:
        export_parquet(Workspace(ran), REG_ID, "-", stdout=stream)
    assert caught.value.exit_code == 2 and stream.getvalue() == b""


def test_without_pyarrow_the_extra_is_named(
    ran: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    out = tmp_path / "x.parquet"
    result = cli("-w", ran, "export", REG_ID, "--out", out, "--format", "parquet")
    assert result.code == 2 and "prereg-agents[parquet]" in result.stderr
    assert not out.exists()


def test_the_jsonl_reference_itself_is_whole(jsonl_export: list[dict[str, Any]]) -> None:
    """The reference: one record per run unit, in chain order."""
    assert [r["chain"]["index"] for r in jsonl_export] == list(range(len(jsonl_export)))
    assert len({(r["arm"], r["task_id"], r["repeat"]) for r in jsonl_export}) == 100
