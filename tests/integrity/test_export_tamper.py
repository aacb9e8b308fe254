"""Export tamperings (issue 12, items 2 and 4): ``import`` refuses them, exit 3, nothing written.

Before, import checked only the digest: an export with edited outcomes imported into any
workspace holding the registration and flipped the verdict; re-importing an edited file
said "skipped 168"; records of units never planned, or of another driver or evidence
class, imported with exit 0 and then made ``analyse`` fail for ever (the store is
append-only). Each test edits an export of the fully run pilot (JSON Lines and CSV where
the format matters), imports it into a copy of a workspace that holds the same
registration (fresh: never run; or the workspace the export came from) and asserts the
exit code and that runs/ and registry/ are byte for byte unchanged. Where the edit must
get past the chain check to test what comes after it, the attacker recomputes the chain
with prereg.runners.store.chain (tamper_tools.forge_records).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.record import RunRecord
from tests.conftest import tree_digest
from tests.integrity.tamper_tools import (
    OTHER_ID,
    PILOT_ID,
    attacker,
    copy_workspace,
    digest_of,
    edited,
    flip_outcome,
    forge_records,
    prereg,
    read_csv,
    read_jsonl,
    rewrite,
    stored,
    write_csv,
    write_jsonl,
)

FORMATS = ["jsonl", "csv"]
READ = {"jsonl": read_jsonl, "csv": read_csv}
WRITE = {"jsonl": write_jsonl, "csv": write_csv}


@pytest.fixture(scope="module")
def exports(ran_template: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pilot's 168 records exported once, as JSON Lines and as CSV."""
    folder = tmp_path_factory.mktemp("exports")
    out = {}
    for fmt in FORMATS:
        path = folder / f"pilot.{fmt}"
        assert prereg("-w", ran_template, "export", PILOT_ID, "--out", path, "-f", fmt)[0] == 0
        out[fmt] = path
    return out


@pytest.fixture
def fresh(registered_template: Path, tmp_path: Path) -> Path:
    """A workspace holding the pilot's registration and no runs."""
    return copy_workspace(registered_template, tmp_path / "fresh")


@pytest.fixture
def same(ran_template: Path, tmp_path: Path) -> Path:
    """A copy of the workspace the export came from (the 168 records stored)."""
    return copy_workspace(ran_template, tmp_path / "same")


def tampered(
    exports: dict[str, Path],
    fmt: str,
    where: Path,
    change: Callable[[list[RunRecord]], Sequence[RunRecord]],
) -> Path:
    """The export of ``fmt`` read, changed and written to ``where`` in the same format."""
    records = READ[fmt](exports[fmt])
    return WRITE[fmt](where / f"tampered.{fmt}", list(change(records)))


def snapshot(ws: Path) -> tuple[dict[str, str], dict[str, str]]:
    return tree_digest(ws / "runs"), tree_digest(ws / "registry")


def refused(cli: Any, ws: Path, path: Path, *needles: str) -> dict[str, Any]:
    """``import`` exits 3 naming ``needles``, and runs/ and registry/ are unchanged."""
    before = snapshot(ws)
    result = cli("-w", ws, "import", path, "--json")
    assert result.code == 3, result.stdout
    error: dict[str, Any] = json.loads(result.stdout)
    assert error["error"] == "IntegrityError"
    assert "nothing was imported" in error["message"]
    text = "\n".join([error["message"], *error["details"]])
    for needle in needles:
        assert needle in text, (needle, error)
    assert snapshot(ws) == before
    return error


def flip_semantic_failures(records: list[RunRecord]) -> list[RunRecord]:
    """The verdict-flipping edit: every failure of the favoured arm made a success."""
    out = [flip_outcome(r) if r.arm == "semantic" and r.success is False else r for r in records]
    assert out != records
    return out


