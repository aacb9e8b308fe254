"""Untrusted text on the terminal: escape sequences never reach it raw, rich markup is text.

Issue 12, "Why" point 6: the terminal output of ``analyse`` emitted clear-screen, colour
and OSC 8 link sequences; ``prereg show`` interpreted rich markup in a title and
crashed on ``[/bold]``. The CLI runs in-process with its output captured (not a
terminal, so rich itself writes no escape sequence: any ESC in the output came from
the data).
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from prereg.core.output import dumps
from prereg.core.untrusted import display, display_text, json_safe
from tests.reports import append, make_lab, paired_records, register, registration

SEQUENCES = {
    "clear-screen": "\x1b[2J\x1b[3J\x1b[H",
    "colour": "\x1b[31;1mred\x1b[0m",
    "osc8-link": "\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\",
    "osc52-clipboard": "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07",
    "c1-csi": "\x9b2J\x9d0;title\x9c",
}


def _controls(text: str) -> list[str]:
    """Characters of ``text`` a terminal would act on (newlines aside)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


def _lab(cli: Any, ws: Path, reg_id: str, title: str, tool: str = "Read one item.") -> None:
    tasks = make_lab(ws, n_tasks=6, description=tool, prompt="Show item {k}. " + tool)
    digest = register(cli, ws, registration(reg_id, title=title))
    ok = [[True]] * 6
    append(ws, paired_records(reg_id, digest, tasks, ok, ok))


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_analyse_prints_no_escape_sequence_from_untrusted_text(
    cli: Any, ws: Path, name: str
) -> None:
    sequence = SEQUENCES[name]
    _lab(cli, ws, "lab-term", f"Title {sequence} end", tool=f"Tool {sequence} text")
    result = cli("-w", ws, "analyse", "lab-term")
    assert result.code == 0, result.stderr
    assert _controls(result.stdout) == []
    # shown, escaped, where it was
    assert f"Title {display_text(sequence)} end" in result.stdout


def test_show_prints_rich_markup_in_a_title_as_text(cli: Any, ws: Path) -> None:
    title = "A [bold red]loud[/bold red] [link=https://x.example]claim[/link]"
    make_lab(ws, n_tasks=6)
    register(cli, ws, registration("lab-markup", title=title))
    result = cli("-w", ws, "show", "lab-markup")
    assert result.code == 0, result.stderr
    # the heading line, not only the JSON of the frozen document further down
    assert result.stdout.splitlines()[0] == f"lab-markup: {title}"


def test_show_does_not_crash_on_a_closing_tag_in_a_title(cli: Any, ws: Path) -> None:
    title = "Stray [/bold] closing tag and [/] another"
    make_lab(ws, n_tasks=6)
    register(cli, ws, registration("lab-close", title=title, hypothesis="h [/bold] x"))
    result = cli("-w", ws, "show", "lab-close")
    assert result.code == 0, result.stderr
    assert title in result.stdout and "h [/bold] x" in result.stdout


def test_show_list_and_verify_print_no_escape_sequence(cli: Any, ws: Path) -> None:
    sequence = "".join(SEQUENCES.values())
    make_lab(ws, n_tasks=6)
    register(cli, ws, registration("lab-all", title=f"t {sequence}", hypothesis=sequence))
    for args in (["show", "lab-all"], ["list"], ["verify"], ["split", "show", "lab"]):
        result = cli("-w", ws, *args)
        assert result.code == 0, (args, result.stderr)
        assert _controls(result.stdout) == [], args


def test_json_output_is_the_exact_data_with_nothing_raw() -> None:
    value = "a\x1b[2J b\x9b1m c\u202e d\u2028 e\x7f f\u200b g\U000e0041 é … ±"
    document = dumps({"title": value})
    assert _controls(document.replace("\n", "")) == []
    assert json.loads(document) == {"title": value}
    assert json_safe('"plain é …"') == '"plain é …"'


def test_display_escapes_every_control_and_keeps_markup_as_text() -> None:
    shown = display_text("a\x1b[2J\tb\r\nc\x9b\x00\u2028\U000e0041", multiline=True)
    assert shown == "a\\x1b[2J\tb\nc\\x9b\\x00\\u2028\\U000e0041"
    assert display_text("a\nb\tc") == "a b c" and display_text("x" * 9, limit=4) == "xxx…"
    text = display("[bold]x[/bold] [/]", style="dim")
    assert text.plain == "[bold]x[/bold] [/]" and str(text.style) == "dim"
