"""Speed of the failure-record decoder (``prereg.reports.toolbottleneck.decoder``, issue 42
item 2): the ten feature sets, leave one intent out, and the intent-cluster bootstrap
(10,000 draws by default) of their balanced accuracies and the five paired gains.

Runs the bundled study (``experiments/bundled/toolbottleneck/study.yaml``, simulated
policy; its run is not timed), then times, each the median of ``--repeats``:

* ``packets`` + ``decode_pressure`` on the bundled study's own episodes (4 intents: below
  10 no interval is printed, so nothing is resampled);
* the same packets with their intents copied k times under new names (at least 12 and 36
  intents, k times the packets), so the bootstrap runs at ``--draws`` draws;
* the same with at least 120 intents, for scale.

No assertions: figures only.

    python bench/tb_decoder.py [--draws 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from prereg.experiments.toolbottleneck.study import load_study
from prereg.reports.toolbottleneck.decoder import Packet, Population, decode_pressure, packets
from prereg.runners.toolbottleneck.study import run_study

STUDY = Path(__file__).resolve().parents[1] / "experiments/bundled/toolbottleneck/study.yaml"


def _median(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _copied(pop: Population, k: int) -> Population:
    """The packets with their intents copied k times under new names."""

    def copy(items: tuple[Packet, ...]) -> tuple[Packet, ...]:
        return tuple(
            dataclasses.replace(p, intent=f"{p.intent}#{i}") for i in range(k) for p in items
        )

    return dataclasses.replace(pop, single=copy(pop.single), several=copy(pop.several))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    study = load_study(STUDY)
    run = run_study(study, str(STUDY))
    records = list(run.records)
    baseline = study.spec.baseline or study.spec.arms[0].id
    pop = packets(records, baseline)
    intents = len({p.intent for p in pop.single})
    print(
        f"bundled study: {len(records)} episodes, {len(pop.configurations)} configuration(s), "
        f"{len(pop.single)} single-failure packets over {intents} intents, "
        f"{len(pop.several)} several-failure rows"
    )
    seconds = _median(
        lambda: decode_pressure(packets(records, baseline), draws=args.draws), args.repeats
    )
    print(f"  packets + decode (no resampling below 10 intents): {seconds:.3f} s")
    for target in (12, 36, 120):
        bigger = _copied(pop, -(-target // max(intents, 1)))
        n = len({p.intent for p in bigger.single})
        seconds = _median(
            functools.partial(decode_pressure, bigger, draws=args.draws), args.repeats
        )
        print(
            f"  {n} intents, {len(bigger.single)} packets, {args.draws:,} draws x 10 feature "
            f"sets + 5 gains: {seconds:.3f} s"
        )


if __name__ == "__main__":
    main()
