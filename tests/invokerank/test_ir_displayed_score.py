"""The displayed InvokeRank score is the exact expected value (issue 39, items 1-2).

The seed's score is E[Q] under independent stage posteriors: the product over stages of
the Beta posterior means, Beta(y/DEFF + mu kappa, (n - y)/DEFF + (1 - mu) kappa), rolled
up as sum_c w_c E[Q_c]. The published path's 4,000 draws only approximate it; the report
prints it exactly, keeps the Monte Carlo mean labelled (``q_mc``), and every calibrated
interval it prints contains it (the calibrated interval is computed on the plug-in score,
a different estimate).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import Report
from prereg.reports.observations import Obs, from_record
from prereg.reports.render.text import invokerank_leaderboard, invokerank_tables, points


def _run(arm: str, task: str, intent: str, repeat: int, surfaced: bool, selected: bool) -> Obs:
    return from_record(
        {
            "record_id": f"{arm}/{task}/{repeat}",
            "registration_id": "r",
            "arm": arm,
            "task_id": task,
            "intent": intent,
            "polarity": "positive",
            "repeat": repeat,
            "status": "ok",
            "evidence_class": "S",
            "funnel": {"surfaced": surfaced, "selected": selected},
            "terminal_class": "focal" if selected else "searched_then_declined",
        }
    )


def _one_run_per_prompt(arm: str, table: list[tuple[str, int, int, int]]) -> list[Obs]:
    """Per intent (name, prompts, surfaced, selected): one run per prompt, so Kish's
    design effect is exactly 1 whatever rho, and the first ``surfaced`` prompts surfaced,
    the first ``selected`` of them selected."""
    out = []
    for intent, prompts, surfaced, selected in table:
        for p in range(prompts):
            out.append(_run(arm, f"{intent}-{p}", intent, 0, p < surfaced, p < selected))
    return out


def test_one_intent_scores_the_product_of_jeffreys_posterior_means() -> None:
    # one intent: fewer than two cells, so each stage's prior is Jeffreys Beta(1/2, 1/2)
    # (4.1, step 4); one run per prompt, DEFF = 1; posteriors Beta(y + 1/2, n - y + 1/2)
    runs = _one_run_per_prompt("a", [("only", 40, 29, 11)])
    arm = invokerank_section(runs, [ArmMeta("a", "s")], seed=5).arms[0]  # type: ignore[union-attr]
    exact = (29 + 0.5) / (40 + 1) * (11 + 0.5) / (29 + 1)
    assert exact == pytest.approx(0.2758, abs=1e-4)
    assert arm.q == pytest.approx(exact, abs=1e-12)
    assert arm.intents[0].q == pytest.approx(exact, abs=1e-12)
    # the Monte Carlo mean of the 4,000 draws is kept, labelled, and is not the score
    assert arm.q_mc is not None and arm.q_mc != pytest.approx(exact, abs=1e-9)
    assert abs(arm.q_mc - exact) < 0.01
    # every renderer prints the exact value (the tables are shared by md, html, terminal)
    report = Report.model_construct(invokerank=invokerank_section(runs, [ArmMeta("a", "s")], 5))
    header, rows = invokerank_leaderboard(report)
    assert rows[0][header.index("value")] == points(exact) == "27.6"
    _, per_header, per_rows = invokerank_tables(report)[1]
    assert per_rows[0][per_header.index("value")] == points(exact)


def _posterior_mean(stage: Any) -> float:
    """The seed's step 6 from the report's own counts and prior, written out here."""
    alpha = stage.effective_successes + stage.prior_alpha
    beta = stage.effective_trials - stage.effective_successes + stage.prior_beta
    return float(alpha / (alpha + beta)) if alpha + beta > 0 else float("nan")


def _several_intents(arm: str) -> list[Obs]:
    """Four intents of 10 prompts x 2 runs with different rates (a shared prior)."""
    out = []
    rates = {"w": (0.9, 0.7), "x": (0.7, 0.5), "y": (0.6, 0.2), "z": (0.95, 0.05)}
    rng = np.random.default_rng(3)
    for intent, (d, s) in rates.items():
        for p in range(10):
            dp, sp = rng.beta(2 * d, 2 * (1 - d)), rng.beta(2 * s, 2 * (1 - s))
            for r in range(2):
                surfaced = bool(rng.random() < dp)
                selected = surfaced and bool(rng.random() < sp)
                out.append(_run(arm, f"{intent}-{p}", intent, r, surfaced, selected))
    return out


@pytest.mark.parametrize("method", ["published", "calibrated"])
def test_several_intents_score_exactly_and_every_interval_contains_the_score(
    method: str,
) -> None:
    runs = _several_intents("a") + _several_intents("b")[::-1]
    section = invokerank_section(
        runs,
        [ArmMeta("a", "s"), ArmMeta("b", "s")],
        seed=2,
        interval=method,  # type: ignore[arg-type]
    )
    assert section is not None
    for arm in section.arms:
        expected = []
        for intent in arm.intents:
            exact = float(np.prod([_posterior_mean(s) for s in intent.stages]))
            assert intent.q == pytest.approx(exact, abs=1e-12)
            assert intent.q_mc is not None and intent.q_mc != pytest.approx(exact, abs=1e-9)
            expected.append(intent.weight * exact)
        assert arm.q == pytest.approx(sum(expected), abs=1e-12)
        # the calibrated interval (of the plug-in score) contains the displayed score,
        # per intent and rolled up, at both levels; so do the published intervals
        for owner in [arm, *arm.intents]:
            for iv in [*owner.calibrated, *owner.published, *owner.intervals]:
                assert iv.low is not None and iv.high is not None
                assert iv.low <= owner.q <= iv.high, (owner, iv)
        # ties are decided on the registered method's intervals (of the displayed score)
        assert arm.intervals == (arm.calibrated if method == "calibrated" else arm.published)


#: Three intents of six prompts x four runs; every run of a prompt reaches the same
#: depth of the five-stage funnel (0: not surfaced .. 5: completed).
DEPTHS = {"hi": [5, 5, 5, 1, 5, 5], "mid": [1, 3, 0, 5, 2, 0], "lo": [2, 0, 1, 1, 2, 2]}


def test_the_calibrated_interval_contains_a_shrunk_score() -> None:
    # the shared prior shrinks each stage toward the other intents, so "hi" scores far
    # below its plug-in (5 of 6 prompts complete, 0.833): an interval of the plug-in
    # alone (the calibrated interval before issue 39) excluded the displayed score
    stages = ("surfaced", "selected", "invoked", "executed", "completed")
    runs = []
    for intent, depths in DEPTHS.items():
        for p, depth in enumerate(depths):
            for r in range(4):
                funnel = {s: k < depth for k, s in enumerate(stages)}
                runs.append(
                    from_record(
                        {
                            "record_id": f"a/{intent}-{p}/{r}",
                            "registration_id": "r",
                            "arm": "a",
                            "task_id": f"{intent}-{p}",
                            "intent": intent,
                            "polarity": "positive",
                            "repeat": r,
                            "status": "ok",
                            "evidence_class": "S",
                            "funnel": funnel,
                            "terminal_class": "focal" if depth >= 2 else "searched_then_declined",
                        }
                    )
                )
    section = invokerank_section(runs, [ArmMeta("a", "s")], seed=1, interval="calibrated")
    assert section is not None
    arm = section.arms[0]
    assert arm.level == "full"
    hi = next(i for i in arm.intents if i.intent == "hi")
    assert hi.q < 0.6  # shrunk from the plug-in 5/6
    for owner in [arm, *arm.intents]:
        for iv in [*owner.calibrated, *owner.intervals]:
            assert iv.low is not None and iv.high is not None
            assert iv.low <= owner.q <= iv.high, (getattr(owner, "intent", "roll-up"), iv)
    # the plug-in the calibrated interval resamples is kept beside the score, labelled
    assert hi.plug_in == pytest.approx(5 / 6)
    assert arm.plug_in == pytest.approx((5 / 6 + 1 / 6 + 0) / 3)
