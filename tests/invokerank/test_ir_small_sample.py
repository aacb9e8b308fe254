"""The small-sample rule of the InvokeRank section (issue 39, items 3-4).

Below MIN_PROMPTS prompts in an intent, no interval of (or over) that intent is printed:
bounds null and a labelled "too few prompts (n < m)", for the score (published and
calibrated, per intent and rolled up), the Invoke Rating and the Selection Shares. No
zero-width interval is printed without its label, and the 90% interval nests in the
95%. With sessions, the calibrated interval needs MIN_SESSIONS of them and carries the
between-session variance. Its coverage at 8 prompts per intent is simulated here on
independent intents (the Monte Carlo SE is stated beside the tolerance); the full
table is bench/invokerank_coverage.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import InvokeRankReport, Report
from prereg.reports.observations import Obs, from_record
from prereg.reports.render.text import invokerank_tables
from prereg.stats.invokerank import MIN_PROMPTS, MIN_SESSIONS, bootstrap_score, invokerank

POOL = [("focal", "focal"), ("rival", "competitor"), ("other", "competitor")]


def _run(arm: str, intent: str, task: str, repeat: int, first: str | None) -> Obs:
    cls = {"focal": "focal", "rival": "competitor", "other": "competitor"}.get(
        first or "", "searched_then_declined"
    )
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
            "terminal_class": cls,
            "funnel": {
                "surfaced": first == "focal" or repeat % 2 == 0,
                "selected": first == "focal",
            },
            "offer": {
                "servers": [{"key": k, "role": r} for k, r in POOL],
                "first_server": first,
            },
        }
    )


def _arm(arm: str, prompts: dict[str, int], runs: int, seed: int) -> list[Obs]:
    """``prompts[intent]`` prompts of ``runs`` runs each; a prompt mostly picks one
    option (its runs agree), as the podcast draft's do."""
    rng = np.random.default_rng(seed)
    options = [None, "focal", "rival", "other"]
    out = []
    for intent, count in prompts.items():
        for p in range(count):
            usual = options[int(rng.integers(0, 4))]
            for r in range(runs):
                first = usual if rng.random() < 0.85 else options[int(rng.integers(0, 4))]
                out.append(_run(arm, intent, f"{intent}-{p}", r, first))
    return out


def _intervals(section: InvokeRankReport) -> list[tuple[str, list[Any]]]:
    """Every printed interval list of the section: (where, [90%, 95%])."""
    out: list[tuple[str, list[Any]]] = []
    for a in section.arms:
        for name in ("intervals", "published", "calibrated"):
            out.append((f"{a.arm} roll-up {name}", getattr(a, name)))
            out += [(f"{a.arm} {i.intent} {name}", getattr(i, name)) for i in a.intents]
        if a.rating is not None:
            out += [(f"{a.arm} rating {r.integration}", r.intervals) for r in a.rating.rows]
        if a.shares is not None:
            out += [
                (f"{a.arm} share {r.intent} {r.integration}", r.intervals) for r in a.shares.rows
            ]
    return out


def _check_printed(section: InvokeRankReport) -> None:
    """No unlabelled zero-width interval; 90% nested in 95%; a withheld one has a reason."""
    for where, pair in _intervals(section):
        assert [round(iv.level, 2) for iv in pair] == [0.9, 0.95], where
        for iv in pair:
            reason = getattr(iv, "reason", None)
            if iv.low is None or iv.high is None:
                assert reason, where
            elif iv.high - iv.low <= 1e-12:
                assert reason and "zero width" in reason, (where, "unlabelled zero width", iv)
        narrow, wide = pair
        if narrow.low is not None and wide.low is not None:
            assert wide.low <= narrow.low <= narrow.high <= wide.high, where
    # the printed tables (Markdown, HTML and the terminal share them)
    report = Report.model_construct(invokerank=section)
    for title, _, rows in invokerank_tables(report):
        for row in rows:
            for cell in map(str, row):
                for low, high in re.findall(r"(-?\d+\.?\d*%?) to (-?\d+\.?\d*%?)", cell):
                    if low == high:
                        assert "zero width" in cell, (title, row)


# the bundled podcast controls draft's design: 5 prompts over 4 intents, 8 runs each
PODCAST = {"episodes": 1, "find-podcast": 1, "follow-podcast": 2, "mark-played": 1}


