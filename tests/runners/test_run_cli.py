"""`prereg run`, `export`, `import`, `split show` end to end, and the locked-split rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from prereg.runners.store.sqlite import RunStore

PILOT = "drafts/music-library-pilot.yaml"
CONFIRM = "drafts/music-library-confirmatory.yaml"


def register(cli: Any, ws: Path, draft: str | Path) -> dict[str, Any]:
    result = cli("-w", ws, "register", ws / draft if isinstance(draft, str) else draft, "--json")
    assert result.code == 0, result.stderr
    return result.json()  # type: ignore[no-any-return]


def run(cli: Any, ws: Path, *args: str) -> Any:
    return cli("-w", ws, "run", *args)


def test_run_resume_and_max_units(ws: Path, cli: Any) -> None:
    reg = register(cli, ws, PILOT)
    exp = load_experiment(folder_reader(ws / "experiments" / "music-library"), "music-library")
    planned = 2 * len(exp.tasks_in_split("dev")) * 3  # arms x dev tasks x repeats
    first = run(cli, ws, "music-library-pilot", "--max-units", "10", "--json")
    assert first.code == 0, first.stderr
    data = first.json()
    assert {k: data[k] for k in ("planned", "completed", "skipped_existing", "failed")} == {
        "planned": planned,
        "completed": 10,
        "skipped_existing": 0,
        "failed": 0,
    }
    assert data["stopped"] == "max_units" and data["remaining"] == planned - 10
    second = run(cli, ws, "music-library-pilot", "--concurrency", "8", "--json").json()
    assert second["skipped_existing"] == 10 and second["completed"] == planned - 10
    assert second["remaining"] == 0 and second["stopped"] is None
    third = run(cli, ws, "music-library-pilot", "--json").json()
    assert third["completed"] == 0 and third["skipped_existing"] == planned
    records = RunStore(ws / "runs").records(registration_id="music-library-pilot")
    assert len(records) == planned
    assert len({r.unit_key for r in records}) == planned  # no duplicates
    assert {r.registration_digest for r in records} == {reg["digest"]}


def test_run_human_output(ws: Path, cli: Any) -> None:
    register(cli, ws, PILOT)
    result = run(cli, ws, "music-library-pilot", "--max-units", "4")
    assert result.code == 0, result.stderr
    assert "completed this run" in result.stdout and "max_units" in result.stdout


def test_run_unknown_registration_is_bad_input(ws: Path, cli: Any) -> None:
    result = run(cli, ws, "nope", "--json")
    assert result.code == 2 and result.json()["error"] == "BadInput"


def test_runs_read_the_frozen_experiment(ws: Path, cli: Any) -> None:
    register(cli, ws, PILOT)
    corpus = ws / "experiments" / "music-library" / "corpus.yaml"
    corpus.write_text("this: is not a corpus\n")  # editing the workspace after registering
    result = run(cli, ws, "music-library-pilot", "--max-units", "2", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["completed"] == 2


def export(cli: Any, ws: Path, fmt: str, out: Path) -> dict[str, Any]:
    result = cli("-w", ws, "export", "music-library-pilot", "--format", fmt, "--out", out, "--json")
    assert result.code == 0, result.stderr
    return result.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_import_round_trip(ws: Path, cli: Any, tmp_path: Path, fmt: str) -> None:
    register(cli, ws, PILOT)
    assert run(cli, ws, "music-library-pilot", "--max-units", "12", "--json").code == 0
    out = tmp_path / f"runs.{fmt}"
    info = export(cli, ws, fmt, out)
    assert info["records"] == 12
    original = RunStore(ws / "runs").records()
    if fmt == "jsonl":
        lines = out.read_text().splitlines()
        assert len(lines) == 12
        row = json.loads(lines[0])
    else:
        import csv

        rows = list(csv.DictReader(out.open()))
        assert len(rows) == 12
        row = rows[0]
    for column in (
        "registration_id",
        "registration_digest",
        "arm",
        "task_id",
        "intent",
        "cluster",
        "split",
        "polarity",
        "repeat",
        "rotation",
        "driver",
        "evidence_class",
        "model_requested",
        "model_returned",
        "started_at",
        "finished_at",
        "latency_ms",
        "cost_usd",
        "terminal_class",
        "terminal_flag",
        "first_unmet_obligation",
        "selected_operations",
        "selection_rate",
        "success",
        "status",
        "error",
        "trace",
    ):
        assert column in row
    # into a second workspace with the same registration (same content, same digest)
    other = tmp_path / "other"
    assert cli("init", other).code == 0
    register(cli, other, PILOT)
    imported = cli("-w", other, "import", out, "--json")
    assert imported.code == 0, imported.stderr
    assert imported.json()["imported"] == 12
    again = cli("-w", other, "import", out, "--json").json()
    assert (again["records"], again["imported"], again["already_stored"]) == (12, 0, 12)
    # the same records, chain links included, so the two stores hold one chain
    assert RunStore(other / "runs").records() == original
    (digest,) = again["chains"]
    assert again["chains"][digest]["count"] == 12


def test_import_refuses_a_foreign_digest(ws: Path, cli: Any, tmp_path: Path) -> None:
    register(cli, ws, PILOT)
    run(cli, ws, "music-library-pilot", "--max-units", "3", "--json")
    out = tmp_path / "runs.jsonl"
    export(cli, ws, "jsonl", out)
    lines = out.read_text().splitlines()
    tampered = json.loads(lines[1])
    tampered["registration_digest"] = "sha256:" + "f" * 64
    lines[1] = json.dumps(tampered)
    bad = tmp_path / "tampered.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    other = tmp_path / "other"
    cli("init", other)
    register(cli, other, PILOT)
    result = cli("-w", other, "import", bad, "--json")
    assert result.code == 3
    assert tampered["record_id"] in result.stderr and "tampered.jsonl:2" in result.stderr
    assert RunStore(other / "runs").records() == []  # nothing was written


def test_import_refuses_malformed_records(ws: Path, cli: Any, tmp_path: Path) -> None:
    register(cli, ws, PILOT)
    run(cli, ws, "music-library-pilot", "--max-units", "2", "--json")
    out = tmp_path / "runs.jsonl"
    export(cli, ws, "jsonl", out)
    lines = out.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["funnel"] = {"surfaced": False, "selected": True}
    lines[1] = json.dumps(broken)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    result = cli("-w", ws, "import", bad, "--json")
    # the chain is checked before the record is validated (issue 43, item 6): an edit
    # that also breaks the record's shape is still an edit, exit 3, naming the row
    assert result.code == 3
    err = result.json()
    assert err["file"].endswith("bad.jsonl:2") and "edited after export" in err["message"]
    assert broken["record_id"] in result.stderr


def test_split_show(ws: Path, cli: Any) -> None:
    result = cli("-w", ws, "split", "show", "music-library", "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    exp = load_experiment(folder_reader(ws / "experiments" / "music-library"), "music-library")
    assert data["tasks"] == len(exp.tasks)
    for split in ("dev", "validation", "test"):
        tasks = exp.tasks_in_split(split)
        info = data["splits"][split]
        assert info["tasks"] == len(tasks)
        assert sum(sum(c.values()) for c in info["intents"].values()) == len(tasks)
        negatives = sum(t.polarity == "negative" for t in tasks)
        assert info["polarity"].get("negative", 0) == negatives
    human = cli("-w", ws, "split", "show", "music-library")
    assert human.code == 0 and "music-library" in human.stdout
    missing = cli("-w", ws, "split", "show", "nope", "--json")
    assert missing.code == 2


def _second_confirmatory(ws: Path, new_id: str) -> Path:
    text = (ws / CONFIRM).read_text().replace("id: music-library-confirmatory", f"id: {new_id}")
    path = ws / "drafts" / f"{new_id}.yaml"
    path.write_text(text)
    return path


def test_locked_split_is_claimed_once(ws: Path, cli: Any) -> None:
    from prereg.registry.registrations import Registry

    register(cli, ws, CONFIRM)
    register(cli, ws, _second_confirmatory(ws, "music-library-confirmatory-b"))
    first = run(cli, ws, "music-library-confirmatory", "--max-units", "4", "--json")
    assert first.code == 0, first.stderr
    claim = Registry(ws / "registry").claim_of("music-library")
    assert claim is not None and claim["id"] == "music-library-confirmatory"
    # resuming the same confirmatory registration is allowed (the claim is idempotent)
    assert run(cli, ws, "music-library-confirmatory", "--max-units", "2", "--json").code == 0
    # another confirmatory registration on the spent split is refused at run ...
    second = run(cli, ws, "music-library-confirmatory-b", "--json")
    assert second.code == 4
    assert "music-library-confirmatory" in second.stderr
    assert RunStore(ws / "runs").records(registration_id="music-library-confirmatory-b") == []
    # ... and a new one is refused at registration
    late = cli(
        "-w", ws, "register", _second_confirmatory(ws, "music-library-confirmatory-c"), "--json"
    )
    assert late.code == 4 and "music-library-confirmatory" in late.stderr


def test_a_not_runnable_registration_is_refused(ws: Path, cli: Any) -> None:
    text = (ws / PILOT).read_text().replace("id: music-library-pilot", "id: too-small")
    draft = ws / "drafts" / "too-small.yaml"
    draft.write_text(text + "plan: {mde: 0.02, power: 0.9, sigma_d: 0.5}\n")
    assert register(cli, ws, draft)["runnable"] is False
    result = run(cli, ws, "too-small", "--json")
    assert result.code == 4 and "not runnable" in result.stderr
    assert RunStore(ws / "runs").records() == []


def test_exploratory_work_never_touches_the_locked_split(
    monkeypatch: pytest.MonkeyPatch, ws: Path
) -> None:
    # the registry already refuses such a registration; the runner checks again on its own
    from types import SimpleNamespace

    from prereg.core.errors import ProtocolRefusal
    from prereg.core.workspace import Workspace
    from prereg.runners import api
    from prereg.runners import prepare as preparing

    entry = SimpleNamespace(
        id="sneaky",
        runnable=True,
        digest="sha256:" + "0" * 64,
        registration=SimpleNamespace(kind="exploratory", split="test", experiment="music-library"),
    )
    monkeypatch.setattr(
        preparing, "open_registry", lambda _ws: SimpleNamespace(get=lambda _id: entry)
    )
    monkeypatch.setattr(preparing, "verified_entry", lambda _registry, _id: entry)
    with pytest.raises(ProtocolRefusal, match="locked test split"):
        api.prepare(Workspace(ws), "sneaky")
