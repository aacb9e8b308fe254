"""The seed's further analyses in the InvokeRank section (issue 41, item 4): need type and
the exact intent-level permutation test (6.2), the False-Invoke Rate per intent (6.5),
rho per intent with intervals (7.4, Figure 8), the two-level choice of eq. (4), and
Figures 2, 3, 5 and 8 (Figure 7 withheld with its reason).

Every figure is recomputed independently: from the seed's published numbers, from the run
records by hand (ANOVA, Kish, Jeffreys written out), against scipy's exact permutation
test, scipy's Beta quantiles and statsmodels' ANOVA table.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from prereg.reports.invokerank.analyses import need_test
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import IntentScore, Report
from prereg.reports.observations import Obs, from_record
from prereg.reports.render import invokerank_figures as figs
from prereg.reports.render.figures import FIGURES, _canvas
from prereg.reports.render.text import invokerank_tables
from prereg.stats.invokerank.rho_intervals import nested_icc, rho_bootstrap


def _obs(arm: str, task: str, intent: str, repeat: int, **fields: Any) -> Obs:
    polarity = fields.pop("polarity", "positive")
    status = fields.pop("status", "ok")
    cls = fields.pop("terminal_class", None)
    return from_record(
        {
            "record_id": f"{arm}/{task}/{repeat}",
            "registration_id": "t",
            "arm": arm,
            "task_id": task,
            "intent": intent,
            "polarity": polarity,
            "repeat": repeat,
            "status": status,
            "evidence_class": "S",
            "terminal_class": cls,
            "funnel": fields,
        }
    )


def _positive(arm: str, task: str, intent: str, repeat: int, cls: str) -> Obs:
    """A positive run ending in terminal class ``cls``, with a funnel that agrees."""
    surfaced = cls != "answered_without_search"
    selected = cls == "focal"
    return _obs(
        arm,
        task,
        intent,
        repeat,
        surfaced=surfaced,
        selected=selected,
        invoked=selected,
        executed=None,
        completed=None,
        terminal_class=cls,
    )


# --- (a) need type and the exact intent-level permutation test (6.2) -------------------

#: Figure 3 of the seed: intent -> (Claude API score, ChatGPT API score, need type)
SEED_FIGURE_3 = {
    "prepare-quarterly-update": (75.9, 57.4, "private state"),
    "mtd-deadlines": (56.5, 60.2, "private state"),
    "check-mtd-obligation": (44.9, 66.6, "answerable"),
    "record-transaction": (52.7, 45.9, "action"),
    "log-business-mileage": (45.5, 33.6, "action"),
    "create-send-invoice": (32.3, 37.4, "action"),
    "estimate-sole-trader-tax": (17.7, 3.5, "answerable"),
    "check-tax-code": (6.2, 1.5, "answerable"),
}


def _scores(host: int) -> list[IntentScore]:
    return [
        IntentScore.model_construct(intent=k, q=v[host] / 100) for k, v in SEED_FIGURE_3.items()
    ]


@pytest.mark.parametrize(
    ("host", "recode", "p", "difference"),
    [
        (0, False, 0.036, 29.7),
        (1, False, 0.107, 23.0),
        (0, True, 0.114, None),
        (1, True, 0.257, None),
    ],
)
def test_need_type_test_reproduces_the_seed(
    host: int, recode: bool, p: float, difference: float | None
) -> None:
    """6.2: p = 0.036 (Claude API) and 0.107 (ChatGPT API) over the 56 ways of choosing
    five of eight intents; 0.114 and 0.257 with mtd-deadlines coded answerable."""
    coding = {k: v[2] for k, v in SEED_FIGURE_3.items()}
    if recode:
        coding["mtd-deadlines"] = "answerable"
    t = need_test(_scores(host), coding)
    assert t.reason is None and t.relabelings == math.comb(8, len(t.tool_need))
    assert round(t.pvalue or 0, 3) == p
    if difference is not None:
        # from the scores as published (rounded to 0.1 each): within 0.1 of the seed's
        assert t.relabelings == 56
        assert 100 * (t.difference or 0) == pytest.approx(difference, abs=0.1)
    # against scipy's exact permutation test (every relabeling enumerated)
    x = [SEED_FIGURE_3[k][host] for k in t.tool_need]
    y = [SEED_FIGURE_3[k][host] for k in t.answerable]
    ref = sps.permutation_test(
        (x, y),
        lambda a, b: np.mean(a) - np.mean(b),
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,
    )
    assert t.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
    assert t.smallest_p == pytest.approx(1 / t.relabelings)


def test_need_type_test_beyond_the_exact_limit_says_so() -> None:
    """C(24, 12) > 10^6 relabelings: seeded random relabelings, and the note says so."""
    scores = [IntentScore.model_construct(intent=f"i{k}", q=k / 30) for k in range(24)]
    coding = {f"i{k}": "action" if k >= 12 else "knowledge" for k in range(24)}
    t = need_test(scores, coding)
    assert t.relabelings == math.comb(24, 12) and "seeded random relabelings" in t.note
    assert t.pvalue is not None and t.pvalue < 0.01  # the top twelve: extreme
    assert t.smallest_p is not None and t.smallest_p > 1 / t.relabelings


def test_need_vocabulary_is_the_native_judge_s() -> None:
    from prereg.reports.invokerank import analyses
    from prereg.runners.judging import ask

    assert analyses.NEEDS == ask.NEEDS
    assert analyses.NEVER_SELF_SERVED == ask.NEVER_SELF_SERVED


def test_need_type_test_says_why_it_is_not_run() -> None:
    scores = _scores(0)
    assert "no need type per intent" in (need_test(scores, None).reason or "")
    only_tools = {k: "action" for k in SEED_FIGURE_3}
    assert "at least one tool-need and one knowledge" in (
        need_test(scores, only_tools).reason or ""
    )
    partial = {"check-tax-code": "knowledge", "record-transaction": "action"}
    t = need_test(scores, partial)
    assert t.relabelings == 2 and len(t.uncoded) == 6
    with pytest.raises(ValueError, match="need type 'menu'"):
        need_test(scores, {"check-tax-code": "menu"})


# --- a design with four intents of different rates, negatives and a failed run --------

#: per intent: (prompts, selection pattern per prompt over 2 repeats)
INTENT_RATES = {
    "alpha": [("focal", "focal")] * 6
    + [("focal", "searched_then_declined")] * 3
    + [("searched_then_declined",) * 2] * 3,
    "beta": [("focal", "focal")] * 5
    + [("searched_then_declined",) * 2] * 5
    + [("competitor",) * 2],
    "gamma": [("focal", "answered_without_search")] * 6 + [("answered_without_search",) * 2] * 6,
    "delta": [("focal", "focal")] * 2 + [("answered_without_search", "competitor")] * 4,
}
#: negatives per intent: (prompts, focal calls on the first run of the first n prompts)
NEGATIVES = {"alpha": (8, 4), "gamma": (6, 0), "delta": (5, 1)}
NEEDS = {"alpha": "private_state", "beta": "action", "gamma": "knowledge", "delta": "answerable"}


def _design(arm: str = "a") -> list[Obs]:
    runs: list[Obs] = []
    for intent, prompts in INTENT_RATES.items():
        for p, pattern in enumerate(prompts):
            for r, cls in enumerate(pattern):
                runs.append(_positive(arm, f"{intent}-p{p}", intent, r, cls))
    for intent, (n, focal) in NEGATIVES.items():
        for p in range(n):
            for r in range(2):
                cls = "focal" if r == 0 and p < focal else "answered_without_search"
                if intent == "delta" and r == 1 and p == 0:
                    cls = "competitor"
                runs.append(
                    _obs(
                        arm,
                        f"{intent}-n{p}",
                        intent,
                        r,
                        polarity="negative",
                        selected=cls == "focal",
                        terminal_class=cls,
                    )
                )
    # a failed run (an infrastructure error): in no rate, no count
    runs.append(
        _obs(
            arm, "alpha-n0", "alpha", 2, polarity="negative", status="error", terminal_class="focal"
        )
    )
    return runs


@pytest.fixture(scope="module")
def design() -> Any:
    runs = _design()
    section = invokerank_section(runs, [ArmMeta("a", "s")], seed=5, need_types=NEEDS)
    assert section is not None
    return runs, section.arms[0], section


def _anova_rho(groups: Sequence[Sequence[int]]) -> float:
    """One-way ANOVA rho of binary outcomes per group, written out (nan if undefined)."""
    groups = [g for g in groups if len(g)]
    k = len(groups)
    big_n = sum(len(g) for g in groups)
    total = sum(sum(g) for g in groups)
    if k < 2 or big_n == k or total in (0, big_n):
        return math.nan
    grand = total / big_n
    ssb = sum(len(g) * (sum(g) / len(g) - grand) ** 2 for g in groups)
    ssw = sum(sum((v - sum(g) / len(g)) ** 2 for v in g) for g in groups)
    msb, msw = ssb / (k - 1), ssw / (big_n - k)
    n0 = (big_n - sum(len(g) ** 2 for g in groups) / big_n) / (k - 1)
    return min(1.0, max(0.0, (msb - msw) / (msb + (n0 - 1) * msw)))


def _stage_groups(
    runs: Sequence[Obs], stage: str, intent: str | None = None
) -> dict[str, list[int]]:
    """Per prompt, the sequential outcomes at ``stage`` among runs reaching its parent."""
    parent = {"surfaced": None, "selected": "surfaced"}[stage]
    out: dict[str, list[int]] = defaultdict(list)
    for o in runs:
        if o.polarity != "positive" or (intent is not None and o.intent != intent):
            continue
        if parent is None or o.funnel[parent]:
            out[o.task_id].append(int(bool(o.funnel[stage])))
    return out


def test_need_type_test_in_the_section_from_the_records(design: Any) -> None:
    _, arm, _ = design
    t = arm.need_test
    assert t.coding == {
        "alpha": "private_state",
        "beta": "action",
        "delta": "knowledge",
        "gamma": "knowledge",
    }
    q = {i.intent: i.q for i in arm.intents}
    x, y = [q["alpha"], q["beta"]], [q["delta"], q["gamma"]]
    # every relabeling by hand: 6 ways of choosing the two tool-need intents
    values = list(q.values())
    observed = np.mean(x) - np.mean(y)
    hits = 0
    for pick in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]:
        a = [values[i] for i in pick]
        b = [values[i] for i in range(4) if i not in pick]
        hits += np.mean(a) - np.mean(b) >= observed - 1e-12
    assert t.pvalue == pytest.approx(hits / 6) and t.relabelings == 6
    assert t.difference == pytest.approx(observed)


# --- (b) False-Invoke Rate per intent (6.5) --------------------------------------------


def _jeffreys(x: float, n: float, deff: float, level: float = 0.90) -> tuple[float, float]:
    a, b = x / deff + 0.5, (n - x) / deff + 0.5
    low = 0.0 if x == 0 else float(sps.beta.ppf((1 - level) / 2, a, b))
    high = 1.0 if x == n else float(sps.beta.ppf((1 + level) / 2, a, b))
    return low, high


def test_false_invoke_rate_per_intent_from_the_records(design: Any) -> None:
    runs, arm, _ = design
    rho_s = _anova_rho(list(_stage_groups(runs, "selected").values()))
    assert arm.false_invoke.rho == pytest.approx(rho_s, abs=1e-12)
    rows = {x.intent: x for x in arm.false_invoke_by_intent}
    assert list(rows) == ["alpha", "delta", "gamma"]  # beta has no negative runs
    for intent, row in rows.items():
        ok = [o for o in runs if o.intent == intent and o.polarity == "negative" and o.ok]
        sizes: dict[str, int] = defaultdict(int)
        for o in ok:
            sizes[o.task_id] += 1
        kbar = sum(m * m for m in sizes.values()) / sum(sizes.values())
        deff = 1 + (kbar - 1) * rho_s
        for neg, classes in (
            (row.false_invoke, {"focal"}),
            (row.any_external, {"focal", "competitor", "other_external"}),
        ):
            calls = sum(o.terminal_class in classes for o in ok)
            assert (neg.calls, neg.runs, neg.prompts) == (calls, len(ok), len(sizes))
            assert neg.design_effect == pytest.approx(deff)
            low, high = _jeffreys(calls, len(ok), deff)
            assert (neg.interval.low, neg.interval.high) == pytest.approx((low, high), abs=1e-9)
    # the seed's check-mtd-obligation on the ChatGPT API: 4 of 16 negative runs, 25.0%
    assert (rows["alpha"].false_invoke.calls, rows["alpha"].false_invoke.runs) == (4, 16)
    assert round(100 * rows["alpha"].false_invoke.rate, 1) == 25.0
    # the per-intent counts add up to the arm's (the failed run is in neither)
    assert sum(r.false_invoke.calls for r in rows.values()) == arm.false_invoke.calls == 5
    assert sum(r.any_external.calls for r in rows.values()) == arm.any_external.calls == 6


# --- (c) rho per intent with intervals (Figure 8) --------------------------------------


def test_rho_per_intent_from_the_records(design: Any) -> None:
    runs, arm, _ = design
    rows = arm.rho.rows
    for stage in ("surfaced", "selected"):
        pooled = next(r for r in rows if r.stage == stage and r.kind == "pooled")
        want = _anova_rho(list(_stage_groups(runs, stage).values()))
        assert (pooled.rho if pooled.rho is not None else math.nan) == pytest.approx(
            want, nan_ok=True
        )
        for intent in INTENT_RATES:
            cell = next(r for r in rows if r.stage == stage and r.intent == intent)
            groups = _stage_groups(runs, stage, intent)
            want = _anova_rho(list(groups.values()))
            got = cell.rho if cell.rho is not None else math.nan
            assert got == pytest.approx(want, nan_ok=True), (stage, intent)
            assert cell.groups == sum(1 for g in groups.values() if g)
            # the report's cell rho is the one the published path used
            score = next(i for i in arm.intents if i.intent == intent)
            stage_est = next(s for s in score.stages if s.stage == stage)
            if stage_est.rho_source == "cell":
                assert stage_est.rho == pytest.approx(got)
    # small scale: every intent has fewer than 10 prompts with data at some stage
    delta = next(r for r in rows if r.stage == "surfaced" and r.intent == "delta")
    assert delta.interval.low is None and "too few prompts (6 < 10)" in delta.interval.reason


def _loop_bootstrap(groups: list[list[int]], seed: int, resamples: int) -> tuple[float, float]:
    """The percentile bootstrap over prompts, one resample at a time, from the runs."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(groups), size=(resamples, len(groups)))
    values = [_anova_rho([groups[i] for i in row]) for row in idx]
    ok = [v for v in values if not math.isnan(v)]
    low, high = np.quantile(ok, [0.05, 0.95])
    return float(low), float(high)