@pytest.mark.parametrize("method", ["published", "calibrated"])
def test_five_prompts_over_four_intents_print_too_few_labels(method: str) -> None:
    runs = _arm("reference", PODCAST, 8, 1) + _arm("placebo", PODCAST, 8, 2)
    metas = [ArmMeta("reference", "s"), ArmMeta("placebo", "s")]
    section = invokerank_section(runs, metas, seed=3, interval=method)  # type: ignore[arg-type]
    assert section is not None
    _check_printed(section)
    withheld = [(w, iv) for w, pair in _intervals(section) for iv in pair]
    assert withheld
    for where, iv in withheld:
        if "rating" in where and iv.reason and iv.reason.startswith("no rating"):
            continue  # an alternative never chosen has no rating at all
        assert iv.low is None and iv.high is None, where
        assert iv.reason is not None and iv.reason.startswith("too few prompts ("), where
    # per intent the count is the intent's, rolled up the smallest weighed intent's
    arm = section.arms[0]
    assert arm.intents[0].intervals[0].reason == f"too few prompts (1 < {MIN_PROMPTS})"
    assert arm.intervals[0].reason == f"too few prompts (1 < {MIN_PROMPTS} in an intent)"
    # the score itself is still printed; ties are not decided without intervals
    assert arm.q is not None and arm.tied_with == [] and arm.ties_note
    report = Report.model_construct(invokerank=section)
    text = "\n".join(str(c) for _, _, rows in invokerank_tables(report) for r in rows for c in r)
    assert f"too few prompts (1 < {MIN_PROMPTS})" in text


def test_at_the_minimum_the_intervals_are_shown_nested_and_labelled() -> None:
    design = {"a": MIN_PROMPTS, "b": MIN_PROMPTS, "c": MIN_PROMPTS + 2}
    runs = _arm("x", design, 3, 4)
    section = invokerank_section(runs, [ArmMeta("x", "s")], seed=5, interval="calibrated")
    assert section is not None
    _check_printed(section)
    arm = section.arms[0]
    for owner in [arm, *arm.intents]:
        for iv in [*owner.intervals, *owner.published, *owner.calibrated]:
            assert iv.low is not None and iv.high is not None
            assert iv.low <= owner.q <= iv.high
    assert arm.rating is not None and any(r.intervals[0].low is not None for r in arm.rating.rows)
    assert arm.shares is not None and arm.shares.rows
    for where, pair in _intervals(section):
        assert not any((iv.reason or "").startswith("too few") for iv in pair), where


def _sessions_study(
    rng: np.random.Generator, shifts: list[float], prompts: int = 30
) -> dict[str, np.ndarray]:
    """Two intents, each prompt run once per session; session s shifts every prompt's
    rate by ``shifts[s]`` (the run-to-run component)."""
    rate = rng.beta(1.0, 1.5, (2, prompts))
    rows: dict[str, list[int]] = {k: [] for k in ("runs", "y", "cell", "prompt", "session")}
    for c in range(2):
        for p in range(prompts):
            for s, shift in enumerate(shifts):
                y = int(rng.random() < float(np.clip(rate[c, p] + shift, 0.0, 1.0)))
                for key, value in zip(rows, (1, y, c, c * prompts + p, s), strict=True):
                    rows[key].append(value)
    return {k: np.asarray(v) for k, v in rows.items()}


def _width(got: Any, c: int | None = None) -> float:
    if c is None:
        return float(got.rollup_high[0.9] - got.rollup_low[0.9])
    return float(got.q_high[0.9][c] - got.q_low[0.9][c])