# ---- an intact export ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_intact_export_round_trips(
    exports: dict[str, Path], fresh: Path, same: Path, cli: Any, fmt: str, tmp_path: Path
) -> None:
    imported = cli("-w", fresh, "import", exports[fmt], "--json")
    assert imported.code == 0, imported.stdout
    assert imported.json()["imported"] == 168  # type: ignore[index]
    again = tmp_path / f"again.{fmt}"
    assert cli("-w", fresh, "export", PILOT_ID, "--out", again, "-f", fmt).code == 0
    assert again.read_bytes() == exports[fmt].read_bytes()
    checked = cli("-w", fresh, "verify", "--json")
    assert checked.code == 0, checked.stdout
    original = cli("-w", same, "verify", "--json")
    digest = digest_of(same)
    chains = [r.json()["runs"]["chains"][digest] for r in (checked, original)]  # type: ignore[index]
    assert chains[0] == chains[1]
    # into the workspace it came from: every link already stored, nothing written
    before = snapshot(same)
    reimported = cli("-w", same, "import", exports[fmt], "--json")
    assert reimported.code == 0, reimported.stdout
    assert (reimported.json()["imported"], reimported.json()["already_stored"]) == (0, 168)  # type: ignore[index]
    assert snapshot(same) == before
    if fmt == "jsonl":
        analysed = cli("-w", fresh, "analyse", PILOT_ID, "--json")
        assert analysed.code == 0, analysed.stdout


# ---- edited outcomes -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_edited_outcomes_into_a_fresh_workspace(
    exports: dict[str, Path], fresh: Path, cli: Any, fmt: str, tmp_path: Path
) -> None:
    path = tampered(exports, fmt, tmp_path, flip_semantic_failures)
    refused(cli, fresh, path, "do not form an intact chain", "does not match its hash")
    assert not (fresh / "runs" / "runs.sqlite").exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_edited_outcomes_into_the_same_workspace(
    exports: dict[str, Path], same: Path, cli: Any, fmt: str, tmp_path: Path
) -> None:
    path = tampered(exports, fmt, tmp_path, flip_semantic_failures)
    refused(cli, same, path, "do not form an intact chain")


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_edited_and_rechained_export_reimported_names_the_differing_records(
    exports: dict[str, Path], same: Path, cli: Any, fmt: str, tmp_path: Path
) -> None:
    """The chain recomputed, so it is intact: the stored records are what differ (was
    "skipped 168")."""
    victim: list[str] = []

    def change(records: list[RunRecord]) -> list[RunRecord]:
        at = 100
        victim.append(records[at].record_id)
        records[at] = flip_outcome(records[at])
        return forge_records(records, records[0].registration_digest)

    path = tampered(exports, fmt, tmp_path, change)
    error = refused(cli, same, path, "differ from the records stored here", victim[0])
    assert error["details"][0].startswith("link 100: record ")
    assert any("more" in d for d in error["details"])  # links 100..167 all differ


# ---- removed records -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("at", [0, 80])
def test_a_removed_record(
    exports: dict[str, Path], fresh: Path, cli: Any, fmt: str, at: int, tmp_path: Path
) -> None:
    def change(records: list[RunRecord]) -> list[RunRecord]:
        del records[at]
        return records

    refused(cli, fresh, tampered(exports, fmt, tmp_path, change), "removed")


def test_a_truncated_export_is_an_intact_prefix_that_cannot_be_analysed(
    exports: dict[str, Path], fresh: Path, cli: Any, tmp_path: Path
) -> None:
    """The limit of a chain without an anchor: an export cut at its tail is a shorter,
    intact chain. Import takes it (nothing in the file pins the length); the plan does
    pin it, so the analysis refuses an incomplete run set (exit 4) and, with
    --allow-incomplete, gives no verdict."""
    path = tampered(exports, "jsonl", tmp_path, lambda records: records[:100])
    imported = cli("-w", fresh, "import", path, "--json")
    assert imported.code == 0, imported.stdout
    assert cli("-w", fresh, "analyse", PILOT_ID, "--json").code == 4


# ---- records the registration never planned, or of another driver ---------------------

