"""The terminal's tables and verdict on a narrow terminal cut nothing (issue 37).

:func:`prereg.reports.render.table.print_table` keeps identifier and number columns
whole, wraps prose columns between words, leaves out the columns named to give way
(saying so), drops the outer frame when that is enough, and prints rows as paragraphs
when no table fits. The verdict prints whole, with what decided it.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from prereg.reports.model import Report
from prereg.reports.render import terminal as render_terminal
from prereg.reports.render.table import fit, overhead, print_table
from tests.reports import append, make_lab, paired_records, register, registration, seed002_outcomes
from tests.reports.test_narrow_terminal import flat, in_order, verdict_box

LONG = "menu-128--workflow-high--encoding-linked--policy-sim-truncating"
HEADER = ["arm", "rate", "interval", "note", "DEFF"]
ROWS = [
    [LONG, "93.8%", "74.3-99.3%", "the careful profile reads every tool description", "1.00"],
    ["v8-fixed", "100.0%", "79.9-100.0%", "short", "1.46"],
    ["v128-fixed-steady", "18.8%", "-0.375 to -0.188 (95%)", "a b c d e f g h i j k l m n", "0.9"],
]


def _print(width: int, **options: Any) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    print_table(console, "a table", HEADER, ROWS, **options)
    return console.export_text()


@pytest.mark.parametrize("width", range(12, 161, 4))
def test_no_width_cuts_a_cell(width: int) -> None:
    text = _print(width, prose={"note"}, drop=("DEFF", "note"))
    assert "…" not in text
    assert all(cell_len(line) <= width for line in text.splitlines())
    note_shown = "DEFF, note" not in " ".join(text.split())  # else it gave way, said so
    for row in ROWS:  # whole cells in order; a prose cell's words each whole
        in_order(text, [row[0], row[1], row[2]], "a table")
        if note_shown:
            in_order(text, row[3].split(), row[0])


def test_prose_wraps_between_words_while_ids_stay_whole() -> None:
    # the ids and numbers need 63 + 6 + 22 + 4; the prose column gets the rest
    width = 63 + 6 + 22 + 4 + 20 + overhead(5)
    text = _print(width, prose={"note"})
    assert "┃ arm" in text and "left out" not in text
    assert any(line.startswith(f"│ {LONG} │") for line in text.splitlines())
    assert "│ -0.375 to -0.188 (95%) │" in text
    assert "the careful profile" in text and "reads every tool description" not in text


def test_columns_give_way_in_the_order_given_and_the_caption_says_so() -> None:
    width = 63 + 6 + 22 + overhead(3)  # room for arm, rate and interval only
    text = " ".join(_print(width, prose={"note"}, drop=("DEFF", "note")).split())
    assert "left out at this width: DEFF, note" in text
    assert "┃ arm ┃ rate ┃ interval ┃" in text and "1.46" not in text


def test_the_frame_goes_before_a_column() -> None:
    natural = [63, 6, 22, 48, 4]
    framed = sum(natural) + overhead(5)
    text = _print(framed - 2, drop=("DEFF",))
    assert "left out" not in text and "1.46" in text
    assert not any(line.startswith(("┃", "│", "┏", "└")) for line in text.splitlines())
    assert _print(framed).splitlines()[1].startswith("┏")


def test_too_narrow_for_any_table_each_row_is_a_paragraph() -> None:
    text = _print(50, prose={"note"}, drop=("DEFF", "note"))
    lines = text.splitlines()
    assert lines[0] == "a table"
    assert lines[1] == LONG[:50] and lines[2] == LONG[50:]  # folded, not cut
    assert lines[3] == "  rate: 93.8%; interval: 74.3-99.3%; note: the"
    assert "DEFF: 1.46" in text  # a paragraph leaves nothing out
    assert all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize(
    ("natural", "least", "width"),
    [
        (n, [min(a, b) for a, b in zip(n, lst, strict=True)], w)
        for n, lst, w in itertools.product(
            [[10, 30, 5], [63, 6, 22, 48, 4], [1, 1]],
            [[3, 30, 5], [8, 2, 9, 20, 4], [1, 1]],
            [20, 40, 80, 120],
        )
        if len(n) == len(lst)
    ],
)
def test_fit_stays_within_the_width_and_the_bounds(
    natural: list[int], least: list[int], width: int
) -> None:
    widths = fit(natural, least, width)
    room = width - overhead(len(natural))
    if sum(least) > room:
        assert widths is None
        return
    assert widths is not None
    assert all(lo <= w <= hi for lo, w, hi in zip(least, widths, natural, strict=True))
    assert sum(widths) == min(room, sum(natural))


# -- the verdict ---------------------------------------------------------------------------


@pytest.fixture
def not_supported(cli: Any, ws: Path) -> Report:
    """A confirmatory registration read not_supported (4 discordant pairs against 3)."""
    tasks = make_lab(ws, n_tasks=24)
    digest = register(cli, ws, registration("lab-narrow"))
    append(ws, paired_records("lab-narrow", digest, tasks, *seed002_outcomes(24, 10, 11, 7)))
    result = cli("-w", ws, "analyse", "lab-narrow", "--json")
    assert result.code == 0, result.stderr
    return Report.model_validate_json((ws / "reports/lab-narrow/report.json").read_text())


def _render(report: Report, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    render_terminal.render(report, console)
    return console.export_text()


@pytest.mark.parametrize("width", [40, 60, 80])
def test_the_verdict_and_what_decided_it_print_whole(not_supported: Report, width: int) -> None:
    text = _render(not_supported, width)
    detail = not_supported.verdict_detail
    assert not_supported.verdict == "not_supported" and detail.decided_by == "primary test"
    box = verdict_box(text)
    assert "Verdict: not_supported" in box
    assert flat(f"Decided by: {detail.decided_by}. {detail.reason}") in flat(box)
    assert "…" not in text


def test_a_word_wider_than_a_panel_is_printed_between_rules(not_supported: Report) -> None:
    reason = f"the test rejects at the registered alpha ({LONG}-and-more ahead)"
    detail = not_supported.verdict_detail.model_copy(update={"reason": reason})
    report = not_supported.model_copy(update={"verdict_detail": detail})
    text = _render(report, 60)
    assert "╭" not in text  # a panel would fold the id between its borders
    assert flat(f"Decided by: primary test. {reason}") in flat(text)
    assert "╭" in _render(report, 120)
