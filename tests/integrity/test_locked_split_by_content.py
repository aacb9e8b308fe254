"""The locked split is locked by content (issue 12, item 3; DESIGN.md invariant 12).

The four bypasses of the issue, each refused now:

1. copy the experiment folder under a new name and register (or run) a confirmatory
   registration on the same test tasks;
2. rewrite ``splits`` with explicit assignment so an exploratory registration runs the
   locked tasks;
3. run a second confirmatory registration in another workspace, export, import and
   analyse it where its claim was refused;
4. delete the newest claim line and its mirror: ``verify`` finds test-split runs that
   no claim covers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from prereg.experiments import load_experiment
from prereg.experiments.fingerprints import task_fingerprint
from prereg.experiments.loader import folder_reader

CONFIRM = "drafts/music-library-confirmatory.yaml"
PILOT = "drafts/music-library-pilot.yaml"


def _copy_experiment(ws: Path, name: str) -> Path:
    target = ws / "experiments" / name
    shutil.copytree(ws / "experiments" / "music-library", target)
    spec = target / "experiment.yaml"
    spec.write_text(spec.read_text().replace("name: music-library", f"name: {name}"))
    return target


def _draft(ws: Path, source: str, new_id: str, **fields: object) -> Path:
    doc = yaml.safe_load((ws / source).read_text())
    doc["id"] = new_id
    doc.update(fields)
    path = ws / "drafts" / f"{new_id}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_copied_experiment_cannot_spend_the_test_split_again(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0
    _copy_experiment(ws, "music-copy")
    copy = _draft(ws, CONFIRM, "copy-confirmatory", experiment="music-copy")
    before = sorted(p.name for p in (ws / "registry").rglob("*"))
    result = cli("-w", ws, "register", copy, "--json")
    assert result.code == 4, result.stdout
    assert "claimed, by content" in result.json()["message"]
    assert sorted(p.name for p in (ws / "registry").rglob("*")) == before


def test_a_copy_registered_before_the_claim_cannot_claim_at_run(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    _copy_experiment(ws, "music-copy")
    copy = _draft(ws, CONFIRM, "copy-confirmatory", experiment="music-copy")
    assert cli("-w", ws, "register", copy).code == 0  # nothing claimed yet
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0
    result = cli("-w", ws, "run", "copy-confirmatory", "--json")
    assert result.code == 4, result.stdout
    assert "by content" in result.json()["message"]


def test_reassigned_splits_cannot_move_locked_tasks_into_exploratory_work(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / PILOT).code == 0  # fixes each task's split
    experiment = load_experiment(
        folder_reader(ws / "experiments" / "music-library"), "music-library"
    )
    clusters: dict[str, list[str]] = {"dev": [], "validation": [], "test": []}
    for task in experiment.tasks:
        split = experiment.split_of(task)
        target = "dev" if split == "test" else ("test" if split == "dev" else split)
        if task.cluster not in clusters[target]:
            clusters[target].append(task.cluster)
    copy = _copy_experiment(ws, "music-relabelled")
    spec = yaml.safe_load((copy / "experiment.yaml").read_text())
    spec["splits"] = {"assign": clusters}
    (copy / "experiment.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    sneaky = _draft(ws, PILOT, "sneaky-pilot", experiment="music-relabelled")
    result = cli("-w", ws, "register", sneaky, "--json")
    assert result.code == 4, result.stdout
    error = result.json()
    assert "change sides of the locked split" in error["message"]
    assert any("is in split dev" in d for d in error["details"])


def test_moving_tasks_between_exploratory_splits_is_allowed(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    experiment = load_experiment(
        folder_reader(ws / "experiments" / "music-library"), "music-library"
    )
    clusters: dict[str, list[str]] = {"dev": [], "validation": [], "test": []}
    for task in experiment.tasks:
        split = experiment.split_of(task)
        target = {"dev": "validation", "validation": "dev"}.get(split, split)
        if task.cluster not in clusters[target]:
            clusters[target].append(task.cluster)
    copy = _copy_experiment(ws, "music-swapped")
    spec = yaml.safe_load((copy / "experiment.yaml").read_text())
    spec["splits"] = {"assign": clusters}
    (copy / "experiment.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    swapped = _draft(ws, PILOT, "swapped-pilot", experiment="music-swapped")
    assert cli("-w", ws, "register", swapped).code == 0


def test_runs_made_under_a_refused_claim_cannot_be_imported_or_analysed(  # type: ignore[no-untyped-def]
    ws: Path, cli, tmp_path: Path
) -> None:
    second = _draft(ws, CONFIRM, "second-confirmatory")
    for draft in (ws / CONFIRM, second):
        assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0
    assert cli("-w", ws, "run", "second-confirmatory", "--json").code == 4  # refused here
    # elsewhere, the second registration claims and runs
    other = tmp_path / "elsewhere"
    assert cli("init", other).code == 0
    shutil.rmtree(other / "drafts")
    shutil.copytree(ws / "drafts", other / "drafts")
    assert cli("-w", other, "register", other / "drafts" / "second-confirmatory.yaml").code == 0
    assert cli("-w", other, "run", "second-confirmatory", "--max-units", "4").code == 0
    out = tmp_path / "second.jsonl"
    assert cli("-w", other, "export", "second-confirmatory", "--out", out).code == 0
    imported = cli("-w", ws, "import", out, "--json")
    assert imported.code == 4, imported.stdout
    assert "claim" in imported.json()["message"]
    assert cli("-w", ws, "analyse", "second-confirmatory", "--json").code in (0, 4)


def test_verify_finds_test_split_runs_no_claim_covers(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0
    ledger = ws / "registry" / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    claim_lines = [i for i, line in enumerate(lines) if b'"locked-split-claim"' in line]
    (index,) = claim_lines
    seq = json.loads(lines[index])["seq"]
    # the documented tail limit: remove the claim with its mirror and everything after
    ledger.write_bytes(b"".join(lines[:index]))
    (ws / "registry" / "claims" / f"{seq:06d}.json").unlink()
    for anchor in (ws / "registry" / "anchors").glob("*.json"):
        if int(anchor.stem) > seq:
            anchor.unlink()
    result = cli("-w", ws, "verify", "--json")
    assert result.code == 3, result.stdout
    kinds = {p["kind"] for p in result.json()["problems"]}
    assert "runs-locked-split" in kinds, kinds


def test_claims_name_the_test_tasks_by_content(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "2").code == 0
    claim = next((ws / "registry" / "claims").glob("*.json"))
    tasks = set(json.loads(claim.read_bytes())["tasks"])
    experiment = load_experiment(
        folder_reader(ws / "experiments" / "music-library"), "music-library"
    )
    assert tasks == {task_fingerprint(t) for t in experiment.tasks_in_split("test")}
