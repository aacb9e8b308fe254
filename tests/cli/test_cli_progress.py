"""Progress when stderr is not a terminal: plain periodic lines, never a cut-off bar
(issue 16, item 5)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from prereg.commands.progress import PLAIN_EVERY_S, RichProgress
from prereg.runners.record import RunRecord
from tests.cli.helpers import PILOT, PILOT_ID, prereg

LINE = re.compile(
    r"^music-library-pilot: (done, )?\d+/\d+ units, \d+ succeeded, \d+ infra, "
    r"spend not measured, [\d.-]+/s, \d+s$"  # the local host prices nothing
)


def test_run_into_a_pipe_prints_whole_plain_lines(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    done = prereg("-w", ws, "run", PILOT_ID, "--max-units", "40", env={"COLUMNS": "40"})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "music-library-pilot: 40 unit(s) to run"
    assert all(LINE.match(line) for line in lines[1:]), lines
    assert lines[-1].startswith("music-library-pilot: done, 40/40 units, ")
    assert 2 <= len(lines) - 1 <= 11  # each tenth at most, and the final line
    assert "…" not in done.stderr and "━" not in done.stderr  # no bar, nothing cut


class _Record:
    """What the progress reads of a record."""

    def __init__(self, ok: bool = True, cost_usd: float | None = 0.25) -> None:
        self.status = "ok" if ok else "infra_error"
        self.success = ok
        self.cost_usd = cost_usd


def _plain(clock: list[float]) -> tuple[RichProgress, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=30)
    return RichProgress("reg", console, clock=lambda: clock[0]), out


def test_plain_lines_every_few_seconds_and_each_tenth() -> None:
    clock = [100.0]
    progress, out = _plain(clock)
    assert progress.plain
    progress.start(total=1000, already=24)
    for i in range(3):  # few units, but time passes: a line each PLAIN_EVERY_S
        clock[0] += PLAIN_EVERY_S
        progress.advance(_record(ok=i != 1), spent=0.5)
    for _ in range(97):  # the first tenth (100 units) is reached: one more line
        progress.advance(_record(), spent=1.25)
    progress.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "reg: 1000 unit(s) to run (+24 recorded earlier)"
    assert lines[1].startswith("reg: 1/1000 units, 1 succeeded, 0 infra, $0.50")
    assert lines[2].startswith("reg: 2/1000 units, 1 succeeded, 1 infra")
    assert lines[4].startswith("reg: 100/1000 units, 99 succeeded, 1 infra, $1.25")
    assert lines[-1].startswith("reg: done, 100/1000 units")
    assert len(lines) == 6  # start, three by time, one tenth, done


def test_a_terminal_still_gets_the_bar() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    assert not RichProgress("reg", console).plain


def _record(ok: bool = True, cost_usd: float | None = 0.25) -> RunRecord:
    return _Record(ok, cost_usd)  # type: ignore[return-value]


def test_a_host_that_prices_nothing_shows_spend_not_measured() -> None:
    """The local host and the replay record no cost: the plain lines say so, never $0.00
    (invariant 7); a host whose records carry a cost shows it."""
    clock = [100.0]
    progress, out = _plain(clock)
    progress.start(total=10, already=0)
    for _ in range(10):
        clock[0] += PLAIN_EVERY_S
        progress.advance(_record(cost_usd=None), spent=0.0)
    progress.stop()
    lines = out.getvalue().splitlines()[1:]
    assert lines and all("spend not measured" in line and "$" not in line for line in lines)