UNPLANNED: dict[str, tuple[dict[str, Any], str]] = {
    "task": ({"task_id": "no-such-task"}, "not a unit 'music-library-pilot' plans"),
    "repeat": ({"repeat": 7}, "not a unit 'music-library-pilot' plans"),
    "arm": ({"arm": "no-such-arm"}, "not a unit 'music-library-pilot' plans"),
    "split": ({"split": "validation"}, "split validation, the registration's is dev"),
    "replay": (
        {
            "driver": "replay",
            "evidence_class": "replay",
            "latency_ms": None,
            "cost_usd": None,
            "retries": None,
            "tokens": {},
        },
        "driver replay (replay); arm",
    ),
    "api": (
        {"driver": "openai", "evidence_class": "api"},
        "driver openai (api); arm",
    ),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("what", sorted(UNPLANNED))
def test_records_the_registration_does_not_plan(
    exports: dict[str, Path], fresh: Path, cli: Any, fmt: str, what: str, tmp_path: Path
) -> None:
    """An edited record with the chain recomputed, so only the plan check can catch it."""
    change, needle = UNPLANNED[what]

    def rewrite_records(records: list[RunRecord]) -> list[RunRecord]:
        records[5] = edited(records[5], **change)
        return forge_records(records, records[0].registration_digest)

    error = refused(
        cli, fresh, tampered(exports, fmt, tmp_path, rewrite_records), "are not runs", needle
    )
    assert "intact chain" not in error["message"]


@pytest.mark.parametrize(
    ("where", "clash"), [("fresh", "unit"), ("same", "unit"), ("fresh", "record_id")]
)
def test_a_second_record_for_a_unit_or_a_record_id(
    exports: dict[str, Path],
    fresh: Path,
    same: Path,
    cli: Any,
    where: str,
    clash: str,
    tmp_path: Path,
) -> None:
    """A chain recomputed around a second ok record for a failed unit (its verdict
    reversed, appended as the last link), or around a record id used twice. The store's
    unique indexes would refuse such a record half-way through the import (a traceback,
    the links before it written); the import refuses it first, writing nothing."""
    ws = fresh if where == "fresh" else same

    def change(records: list[RunRecord]) -> list[RunRecord]:
        if clash == "unit":
            failed = next(r for r in records if r.success is False)
            twin = edited(flip_outcome(failed), record_id=failed.record_id[:-4] + "beef")
            records.append(twin)
        else:
            records[5] = edited(records[5], record_id=records[6].record_id)
        return forge_records(records, records[0].registration_digest)

    path = tampered(exports, "jsonl", tmp_path, change)
    refused(cli, ws, path, "more than one ok record" if clash == "unit" else "record id")


def test_an_intact_export_onto_a_tampered_store(
    exports: dict[str, Path], same: Path, cli: Any
) -> None:
    """Import reads the stored chain it extends: a tampered one is refused, not extended."""
    digest = digest_of(same)
    with attacker(same, "TRIGGER records_no_update") as conn:
        seq, record = stored(conn, digest)[40]
        rewrite(conn, seq, flip_outcome(record))
    refused(cli, same, exports["jsonl"], "verification")


def test_records_of_a_registration_this_workspace_does_not_hold(
    exports: dict[str, Path], ran_template: Path, fresh: Path, cli: Any, tmp_path: Path
) -> None:
    out = tmp_path / "other.jsonl"
    assert cli("-w", ran_template, "export", OTHER_ID, "--out", out).code == 0
    refused(cli, fresh, out, "not registered here")


@pytest.mark.parametrize("ragged", ["a missing field", "a renamed column and an extra field"])
def test_a_ragged_csv_is_bad_input(
    exports: dict[str, Path], fresh: Path, cli: Any, ragged: str, tmp_path: Path
) -> None:
    with open(exports["csv"], newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if ragged == "a missing field":
        rows[1] = rows[1][:-1]
    else:
        rows[0][3] = "renamed"
        rows[1].append("extra")
    path = tmp_path / "ragged.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    before = snapshot(fresh)
    result = cli("-w", fresh, "import", path, "--json")
    assert result.code == 2, result.stdout
    assert snapshot(fresh) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_number_edited_to_overflow_to_infinity(
    exports: dict[str, Path], fresh: Path, cli: Any, fmt: str, tmp_path: Path
) -> None:
    """One byte, a digit of a latency made an 'e' (2.7922... -> 2.7e22...), reads as
    infinity, which canonical JSON cannot hold: the chain check met it with a traceback."""
    path = tmp_path / f"inf.{fmt}"
    if fmt == "jsonl":
        content = bytearray(exports[fmt].read_bytes())
        # the second digit after the point (a latency of 10 ms or more has two before it)
        at = content.index(b".", content.index(b'"latency_ms":')) + 2
        content[at] = ord("e")
        path.write_bytes(bytes(content))
    else:
        with open(exports[fmt], newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        column = rows[0].index("latency_ms")
        value = rows[1][column]
        at = value.index(".") + 2
        rows[1][column] = value[:at] + "e" + value[at + 1 :]
        with open(path, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(rows)
    assert READ[fmt](path)[0].latency_ms == float("inf")
    refused(cli, fresh, path, "cannot be canonicalised")
