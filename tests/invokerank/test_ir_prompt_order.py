"""The InvokeRank intervals do not depend on the order runs were stored in.

A registration's runs are stored as parallel units finish, so the same runs come back in
different orders from one ``prereg run`` to the next; a seeded bootstrap resamples
prompts by position. Before prompts were put in task-id order, two demo runs of the same
data printed different Figure 8 intervals (0.0757 against 0.0769), and a cell could flip
between an interval and "degenerate"."""

from __future__ import annotations

import random

import numpy as np

from prereg.reports.invokerank.analyses import rho_block
from prereg.reports.invokerank.counts import prompt_counts
from prereg.reports.observations import STAGES, Obs

STAGES_MEASURED = STAGES[:2]


def _runs(seed: int) -> list[Obs]:
    """12 prompts of one intent, 4 runs each, whose Selected rate varies by prompt (so the
    within-intent rho is defined and its bootstrap spread depends on which prompts are
    drawn)."""
    rng = np.random.default_rng(seed)
    out: list[Obs] = []
    for p in range(12):
        rate = float(rng.uniform(0.1, 0.9))
        for r in range(4):
            selected = bool(rng.random() < rate)
            out.append(
                Obs(
                    record_id=f"rec-{p}-{r}",
                    registration_id="reg",
                    digest="sha256:x",
                    arm="a",
                    task_id=f"t{p:02d}",
                    intent="find",
                    cluster=f"t{p:02d}",
                    polarity="positive",
                    repeat=r,
                    rotation=None,
                    status="ok",
                    evidence_class="local",
                    driver="local",
                    model_requested=None,
                    model_returned=None,
                    success=selected,
                    funnel={"surfaced": True, "selected": selected},
                    terminal_class=None,
                    selection_rate=None,
                    cost_usd=None,
                    tokens=None,
                )
            )
    return out


def test_prompts_are_in_task_id_order_whatever_the_stored_order() -> None:
    runs = _runs(1)
    shuffled = runs[:]
    random.Random(7).shuffle(shuffled)
    assert prompt_counts(shuffled, STAGES_MEASURED).tasks == sorted({o.task_id for o in runs})


def test_figure_8_intervals_are_the_same_for_every_stored_order() -> None:
    runs = _runs(2)
    reference = rho_block(prompt_counts(runs, STAGES_MEASURED), STAGES_MEASURED, seed=3)
    cells = [row for row in reference.rows if row.kind == "cell"]
    assert any(row.interval is not None and row.interval.low is not None for row in cells)
    for order in range(5):
        shuffled = runs[:]
        random.Random(order).shuffle(shuffled)
        again = rho_block(prompt_counts(shuffled, STAGES_MEASURED), STAGES_MEASURED, seed=3)
        assert again == reference, order
