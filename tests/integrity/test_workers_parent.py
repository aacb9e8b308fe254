"""Workers die with their parent (issue 40, item 3).

``prereg run --workers 2`` is started as a real process against the local fake provider,
whose answers the test holds: at the kill every worker has a request in flight and
nothing is being written. The parent is then killed with SIGKILL (as a scheduler, a
timeout or the out-of-memory killer does) and the held answers are released, so a worker
that outlived its parent would go on: send its next requests (spend) and store records.
Every worker must end instead, with no request sent and no record stored after the kill.
Waits are bounded polls on progress (tests/waiting.py), never a measure of speed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.providers.fakes import Brain, FakeProviders, provider_env
from tests.waiting import wait_until

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads processes from /proc"
)

DRAFT = """\
id: orphans
title: Podcast selection on a provider host, run by two workers
hypothesis: Descriptive metadata raises selection of the focal integration.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {id: descriptive, surface: focal}
  - {id: neutral, surface: focal-neutral}
host: {driver: anthropic, model: claude-haiku-4-5}
budgets: {completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: 6,
          spend_usd: 5}
design: {repeats: 2, rotations: 2, seed: 3}
outcome: success
primary: {test: mcnemar_exact, alpha: 0.05, sides: two-sided}
"""

#: model requests answered at once; every later one waits for the test's gate
FREE = 4
#: how long a worker may take to end after its parent was killed before the test calls
#: it hung (a bound on a hang, not a measure: on Linux the kernel ends it at once)
ORPHAN_BOUND_S = 60.0


@dataclass
class Held(Brain):
    """The default agent, whose answers after the first ``FREE`` wait for ``gate``."""

    gate: threading.Event = field(default_factory=threading.Event)
    asked: int = 0
    waiting: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.asked += 1
            held = self.asked > FREE
            self.waiting += held
        if held:
            self.gate.wait(timeout=600)
        return super().anthropic(body)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    brain = Held()
    with FakeProviders(brain) as server:
        provider_env(monkeypatch, server)
        monkeypatch.setenv("PREREG_TIMEOUT_S", "600")  # a held request is not retried
        try:
            yield server
        finally:
            brain.gate.set()


def ok_rows(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM records").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of process ``pid``, None when it no longer exists."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid:
                found.append(int(entry.name))
    return sorted(found)


def ended(pid: int) -> bool:
    """Whether ``pid`` has ended (gone, or a zombie nobody reaped yet)."""
    stat = _stat(pid)
    return stat is None or stat[0] in ("Z", "X")


def wait_bounded(condition: Callable[[], bool], what: str, bound_s: float) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still not after {bound_s:.0f} s")
        time.sleep(0.05)


def test_workers_end_with_a_parent_killed_by_sigkill_and_spend_nothing_after(
    ws: Path, cli: Callable[..., CliResult], fake: FakeProviders
) -> None:
    brain = fake.brain
    assert isinstance(brain, Held)
    draft = ws / "drafts" / "orphans.yaml"
    draft.write_text(DRAFT)
    assert cli("-w", ws, "register", draft, "--json").code == 0
    parent = subprocess.Popen(
        [sys.executable, "-m", "prereg", "-w", str(ws), "run", "orphans"]
        + ["--workers", "2", "--concurrency", "2", "--no-progress", "--json"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    db = ws / "runs" / "runs.sqlite"
    workers: list[int] = []
    try:
        # each worker runs one unit at a time: two requests held means both are in flight
        wait_until(lambda: brain.waiting >= 2, "both workers' requests held", proc=parent)
        wait_until(lambda: ok_rows(db) >= 1, "a unit stored before the kill", proc=parent)
        workers = children(parent.pid)
        assert len(workers) == 2, workers
        parent.send_signal(signal.SIGKILL)
        assert parent.wait(timeout=60) == -signal.SIGKILL
        stored, asked = ok_rows(db), fake.model_requests
        brain.gate.set()  # a worker still alive would now be answered and go on
        wait_bounded(lambda: all(ended(pid) for pid in workers), "workers ended", ORPHAN_BOUND_S)
        assert ok_rows(db) == stored  # no record appended after the kill
        assert fake.model_requests == asked  # no request sent (nothing spent) after it
    finally:
        brain.gate.set()
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in workers:
            if not ended(pid):
                os.kill(pid, signal.SIGKILL)


#: A parent that starts one child and waits: the child binds itself to the parent as a
#: worker does, with the parent-death signal unavailable (as on macOS or Windows), so only
#: the polling watch can end it; it then idles, never exiting on its own.
POLLING_PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
print(child.pid, flush=True)
time.sleep(3600)
"""
POLLING_CHILD = """
import sys, time
from prereg.runners import workers
workers._death_signal = lambda sig: False  # no prctl: the watch thread must do it
workers.bind_to_parent(int(sys.argv[1]))  # the parent's pid, as a worker's job carries it
time.sleep(3600)
"""


def test_without_the_death_signal_the_watch_ends_a_worker_whose_parent_died() -> None:
    """The fallback of every platform without the parent-death signal, run on Linux."""
    parent = subprocess.Popen(
        [sys.executable, "-c", POLLING_PARENT, POLLING_CHILD],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_until(lambda: not ended(child), "the child started", proc=parent)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        # bounded far above the watch's 0.5 s poll: a hang guard, not a speed measure
        wait_bounded(lambda: ended(child), "the orphaned child ended", 120)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if "child" in locals() and not ended(child):
            os.kill(child, signal.SIGKILL)
