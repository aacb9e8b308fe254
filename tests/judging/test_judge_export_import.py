"""``prereg export`` / ``prereg import`` carry a registration's verdicts and gold labels in
``FILE.verdicts.jsonl`` beside the runs; a run export without verdicts is unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from prereg.core.workspace import Workspace
from prereg.runners.exchange.export import export_registration
from tests.conftest import tree_digest
from tests.judging.gold_helpers import gold_count, stored_verdicts
from tests.judging.helpers import local_judges, registration, write


def _workspaces(cli, ws: Path, tmp_path: Path, judges: bool = True) -> Path:
    """``ws`` registered, run (and judged with three gold labels when ``judges``); a copy
    of it taken after registering, with no runs, is returned."""
    doc = registration("judged", judge=local_judges() if judges else None, repeats=2)
    assert cli("-w", ws, "register", write(ws, doc)).code == 0
    fresh = tmp_path / "fresh"
    shutil.copytree(ws, fresh)
    assert cli("-w", ws, "run", "judged", "--no-progress").code == 0
    if judges:
        assert cli("-w", ws, "judge", "judged").code == 0
        runs = [str(v["record_id"]) for v in stored_verdicts(ws)]
        gold = tmp_path / "gold.csv"
        gold.write_text(
            "run_id,label,annotator\n"
            + "".join(f"{r},{i % 2},ann1\n" for i, r in enumerate(runs[:3]))
        )
        assert cli("-w", ws, "judge", "judged", "--gold", gold).code == 0
    return fresh


def test_export_and_import_carry_verdicts_and_gold(cli, ws: Path, tmp_path: Path) -> None:
    fresh = _workspaces(cli, ws, tmp_path)
    reference = tmp_path / "reference.jsonl"  # the run export as the run path writes it
    export_registration(Workspace(ws), "judged", "jsonl", reference)
    out = tmp_path / "runs.jsonl"
    done = cli("-w", ws, "export", "judged", "--out", out, "--json")
    assert done.code == 0, done.stderr
    sidecar = tmp_path / "runs.jsonl.verdicts.jsonl"
    assert done.json()["verdicts_out"] == str(sidecar)
    assert out.read_bytes() == reference.read_bytes()  # the run file is unchanged
    lines = [json.loads(line) for line in sidecar.read_text().splitlines()]
    verdicts = [x["verdict"] for x in lines if "verdict" in x]
    assert verdicts == stored_verdicts(ws)  # as stored, chain links included
    assert sum("gold" in x for x in lines) == 3 == done.json()["gold"]

    imported = cli("-w", fresh, "import", out, "--json")
    assert imported.code == 0, imported.stderr
    result = imported.json()
    assert result["imported"] == len(reference.read_text().splitlines())
    assert (result["verdicts_imported"], result["gold_imported"]) == (len(verdicts), 3)
    assert stored_verdicts(fresh) == stored_verdicts(ws) and gold_count(fresh) == 3
    assert cli("-w", fresh, "verify").code == 0
    ledger = [json.loads(x) for x in (fresh / "registry" / "ledger.jsonl").read_text().splitlines()]
    anchor = [e for e in ledger if e["event"] == "verdicts-anchor"][-1]
    assert (anchor["verdicts"]["count"], anchor["gold"]["count"]) == (len(verdicts), 3)
    again = cli("-w", fresh, "import", out, "--json")  # the same export: nothing new
    assert again.code == 0 and again.json()["verdicts_already_stored"] == len(verdicts) + 3


def test_import_refuses_a_bad_verdicts_file_before_any_run(cli, ws: Path, tmp_path: Path) -> None:
    fresh = _workspaces(cli, ws, tmp_path)
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", "judged", "--out", out).code == 0
    sidecar = tmp_path / "runs.jsonl.verdicts.jsonl"
    good = sidecar.read_text().splitlines()
    edited = json.loads(good[0])
    edited["verdict"]["met"] = not edited["verdict"]["met"]
    cases = {
        "tampered": ("\n".join([json.dumps(edited), *good[1:]]) + "\n", 3),
        "malformed": (good[0] + "\n" + json.dumps({"gold": {"record_id": "x"}}) + "\n", 2),
    }
    before = (tree_digest(fresh / "runs"), tree_digest(fresh / "registry"))
    for name, (text, code) in cases.items():
        sidecar.write_text(text)
        refused = cli("-w", fresh, "import", out)
        assert refused.code == code, (name, refused.stderr)
        assert str(sidecar) in refused.stderr
        # neither the runs nor the verdicts were written, nothing anchored
        assert (tree_digest(fresh / "runs"), tree_digest(fresh / "registry")) == before, name
    assert f"{sidecar}:2" in cli("-w", fresh, "import", out).stderr


def test_run_export_without_verdicts_is_unchanged(cli, ws: Path, tmp_path: Path) -> None:
    _workspaces(cli, ws, tmp_path, judges=False)
    for fmt in ("jsonl", "csv"):
        reference = tmp_path / f"reference.{fmt}"
        export_registration(Workspace(ws), "judged", fmt, reference)  # type: ignore[arg-type]
        out = tmp_path / f"runs.{fmt}"
        done = cli("-w", ws, "export", "judged", "--out", out, "--format", fmt, "--json")
        assert done.code == 0, done.stderr
        assert out.read_bytes() == reference.read_bytes()
        assert not (tmp_path / f"runs.{fmt}.verdicts.jsonl").exists()
        assert "verdicts_out" not in done.json() and "verdicts_note" not in done.json()
