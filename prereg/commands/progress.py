"""The rich progress bar of ``prereg run``: units done, successes, spend, rate, ETA."""

from __future__ import annotations

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

from prereg.runners.orchestrate import Progress as ProgressCallbacks
from prereg.runners.record import RunRecord


class RichProgress(ProgressCallbacks):
    """Draws on stderr so that stdout stays clean for ``--json``."""

    def __init__(self, label: str, console: Console | None = None) -> None:
        self.label = label
        self.console = console or Console(stderr=True)
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.successes = 0
        self.done = 0
        self.failed = 0

    def start(self, total: int, already: int) -> None:
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("success {task.fields[successes]}/{task.fields[done]}"),
            TextColumn("infra {task.fields[failed]}"),
            TextColumn("${task.fields[spend]}"),
            TextColumn("{task.fields[rate]}/s"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.bar.start()
        label = f"{self.label} (+{already} earlier)" if already else self.label
        self.task = self.bar.add_task(
            label, total=total, successes=0, done=0, failed=0, spend="0.00", rate="-"
        )

    def advance(self, record: RunRecord, spent: float) -> None:
        if self.bar is None or self.task is None:
            return
        if record.status == "ok":
            self.done += 1
            self.successes += bool(record.success)
        else:
            self.failed += 1
        task = self.bar.tasks[0]
        elapsed = task.elapsed or 0.0
        rate = f"{(self.done + self.failed) / elapsed:.1f}" if elapsed > 0 else "-"
        self.bar.update(
            self.task,
            advance=1,
            successes=self.successes,
            done=self.done,
            failed=self.failed,
            spend=f"{spent:.2f}",
            rate=rate,
        )

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
