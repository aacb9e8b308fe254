"""Throughput of `prereg run`: runs/s with a host of fixed simulated latency L.

For each concurrency C the bench registers the bundled pilot (with enough
repeats) in a fresh workspace and runs N = C * units_per_worker units through
the same code path as `prereg run` (runners.api.run_registration), with a
driver that waits L seconds and answers. The ideal wall time is N * L / C; the
bench prints the measured time next to it. Target: within 15% at C = 32.

    python bench/run_throughput.py [--latency-ms 50] [--per-worker 40] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prereg.cli import main as cli_main
from prereg.core.workspace import Workspace
from prereg.runners.api import run_registration
from prereg.runners.drivers.base import Episode, Exchange, FinalAnswer, Turn


class FixedLatencyDriver:
    """A host that takes exactly ``latency`` seconds per turn and answers at once."""

    name = "fixed-latency"
    evidence_class = "local"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        await asyncio.sleep(self.latency)
        return Turn(FinalAnswer("done"), latency_ms=self.latency * 1000.0)

    async def aclose(self) -> None:
        return None


def _cli(*args: str) -> None:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(list(args))
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise RuntimeError(f"prereg {' '.join(args)} exited {exc.code}") from None


def prepare(root: Path, repeats: int) -> Workspace:
    """A workspace with the pilot registered under ``repeats`` repeats."""
    _cli("init", str(root), "--json")
    draft = root / "drafts" / "music-library-pilot.yaml"
    text = draft.read_text().replace("repeats: 3", f"repeats: {repeats}")
    bench = root / "drafts" / "bench.yaml"
    bench.write_text(text.replace("id: music-library-pilot", "id: bench"))
    _cli("-w", str(root), "register", str(bench), "--json")
    return Workspace(root)


def measure(concurrency: int, latency: float, per_worker: int) -> dict[str, Any]:
    n = concurrency * per_worker
    with tempfile.TemporaryDirectory() as tmp:
        # 28 dev tasks x 2 arms per repeat
        ws = prepare(Path(tmp) / "ws", repeats=max(3, -(-n // 56)))
        start = time.perf_counter()
        summary = run_registration(
            ws, "bench", concurrency=concurrency, max_units=n, driver=FixedLatencyDriver(latency)
        )
        wall = time.perf_counter() - start
    assert summary.completed == n, summary
    limit = n * latency / concurrency
    return {
        "concurrency": concurrency,
        "units": n,
        "latency_ms": latency * 1000,
        "wall_s": round(wall, 3),
        "runs_per_s": round(n / wall, 2),
        "limit_s": round(limit, 3),
        "limit_runs_per_s": round(n / limit, 2),
        "wall_over_limit": round(wall / limit, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument(
        "--per-worker", type=int, default=40, help="units per concurrent worker (N = C * this)"
    )
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [measure(c, args.latency_ms / 1000.0, args.per_worker) for c in args.levels]
    top = rows[-1]
    verdict = {
        "target": "wall within 15% of N*L/C at the highest concurrency",
        "met": top["wall_over_limit"] <= 1.15,
    }
    if args.json:
        print(json.dumps({"rows": rows, **verdict}, indent=2))
    else:
        print(
            f"{'C':>4} {'N':>6} {'L ms':>6} {'wall s':>8} {'runs/s':>8} {'N*L/C s':>8} "
            f"{'limit runs/s':>12} {'wall/limit':>10}"
        )
        for r in rows:
            print(
                f"{r['concurrency']:>4} {r['units']:>6} {r['latency_ms']:>6.0f} "
                f"{r['wall_s']:>8.3f} {r['runs_per_s']:>8.1f} {r['limit_s']:>8.3f} "
                f"{r['limit_runs_per_s']:>12.1f} {r['wall_over_limit']:>10.3f}"
            )
        print(
            f"target (within 15% at C={top['concurrency']}): "
            f"{'met' if verdict['met'] else 'NOT met'}"
        )
    return 0 if verdict["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
