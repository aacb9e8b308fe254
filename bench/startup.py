"""Start-up time of the CLI: each command in a fresh process, median of ``--runs``.

Times ``python -c pass`` (the interpreter alone), ``prereg --version``, ``prereg --help``,
``prereg plan`` (a power calculation from options) and ``prereg verify`` on a small
workspace (the bundled pilot registered, 12 units run and anchored), each as a new process
the way a user starts it, after one warm-up run (the file cache warm), next to the targets
of issue 15 (``--help`` under 0.3 s, ``plan`` under 0.5 s), with the CPU time (user +
system) the process used, which a loaded machine inflates less than the wall time.
``--imports N`` also lists, per command, the N packages whose import costs most (``python
-X importtime``, self times summed per package; prereg per subpackage), to show what a
command loads and does not use, and which of the heavy libraries (:data:`HEAVY`) it
imports at all (tests/cli/test_startup_imports.py asserts that ``--help`` and ``plan``
import none). No assertions: figures only, indicative on a loaded machine (the load
average is printed).

    python bench/startup.py [--runs 9] [--imports 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PILOT = "music-library-pilot"
#: issue 15's start-up targets, seconds
TARGETS = {"prereg --help": 0.3, "prereg plan (from options)": 0.5}
PLAN = ("plan", "--sigma-d", "0.28", "--prompts", "100", "--json")
#: libraries whose import alone costs a command tens of milliseconds or more
HEAVY = ("numpy", "scipy", "statsmodels", "pydantic", "anthropic", "openai", "mcp", "matplotlib")


def _prereg(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "prereg", *map(str, args)]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(command: list[str], runs: int) -> tuple[float, float, float]:
    """(median wall time, fastest wall time, median CPU time) of ``runs`` fresh processes."""
    env = {**os.environ, "NO_COLOR": "1"}
    subprocess.run(command, check=True, capture_output=True, env=env)  # warm-up
    times, cpus = [], []
    for _ in range(runs):
        cpu, start = _cpu(), time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
        cpus.append(_cpu() - cpu)
    return statistics.median(times), min(times), statistics.median(cpus)


def heaviest_imports(command: list[str], top: int) -> list[tuple[str, float]]:
    """The ``top`` packages whose modules cost ``command`` most import time (seconds: the
    self time of every module of the package, summed; ``prereg`` by subpackage), then
    each of :data:`HEAVY` that it imports, marked ``(heavy)``."""
    env = {**os.environ, "NO_COLOR": "1"}
    run = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]], capture_output=True, text=True, env=env
    )
    totals: dict[str, float] = {}
    for line in run.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name = parts[2].strip()
        parts_of = name.split(".")
        package = ".".join(parts_of[:2]) if parts_of[0] == "prereg" else parts_of[0]
        totals[package] = totals.get(package, 0.0) + int(parts[0]) / 1e6
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return ranked + [(f"(heavy) {name}", totals[name]) for name in HEAVY if name in totals]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--imports", type=int, default=0, metavar="N")
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
            "prereg plan (from options)": _prereg(*PLAN),
            "prereg verify (12 records)": _prereg("-w", ws, "verify"),
        }
        load = os.getloadavg()[0]
        figures = {name: _time(command, args.runs) for name, command in commands.items()}
        imports = {
            name: heaviest_imports(command, args.imports)
            for name, command in commands.items()
            if args.imports and name.startswith("prereg")
        }
    if args.json:
        out = {
            k: {"median_s": m, "min_s": n, "cpu_s": c, "target_s": TARGETS.get(k)}
            for k, (m, n, c) in figures.items()
        }
        print(json.dumps({"figures": out, "loadavg_1m": load, "imports": imports}))
        return 0
    print(
        f"python {sys.version.split()[0]}, wall time median (min) and CPU time median of "
        f"{args.runs} fresh processes; load average {load:.1f} on {os.cpu_count()} cores"
    )
    for name, (median, fastest, cpu) in figures.items():
        target = TARGETS.get(name)
        mark = "" if target is None else f"  target {target * 1000:.0f} ms: "
        mark += "" if target is None else ("met" if median <= target else "NOT met")
        print(
            f"{name:<28} {median * 1000:7.0f} ms ({fastest * 1000:.0f} ms)"
            f"  cpu {cpu * 1000:5.0f} ms{mark}"
        )
    for name, heavy in imports.items():
        print(f"\n{name}: packages by import time (self time of their modules)")
        for module, seconds in heavy:
            print(f"  {module:<50} {seconds * 1000:7.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
