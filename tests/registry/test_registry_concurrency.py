"""Concurrent ``register`` calls cannot corrupt or fork the ledger."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_parallel_registers_keep_the_chain(ws: Path, cli) -> None:
    draft = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    paths = []
    for i in range(6):
        path = ws / "drafts" / f"p{i}.yaml"
        path.write_text(draft.replace("id: music-library-pilot", f"id: parallel-{i}"))
        paths.append(path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "prereg", "-w", str(ws), "register", str(p)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in paths
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * 6, [p.stderr.read() for p in procs if p.stderr]
    result = cli("-w", ws, "verify", "--json")
    assert result.code == 0, result.stdout
    listed = {r["id"] for r in cli("-w", ws, "list", "--json").json()["registrations"]}
    assert listed == {f"parallel-{i}" for i in range(6)}
    assert len((ws / "registry" / "ledger.jsonl").read_text().splitlines()) == 6
