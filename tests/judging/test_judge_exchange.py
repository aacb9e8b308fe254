"""Verdicts and gold labels travel with the runs: ``judge --export`` / ``judge --import``,
chains verified, nothing written on a refusal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import tree_digest
from tests.judging.gold_helpers import gold_count, stored_verdicts
from tests.judging.helpers import local_judges, registration, write


def test_verdicts_and_gold_round_trip_and_tampered_exports_are_refused(
    cli, ws: Path, tmp_path: Path
) -> None:
    path = write(ws, registration("judged", judge=local_judges(), repeats=2))
    assert cli("-w", ws, "register", path).code == 0
    fresh = tmp_path / "fresh"
    shutil.copytree(ws, fresh)  # the same registration, no runs yet
    assert cli("-w", ws, "run", "judged", "--no-progress").code == 0
    assert cli("-w", ws, "judge", "judged").code == 0
    runs = [str(v["record_id"]) for v in stored_verdicts(ws)]
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        "".join(
            json.dumps({"run_id": rid, "label": i % 2 == 0, "annotator": "ann1"}) + "\n"
            for i, rid in enumerate(runs[:3])
        )
    )
    assert cli("-w", ws, "judge", "judged", "--gold", gold).code == 0
    runs_file, items = tmp_path / "runs.jsonl", tmp_path / "verdicts.jsonl"
    assert cli("-w", ws, "export", "judged", "--out", runs_file).code == 0
    # `prereg export` put the verdicts beside the runs (test_judge_export_import); here
    # they travel on their own, with judge --export / --import
    (tmp_path / "runs.jsonl.verdicts.jsonl").unlink()
    exported = cli("-w", ws, "judge", "judged", "--export", items, "--json")
    assert exported.code == 0, exported.stderr
    assert (exported.json()["verdicts"], exported.json()["gold"]) == (len(runs), 3)

    # before the runs are imported, the verdicts have no runs to belong to: refused
    early = cli("-w", fresh, "judge", "judged", "--import", items)
    assert early.code == 3 and "nothing was imported" in early.stderr
    assert cli("-w", fresh, "import", runs_file).code == 0

    lines = items.read_text().splitlines()
    edited = json.loads(lines[0])
    edited["verdict"]["met"] = not edited["verdict"]["met"]
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([json.dumps(edited), *lines[1:]]) + "\n")
    dropped = tmp_path / "dropped.jsonl"  # a verdict removed from the middle
    dropped.write_text("\n".join([lines[0], *lines[2:]]) + "\n")
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text(lines[0] + "\n" + json.dumps({"gold": {"record_id": runs[0]}}) + "\n")
    before = tree_digest(fresh / "runs")
    for bad, code in ((tampered, 3), (dropped, 3), (malformed, 2)):
        result = cli("-w", fresh, "judge", "judged", "--import", bad)
        assert result.code == code, (bad.name, result.stderr)
        assert tree_digest(fresh / "runs") == before, bad.name
    assert f"{malformed}:2" in cli("-w", fresh, "judge", "judged", "--import", malformed).stderr

    imported = cli("-w", fresh, "judge", "judged", "--import", items, "--json")
    assert imported.code == 0, imported.stderr
    assert (imported.json()["verdicts_imported"], imported.json()["gold_imported"]) == (
        len(runs),
        3,
    )
    assert stored_verdicts(fresh) == stored_verdicts(ws) and gold_count(fresh) == 3
    again = cli("-w", fresh, "judge", "judged", "--import", items, "--json")
    assert again.code == 0 and again.json()["already_stored"] == len(runs) + 3
    assert cli("-w", fresh, "verify").code == 0
    assert cli("-w", fresh, "judge", "judged", "--json").json()["judged"] == 0  # all there
