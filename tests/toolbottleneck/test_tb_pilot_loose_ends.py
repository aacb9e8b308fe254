"""The loose ends of the pilot's slice: the census labels the turn limit structurally
unreachable (reading F3), and ``prereg study run``'s report gives the repairs' sentinel
gains and Table 8, each recomputed here from the run's records."""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from prereg.reports.toolbottleneck.census import TURN_LIMIT_UNREACHABLE, census_tables
from prereg.runners.toolbottleneck.host import Contract
from tests.toolbottleneck.helpers import BUNDLED

FAMILIES = [
    "overdue-case-escalation",
    "invoice-payment-approval",
    "external-share-review",
    "meeting-room-conflict",
]


@dataclass(frozen=True)
class Row:
    arm: str
    task_id: str
    repeat: int
    status: str
    success: bool | None
    terminal_flag: str | None
    first_unmet_obligation: str | None
    calls: int


ROWS = [
    Row("a", "t1", 0, "ok", False, "completion_cap", "selection", 0),
    Row("a", "t2", 0, "ok", True, None, None, 3),
]


def test_the_census_labels_an_unreachable_turn_limit() -> None:
    census, crossed = (t[1] for t in census_tables(ROWS, contract=Contract(turn_slack=2))[:2])
    assert TURN_LIMIT_UNREACHABLE in census and "turn_limit" not in census
    assert TURN_LIMIT_UNREACHABLE in crossed
    # at turn slack 0 the turn limit can end an episode: the plain label
    census0, crossed0 = (t[1] for t in census_tables(ROWS, contract=Contract(turn_slack=0))[:2])
    assert "turn_limit" in census0 and TURN_LIMIT_UNREACHABLE not in census0
    assert "turn_limit" in crossed0
    # no contract (a registered study's report today): unlabelled, as before
    assert "turn_limit" in census_tables(ROWS)[0][1]


def write_study(tmp: Path, repeats: int) -> Path:
    (tmp / "families").mkdir(parents=True)
    for name in FAMILIES:
        shutil.copy(BUNDLED / f"{name}.yaml", tmp / "families" / f"{name}.yaml")
    arm = {"workflow": "low", "encoding": "raw"}
    doc: dict[str, Any] = {
        "id": "loose-ends",
        "families": [f"families/{n}.yaml" for n in FAMILIES],
        "repeats": repeats,
        "baseline": "v8",
        "policy": {"profile": "sim-truncating"},
        "arms": [
            {"id": "v8", "menu": 8, **arm},
            {"id": "v64", "menu": 64, **arm},
            {"id": "v8-fixed", "menu": 8, "menu_mode": "fixed", **arm},
            {"id": "v64-fixed", "menu": 64, "menu_mode": "fixed", **arm},
        ],
        "repairs": [
            {
                "id": "routed-menu",
                "pressure": "V",
                "repaired": {"stressed": "v64", "unstressed": "v8"},
                "control": {"stressed": "v64-fixed", "unstressed": "v8-fixed"},
            }
        ],
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _section(md: str, title: str) -> str:
    start = md.index(title)
    end = md.find("\n## ", start + 1)
    return md[start : None if end < 0 else end]


def test_study_run_reports_sentinel_gains_table_8_and_the_turn_limit_label(
    cli, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    study = write_study(tmp_path / "s", repeats=2)
    result = cli("study", "run", study, "--out", out, "--draws", "200", "--json")
    assert result.code == 0, result.stderr
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    md = (out / "report.md").read_text()

    # sentinel gain: per family, mean success of v64 minus v64-fixed over the two runs,
    # families weighting equally (one seed: a task is a family)
    succ: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        succ[(r["arm"], r["family"])].append(float(r["success"]))
    gain = np.mean([np.mean(succ[("v64", f)]) - np.mean(succ[("v64-fixed", f)]) for f in FAMILIES])
    sentinel = _section(md, "## Sentinel repeats: each repair's stress gain")
    row = next(line for line in sentinel.splitlines() if line.startswith("| routed-menu"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["routed-menu", "V", "4", "4", "2"]
    assert cells[5].startswith(f"{round(100 * gain, 1) + 0.0:+.1f} pp")
    # four families: below the cluster floor, so no interval is printed
    assert "no interval" in cells[5] and "[" not in cells[5]

    # Table 8: per configuration, its arms at its largest menu; truncated = the first
    # response cut (flag completion_cap after one request)
    table8 = _section(md, "## Truncated first responses at the largest menu (seed Table 8)")
    for mode in ("routed", "fixed"):
        arm = "v64" if mode == "routed" else "v64-fixed"
        mine = [r for r in records if r["arm"] == arm and r["turns"] >= 1]
        cut = sum(1 for r in mine if r["terminal_flag"] == "completion_cap" and r["turns"] == 1)
        line = next(x for x in table8.splitlines() if f"sim-truncating / {mode} / cap 1024" in x)
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1:4] == ["64", str(len(mine)), str(cut)]
        assert (cells[5] == "-") == (cut == 0)

    # the census: at the seed's turn slack the turn limit cannot fire, and says so
    census = _section(md, "## Failure census").replace("\\_", "_")  # Markdown-escaped
    assert TURN_LIMIT_UNREACHABLE in census
    assert not any(r["terminal_flag"] == "turn_limit" for r in records)
    assert all(r["turns"] <= r["call_limit"] + 1 for r in records)


def test_one_run_per_condition_gives_no_sentinel_gain(cli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    study = write_study(tmp_path / "s", repeats=1)
    result = cli("study", "run", study, "--out", out, "--draws", "200")
    assert result.code == 0, result.stderr
    sentinel = _section((out / "report.md").read_text(), "## Sentinel repeats: each repair")
    assert re.search(r"\| routed-menu \| V \| 0 \| 0 \| 0 \| -; no task run twice", sentinel)
