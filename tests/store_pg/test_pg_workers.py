"""Three ``prereg run`` workers on one registration and one PostgreSQL store, one of them
killed with SIGKILL mid-run, then resumed: every unit has exactly one ok record, none is
lost, and the analysis reads the same numbers as from SQLite."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from prereg.core.workspace import Workspace
from prereg.registry.registrations import Registry
from prereg.reports.analysis import Options, analyse
from prereg.runners.store.postgres import PgRunStore
from prereg.runners.store.verify import verify_runs
from tests.conftest import CliResult
from tests.waiting import wait_until

REG = "replay-pilot"


def _draft(ws: Path) -> Path:
    """The bundled pilot on the replay driver (deterministic, no network), 112 units."""
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    for old, new in (
        ("id: music-library-pilot", f"id: {REG}"),
        ("driver: local", "driver: replay"),
        ("repeats: 3", "repeats: 2"),
        ("draws: 10000", "draws: 500"),
    ):
        assert old in text
        text = text.replace(old, new)
    path = ws / "drafts" / f"{REG}.yaml"
    path.write_text(text)
    return path


def _worker(ws: Path, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "prereg", "-w", str(ws), "run", REG]
        + ["--store", url, "--concurrency", "1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _running_with_claims(
    url: str, workers: list[subprocess.Popen[bytes]], at_least: int
) -> subprocess.Popen[bytes] | None:
    """A worker still running that has claimed ``at_least`` units (it is mid-run)."""
    assert any(w.poll() is None for w in workers), "every worker ended before the kill"
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            rows = conn.execute("SELECT worker, count(*) FROM claims GROUP BY worker").fetchall()
        except psycopg.errors.UndefinedTable:  # no worker has created the schema yet
            return None
    counts = {str(worker).rsplit(":", 1)[-1]: int(n) for worker, n in rows if worker}
    for w in workers:
        if counts.get(str(w.pid), 0) >= at_least and w.poll() is None:
            return w
    return None


def _wait(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what)


def _sessions_gone(url: str) -> bool:
    """No prereg worker's database session is left (a killed one ends when the server
    sees its connection closed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'prereg'"
        ).fetchone()
    return row is not None and row[0] == 0


@pytest.mark.slow
def test_three_workers_one_killed_then_resumed(
    ws: Path, pg_url: str, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    assert cli("-w", ws, "register", _draft(ws), "--json").code == 0
    workers = [_worker(ws, pg_url) for _ in range(3)]
    try:
        # the victim: whichever worker is mid-run with 5 claims (workers start unevenly)
        victim = wait_until(
            lambda: _running_with_claims(pg_url, workers, 5), "a worker claimed 5 units"
        )
        victim.send_signal(signal.SIGKILL)
        workers.remove(victim)
        workers.insert(0, victim)
        outputs = [w.communicate(timeout=120) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert victim.returncode == -signal.SIGKILL  # it was killed mid-run, not finished
    summaries = []
    for w, (out, err) in zip(workers[1:], outputs[1:], strict=True):
        assert w.returncode == 0, err.decode()
        summaries.append(json_of(out))
    _wait(lambda: _sessions_gone(pg_url), "the killed worker's session stayed")

    resumed = cli("-w", ws, "run", REG, "--store", pg_url, "--json")
    assert resumed.code == 0, resumed.stderr
    last = resumed.json()
    assert isinstance(last, dict)
    planned = int(last["planned"])
    assert last["remaining"] == 0 and last["failed"] == 0
    # no worker ran a unit another had stored (claims, not the unique index, kept them apart)
    assert all(s["duplicates"] == 0 for s in summaries)
    assert last["duplicates"] == 0

    with PgRunStore(pg_url) as store:
        records = store.records(registration_id=REG)
    ok = Counter(r.unit_key for r in records if r.status == "ok")
    assert len(ok) == planned == 112 and set(ok.values()) == {1}  # one per unit, none lost
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT sum(claimed), count(*) FROM claims").fetchone()
        workers_seen = conn.execute("SELECT count(DISTINCT worker) FROM claims").fetchone()
    assert row is not None and row[1] == planned
    # each unit was claimed once, but for the victim's units in flight, claimed again after
    # the kill: at concurrency 1, the unit it played and the record of the one before, which
    # it appends while it plays the next (orchestrate._Slots)
    assert planned <= row[0] <= planned + 2
    assert workers_seen is not None and workers_seen[0] >= 2
    # the victim's stored units were kept: it had claimed 5 one at a time, so stored 3 or 4
    by_others = sum(int(s["completed"]) for s in summaries) + int(last["completed"])
    assert planned - by_others >= 3
    assert verify_runs(pg_url, Registry(ws / "registry")).problems == []

    _same_report_as_sqlite(ws, pg_url, cli, tmp_path)


def json_of(out: bytes) -> dict[str, Any]:
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def _same_report_as_sqlite(
    ws: Path, url: str, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """Export from PostgreSQL, import into a second workspace's SQLite store (the same
    registration, so the same digest), analyse both: the same report."""
    export = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", REG, "--store", url, "-o", export).code == 0
    other = tmp_path / "ws2"
    assert cli("init", other).code == 0
    (other / "drafts" / f"{REG}.yaml").write_text((ws / "drafts" / f"{REG}.yaml").read_text())
    assert cli("-w", other, "register", other / "drafts" / f"{REG}.yaml").code == 0
    imported = cli("-w", other, "import", export, "--json")
    assert imported.code == 0, imported.stderr
    # the analysis itself (the CLI adds only the files and figures written from it)
    a = analyse(Workspace(ws), REG, Options(store=url)).to_json()
    b = analyse(Workspace(other), REG, Options()).to_json()
    chains = [
        {d: (c["count"], c["head"]) for d, c in r["provenance"]["run_chains"].items()}
        for r in (a, b)
    ]
    assert chains[0] == chains[1]  # the same chain, link for link
    a.pop("provenance"), b.pop("provenance")  # times and ledgers differ
    assert a["complete"] and a["runs"] == b["runs"]
    assert a == b
