"""``prereg judge``'s progress speaks of runs judged and unparseable answers, not of units
and successes (the run's bar keeps its own words)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from prereg.commands.progress import PLAIN_EVERY_S, JudgeProgress, RichProgress
from prereg.runners.judging.verdicts import Verdict
from tests.judging.gold_helpers import stored_verdicts
from tests.judging.helpers import local_judges, registration, write

LINE = re.compile(
    r"^judge judged: (done, )?\d+/\d+ runs judged, \d+ unparseable, \d+ infra, "
    r"\$\d+\.\d\d, [\d.-]+/s, \d+s$"
)


def _verdict(parse: str) -> Verdict:
    return SimpleNamespace(parse=parse)  # type: ignore[return-value]


def _plain(clock: list[float], cls: type[RichProgress]) -> tuple[Any, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=30)
    return cls("reg", console, clock=lambda: clock[0]), out


def test_plain_judge_lines_count_runs_judged_unparseable_and_infra() -> None:
    clock = [50.0]
    progress, out = _plain(clock, JudgeProgress)
    progress.start(total=100, already=7)
    costs = (0.1, 0.25, 0.0)  # a verdict, an unparseable one, an infra failure
    for kind, cost in zip(("ok", "unparseable", None), costs, strict=True):
        clock[0] += PLAIN_EVERY_S  # time passes: one line each
        progress.judged(None if kind is None else _verdict(kind), cost)
    progress.stop()
    lines = out.getvalue().splitlines()
    assert lines[0] == "reg: 100 verdict(s) to ask (+7 judged earlier)"
    # the spend is the sum of the requests' costs: 0.1, then 0.1 + 0.25 = 0.35
    assert lines[1].startswith("reg: 1/100 runs judged, 0 unparseable, 0 infra, $0.10, ")
    assert lines[2].startswith("reg: 2/100 runs judged, 1 unparseable, 0 infra, $0.35, ")
    assert lines[3].startswith("reg: 2/100 runs judged, 1 unparseable, 1 infra, $0.35, ")
    assert lines[-1].startswith("reg: done, 2/100 runs judged, 1 unparseable, 1 infra")
    assert len(lines) == 5
    assert not any("succeeded" in line or " units" in line for line in lines)


def test_the_run_bar_keeps_its_words() -> None:
    clock = [0.0]
    progress, out = _plain(clock, RichProgress)
    progress.start(total=10, already=0)
    clock[0] += PLAIN_EVERY_S
    progress.advance(SimpleNamespace(status="ok", success=True, cost_usd=0.5), 0.5)  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    assert lines == ["reg: 10 unit(s) to run", lines[1]]
    assert lines[1].startswith("reg: 1/10 units, 1 succeeded, 0 infra, $0.50")


def test_judge_into_a_pipe_prints_its_own_plain_lines(cli, ws: Path) -> None:
    path = write(ws, registration("judged", judge=local_judges(), repeats=2))
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", "judged", "--no-progress").code == 0
    done = cli("-w", ws, "judge", "judged")  # stderr captured: not a terminal
    assert done.code == 0, done.stderr
    n = len(stored_verdicts(ws))
    lines = [line for line in done.stderr.splitlines() if line.startswith("judge judged:")]
    assert lines[0] == f"judge judged: {n} verdict(s) to ask"
    assert all(LINE.match(line) for line in lines[1:]), lines
    assert lines[-1].startswith(f"judge judged: done, {n}/{n} runs judged, 0 unparseable, ")