def test_rho_bootstrap_equals_a_bootstrap_of_the_records() -> None:
    rng = np.random.default_rng(1)
    groups = [[int(v) for v in rng.random(3) < p] for p in rng.uniform(0, 1, 14)]
    y = [sum(g) for g in groups]
    n = [len(g) for g in groups]
    b = rho_bootstrap(y, n, seed=9, resamples=400)
    assert b.rho == pytest.approx(_anova_rho(groups))
    assert b.reason is None and (b.low, b.high) == pytest.approx(_loop_bootstrap(groups, 9, 400))
    # a degenerate cell: every prompt all or nothing gives rho 1 in every resample
    allor = [[1, 1], [0, 0]] * 6
    d = rho_bootstrap([sum(g) for g in allor], [2] * 12, seed=1)
    assert d.rho == 1.0 and math.isnan(d.low) and "degenerate" in (d.reason or "")
    few = rho_bootstrap(y[:9], n[:9])
    assert math.isnan(few.low) and "too few prompts (9 < 10)" in (few.reason or "")
    assert "undefined" in (rho_bootstrap([0, 0], [2, 2]).reason or "")


def test_within_intent_rho_equals_statsmodels_nested_anova() -> None:
    smf = pytest.importorskip("statsmodels.formula.api")
    anova_lm = pytest.importorskip("statsmodels.stats.anova").anova_lm
    import pandas as pd

    rng = np.random.default_rng(4)
    rows, y, n, cell = [], [], [], []
    for c in range(3):
        for p in range(7):
            m = int(rng.integers(2, 5))
            prob = rng.uniform(0.1, 0.9) * (0.5 + 0.25 * c)
            outcomes = [int(v) for v in rng.random(m) < prob]
            rows += [{"y": v, "intent": f"c{c}", "prompt": f"c{c}p{p}"} for v in outcomes]
            y.append(sum(outcomes))
            n.append(m)
            cell.append(c)
    frame = pd.DataFrame(rows)
    # nested models: intent means only, then prompt means (prompts nested in intents);
    # statsmodels' F table gives the prompt-within-intent and residual sums of squares
    by_intent = smf.ols("y ~ C(intent)", data=frame).fit()
    by_prompt = smf.ols("y ~ C(prompt)", data=frame).fit()
    table = anova_lm(by_intent, by_prompt)
    ss_prompt, df_prompt = table.loc[1, ["ss_diff", "df_diff"]]
    ss_resid, df_resid = table.loc[1, ["ssr", "df_resid"]]
    msb, msw = ss_prompt / df_prompt, ss_resid / df_resid
    big_n = sum(n)
    per_cell = [
        sum(n[i] ** 2 for i in range(len(n)) if cell[i] == c)
        / sum(n[i] for i in range(len(n)) if cell[i] == c)
        for c in range(3)
    ]
    n0 = (big_n - sum(per_cell)) / df_prompt
    want = min(1.0, max(0.0, (msb - msw) / (msb + (n0 - 1) * msw)))
    assert (df_prompt, df_resid) == (21 - 3, big_n - 21)
    assert nested_icc(y, n, cell) == pytest.approx(want, rel=1e-9)


