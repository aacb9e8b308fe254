"""Crash safety: a run killed mid-way (SIGKILL or Ctrl-C) then resumed gives exactly one
record per unit, no half-written row and no duplicate."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.store.sqlite import RunStore
from tests.waiting import wait_until

SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from prereg.core.workspace import Workspace
    from prereg.runners.api import run_registration
    from prereg.runners.drivers.replay import ReplayDriver

    class Slow(ReplayDriver):
        async def next_turn(self, episode, history):
            await asyncio.sleep(0.01)
            return await super().next_turn(episode, history)

    run_registration(Workspace(Path(sys.argv[1])), sys.argv[2], concurrency=4, driver=Slow())
""")


def ok_rows(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM records WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def start_and_interrupt(ws: Path, reg_id: str, at_least: int, sig: int) -> int:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(ws), reg_id],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    db = ws / "runs" / "runs.sqlite"
    try:
        wait_until(lambda: ok_rows(db) >= at_least, f"{at_least} runs recorded", proc=proc)
        proc.send_signal(sig)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_run_resumes_without_loss_or_duplicates(ws: Path, cli: Any, sig: int) -> None:
    draft = ws / "drafts" / "replay-pilot.yaml"
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    draft.write_text(
        text.replace("id: music-library-pilot", "id: replay-pilot").replace(
            "driver: local", "driver: replay"
        )
    )
    assert cli("-w", ws, "register", draft, "--json").code == 0
    code = start_and_interrupt(ws, "replay-pilot", 15, sig)
    assert code != 0  # it did not finish on its own
    interrupted_at = ok_rows(ws / "runs" / "runs.sqlite")
    # a second interruption, later in the run
    start_and_interrupt(ws, "replay-pilot", interrupted_at + 25, sig)
    conn = sqlite3.connect(ws / "runs" / "runs.sqlite")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    result = cli("-w", ws, "run", "replay-pilot", "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["skipped_existing"] >= interrupted_at + 25
    assert summary["remaining"] == 0 and summary["failed"] == 0
    records = RunStore(ws / "runs").records(registration_id="replay-pilot")
    keys = [r.unit_key for r in records if r.status == "ok"]
    assert len(keys) == summary["planned"] == len(set(keys))  # exactly one per unit
    assert all(r.success for r in records)  # replay: every task succeeds
