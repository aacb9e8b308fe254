"""What pinning every link of a confirmatory run costs (issue 40, item 8).

A run on the locked split appends one ledger anchor per stored record
(:meth:`prereg.registry.registrations.Registry.pin_link`). This runs the bundled
confirmatory draft on the replay driver with many repeats, with the pins and without
(``link_pin`` patched to None, the behaviour before), and prints the run's time, the
ledger's size, and the time of ``verify`` and ``analyse`` afterwards.

    python bench/anchor_pins.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from pathlib import Path

from prereg.cli import main
from prereg.core.workspace import Workspace
from prereg.runners import api
from prereg.runners.api import run_registration


def prereg(*args: str | Path) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


def one(root: Path, repeats: int, pins: bool) -> dict[str, float]:
    assert prereg("init", root) == 0
    text = (root / "drafts" / "music-library-confirmatory.yaml").read_text()
    draft = root / "drafts" / "bench.yaml"
    draft.write_text(
        text.replace("driver: local", "driver: replay").replace("repeats: 3", f"repeats: {repeats}")
    )
    assert prereg("-w", root, "register", draft) == 0
    saved = api.link_pin
    if not pins:
        api.link_pin = lambda registry, entry: None  # type: ignore[assignment]
    try:
        start = time.process_time(), time.perf_counter()
        summary = run_registration(Workspace(root), "music-library-confirmatory", concurrency=4)
        run = time.process_time() - start[0], time.perf_counter() - start[1]
    finally:
        api.link_pin = saved
    start = time.process_time(), time.perf_counter()
    assert prereg("-w", root, "verify") == 0
    verify = time.process_time() - start[0], time.perf_counter() - start[1]
    start = time.process_time(), time.perf_counter()
    prereg("-w", root, "analyse", "music-library-confirmatory")
    analyse = time.process_time() - start[0], time.perf_counter() - start[1]
    ledger = root / "registry" / "ledger.jsonl"
    return {
        "records": summary.completed,
        "run_cpu_s": run[0],
        "run_wall_s": run[1],
        "verify_wall_s": verify[1],
        "analyse_wall_s": analyse[1],
        "ledger_kb": ledger.stat().st_size / 1024,
        "anchor_files": len(list((root / "registry" / "anchors").glob("*.json"))),
    }


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for pins in (False, True):
            figures = one(Path(tmp) / f"ws-{pins}", args.repeats, pins)
            label = "pinned per link" if pins else "end-of-run anchor only"
            shown = ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
            )
            print(f"{label:24s} {shown}")


if __name__ == "__main__":
    run()
