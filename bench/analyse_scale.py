"""``prereg analyse`` at the seed's programme size: 27,000 runs analysed, report and figures.

Builds the store first (setup, not timed): the bundled pilot registered with as many
arms and repeats as ``--runs`` needs (arms x dev tasks x repeats >= N; repeats are capped
at 100, so larger programmes get more arms: each surface again under another completion
cap, a configuration of its own), its first repeat run for
real on the local host (so every arm and task has a genuine record, anchored by the
registry), then every other planned unit appended as a copy of its arm and task's real
record under its own repeat and record id, linked into the hash chain as the store links
a record, so the whole chain verifies and every planned unit is complete. Then times
``prereg analyse ID --json`` in a fresh process as a user starts it (imports, verified
loading, the analysis, report.json / .md / .html and figures), median of ``--repeats``,
next to issue 15's target (under 5 s), with every core (the default) and in one process
(``PREREG_JOBS=1``), and, in this process, the stages: verified loading
(``reports.load``), the analysis, writing the report. ``--profile N`` prints the N
functions with the most cumulative time of one in-process analyse (cProfile). No
assertions: figures only, indicative on a loaded machine (the load average, the host's
plain-Python speed and its memory-walk speed, :mod:`host_speed`, are printed: this
memory-heavy command follows the second).

``--keep DIR`` builds the workspace in DIR once and reuses it on later calls (to
compare code changes on one store without building it again).

    python bench/analyse_scale.py [--runs 27000] [--repeats 3] [--profile 25] [--json]
                                  [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import pstats
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from host_speed import describe, memory_walk_s, python_loop_s  # bench/, this script's directory

from prereg.cli import main as cli_main
from prereg.core.workspace import Workspace
from prereg.registry.registrations import Registry
from prereg.reports.analysis import Options, analyse
from prereg.reports.load import frozen_experiment, load_runs, planned_units
from prereg.reports.render.write import write_report
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore, chain

PILOT = "music-library-pilot"
REG = "analyse-scale"
TARGET_S = 5.0  # issue 15: 27,000 runs analysed, report and figures written
MAX_REPEATS = 100  # the registration schema's cap on design.repeats


def _cli(*args: str | Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli_main([str(a) for a in args])
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise RuntimeError(f"prereg {' '.join(map(str, args))}: exit {exc.code}") from None
    return out.getvalue()


def _dev_tasks(ws: Path) -> int:
    shown = json.loads(_cli("-w", ws, "split", "show", "music-library", "--json"))
    splits = shown["splits"]
    return int(splits["dev"]["tasks"] if isinstance(splits, dict) else splits[0]["tasks"])


def build(ws: Path, runs: int) -> dict[str, Any]:
    """The workspace with a complete store of at least ``runs`` records (see above)."""
    _cli("init", ws)
    draft = (ws / "drafts" / f"{PILOT}.yaml").read_text()
    tasks = _dev_tasks(ws)
    pairs = max(1, math.ceil(runs / (2 * tasks * MAX_REPEATS)))
    repeats = max(1, math.ceil(runs / (2 * pairs * tasks)))
    arms = ["  - {id: baseline, surface: baseline}", "  - {id: semantic, surface: semantic}"]
    arms += [
        f"  - {{id: {surface}-cap{cap}, surface: {surface}, budgets: {{completion_cap: {cap}}}}}"
        for cap in range(1000, 1000 - 10 * (pairs - 1), -10)
        for surface in ("baseline", "semantic")
    ]
    text = draft.replace(f"id: {PILOT}", f"id: {REG}", 1)
    text = re.sub(r"arms:\n(  - .*\n)+", "arms:\n" + "\n".join(arms) + "\n", text, count=1)
    variant = ws / "drafts" / f"{REG}.yaml"
    variant.write_text(text.replace("design: {repeats: 3,", f"design: {{repeats: {repeats},", 1))
    _cli("-w", ws, "register", variant)
    _cli("-w", ws, "run", REG, "--max-units", str(len(arms) * tasks), "--json")
    registry = Registry(ws / "registry")
    entry = registry.get(REG)
    experiment = frozen_experiment(registry, entry)
    with RunStore(ws / "runs") as store:
        real = store.records(registration_id=REG)
        template = {(r.arm, r.task_id): r.model_dump(mode="json", exclude={"chain"}) for r in real}
        done = {(r.arm, r.task_id, r.repeat) for r in real}
        last = real[-1].chain
        assert last is not None
        prev, index, linked = last.hash, last.index + 1, []
        for arm, task, repeat in planned_units(entry, experiment):
            if (arm, task, repeat) in done:
                continue
            body = template[(arm, task)]
            copy = RunRecord.model_validate(
                {**body, "record_id": f"scale-{index:08d}", "repeat": repeat}
            )
            record = chain.link(copy, index, prev)
            assert record.chain is not None
            prev, index = record.chain.hash, index + 1
            linked.append(record)
        with store._tx() as conn:  # one transaction: setup, not what is measured
            for record in linked:
                store._insert(conn, record)
    return {
        "records": index,
        "tasks": tasks,
        "arms": len(arms),
        "repeats": repeats,
        "real": len(real),
    }


def _kept(ws: Path, runs: int) -> dict[str, Any]:
    """The store description of a kept workspace, built (and described) on first use."""
    described = ws / "analyse-scale.json"
    if not described.exists():
        store = build(ws, runs)
        described.write_text(json.dumps(store))
    loaded: dict[str, Any] = json.loads(described.read_text())
    return loaded


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: the two ways timed: every core the machine gives (``prereg.core.forked``), and one process
MODES = {"parallel": None, "one process": "1"}


def time_cli(ws: Path, repeats: int) -> dict[str, dict[str, float]]:
    """``prereg analyse`` as a user runs it: fresh processes, wall and CPU time (of the
    process and its forked children), in both :data:`MODES`, alternating so a change of
    the shared host's speed hits both alike. Python's bytecode caches are written first
    (one untimed run), as an installed package has them: without them (this host sets
    ``PYTHONDONTWRITEBYTECODE``) every start compiles prereg's sources again."""
    command = [sys.executable, "-m", "prereg", "-w", str(ws), "analyse", REG, "--json"]
    base = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PREREG_JOBS")
    }
    base["NO_COLOR"] = "1"
    subprocess.run(command, check=True, capture_output=True, env=base)  # the caches
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpus: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(repeats):
        for mode, jobs in MODES.items():
            env = base if jobs is None else {**base, "PREREG_JOBS": jobs}
            cpu, start = _cpu(), time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=env)
            walls[mode].append(time.perf_counter() - start)
            cpus[mode].append(_cpu() - cpu)
    return {
        mode: {
            "wall_s": statistics.median(walls[mode]),
            "min_s": min(walls[mode]),
            "cpu_s": statistics.median(cpus[mode]),
        }
        for mode in MODES
    }