# --- (d) the two-level choice of eq. (4) -----------------------------------------------

#: the seed's Figure 4, Claude API, all intents: 390 runs; 162 TapTax, 4 a competitor,
#: 119 answered without search, 105 searched then declined
SEED_FIGURE_4 = {
    "focal": 162,
    "competitor": 4,
    "answered_without_search": 119,
    "searched_then_declined": 105,
}


def test_choice_factorisation_reproduces_the_seed() -> None:
    runs = []
    k = 0
    for cls, count in SEED_FIGURE_4.items():
        for _ in range(count):
            runs.append(_positive("claude", f"p{k // 2}", "all", k % 2, cls))
            k += 1
    arm = invokerank_section(runs, [ArmMeta("claude", "s")], seed=1).arms[0]
    overall = arm.choice_factors[0]
    assert overall.intent == "all intents" and overall.runs == 390
    # 6.3 and 8: "the first call in 162 of the 162 plus 4 runs with an external call";
    # "chosen in 41.5% of positive requests"
    assert (overall.focal, overall.external) == (162, 166)
    assert round(100 * overall.p_focal, 1) == 41.5
    assert round(100 * overall.p_external, 1) == 42.6
    assert round(100 * overall.p_focal_given_external, 1) == 97.6
    assert overall.p_external * overall.p_focal_given_external == pytest.approx(overall.p_focal)
    assert (overall.answered_without_search, overall.searched_then_declined) == (119, 105)


