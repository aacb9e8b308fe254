"""``analyse`` on a narrow terminal cuts no identifier and no number (issue 37).

Rich renders at 80 columns whenever stdout is not a terminal (every pipe and CI log).
There the arms table of a factorial design showed four alike "menu-8--workf…" rows and
intervals such as "26.…". These tests render real reports, the bundled factorial and
the ToolBottleneckBench study (arm ids of up to 62 characters), at several widths and
check that every arm id, every interval and every cell of the study tables shown
appears whole (whitespace removed, since a paragraph may wrap between words or fold a
word longer than the line), in the order of report.json, and that no "…" is printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from prereg.cli import main
from prereg.reports.model import Report
from prereg.reports.render import terminal as render_terminal
from prereg.reports.render.text import control_interval, interval, points_interval, primary_line
from tests.waiting import HANG_S

WIDTHS = (40, 60, 80, 100, 120)


def _prereg(*args: str | Path) -> dict[str, Any]:
    """``prereg ARGS --json`` in-process: its one document."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([*(str(a) for a in args), "--json"])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    assert code == 0, (args, out.getvalue()[-2000:])
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def _demo(root: Path, *args: str) -> dict[str, Any]:
    data = _prereg("demo", *args, "--dir", root)
    data["root"] = root
    return data


@pytest.fixture(scope="module")
def factorial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _demo(tmp_path_factory.mktemp("factorial") / "ws", "--example", "factorial")


@pytest.fixture(scope="module")
def study(toolbottleneck_demo: dict[str, Any]) -> dict[str, Any]:
    """The study demo's capacity report (the session's fixture, tests/conftest.py)."""
    return toolbottleneck_demo


@pytest.fixture(scope="module")
def controls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundled draft with all four instrument controls, run on the local host."""
    root = tmp_path_factory.mktemp("controls") / "ws"
    draft = "podcast-selection-controls"
    _prereg("init", root)
    _prereg("-w", root, "register", root / "drafts" / f"{draft}.yaml")
    _prereg("-w", root, "run", draft, "--no-progress")
    data = _prereg("-w", root, "analyse", draft)
    data["root"] = root
    return data


def flat(text: str) -> str:
    """``text`` without whitespace: a wrapped or folded string reads whole again."""
    return "".join(text.split())


def report_of(data: dict[str, Any]) -> Report:
    return Report.model_validate_json(Path(data["files"]["report.json"]).read_text())


def rendered(data: dict[str, Any], width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    render_terminal.render(report_of(data), console)
    return console.export_text()


def span(iv: dict[str, Any]) -> str:
    """An arm's interval as the terminal writes it (percent, one decimal)."""
    return f"{100 * iv['low']:.1f}-{100 * iv['high']:.1f}%"


def in_order(text: str, needles: list[str], start: str, end: str | None = None) -> None:
    """Each needle appears whole, in this order, between ``start`` and ``end``."""
    body = flat(text)
    first = body.index(flat(start))
    last = body.index(flat(end), first) if end else len(body)
    at = first
    for needle in needles:
        found = body.find(flat(needle), at, last)
        assert found >= 0, f"{needle!r} is not whole (after position {at})"
        at = found + len(flat(needle))


def expected_rows(data: dict[str, Any]) -> list[str]:
    """Per arm: its id, then the interval, in report order."""
    out = []
    for arm in data["arms"]:
        out += [arm["id"], span(arm["interval"])]
    return out


def common_checks(data: dict[str, Any], text: str, width: int) -> None:
    assert "…" not in text
    for line in text.splitlines():
        assert cell_len(line) <= width, line
    report = report_of(data)
    in_order(text, expected_rows(data), "Jeffreys intervals", primary_line(report)[:40])
    contrasts = []
    for c in report.contrasts:
        contrasts += [c.id, interval(c.interval)]
    if contrasts:
        in_order(text, contrasts, "registered contrasts")
    # the verdict's reason, whole
    assert flat(data["verdict_detail"]["reason"]) in flat(verdict_box(text))


def verdict_box(text: str) -> str:
    """The text inside the verdict's panel (the last one), its frame taken off."""
    lines = text.splitlines()
    top = max(i for i, line in enumerate(lines) if line.startswith("╭"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    return "\n".join(line.strip().strip("│") for line in lines[top + 1 : bottom])


@pytest.mark.parametrize("width", WIDTHS)
def test_the_factorial_cuts_nothing(factorial: dict[str, Any], width: int) -> None:
    text = rendered(factorial, width)
    common_checks(factorial, text, width)
    ir = report_of(factorial).invokerank
    assert ir is not None
    shown = []
    for arm in ir.arms:
        ninety = next(iv for iv in arm.intervals if round(iv.level, 2) == 0.9)
        shown += [arm.arm, points_interval(ninety)]
    in_order(text, shown, "InvokeRank score per arm")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_study_cuts_nothing(study: dict[str, Any], width: int) -> None:
    text = rendered(study, width)
    common_checks(study, text, width)
    for table in study["toolbottleneck"]["tables"]:
        if not table["title"].startswith(render_terminal.STUDY_TERMINAL):
            continue
        cells = [cell for row in table["rows"] for cell in row]
        in_order(text, cells, table["title"][:30])
    # no arm has an InvokeRank score: one line says so, not a row per arm repeating it
    assert "InvokeRank score per arm" not in text
    assert flat("InvokeRank: not computed for any arm") in flat(text)


def test_the_arms_are_told_apart_at_80_columns(study: dict[str, Any]) -> None:
    """The case of the issue: every arm's row starts with its whole id."""
    text = rendered(study, 80)
    lines = [line.strip() for line in text.splitlines()]
    for arm in study["arms"]:
        assert arm["id"] in lines or any(
            line.startswith(f"│ {arm['id']} ") or line.startswith(f"{arm['id']} ") for line in lines
        ), arm["id"]


def test_a_table_that_fits_stays_a_table(factorial: dict[str, Any]) -> None:
    wide = rendered(factorial, 200)
    assert "┃ arm" in wide and "left out at this width" not in wide
    narrow = rendered(factorial, 80)  # the arms table keeps its ids, leaving columns out
    assert "left out at this width: infra, ok, surface" in " ".join(narrow.split())
    assert "│ profile-local-careful--cap-1024 │" in narrow


def test_analyse_in_a_pipe_honours_columns(factorial: dict[str, Any]) -> None:
    """The real command, its stdout a pipe: rich takes the width from COLUMNS."""
    env = {**os.environ, "COLUMNS": "60"}
    done = subprocess.run(
        [sys.executable, "-m", "prereg", "-w", str(factorial["root"])]
        + ["analyse", factorial["registration"]],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_S,  # a hang guard, never a speed expectation
    )
    assert done.returncode == 0, done.stderr
    common_checks(factorial, done.stdout, 60)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_controls_cut_nothing(controls: dict[str, Any], width: int) -> None:
    text = rendered(controls, width)
    common_checks(controls, text, width)
    shown = []
    for c in report_of(controls).controls:
        # the rule is prose: in a table it wraps between words, each word whole
        shown += [c.check, c.arm, control_interval(c), *c.rule.split()]
        assert c.verdict in text
    in_order(text, shown, "instrument controls")