def stages(ws: Path) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds per stage of one analyse in this process (imports already
    paid); the CPU time is what a loaded machine inflates least."""
    workspace = Workspace(ws)
    registry = Registry(workspace.registry)
    entry = registry.get(REG)
    marks = [(time.perf_counter(), time.process_time())]
    load_runs(workspace, registry, entry)
    marks.append((time.perf_counter(), time.process_time()))
    report = analyse(workspace, REG, Options())
    marks.append((time.perf_counter(), time.process_time()))
    write_report(workspace, report)
    marks.append((time.perf_counter(), time.process_time()))
    names = ("load (verified)", "analyse (load included)", "write report and figures")
    return {
        name: (b[0] - a[0], b[1] - a[1])
        for name, a, b in zip(names, marks[:-1], marks[1:], strict=True)
    }


def profile(ws: Path, top: int) -> str:
    workspace = Workspace(ws)
    profiler = cProfile.Profile()
    profiler.enable()
    write_report(workspace, analyse(workspace, REG, Options()))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=27000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="build once here, then reuse")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="prereg-analyse-scale-") as tmp:
        ws = args.keep or Path(tmp) / "ws"
        started = time.perf_counter()
        store = _kept(ws, args.runs) if args.keep else build(ws, args.runs)
        setup = time.perf_counter() - started
        load = os.getloadavg()[0]
        cli = time_cli(ws, args.repeats)
        parts = stages(ws)
        profiled = profile(ws, args.profile) if args.profile else ""
    speed, walk = python_loop_s(), memory_walk_s()
    if args.json:
        figures = {"store": store, "cli": cli, "stages": parts, "loadavg_1m": load}
        print(
            json.dumps(
                {**figures, "python_loop_s": round(speed, 3), "memory_walk_s": round(walk, 3)}
            )
        )
        return 0
    print(describe(speed, walk))
    print(
        f"{store['records']} records ({store['arms']} arms x {store['tasks']} tasks x "
        f"{store['repeats']} repeats; {store['real']} run on the local host), built in "
        f"{setup:.0f} s; load average {load:.1f} on {os.cpu_count()} cores"
    )
    for mode, timed in cli.items():
        met = "met" if timed["wall_s"] <= TARGET_S else "NOT met"
        print(
            f"prereg analyse --json ({mode}), fresh process, median of {args.repeats}: "
            f"{timed['wall_s']:.2f} s (min {timed['min_s']:.2f} s), cpu {timed['cpu_s']:.2f} s"
            + (f"; target {TARGET_S:.0f} s: {met}" if mode == "parallel" else "")
        )
    print("in this process (imports paid; parallel):")
    for name, (wall, cpu) in parts.items():
        print(f"  {name:<28} {wall:6.2f} s  cpu {cpu:6.2f} s")
    if profiled:
        print(profiled)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