def test_choice_factors_per_intent_from_the_records(design: Any) -> None:
    runs, arm, _ = design
    for f in arm.choice_factors:
        mine = [
            o
            for o in runs
            if o.polarity == "positive"
            and o.ok
            and (f.intent == "all intents" or o.intent == f.intent)
        ]
        classes = [o.terminal_class for o in mine]
        external = sum(c in ("focal", "competitor", "other_external") for c in classes)
        assert (f.runs, f.external, f.focal) == (len(mine), external, classes.count("focal"))
        assert f.p_focal_given_external == (classes.count("focal") / external if external else None)
        assert f.other_no_tool == classes.count("unresolved")


# --- (e) replicates and the figures ----------------------------------------------------


def _report(section: Any, **fields: Any) -> Report:
    return Report.model_construct(
        invokerank=section, pairwise=[], controls=[], outcome="selected", **fields
    )


def test_figures_at_size_and_their_reasons(design: Any) -> None:
    _, arm, section = design
    report = _report(section)
    assert "one run (one session" in section.replicates
    # Figure 2: every measured stage with its Jeffreys interval
    rows = figs.funnel_rows(report)
    assert [r[0] for r in rows] == ["a: surfaced", "a: selected"]
    for (_, est, bounds), stage in zip(rows, arm.funnel, strict=True):
        assert est == stage.successes / stage.trials
        assert bounds == (stage.displayed.low, stage.displayed.high)
    # Figure 3: 6 to 12 prompts per intent, so every score has its 90% interval
    rows = figs.intent_rows(report)
    for (_, q, bounds), score in zip(rows, arm.intents, strict=True):
        assert q == score.q and bounds == (score.intervals[0].low, score.intervals[0].high)
    # Figure 8: one cell with an interval (alpha at Selected: 12 prompts with spread);
    # the others are drawn open and labelled "no interval"
    rho = figs.rho_rows(report)
    with_iv = [label for label, _, b in rho if b is not None]
    assert with_iv == ["a: selected: alpha"]
    fig = figs.ir_rho_figure(report, _canvas)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sum("(no interval)" in lab for lab in labels) == len(rho) - 1
    assert dict(figs.withheld(report)) == {
        "Figure 7 (replicate runs)": "one run per arm in this registration"
    }
    for name in ("ir_funnel", "ir_intents", "ir_rho"):
        assert (FIGURES[name][0](report) or b"")[:8] == b"\x89PNG\r\n\x1a\n"
    assert FIGURES["ir_metadata"][0](report) is None  # no paired change in this report


