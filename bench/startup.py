"""Start-up time of the CLI: each command in a fresh process, median of ``--runs``.

Times ``python -c pass`` (the interpreter alone), ``prereg --version``, ``prereg --help``
and ``prereg verify`` on a small workspace (the bundled pilot registered, 12 units run and
anchored), each as a new process the way a user starts it, after one warm-up run (the
file cache warm). No assertions: figures only.

    python bench/startup.py [--runs 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PILOT = "music-library-pilot"


def _prereg(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "prereg", *map(str, args)]


def _time(command: list[str], runs: int) -> tuple[float, float]:
    env = {**os.environ, "NO_COLOR": "1"}
    subprocess.run(command, check=True, capture_output=True, env=env)  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="prereg-startup-") as tmp:
        ws = Path(tmp) / "ws"
        for setup in (
            _prereg("init", ws),
            _prereg("-w", ws, "register", ws / "drafts" / f"{PILOT}.yaml"),
            _prereg("-w", ws, "run", PILOT, "--max-units", "12", "--json"),
        ):
            subprocess.run(setup, check=True, capture_output=True)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "prereg --version": _prereg("--version"),
            "prereg --help": _prereg("--help"),
            "prereg verify (12 records)": _prereg("-w", ws, "verify"),
        }
        figures = {name: _time(command, args.runs) for name, command in commands.items()}
    if args.json:
        print(json.dumps({k: {"median_s": m, "min_s": n} for k, (m, n) in figures.items()}))
        return 0
    print(f"python {sys.version.split()[0]}, median (min) of {args.runs} fresh processes")
    for name, (median, fastest) in figures.items():
        print(f"{name:<28} {median * 1000:7.0f} ms ({fastest * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
