"""The stopping rule reads the tasks in a registered, seeded random order (issue 14).

The e-process's order is a permutation of the split's tasks drawn from design.seed
(sha256 of the seed and each task id), not the corpus or store order. The report's
monitor and its completeness cut (stopping_cut) read the same order; a different seed
gives another order. References: the permutation recomputed here with hashlib, and the
crossing point from the closed form E = 2^k / (k + 1) after k one-way discordant pairs
(Beta(1, 1) prior), which first reaches 20 at k = 8.
"""

from __future__ import annotations

import hashlib
import random

from prereg.registry.schema import Registration
from prereg.registry.stream_order import stream_order
from prereg.reports.pairs import PairData
from prereg.reports.registered.stopping import stopping_cut, stopping_report
from tests.reports import registration

TASKS = tuple(f"t{k:02d}" for k in range(30))
WINS = {"t01", "t03", "t04", "t09", "t12", "t15", "t18", "t20", "t22", "t27"}


def _reference(seed: int) -> list[str]:
    key = lambda t: hashlib.sha256(f"prereg/stopping-order/v1/{seed}/{t}".encode()).hexdigest()  # noqa: E731
    return sorted(TASKS, key=key)


def _reg(seed: int) -> Registration:
    doc = registration("lab-order", repeats=1)
    doc["design"] = {"repeats": 1, "seed": seed}
    doc["stopping"] = {"rule": "beta-mixture", "threshold": 20, "min_prompts": 1}
    return Registration.model_validate(doc)


def _pairs() -> PairData:
    return PairData(
        control="baseline",
        treatment="semantic",
        outcome="success",
        tasks=TASKS,
        intents={t: "i1" for t in TASKS},
        control_runs={t: {0: False} for t in TASKS},
        treatment_runs={t: {0: t in WINS} for t in TASKS},
        filter_text="test",
        units=tuple((a, t, 0) for a in ("baseline", "semantic") for t in TASKS),
    )


def _crossing(order: list[str]) -> int:
    """Position (1-based) of the eighth win in ``order``."""
    wins = [i + 1 for i, t in enumerate(order) if t in WINS]
    return wins[7]


def test_the_order_is_a_seeded_permutation() -> None:
    for seed in (0, 1, 3, 12345):
        order = stream_order(TASKS, seed)
        assert order == _reference(seed)
        assert sorted(order) == sorted(TASKS) and order != list(TASKS)
        shuffled = list(TASKS)
        random.Random(seed).shuffle(shuffled)
        assert stream_order(shuffled, seed) == order  # not the store's order
    assert stream_order(TASKS, 1) != stream_order(TASKS, 2)


def test_monitor_and_cut_share_the_order() -> None:
    pairs = _pairs()
    positions = {}
    for seed in (0, 5):
        reg = _reg(seed)
        order = _reference(seed)
        expected = _crossing(order)
        report = stopping_report(reg, pairs)
        assert report.crossed and report.stop_at == expected
        assert abs(report.evalue - 2**8 / 9) < 1e-9
        assert f"seed {seed}" in report.order
        # all complete: the cut is the crossing point of the same order
        assert stopping_cut(reg, pairs, TASKS, TASKS) == expected
        # only the head of the registered order is complete: the cut still finds it
        assert stopping_cut(reg, pairs, TASKS, order[:expected]) == expected
        # one task short of it: the rule has not crossed on what is complete
        assert stopping_cut(reg, pairs, TASKS, order[: expected - 1]) is None
        positions[seed] = expected
    assert positions[0] != positions[5]  # a different seed changes the path
