"""Every file prereg reads goes through one safe reader (issue 40, item 4; item 7's
calibration part).

``import`` (JSONL, CSV, Parquet, an Inspect AI log, and a ``FILE.verdicts.jsonl`` beside
an export), ``judge --gold`` and ``judge --import``, ``mcp serve`` (stdio and ``--http``)
and ``mcp show``, and ``analyse`` through ``reports/ID/calibration.json`` are each handed
a FIFO, ``/dev/zero`` and a folder: each exits 2 naming the file, with no traceback. On
the code before this issue they read ``/dev/zero`` until MemoryError and waited forever
on the FIFO: every command runs in a child process with a timeout and a memory limit, so
a regression fails here instead of hanging the suite or filling the machine.

The stored calibration is read as a typed document pinned by the sha256 of its whole
content: an edited one (a row's estimate changed) or a mistyped one is exit 3 naming the
file; before, an edit was shown as the registration's own and a mistyped row crashed
``analyse`` with a traceback.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from prereg.core.errors import BadInput
from prereg.core.safeio import read_input, split_lines
from prereg.core.workspace import Workspace
from prereg.reports.calibration.stored import content_digest, store_calibration
from tests.integrity.tamper_tools import PILOT, PILOT_ID, prereg

JUDGED = "podcast-selection-judged"
#: Long enough for a loaded machine's start-up; a hang is what it bounds, not speed.
TIMEOUT = 240
MEMORY = 3 * 1024**3


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``prereg ARGS`` in a child with a timeout and a memory limit (never a hang)."""
    return subprocess.run(
        [sys.executable, "-m", "prereg", *map(str, args)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=_limit_memory,
        check=False,
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pilot registered with 4 runs and exported; the judged study registered."""
    root = tmp_path_factory.mktemp("safe") / "ws"
    assert prereg("init", root)[0] == 0
    assert prereg("-w", root, "register", root / PILOT)[0] == 0
    assert prereg("-w", root, "run", PILOT_ID, "--json", "--max-units", "4")[0] == 0
    assert prereg("-w", root, "register", root / "drafts" / f"{JUDGED}.yaml")[0] == 0
    assert prereg("-w", root, "export", PILOT_ID, "--out", root.parent / "good.jsonl")[0] == 0
    return root


@pytest.fixture
def workspace(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    shutil.copytree(template, root, symlinks=True)
    shutil.copy(template.parent / "good.jsonl", tmp_path / "good.jsonl")
    return root


def make_special(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()


#: (name, the special file relative to the workspace's parent, the command's arguments)
Case = tuple[str, str, Callable[[Path, Path], list[str | Path]]]
CASES: list[Case] = [
    ("import jsonl", "in.jsonl", lambda ws, f: ["-w", ws, "import", f]),
    ("import csv", "in.csv", lambda ws, f: ["-w", ws, "import", f]),
    ("import parquet", "in.parquet", lambda ws, f: ["-w", ws, "import", f]),
    (
        "import verdicts beside",
        "good.jsonl.verdicts.jsonl",
        lambda ws, f: ["-w", ws, "import", ws.parent / "good.jsonl"],
    ),
    (
        "import inspect",
        "log.eval",
        lambda ws, f: ["-w", ws, "import", "--from", "inspect", "--registration", PILOT_ID, f],
    ),
    ("judge --gold", "gold.csv", lambda ws, f: ["-w", ws, "judge", JUDGED, "--gold", f]),
    (
        "judge --import",
        "verdicts.jsonl",
        lambda ws, f: ["-w", ws, "judge", PILOT_ID, "--import", f],
    ),
    ("mcp serve", "snap.json", lambda ws, f: ["mcp", "serve", f]),
    ("mcp serve --http", "snap.json", lambda ws, f: ["mcp", "serve", "--http", "--port", "0", f]),
    ("mcp show", "snap.json", lambda ws, f: ["mcp", "show", f]),
    (
        "analyse calibration",
        f"ws/reports/{PILOT_ID}/calibration.json",
        lambda ws, f: ["-w", ws, "analyse", PILOT_ID, "--allow-incomplete"],
    ),
]


@pytest.mark.parametrize("kind", ["fifo", "devzero", "folder"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_special_file_is_refused_with_exit_2_naming_it(
    case: Case, kind: str, workspace: Path
) -> None:
    name, relative, argv = case
    special = workspace.parent / relative
    make_special(special, kind)
    result = run_cli(*argv(workspace, special), cwd=workspace.parent)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (name, kind, result.returncode, result.stderr[-2000:])
    assert special.name in result.stderr, result.stderr
    expected = {
        "fifo": ["FIFO"],
        "devzero": ["character device"],
        "folder": ["folder", "directory"],
    }
    assert any(word in result.stderr for word in expected[kind]), result.stderr


def test_the_safe_reader_bounds_size_and_splits_jsonl_at_newline_only(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(BadInput) as caught:
        read_input(big, limit=1024, what="an export file")
    assert caught.value.exit_code == 2 and caught.value.file == str(big)
    assert "over the 1 KiB limit for an export file" in caught.value.message
    text = '{"a":"one\u2028two\u2029three\x85four\x0bfive\x0csix\x1cseven"}\r\n{"b":1}\n'
    assert split_lines(text) == [
        '{"a":"one\u2028two\u2029three\x85four\x0bfive\x0csix\x1cseven"}',
        '{"b":1}',
    ]


# ---- the stored calibration: its whole content digested, read typed ---------------------


def _digest(ws: Path) -> str:
    code, out = prereg("-w", ws, "show", PILOT_ID, "--json")
    assert code == 0
    return str(json.loads(out)["digest"])


def _calibration(ws: Path) -> Path:
    doc = {
        "digest": _digest(ws),
        "seed": 11,
        "sims": 60,
        "bootstrap_draws": 200,
        "design": {},
        "rows": [
            {
                "label": "primary",
                "test": "fisher_exact",
                "quantity": "power",
                "scenario": "effect",
                "nominal": 0.8,
                "estimate": 0.75,
                "mc_se": 0.05,
                "verdict": "ok",
                "sims": 60,
                "note": "",
            }
        ],
    }
    return store_calibration(Workspace(ws), PILOT_ID, doc)


def _analyse(ws: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete", "--json", cwd=ws.parent)


def test_an_intact_calibration_is_shown(workspace: Path) -> None:
    _calibration(workspace)
    result = _analyse(workspace)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)["calibration"]
    assert shown is not None and shown["rows"][0]["estimate"] == 0.75


def test_an_edited_calibration_is_exit_3_naming_the_file(workspace: Path) -> None:
    path = _calibration(workspace)
    doc = json.loads(path.read_text())
    doc["rows"][0]["estimate"] = 0.99  # the digest field still says this registration
    path.write_text(json.dumps(doc))
    result = _analyse(workspace)
    assert result.returncode == 3, result.stderr
    assert "calibration.json" in result.stderr and "edited" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "mistype",
    [
        lambda d: d.__setitem__("rows", ["not a row"]),
        lambda d: d.__setitem__("rows", "abc"),
        lambda d: d["rows"][0].__setitem__("estimate", "high"),
        lambda d: d.__setitem__("design", 5),
        lambda d: d.__setitem__("sims", {"n": 1}),
    ],
    ids=["row-string", "rows-string", "estimate-text", "design-number", "sims-object"],
)
def test_a_mistyped_calibration_is_exit_3_never_a_traceback(
    workspace: Path, mistype: Callable[[dict[str, object]], None]
) -> None:
    path = _calibration(workspace)
    doc = json.loads(path.read_text())
    mistype(doc)
    doc["content_digest"] = content_digest(doc)  # recomputed: only the types are wrong
    path.write_text(json.dumps(doc))
    result = _analyse(workspace)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 3, result.stderr
    assert "calibration.json" in result.stderr


def test_a_calibration_without_a_content_digest_is_not_shown(workspace: Path) -> None:
    path = _calibration(workspace)
    doc = json.loads(path.read_text())
    del doc["content_digest"]
    doc["rows"][0]["estimate"] = 0.99
    path.write_text(json.dumps(doc))
    result = _analyse(workspace)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["calibration"] is None
    assert "content digest" in report["calibration_note"]


@pytest.mark.parametrize("command", ["list", "show"])
def test_a_fifo_in_place_of_a_frozen_copy_is_exit_3_never_a_hang(
    workspace: Path, command: str
) -> None:
    frozen = workspace / "registry" / "frozen" / f"{PILOT_ID}.json"
    frozen.unlink()
    os.mkfifo(frozen)
    args = [command] if command == "list" else [command, PILOT_ID]
    result = run_cli("-w", workspace, *args, cwd=workspace.parent)
    assert result.returncode == 3, result.stderr
    assert f"{PILOT_ID}.json" in result.stderr and "FIFO" in result.stderr
