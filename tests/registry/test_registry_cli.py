"""Registering, idempotency, supersession, show/list, and JSON output."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.registry.digest import is_digest
from tests.conftest import tree_digest

PILOT = "drafts/music-library-pilot.yaml"
CONFIRM = "drafts/music-library-confirmatory.yaml"


def test_init_creates_workspace_with_experiments_and_drafts(ws: Path, cli) -> None:
    for sub in ("experiments", "registry", "runs", "reports", "drafts"):
        assert (ws / sub).is_dir()
    assert (ws / "experiments" / "music-library" / "experiment.yaml").is_file()
    drafts = {p.name: p.read_text() for p in (ws / "drafts").glob("*.yaml")}
    assert any("kind: exploratory" in t and "split: dev" in t for t in drafts.values())
    assert any("kind: confirmatory" in t and "split: test" in t for t in drafts.values())
    for name, text in drafts.items():
        # every bundled draft runs offline, but a provider template (its name says -api),
        # which needs a key and dry-runs without one
        drivers = _drivers(yaml.safe_load(text))
        assert drivers, name
        assert drivers <= {"local", "replay"} or name.endswith("-api.yaml"), (name, drivers)
    # a second init leaves user edits alone
    (ws / PILOT).write_text((ws / PILOT).read_text() + "# edited\n")
    again = cli("init", ws, "--json")
    assert again.code == 0
    assert PILOT in again.json()["skipped_existing"]
    assert (ws / PILOT).read_text().endswith("# edited\n")


def test_every_draft_registers(ws: Path, cli) -> None:
    for draft in sorted((ws / "drafts").glob("*.yaml")):
        result = cli("-w", ws, "register", draft, "--json")
        assert result.code == 0, result.stderr
        assert result.json()["created"] is True


def test_register_freezes_and_chains(ws: Path, cli) -> None:
    result = cli("-w", ws, "register", ws / PILOT, "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    assert is_digest(data["digest"])
    frozen = ws / data["frozen_path"]
    assert frozen.is_file()
    assert not (
        stat.S_IMODE(os.stat(frozen).st_mode) & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    )
    lines = (ws / "registry" / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 1
    event = json.loads(lines[0])
    assert event["seq"] == 1 and event["id"] == "music-library-pilot"
    assert event["digest"] == data["digest"]
    assert event["prev"] == "sha256:" + "0" * 64
    for key in ("time", "prereg_version", "supersedes"):
        assert key in event
    # every referenced experiment file is stored by content
    for rel, digest in data["files"].items():
        assert (ws / "registry" / "objects" / digest[7:9] / digest[9:]).is_file(), rel


def test_identical_content_is_idempotent(ws: Path, cli) -> None:
    first = cli("-w", ws, "register", ws / PILOT, "--json").json()
    before = tree_digest(ws / "registry")
    # reformatting and comments do not change the content
    text = (ws / PILOT).read_text()
    (ws / "drafts" / "copy.yaml").write_text("# a comment\n" + text.replace(": ", ":   "))
    again = cli("-w", ws, "register", ws / "drafts" / "copy.yaml", "--json")
    assert again.code == 0, again.stderr
    assert again.json()["digest"] == first["digest"]
    assert again.json()["created"] is False
    assert tree_digest(ws / "registry") == before


def test_different_content_under_existing_id_is_refused(ws: Path, cli) -> None:
    cli("-w", ws, "register", ws / PILOT)
    before = tree_digest(ws / "registry")
    changed = ws / "drafts" / "changed.yaml"
    changed.write_text((ws / PILOT).read_text().replace("seed: 7", "seed: 8"))
    result = cli("-w", ws, "register", changed)
    assert result.code == 4
    assert "music-library-pilot" in result.stderr and "supersedes" in result.stderr
    assert tree_digest(ws / "registry") == before


def test_supersede_keeps_both(ws: Path, cli) -> None:
    cli("-w", ws, "register", ws / PILOT)
    newer = ws / "drafts" / "pilot-2.yaml"
    newer.write_text(
        (ws / PILOT)
        .read_text()
        .replace(
            "id: music-library-pilot", "id: music-library-pilot-2\nsupersedes: music-library-pilot"
        )
    )
    result = cli("-w", ws, "register", newer, "--json")
    assert result.code == 0, result.stderr
    old = cli("-w", ws, "show", "music-library-pilot", "--json").json()
    assert old["superseded_by"] == "music-library-pilot-2"
    new = cli("-w", ws, "show", "music-library-pilot-2", "--json").json()
    assert new["supersedes"] == "music-library-pilot"
    listed = cli("-w", ws, "list", "--json").json()["registrations"]
    assert [r["id"] for r in listed] == ["music-library-pilot", "music-library-pilot-2"]
    human = cli("-w", ws, "show", "music-library-pilot")
    assert "superseded by music-library-pilot-2" in human.stdout
    # a second registration superseding the same old one is refused
    fork = ws / "drafts" / "pilot-3.yaml"
    fork.write_text(newer.read_text().replace("pilot-2", "pilot-3"))
    assert cli("-w", ws, "register", fork).code == 4


def test_supersedes_unknown_id_is_bad_input(ws: Path, cli) -> None:
    bad = ws / "drafts" / "bad.yaml"
    bad.write_text((ws / PILOT).read_text() + "supersedes: nothing-here\n")
    result = cli("-w", ws, "register", bad)
    assert result.code == 2
    assert "supersedes" in result.stderr


def test_show_json_fields(ws: Path, cli) -> None:
    cli("-w", ws, "register", ws / PILOT)
    data = cli("-w", ws, "show", "music-library-pilot", "--json").json()
    for key in ("frozen_path", "digest", "registered_at", "supersedes", "superseded_by"):
        assert key in data
    assert not Path(data["frozen_path"]).is_absolute()
    assert (ws / data["frozen_path"]).is_file()
    assert data["registration"]["hypothesis"].startswith("Offering composite")


def test_show_unknown_is_exit_2(ws: Path, cli) -> None:
    result = cli("-w", ws, "show", "nope", "--json")
    assert result.code == 2
    assert json.loads(result.stdout)["exit_code"] == 2


def test_workspace_from_environment(ws: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREREG_WORKSPACE", str(ws))
    assert cli("register", ws / PILOT).code == 0
    assert cli("list", "--json").json()["registrations"][0]["id"] == "music-library-pilot"


def test_runs_read_frozen_content_not_workspace(ws: Path, cli) -> None:
    from prereg.registry.registrations import Registry

    cli("-w", ws, "register", ws / PILOT)
    corpus_files = sorted((ws / "experiments" / "music-library").rglob("*.yaml"))
    originals = {p: p.read_bytes() for p in corpus_files}
    for p in corpus_files:
        p.write_bytes(b"# vandalised\n")
    registry = Registry(ws / "registry")
    entry = registry.get("music-library-pilot")
    read = registry.experiment_reader(entry)
    for p, data in originals.items():
        rel = str(p.relative_to(ws / "experiments" / "music-library"))
        if rel in entry.files:
            assert read(rel) == data
    experiment = registry.load_experiment(entry)
    assert experiment.tasks_in_split("dev")


def _drivers(doc: dict[str, Any]) -> set[str]:
    """Every host driver a draft names: the registration's, its arms', a factorial's base."""
    hosts = [doc.get("host")]
    hosts += [arm.get("host") for arm in doc.get("arms") or []]
    factorial = doc.get("factorial") or {}
    hosts += [(factorial.get("base") or {}).get("host")]
    hosts += [arm.get("host") for arm in factorial.get("extra_arms") or []]
    return {h["driver"] for h in hosts if isinstance(h, dict) and "driver" in h}
