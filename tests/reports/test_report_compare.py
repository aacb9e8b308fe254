"""``prereg compare A B``: seed 002's side-by-side table, the paired change, the refusals."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.reports import (
    append,
    make_lab,
    paired_records,
    record,
    register,
    registration,
    seed002_outcomes,
)


def _two(cli, ws: Path, model_b: str | None = None):  # type: ignore[no-untyped-def]
    tasks = make_lab(ws, n_tasks=24)
    da = register(cli, ws, registration("spotify-002"))
    db = register(
        cli,
        ws,
        registration(
            "spotify-003",
            budgets={
                "completion_cap": 2048,
                "episode_tokens": 64000,
                "call_limit": 20,
                "turn_limit": 24,
            },
        ),
    )
    ctl, trt = seed002_outcomes(24, 13, 14, 1)
    append(ws, paired_records("spotify-002", da, tasks, ctl, trt))
    ctl, trt = seed002_outcomes(24, 17, 16, 1)
    extra = {"model_returned": model_b} if model_b else {}
    append(ws, paired_records("spotify-003", db, tasks, ctl, trt, **extra))
    return tasks, da, db


def test_compare_reports_both_results_and_the_paired_change(cli, ws: Path) -> None:
    _two(cli, ws)
    result = cli("-w", ws, "compare", "spotify-002", "spotify-003", "--json")
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["a"]["verdict"] == "inconclusive" and data["b"]["verdict"] == "inconclusive"
    assert data["a"]["arms"] == {"baseline": "13 of 24", "semantic": "14 of 24"}
    assert data["b"]["arms"] == {"baseline": "17 of 24", "semantic": "16 of 24"}
    assert data["a"]["discordant"]["n"] == 1 and data["b"]["discordant"]["n"] == 1
    changes = {c["arm"]: c for c in data["changes"]}
    assert changes["baseline"]["difference"] == (17 - 13) / 24
    assert changes["baseline"]["tasks"] == 24
    assert changes["baseline"]["provenance"]["registration_field"] is None
    assert any(d.startswith("budgets:") for d in data["differences"])
    assert data["label"].startswith("exploratory")


def test_compare_labels_models_returned_when_they_differ(cli, ws: Path) -> None:
    # issue 13, item 7: another model is compared, never hidden: each side lists it
    _two(cli, ws, model_b="another-model")
    result = cli("-w", ws, "compare", "spotify-002", "spotify-003", "--json")
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert "another-model" in data["b"]["models_returned"]
    assert "another-model" not in data["a"]["models_returned"]


def test_compare_refuses_different_corpora_and_says_which(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=24)
    da = register(cli, ws, registration("lab-a"))
    make_lab(ws, name="lab-other", n_tasks=24, prompt="A different prompt {k}.")
    db = register(cli, ws, registration("lab-b", experiment="lab-other"))
    ok = [[True]] * 24
    append(ws, paired_records("lab-a", da, tasks, ok, ok))
    append(ws, paired_records("lab-b", db, tasks, ok, ok, experiment="lab-other"))
    result = cli("-w", ws, "compare", "lab-a", "lab-b", "--json")
    assert result.code == 4
    details = "\n".join(result.json()["details"])
    assert "corpora differ" in details and "t001" in details


def test_compare_refuses_foreign_runs(cli, ws: Path) -> None:
    tasks, _, db = _two(cli, ws)
    other = "sha256:" + hashlib.sha256(b"x").hexdigest()
    append(ws, [record("spotify-003", other, "baseline", tasks[0], True)])
    result = cli("-w", ws, "compare", "spotify-002", "spotify-003", "--json")
    assert result.code == 3


def test_compare_needs_two_registrations(cli, ws: Path) -> None:
    _two(cli, ws)
    assert cli("-w", ws, "compare", "spotify-002", "spotify-002", "--json").code == 2
