"""Time of the InvokeRank section per arm on the bundled podcast-selection controls draft.

    python bench/invokerank_speed.py [--workspace DIR] [--repeats 3]

Registers and runs ``drafts/podcast-selection-controls.yaml`` (local host, offline) in a
fresh workspace (or reuses ``--workspace`` if it already holds the runs), then times the
pieces of :func:`prereg.reports.invokerank.section.arm_invokerank` per arm: the published path,
the calibrated bootstrap, the Invoke Rating (fit and 200-resample prompt bootstrap) and
the Selection Share bootstrap, plus the whole section. Median of ``--repeats``; figures
only, no assertions.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from prereg import stats
from prereg.cli import app
from prereg.core.workspace import Workspace
from prereg.registry.registrations import Registry
from prereg.registry.verify import verified_entry
from prereg.reports.invokerank import section as rir
from prereg.reports.invokerank.choices import first_choices
from prereg.reports.invokerank.counts import _positive, prompt_counts, score_level
from prereg.reports.invokerank.rating import invoke_rating_block, shares_block
from prereg.reports.load import load_runs
from prereg.stats.invokerank import bootstrap_score

REG = "podcast-selection-controls"


def _prepare(root: Path) -> None:
    runner = CliRunner()
    if not (root / "registry").exists():
        runner.invoke(app, ["init", str(root)])
    got = runner.invoke(app, ["-w", str(root), "register", str(root / "drafts" / f"{REG}.yaml")])
    if got.exit_code not in (0, 2):
        raise SystemExit(got.output)
    got = runner.invoke(app, ["-w", str(root), "run", REG, "--concurrency", "2"])
    if got.exit_code != 0:
        raise SystemExit(got.output)


def _time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _arm_times(obs: list[Any], meta: rir.ArmMeta, seed: int | None, repeats: int) -> list[float]:
    positive = _positive(obs, meta.id)
    _, stages, _ = score_level(positive)
    prompts = prompt_counts(positive, stages)
    ch = first_choices(positive)
    assert ch is not None
    last = [r[-1] for r in prompts.reached]
    jobs: list[Callable[[], Any]] = [
        partial(
            stats.invokerank,
            prompts.runs,
            prompts.reached,
            prompts.cell,
            stages=stages,
            seed=seed,
        ),
        partial(bootstrap_score, prompts.runs, last, prompts.cell, seed=seed),
        partial(invoke_rating_block, ch, meta.id, seed),
        partial(shares_block, ch, meta.id, seed),
        partial(rir.arm_invokerank, obs, meta, seed),
    ]
    return [_time(job, repeats) for job in jobs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = args.workspace or Path(tempfile.mkdtemp(prefix="ir-speed-"))
    _prepare(root)
    ws = Workspace(root)
    registry = Registry(ws.registry)
    entry = verified_entry(registry, REG)
    loaded = load_runs(ws, registry, entry)
    reg = entry.registration
    obs = loaded.used
    seed = reg.design.seed
    print(f"{REG}: {len(obs)} runs, {len(reg.arms)} arms; median of {args.repeats}, seconds")
    print(f"{'arm':<12} {'publish':>8} {'calibr.':>8} {'rating':>8} {'shares':>8} {'arm':>8}")
    for meta in rir.arm_metas(reg):
        times = _arm_times(obs, meta, seed, args.repeats)
        print(f"{meta.id:<12} " + " ".join(f"{t:>8.3f}" for t in times))
    print(f"whole section: {_time(lambda: rir.invokerank_report(reg, obs), 1):.2f} s")


if __name__ == "__main__":
    main()
