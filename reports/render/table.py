"""Terminal tables that fit the width without cutting an identifier or a number (issue 37).

Asked for a table wider than the terminal, rich squeezes its columns and cuts their
cells: in a pipe or a CI log (80 columns) long arm ids all read "menu-8--workf…" and an
interval "26.…". Here every column is kept at least as wide as its longest cell
(identifiers and numbers, never wrapped) or its longest word (columns named as prose,
wrapped between words). When those widths do not fit, the columns named to give way are
left out one at a time, as ``prereg list`` does (the caption says which); when even then
they do not fit, each row is printed as a paragraph: its first cell on a line of its
own, then ``column: value`` pairs wrapped between words. No cell is ever cut.

Cells are ``rich.text.Text`` made by :func:`prereg.core.untrusted.display` (strings are
passed through it here), so untrusted text never acts on the terminal.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from prereg.core.untrusted import display

Cell = str | Text

#: The narrowest a prose column is squeezed to (unless its text is shorter): narrower,
#: a sentence becomes a column of single words, and a column giving way reads better.
PROSE_LEAST = 20

#: How far a paragraph's ``column: value`` pairs are indented under the row's first cell.
INDENT = 2


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else display(cell)


def _whole(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def _least(text: Text, comfortable: int) -> int:
    """The narrowest a wrapped cell may be: its longest word, and ``comfortable`` unless
    the whole text is shorter."""
    return max(longest_word(text.plain), min(_whole(text), comfortable))


def longest_word(text: str) -> int:
    """The width of the longest run without whitespace: where wrapping cannot break."""
    return max((cell_len(word) for word in text.split()), default=0)


def overhead(columns: int, edge: bool = True) -> int:
    """What rich's default box adds to the cells: a space each side of every column and
    a border between two, and the outer borders unless ``edge`` is False."""
    return 3 * columns + (1 if edge else -1)


def fit(
    natural: Sequence[int], least: Sequence[int], width: int, edge: bool = True
) -> list[int] | None:
    """Column widths within ``width``: the natural ones when they fit, else at least
    ``least`` each, the room left shared in proportion to what each column lacks; None
    when even ``least`` does not fit."""
    room = width - overhead(len(natural), edge)
    if sum(natural) <= room:
        return list(natural)
    if sum(least) > room:
        return None
    widths = list(least)
    spare = room - sum(least)
    lacking = [n - w for n, w in zip(natural, widths, strict=True)]
    total = sum(lacking)
    for i, lack in enumerate(lacking):
        widths[i] += lack * spare // total
    spare = room - sum(widths)
    for i in sorted(range(len(widths)), key=lambda k: widths[k] - natural[k]):
        if spare <= 0:
            break
        if widths[i] < natural[i]:
            widths[i] += 1
            spare -= 1
    return widths


def print_table(
    console: Console,
    title: Cell,
    header: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    prose: Collection[str] = (),
    drop: Sequence[str] = (),
    shown_in: str = "report.md and report.html",
) -> None:
    """Print ``rows`` under ``header`` as wide as ``console`` allows, cutting nothing.

    ``prose``: columns of sentences, which may wrap between words (every other column
    is shown whole on one line); ``drop``: the columns that give way, in that order,
    when the table does not fit; ``shown_in``: where a left-out column can be read.
    """
    heads = [display(h) for h in header]
    cells = [[_text(cell) for cell in row] for row in rows]
    natural = [
        max([_whole(h), *(_whole(r[i]) for r in cells)], default=1) for i, h in enumerate(heads)
    ]
    least = [
        max(
            [
                longest_word(heads[i].plain),
                *(_least(r[i], PROSE_LEAST) if name in prose else _whole(r[i]) for r in cells),
            ],
            default=1,
        )
        for i, name in enumerate(header)
    ]
    keep = list(range(len(header)))
    left_out: list[str] = []
    for name in (None, *drop):
        if name is not None:
            if name not in header or len(keep) == 1:
                continue
            keep.remove(header.index(name))
            left_out.append(name)
        most, fewest = [max(natural[i], 1) for i in keep], [max(least[i], 1) for i in keep]
        edge = fit(most, fewest, console.width) is not None  # else try without the frame
        widths = fit(most, fewest, console.width, edge)
        if widths is None:
            continue
        caption = (
            display(f"left out at this width: {', '.join(left_out)} (in {shown_in})")
            if left_out
            else None
        )
        table = Table(title=_text(title), caption=caption, show_edge=edge)
        for i, width in zip(keep, widths, strict=True):
            table.add_column(heads[i], width=width, overflow="fold")
        for row in cells:
            table.add_row(*(row[i] for i in keep))
        console.print(table)
        return
    print_paragraphs(console, title, heads, cells)


def print_paragraphs(
    console: Console, title: Cell, heads: Sequence[Text], rows: Sequence[Sequence[Text]]
) -> None:
    """Each row as a paragraph, for a terminal too narrow for the table: the first cell
    on its own line, then the others as ``column: value`` pairs, indented and wrapped
    between words (a word wider than the terminal folds onto the next line whole)."""
    console.print(_text(title), style="italic")
    for row in rows:
        console.print(row[0], style="bold")
        pairs = [Text.assemble(heads[i], ": ", row[i]) for i in range(1, len(row))]
        if not pairs:
            continue
        for line in Text("; ").join(pairs).wrap(console, max(console.width - INDENT, 1)):
            line.rstrip()
            console.print(Text(" " * INDENT).append_text(line), soft_wrap=True)
