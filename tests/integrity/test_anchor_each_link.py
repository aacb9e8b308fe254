"""Anchor at the claim (issue 40, item 8): a confirmatory run pins each link it stores.

Before, a run's chain was pinned in the ledger only at the end of the run: a confirmatory
run killed before its end left records only the chain protected, and deleting them all
(or the store) before running again left a consistent, shorter history. Every test here
failed on that code: the killed run left no anchor, so the deletion went unnoticed
(``verify`` exit 0) and the locked split could be run again.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prereg.registry.ledger import Ledger
from tests.integrity.tamper_tools import attacker, digest_of, prereg
from tests.waiting import wait_until

CONFIRM_ID = "confirm-replay"

#: A confirmatory run on the replay driver, each turn slowed so the test can kill it
#: part-way (the records arrive over several hundred milliseconds, whatever the machine).
SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from prereg.core.workspace import Workspace
    from prereg.runners.api import run_registration
    from prereg.runners.drivers.replay import ReplayDriver

    class Slow(ReplayDriver):
        async def next_turn(self, episode, history):
            await asyncio.sleep(0.02)
            return await super().next_turn(episode, history)

    run_registration(Workspace(Path(sys.argv[1])), sys.argv[2], concurrency=2, driver=Slow())
""")


def _workspace(root: Path) -> Path:
    assert prereg("init", root)[0] == 0
    text = (root / "drafts" / "music-library-confirmatory.yaml").read_text()
    draft = root / "drafts" / f"{CONFIRM_ID}.yaml"
    draft.write_text(
        text.replace("id: music-library-confirmatory", f"id: {CONFIRM_ID}").replace(
            "driver: local", "driver: replay"
        )
    )
    assert prereg("-w", root, "register", draft)[0] == 0
    return root


def _chain(ws: Path, digest: str) -> list[str]:
    """The stored chain's hashes in chain order, read with plain sqlite3."""
    db = ws / "runs" / "runs.sqlite"
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT record_hash FROM records WHERE registration_digest = ? ORDER BY chain_index",
            (digest,),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [r[0] for r in rows]


def _pins(ws: Path, digest: str) -> list[tuple[int, str]]:
    """(count, head) of every runs-anchor line of ``digest``, read from the ledger file."""
    lines = (ws / "registry" / "ledger.jsonl").read_bytes().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return [
        (e["count"], e["head"])
        for e in events
        if e.get("event") == "runs-anchor" and e.get("digest") == digest
    ]


def _kill_part_way(ws: Path, at_least: int) -> None:
    digest = digest_of(ws, CONFIRM_ID)
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(ws), CONFIRM_ID],
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: len(_chain(ws, digest)) >= at_least, "records stored", proc=proc)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def killed(tmp_path: Path) -> Path:
    """A confirmatory run on the locked split, killed (SIGKILL) after 6 stored records."""
    ws = _workspace(tmp_path / "ws")
    _kill_part_way(ws, 6)
    return ws


def test_a_confirmatory_run_pins_every_link_it_stores(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    code, out = prereg("-w", ws, "run", CONFIRM_ID, "--json")
    assert code == 0, out
    digest = digest_of(ws, CONFIRM_ID)
    hashes = _chain(ws, digest)
    assert len(hashes) == json.loads(out)["completed"] > 0
    pins = _pins(ws, digest)
    # one pin per stored link, each naming that link's own hash
    assert sorted(pins) == [(i + 1, h) for i, h in enumerate(hashes)]
    assert prereg("-w", ws, "verify")[0] == 0


def test_an_exploratory_run_is_anchored_once_at_its_end(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert prereg("init", root)[0] == 0
    assert prereg("-w", root, "register", root / "drafts" / "music-library-pilot.yaml")[0] == 0
    assert prereg("-w", root, "run", "music-library-pilot", "--max-units", "5")[0] == 0
    digest = digest_of(root, "music-library-pilot")
    assert _pins(root, digest) == [(5, _chain(root, digest)[-1])]


def test_a_killed_confirmatory_run_is_pinned_up_to_where_it_stopped(killed: Path) -> None:
    digest = digest_of(killed, CONFIRM_ID)
    hashes = _chain(killed, digest)
    pins = _pins(killed, digest)
    assert pins, "the killed run left no anchor"
    # every pin sits on the stored chain; at most the units in flight (2) are unpinned
    assert all(count <= len(hashes) and hashes[count - 1] == head for count, head in pins)
    assert max(count for count, _ in pins) >= len(hashes) - 2
    assert prereg("-w", killed, "verify")[0] == 0


def test_deleting_a_killed_runs_records_is_detected(killed: Path) -> None:
    digest = digest_of(killed, CONFIRM_ID)
    with attacker(killed, "TRIGGER records_no_delete") as conn:
        conn.execute("DELETE FROM records WHERE registration_digest = ?", (digest,))
    assert _chain(killed, digest) == []
    code, out = prereg("-w", killed, "verify", "--json")
    assert code == 3
    assert "pinned" in out
    # and the locked split cannot be run again over the hole
    assert prereg("-w", killed, "run", CONFIRM_ID)[0] == 3


def test_deleting_the_store_of_a_killed_run_is_detected(killed: Path) -> None:
    for path in (killed / "runs").glob("runs.sqlite*"):
        path.unlink()
    assert prereg("-w", killed, "verify")[0] == 3
    assert prereg("-w", killed, "run", CONFIRM_ID)[0] == 3


def test_the_ledger_head_read_from_its_end_is_the_newest_line(tmp_path: Path) -> None:
    """:meth:`Ledger.head` reads only the file's end; it must name the line a whole read
    names, with lines longer than its first block, blank lines and a damaged end."""
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)

    def whole_read() -> tuple[int, str]:
        last = ledger.lines()[-1]
        return (int(last.data["seq"]) if last.data else 0, last.hash)

    assert ledger.head().seq == 0  # no ledger yet
    with ledger.locked():
        for n in range(3):
            ledger.append_prepared(ledger.prepare({"event": "x", "pad": "y" * (9000 * n)}))
    assert (ledger.head().seq, ledger.head().hash) == whole_read() == (3, ledger.head().hash)
    with ledger.locked():
        ledger.append_prepared(ledger.prepare({"event": "x", "pad": "z" * 70000}))
    assert ledger.head().seq == 4
    assert (ledger.head().seq, ledger.head().hash) == whole_read()
    with open(path, "ab") as handle:  # a blank line at the end: read whole, skipped
        handle.write(b"   \n")
    assert (ledger.head().seq, ledger.head().hash) == whole_read()
    with open(path, "ab") as handle:  # a damaged end (no newline): read whole
        handle.write(b'{"seq": 9')
    assert ledger.head().hash == ledger.lines()[-1].hash
