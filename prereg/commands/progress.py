"""The progress of ``prereg run`` (units done, successes, spend, rate, ETA) and of
``prereg judge`` (runs judged, unparseable answers, infra failures, spend).

On a terminal, a rich progress bar. When stderr is not a terminal (a log file, CI, a
pipe), a bar would be cut to the console's default width and redrawn into the log, so
plain lines are printed instead: one at the start, then every :data:`PLAIN_EVERY_S`
seconds or each tenth of the units, whichever comes first, and one at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from prereg.core.output import SafeConsole
from prereg.core.untrusted import display_text
from prereg.runners.judging.judge_runs import JudgeProgress as JudgeCallbacks
from prereg.runners.judging.verdicts import Verdict
from prereg.runners.orchestrate import Progress as ProgressCallbacks
from prereg.runners.record import RunRecord

#: Seconds between two plain progress lines (at most; each tenth of the units prints too).
PLAIN_EVERY_S = 5.0


class RichProgress(ProgressCallbacks):
    """Draws on stderr so that stdout stays clean for ``--json``."""

    def __init__(
        self,
        label: str,
        console: Console | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.console = console or SafeConsole(stderr=True)  # a closed pipe: exit 141
        self.plain = not self.console.is_terminal
        self.clock = clock
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.successes = 0
        self.done = 0
        self.failed = 0
        self.total = 0
        self.spent = 0.0
        self.measured = False  # a record carried a cost: the host prices its requests
        self.started = 0.0
        self.last_line = 0.0
        self.last_tenth = 0

    #: the plain first line: what is to do, and what an earlier run did
    intro = "{total} unit(s) to run"
    earlier = " (+{already} recorded earlier)"
    #: the bar's count columns and their starting fields (the judge has its own)
    counts: tuple[str, ...] = ("success {task.fields[successes]}/{task.fields[done]}",)
    fields: dict[str, Any] = {"successes": 0, "done": 0}

    def start(self, total: int, already: int) -> None:
        if self.plain:
            self.total, self.started = total, self.clock()
            self.last_line = self.started
            earlier = self.earlier.format(already=already) if already else ""
            self._line(self.intro.format(total=total) + earlier)
            return
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            *(TextColumn(column) for column in self.counts),
            TextColumn("infra {task.fields[failed]}"),
            TextColumn("{task.fields[spend]}"),
            TextColumn("{task.fields[rate]}/s"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.bar.start()
        label = self._bar_label(already)
        start = {**self.fields, "failed": 0, "spend": self._spend(), "rate": "-"}
        self.task = self.bar.add_task(label, total=total, **start)

    def _bar_label(self, already: int) -> str:
        return f"{self.label} (+{already} earlier)" if already else self.label

    def advance(self, record: RunRecord, spent: float) -> None:
        if record.status == "ok":
            self.done += 1
            self.successes += bool(record.success)
        else:
            self.failed += 1
        self.spent = spent
        self.measured = self.measured or record.cost_usd is not None
        self._show(successes=self.successes, done=self.done)

    def _spend(self) -> str:
        """The spend so far, or "spend not measured" while no record carried a cost (the
        local host and the replay price nothing: invariant 7, never shown as $0.00)."""
        return f"${self.spent:.2f}" if self.measured else "spend not measured"

    def _show(self, **counts: int) -> None:
        """One finished unit: a plain line now and then, or the bar advanced with
        ``counts`` (the bar's own fields), infra failures, spend and rate."""
        if self.plain:
            self._maybe_line()
            return
        if self.bar is None or self.task is None:
            return
        elapsed = self.bar.tasks[0].elapsed or 0.0
        rate = f"{(self.done + self.failed) / elapsed:.1f}" if elapsed > 0 else "-"
        fields: dict[str, Any] = {
            **counts,
            "failed": self.failed,
            "spend": self._spend(),
            "rate": rate,
        }
        self.bar.update(self.task, advance=1, **fields)

    def stop(self) -> None:
        if self.plain:
            if self.total:
                self._line(f"done, {self._status()}")
            return
        if self.bar is not None:
            self.bar.stop()

    # -- plain lines, when stderr is not a terminal -------------------------------------

    def _status(self) -> str:
        """E.g. ``168/224 units, 150 succeeded, 12 infra, $0.42, 3.1/s, 54s`` (``spend not
        measured`` for a host that prices nothing)."""
        finished = self.done + self.failed
        elapsed = self.clock() - self.started
        rate = f"{finished / elapsed:.1f}/s" if elapsed > 0 else "-/s"
        return (
            f"{finished}/{self.total} units, {self.successes} succeeded, "
            f"{self.failed} infra, {self._spend()}, {rate}, {elapsed:.0f}s"
        )

    def _maybe_line(self) -> None:
        now = self.clock()
        tenth = (self.done + self.failed) * 10 // self.total if self.total else 0
        if tenth > self.last_tenth or now - self.last_line >= PLAIN_EVERY_S:
            self.last_tenth = max(tenth, self.last_tenth)
            if (self.done + self.failed) < self.total:  # the last one is stop()'s
                self._line(self._status())

    def _line(self, text: str) -> None:
        self.last_line = self.clock()
        self.console.print(
            f"{display_text(self.label, 120)}: {text}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


class JudgeProgress(RichProgress, JudgeCallbacks):
    """``prereg judge``'s progress, in its own words: runs judged and unparseable
    answers (a run's success means nothing here), infra failures (asked again next
    time) and the verdicts' spend."""

    def __init__(
        self,
        label: str,
        console: Console | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(label, console, clock=clock)
        self.unparseable = 0

    intro = "{total} verdict(s) to ask"
    earlier = " (+{already} judged earlier)"
    counts = ("runs judged {task.fields[done]}", "unparseable {task.fields[unparseable]}")
    fields = {"done": 0, "unparseable": 0}

    def _bar_label(self, already: int) -> str:
        return self.label

    def _spend(self) -> str:
        return f"${self.spent:.2f}"  # the judges' spend, as before (issue 37 left it alone)

    def judged(self, verdict: Verdict | None, cost: float) -> None:
        """One verdict stored (``None``: an infra failure, nothing stored); ``cost`` is
        this request's."""
        if verdict is None:
            self.failed += 1
        else:
            self.done += 1
            self.unparseable += verdict.parse == "unparseable"
        self.spent += cost
        self._show(done=self.done, unparseable=self.unparseable)

    def _status(self) -> str:
        """E.g. ``30/40 runs judged, 2 unparseable, 1 infra, $0.04, 3.1/s, 9s``."""
        elapsed = self.clock() - self.started
        finished = self.done + self.failed
        rate = f"{finished / elapsed:.1f}/s" if elapsed > 0 else "-/s"
        return (
            f"{self.done}/{self.total} runs judged, {self.unparseable} unparseable, "
            f"{self.failed} infra, ${self.spent:.2f}, {rate}, {elapsed:.0f}s"
        )