def test_figures_withheld_at_three_prompts_per_intent() -> None:
    runs = [
        _positive("a", f"{c}-p{p}", c, r, "focal" if (p + r) % 2 else "searched_then_declined")
        for c in ("x", "y")
        for p in range(3)
        for r in range(2)
    ]
    section = invokerank_section(runs, [ArmMeta("a", "s")], seed=1)
    report = _report(section)
    assert (
        figs.ir_intents_figure(report, _canvas) is None
        and figs.ir_rho_figure(report, _canvas) is None
    )
    why = dict(figs.withheld(report))
    assert "no intent has a 90% interval" in why["Figure 3 (score per intent)"]
    assert "no intent has a rho interval" in why["Figure 8 (rho per intent)"]
    assert figs.ir_funnel_figure(report, _canvas) is not None  # Jeffreys: width at every size
    reasons = [iv.reason for i in section.arms[0].intents for iv in i.intervals]
    assert all("too few prompts" in (r or "") for r in reasons)


def test_tables_list_every_analysis(design: Any) -> None:
    _, _, section = design
    titles = [t[0] for t in invokerank_tables(_report(section))]
    for want in (
        "Need type per intent",
        "False-Invoke Rate per intent",
        "Intra-prompt correlation rho per intent (Figure 8",
        "Two-level choice, eq. (4)",
        "Replicate run rates (Figure 7)",
        "InvokeRank figures not drawn",
    ):
        assert any(t.startswith(want) for t in titles), want
    # Figure 3's table carries the seed's FIR and need-type columns
    title, header, rows = next(t for t in invokerank_tables(_report(section)) if "Figure 3" in t[0])
    assert header[-2:] == ["False-Invoke Rate (negatives)", "need type"]
    by_intent = {r[0]: r for r in rows}
    assert by_intent["alpha"][-2:] == ["25.0% (4 / 16)", "private_state"]
    assert by_intent["beta"][-2:] == ["no negative runs", "action"]
    assert by_intent["delta"][-1] == "knowledge"  # 'answerable' read as knowledge


