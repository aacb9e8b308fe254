"""``prereg experiment new`` from a real MCP server and a prompt file (issue 43, item 3).

Acceptance: a snapshot of the third-party ``mcp-server-time`` (PyPI), taken with ``prereg
mcp snapshot``, and a 20-line CSV give an experiment that ``register``, ``run`` and
``analyse`` accept, offline (the local host; the snapshot replayed, every call refused).
The written files are read back with ``yaml`` and ``json`` and checked against the CSV
and the snapshot; ``list --experiments`` is checked against ``split show``. Bad rows exit
2 naming the file, line and column, and write nothing.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult, tree_digest
from tests.waiting import HANG_S

pytest.importorskip("mcp_server_time", reason="needs mcp-server-time (a dev dependency)")

NAME = "time-selection"
HEADER = ["prompt", "intent", "polarity", "cluster", "expected_tool"]
#: 20 prompts: two intents the server serves, one it does not (negative), paraphrase clusters
PROMPTS = [
    ("What time is it in Tokyo right now?", "current-time", "positive", "k1", "get_current_time"),
    ("Tell me the current time in London.", "current-time", "positive", "k1", ""),
    ("What's the time in New York at the moment?", "current-time", "positive", "k2", ""),
    ("Current local time in Sydney, please.", "current-time", "positive", "k2", ""),
    ("Is it morning in Paris now?", "current-time", "positive", "", ""),
    ("What day of the week is it in Auckland right now?", "current-time", "positive", "", ""),
    ("Convert 9am New York time to Berlin time.", "convert-time", "positive", "k5", "convert_time"),
    ("If it's 14:00 in Tokyo, what time is it in London?", "convert-time", "positive", "k5", ""),
    ("What is 8pm Los Angeles time in Sydney?", "convert-time", "positive", "k6", ""),
    ("Convert 10:30 from Paris time to Chicago time.", "convert-time", "positive", "k6", ""),
    ("When it is noon in Delhi, what time is it in Toronto?", "convert-time", "positive", "", ""),
    ("Translate 7am UTC into Singapore time.", "convert-time", "positive", "", ""),
    ('Write a haiku about autumn, with a comma, and a "quote".', "chat", "negative", "k9", ""),
    ("What is the capital of Australia?", "chat", "negative", "k9", ""),
    ("Explain what a time zone is.", "chat", "negative", "k10", ""),
    ("Why do we have daylight saving time?", "chat", "negative", "k10", ""),
    ("Suggest a name for a cat.", "chat", "negative", "", ""),
    ("How many minutes are in a day?", "chat", "negative", "", ""),
    ("Recommend a good book about history.", "chat", "negative", "", ""),
    ("Tell me a joke about clocks.", "chat", "negative", "", ""),
]


def write_csv(path: Path, rows: list[tuple[str, ...]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``prereg mcp snapshot`` of the real server, as a user takes it."""
    out = tmp_path_factory.mktemp("time") / "time.json"
    done = subprocess.run(
        [sys.executable, "-m", "prereg", "mcp", "snapshot", "--out", str(out), "--json"]
        + ["--timeout", "30", "--no-negotiate", "--"]
        + [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "prompts.csv", PROMPTS)


def test_a_new_experiment_registers_runs_and_analyses_offline(
    ws: Path, snapshot: Path, prompts: Path, cli: Callable[..., CliResult]
) -> None:
    made = cli("-w", ws, "experiment", "new", NAME, "--from-snapshot", snapshot)
    assert made.code == 2  # --prompts is required: usage error
    made = cli(
        "-w", ws, "experiment", "new", NAME, "--from-snapshot", snapshot,
        "--prompts", prompts, "--json",
    )  # fmt: skip
    assert made.code == 0, made.stderr
    summary = json.loads(made.stdout)
    folder = ws / "experiments" / NAME
    assert Path(summary["folder"]) == folder and Path(summary["draft"]) == ws / "drafts" / (
        NAME + ".yaml"
    )

    # the files, read back independently
    recorded = json.loads(snapshot.read_text())
    assert (folder / "snapshots" / "original.json").read_bytes() == snapshot.read_bytes()
    assert (folder / "snapshots" / "edited.json").read_bytes() == snapshot.read_bytes()
    corpus = yaml.safe_load((folder / "corpus.yaml").read_text())
    assert [t["prompt"] for t in corpus["tasks"]] == [p[0] for p in PROMPTS]
    assert [(t["intent"], t["polarity"]) for t in corpus["tasks"]] == [p[1:3] for p in PROMPTS]
    assert set(corpus["intents"]) == {"current-time", "convert-time", "chat"}
    given = [p[3] for p in PROMPTS]
    clusters = [t["cluster"] for t in corpus["tasks"]]
    assert [c for c, g in zip(clusters, given, strict=True) if g] == [g for g in given if g]
    assert len(set(clusters)) == len({g for g in given if g}) + given.count("")
    assert "expected tool: get_current_time" in corpus["tasks"][0]["notes"]
    experiment = yaml.safe_load((folder / "experiment.yaml").read_text())
    assert experiment["surfaces"] == {
        "original": "snapshots/original.json",
        "edited": "snapshots/edited.json",
    }
    tools = recorded["server"]["lists"]["tools/list"]["pages"][0]["tools"]
    assert summary["tools"] == [t["name"] for t in tools]

    # the user edits the copy: one tool description rewritten
    edited = json.loads((folder / "snapshots" / "edited.json").read_text())
    first = edited["server"]["lists"]["tools/list"]["pages"][0]["tools"][0]
    first["description"] = "The current date and time, day of week and DST, in any IANA zone."
    (folder / "snapshots" / "edited.json").write_text(json.dumps(edited, indent=2))

    registered = cli("-w", ws, "register", ws / "drafts" / f"{NAME}.yaml", "--json")
    assert registered.code == 0, registered.stdout + registered.stderr
    ran = cli("-w", ws, "run", NAME, "--json")
    assert ran.code == 0, ran.stdout + ran.stderr
    analysed = cli("-w", ws, "analyse", NAME, "--json")
    assert analysed.code == 0, analysed.stdout + analysed.stderr
    assert (ws / "reports" / NAME / "report.html").is_file()

    out = ws.parent / "runs.jsonl"
    assert cli("-w", ws, "export", NAME, "--out", out).code == 0
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert records and all(r["evidence_class"] == "local" for r in records)  # offline
    assert {r["arm"] for r in records} == {"original", "edited"}
    for record in records:
        [server] = record["offer"]["servers"]
        assert server["name"] == recorded["server"]["initialize"]["serverInfo"]["name"]
        assert server["snapshot_digest"].startswith("sha256:")
    digests = {r["arm"]: r["offer"]["servers"][0]["snapshot_digest"] for r in records}
    assert digests["original"] != digests["edited"]  # the edit is what the arms differ by
    calls = [e for r in records for e in r["trace"] if e["kind"] == "tool_call"]
    assert calls and {e["tool"] for e in calls} <= {t["name"] for t in tools}


def test_list_experiments_shows_surfaces_and_tasks_per_split(
    ws: Path, snapshot: Path, prompts: Path, cli: Callable[..., CliResult]
) -> None:
    args = ("experiment", "new", NAME, "--from-snapshot", snapshot, "--prompts", prompts)
    assert cli("-w", ws, *args).code == 0
    listed = cli("-w", ws, "list", "--experiments", "--json")
    assert listed.code == 0, listed.stderr
    items: dict[str, dict[str, Any]] = {
        item["experiment"]: item for item in json.loads(listed.stdout)["experiments"]
    }
    bundled = sorted(
        p.name for p in (ws / "experiments").iterdir() if (p / "experiment.yaml").is_file()
    )
    assert sorted(items) == bundled and NAME in items
    mine = items[NAME]
    assert [(s["id"], s["source"], s["tools"]) for s in mine["surfaces"]] == [
        ("original", "snapshot", 2),
        ("edited", "snapshot", 2),
    ]
    assert sum(mine["tasks_per_split"].values()) == len(PROMPTS) == mine["tasks"]
    # the reference: `prereg split show`, another command reading the same experiment
    shown = json.loads(cli("-w", ws, "split", "show", NAME, "--tasks", "--json").stdout)
    per_split: dict[str, int] = {}
    for task in shown["task_list"]:
        per_split[task["split"]] = per_split.get(task["split"], 0) + 1
    assert {k: v for k, v in mine["tasks_per_split"].items() if v} == per_split
    # a bundled experiment with a pool lists its members with their role
    roles = {s["id"]: s["role"] for s in items["podcast-selection"]["surfaces"]}
    assert roles["castaway"] == "competitor" and roles["weather"] == "decoy"
    human = cli("-w", ws, "list", "--experiments")
    assert human.code == 0 and NAME in human.stdout


def _bad(
    rows: list[tuple[str, ...]], line: int, column: str
) -> tuple[list[tuple[str, ...]], int, str]:
    return rows, line, column


BAD = {
    "polarity": _bad([*PROMPTS[:3], ("Hi", "chat", "maybe", "", ""), *PROMPTS[4:]], 5, "polarity"),
    "intent": _bad(
        [*PROMPTS[:6], ("Hi", "Chit Chat", "negative", "", ""), *PROMPTS[7:]], 8, "intent"
    ),
    "prompt": _bad([*PROMPTS[:1], ("  ", "chat", "negative", "", "")], 3, "prompt"),
    "unknown tool": _bad(
        [("Time?", "current-time", "positive", "", "get_time")], 2, "expected_tool"
    ),
    "cluster mixes intents": _bad(
        [PROMPTS[0], ("Convert 9am NY to Berlin", "convert-time", "positive", "k1", "")],
        3,
        "cluster",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_row_exits_2_naming_file_line_and_column(
    ws: Path, snapshot: Path, tmp_path: Path, cli: Callable[..., CliResult], case: str
) -> None:
    rows, line, column = BAD[case]
    path = write_csv(tmp_path / "bad.csv", rows)
    before = tree_digest(ws)
    result = cli(
        "-w", ws, "experiment", "new", NAME, "--from-snapshot", snapshot,
        "--prompts", path, "--json",
    )  # fmt: skip
    assert result.code == 2, result.stdout
    error = json.loads(result.stdout)
    assert error["file"] == f"{path}:{line}" and error["field"] == column
    assert tree_digest(ws) == before  # nothing written
    assert not (ws / "experiments" / NAME).exists()


def test_a_missing_column_and_a_taken_name_exit_2(
    ws: Path, snapshot: Path, prompts: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    path = write_csv(tmp_path / "short.csv", [p[:2] for p in PROMPTS], HEADER[:2])
    result = cli(
        "-w",
        ws,
        "experiment",
        "new",
        NAME,
        "--from-snapshot",
        snapshot,
        "--prompts",
        path,
        "--json",
    )
    assert result.code == 2 and "polarity" in json.loads(result.stdout)["message"]
    taken = cli(
        "-w",
        ws,
        "experiment",
        "new",
        "music-library",
        "--from-snapshot",
        snapshot,
        "--prompts",
        prompts,
    )
    assert taken.code == 2
    not_a_snapshot = cli(
        "-w", ws, "experiment", "new", NAME, "--from-snapshot", prompts, "--prompts", prompts
    )
    assert not_a_snapshot.code == 2
    assert (
        not (ws / "experiments" / NAME).exists() and not (ws / "drafts" / f"{NAME}.yaml").exists()
    )
