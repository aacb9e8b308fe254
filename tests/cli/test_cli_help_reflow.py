"""A command's help fills the terminal's width: the line breaks of its source text are
joined within a paragraph (typer's rich mode keeps them, so at 80 columns a 90-column
source line broke into a long line and a one- or two-word line), list items and indented
lines keep theirs."""

from __future__ import annotations

import pytest

from prereg.commands._common import reflow_help
from tests.cli.helpers import prereg


def test_paragraph_breaks_are_joined_and_list_items_kept() -> None:
    text = "Summary.\n\nOne long\nsentence, wrapped.\n\n- an item\n- another\n  indented\nEnd."
    assert reflow_help(text) == (
        "Summary.\n\nOne long sentence, wrapped.\n\n- an item\n- another\n  indented\nEnd."
    )
    assert reflow_help(reflow_help(text)) == reflow_help(text)  # idempotent


@pytest.mark.parametrize("command", [("study", "run"), ("study", "toolsandbox"), ("demo",)])
def test_help_paragraphs_fill_80_columns(command: tuple[str, ...]) -> None:
    done = prereg(*command, "--help", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    description = done.stdout.split("╭─")[0].splitlines()[3:]  # after "Usage:" and the summary
    paragraph: list[str] = []
    for line in [*description, ""]:
        if line.strip():
            paragraph.append(line.strip())
            continue
        for inner in paragraph[:-1]:  # every line but a paragraph's last is filled
            assert len(inner) >= 50, (inner, paragraph)
        paragraph = []