def test_sessions_need_the_minimum_and_their_variance_reaches_the_interval() -> None:
    rng = np.random.default_rng(8)
    two = _sessions_study(rng, [-0.1, 0.1])
    got = bootstrap_score(
        two["runs"], two["y"], two["cell"], prompt=two["prompt"], session=two["session"]
    )
    assert got.rollup_reason == f"too few sessions (2 < {MIN_SESSIONS})"
    assert all(math.isnan(v) for v in got.q_low[0.9]) and math.isnan(got.rollup_low[0.9])
    # four sessions shifted by -.2, -.07, .07, .2 (SD .17): found, and in the interval
    study = _sessions_study(rng, [-0.2, -0.07, 0.07, 0.2], prompts=40)
    args = (study["runs"], study["y"], study["cell"])
    with_s = bootstrap_score(*args, prompt=study["prompt"], session=study["session"], seed=2)
    pooled = bootstrap_score(*args, prompt=study["prompt"], seed=2)  # sessions not named
    assert with_s.sessions == 4 and with_s.rollup_reason is None
    assert 0.08 < with_s.rollup_session_sd < 0.3
    assert _width(with_s) > 1.5 * _width(pooled)
    assert _width(with_s, 0) > _width(pooled, 0) and _width(with_s, 1) > _width(pooled, 1)
    # no session effect: the method of moments finds less (only the runs' noise, which it
    # subtracts, on three degrees of freedom), and the interval is narrower
    flat = _sessions_study(rng, [0.0, 0.0, 0.0, 0.0], prompts=40)
    f_args = (flat["runs"], flat["y"], flat["cell"])
    a = bootstrap_score(*f_args, prompt=flat["prompt"], session=flat["session"], seed=2)
    assert a.rollup_session_sd < with_s.rollup_session_sd / 2
    assert _width(a) < _width(with_s)


#: The bench's centre design (seed Figure 3's intent scores split into r_D and r_S).
CENTRE = np.array([0.759, 0.565, 0.449, 0.527, 0.455, 0.323, 0.177, 0.062])


def _coverage(reps: int, groups: int, seed: int, **options: Any) -> tuple[float, float]:
    """Coverage of the calibrated 90% interval (as the report prints it: containing the
    displayed score) at 8 prompts x 2 runs per intent: per intent, and rolled up over
    each group of the centre design's eight intents (groups independent)."""
    rng = np.random.default_rng(seed)
    mu_d = np.minimum(0.95, CENTRE**0.45)
    mu_s = CENTRE / mu_d
    truth = mu_d * mu_s  # E[d s]: prompts' d and s are independent
    prompts, runs = 8, 2
    cell = np.repeat(np.arange(CENTRE.size), prompts)
    intent_hits, roll_hits = [], []
    for rep in range(reps):
        for g in range(groups):
            dp = rng.beta(mu_d * 0.15, (1 - mu_d) * 0.15, (prompts, CENTRE.size)).T.ravel()
            sp = rng.beta(mu_s * 0.25, (1 - mu_s) * 0.25, (prompts, CENTRE.size)).T.ravel()
            surfaced = rng.binomial(runs, dp)
            selected = rng.binomial(surfaced, sp)
            reached = np.stack([surfaced, selected], axis=1)
            n = np.full(cell.size, runs)
            shown = invokerank(n, reached, cell, stages=("surfaced", "selected"), draws=10)
            got = bootstrap_score(
                n,
                selected,
                cell,
                resamples=400,
                seed=rep * groups + g,
                levels=(0.9,),
                centre=shown.q_exact,
                rollup_centre=float(np.mean(shown.q_exact)),
                **options,
            )
            intent_hits.append((got.q_low[0.9] <= truth) & (truth <= got.q_high[0.9]))
            roll_hits.append(got.rollup_low[0.9] <= truth.mean() <= got.rollup_high[0.9])
    return float(np.mean(intent_hits)), float(np.mean(roll_hits))


def test_the_calibrated_interval_covers_at_eight_prompts_per_intent() -> None:
    # 40 replications of 6 independent groups of the eight intents: 1,920 per-intent
    # intervals (each from its own intent's prompts: MC SE 0.7 points) and 240 roll-ups
    # (MC SE 1.9 points). The target is nominal within 2 points; the tolerance adds 2.5
    # MC SEs of simulation noise. Here: 91.6% and 90.4% (the method before issue 39,
    # given the same containment: 89.6% and 85.8% at 50 x 8); bench/invokerank_coverage.py
    # has the design at 400 replications.
    reps, groups = 40, 6
    per_intent, roll_up = _coverage(reps, groups, seed=20)
    se_intent = math.sqrt(0.09 / (reps * groups * CENTRE.size))
    se_roll = math.sqrt(0.09 / (reps * groups))
    assert abs(per_intent - 0.90) <= 0.02 + 2.5 * se_intent, (per_intent, se_intent)
    assert abs(roll_up - 0.90) <= 0.02 + 2.5 * se_roll, (roll_up, se_roll)