# --- end to end on the local host, recomputed from the exported records ---------------

DRAFT = """
id: ir-further
title: InvokeRank further analyses (local host, small)
hypothesis: The placebo arm selects the focal integration as often as the reference arm.
falsification: The paired bootstrap's 95% interval excludes 0.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {id: reference, surface: focal}
  - {id: placebo, surface: focal, control: placebo}
host: {driver: local}
budgets: {completion_cap: 1024, episode_tokens: 32000, call_limit: 8, turn_limit: 10}
design: {repeats: 2, rotations: 1, seed: 3}
outcome: selected
primary:
  {test: paired_bootstrap, compare: [placebo, reference], alpha: 0.05, sides: two-sided,
   draws: 2000}
"""


def test_small_draft_end_to_end_from_exported_records(ws: Path, cli: Any, tmp_path: Path) -> None:
    draft = tmp_path / "ir-further.yaml"
    draft.write_text(DRAFT)
    assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "run", "ir-further", "--json").code == 0
    analysed = cli("-w", ws, "analyse", "ir-further", "--json")
    assert analysed.code == 0, analysed.stderr
    report = analysed.json()
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", "ir-further", "-o", out).code == 0
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    ir = report["invokerank"]
    assert "one run (one session" in ir["replicates"]
    for arm in ir["arms"]:
        mine = [r for r in records if r["arm"] == arm["arm"] and r["status"] == "ok"]
        # (a) no coding registered: the reason
        assert "no need type per intent" in arm["need_test"]["reason"]
        # (b) per-intent focal calls on negatives, from the records
        for row in arm["false_invoke_by_intent"]:
            neg = [r for r in mine if r["polarity"] == "negative" and r["intent"] == row["intent"]]
            fir = row["false_invoke"]
            calls = sum(r["terminal_class"] == "focal" for r in neg)
            assert (fir["calls"], fir["runs"]) == (calls, len(neg))
        # (d) eq. (4) per intent, from the records
        for f in arm["choice_factors"]:
            pos = [
                r
                for r in mine
                if r["polarity"] == "positive"
                and (f["intent"] == "all intents" or r["intent"] == f["intent"])
            ]
            ext = sum(r["terminal_class"] in ("focal", "competitor", "other_external") for r in pos)
            focal = sum(r["terminal_class"] == "focal" for r in pos)
            assert (f["runs"], f["external"], f["focal"]) == (len(pos), ext, focal)
        # (c) every rho interval at this size (5 prompts) is withheld with its reason
        cells = [r for r in arm["rho"]["rows"] if r["kind"] == "cell"]
        assert cells and all(r["interval"]["low"] is None for r in cells)
        assert all(r["interval"]["reason"] for r in cells)
    # (f) Figure 5: the placebo control beside both arms' focal calls on negatives
    saved = json.loads((ws / "reports" / "ir-further" / "report.json").read_text())
    model = Report.model_validate(saved)
    focal_neg = {
        arm: sum(
            r["terminal_class"] == "focal"
            for r in records
            if r["arm"] == arm and r["polarity"] == "negative" and r["status"] == "ok"
        )
        for arm in ("reference", "placebo")
    }
    runs_neg = {
        arm: sum(
            1
            for r in records
            if r["arm"] == arm and r["polarity"] == "negative" and r["status"] == "ok"
        )
        for arm in ("reference", "placebo")
    }
    placebo = next(c for c in report["controls"] if c["control"] == "placebo")
    rows = figs.metadata_rows(model)
    assert rows[0][1] == placebo["estimate"]
    assert rows[0][0] == (
        f"placebo vs reference, {placebo['interval']['level']:.0%} (negatives "
        f"{focal_neg['reference']}/{runs_neg['reference']} -> "
        f"{focal_neg['placebo']}/{runs_neg['placebo']})"
    )
    assert "ir_metadata" in report["figures"]
    assert "ir_funnel" in report["figures"]
    assert "ir_intents" not in report["figures"] and "ir_rho" not in report["figures"]
    markdown = (ws / "reports" / "ir-further" / "report.md").read_text()
    for title in (
        "False-Invoke Rate per intent",
        "Intra-prompt correlation rho per intent",
        "Two-level choice, eq. (4)",
        "InvokeRank figures not drawn",
        "Figure 3 (score per intent)",
        "beside calls on negatives (Figure 5",
    ):
        assert title in markdown, title
    html = (ws / "reports" / "ir-further" / "report.html").read_text()
    assert "False-Invoke Rate per intent" in html and "Two-level choice" in html
    terminal = cli("-w", ws, "analyse", "ir-further")
    assert "highest False-Invoke Rate by intent" in terminal.stdout
    assert "Replicate run rates (Figure 7) not shown" in terminal.stdout
