"""The rule for every printed interval and the counting identities (issue 39).

Unit tests of each rule of :mod:`prereg.reports.invariants` on hand-built report
fragments (each names the figure and the rule it must find, so it fails when the rule is
removed), the table of interval fields held to the report model, and the hook:
``prereg analyse`` refuses (exit 1) a report with a planted broken figure, naming it,
and writes nothing to ``reports/<id>/``.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from prereg.core.errors import PreregError
from prereg.reports import analysis, invariants
from prereg.reports.invariants import (
    BOUNDS,
    INTERVALS,
    RULES,
    ReportInvariantError,
    Violation,
    check,
    enforce,
)
from prereg.reports.model import (
    ArmInvokeRank,
    ArmReport,
    ChoiceShares,
    Completeness,
    ContrastReport,
    ControlReport,
    Discordant,
    FamilyMember,
    IntentRow,
    IntentScore,
    Interval,
    InvokeRankReport,
    InvokeRating,
    JudgedRate,
    JudgedReport,
    LabelledInterval,
    MultiplicityReport,
    NegativeRate,
    PairwiseChange,
    Provenance,
    RatingRow,
    Report,
    ReportProvenance,
    ResolutionSplitReport,
    RunsSummary,
    ServerFunnel,
    ServerStage,
    ShareRow,
    StageEstimate,
    StagePrior,
    StoppingReport,
    TerminalRow,
    VerdictReport,
)
from prereg.reports.model import TestReport as ReportedTest
from prereg.reports.toolbottleneck.model import StudyReport, StudyTable
from tests.harness_rules.helpers import draft

# --- hand-built fragments --------------------------------------------------------------


def _prov() -> Provenance:
    return Provenance(function="prereg.stats.f", registration_field=None)


def _iv(low: float | None, high: float | None, level: float = 0.95) -> Interval:
    return Interval(low=low, high=high, level=level, method="m")


def _arm(arm_id: str, successes: int = 2, interval: tuple[float, float] = (0.2, 0.8)) -> ArmReport:
    return ArmReport(
        id=arm_id,
        surface="s",
        outcome="success",
        planned_runs=4,
        runs=4,
        runs_ok=4,
        infra_errors=0,
        measured=4,
        successes=successes,
        rate=successes / 4,
        interval=_iv(*interval),
        icc=None,
        icc_source="not needed",
        design_effect=1.0,
        effective_trials=4.0,
        models_requested=[],
        models_returned=[],
        spend_usd=None,
        provenance=_prov(),
    )


def _test(**over: Any) -> ReportedTest:
    fields: dict[str, Any] = dict(
        role="primary",
        registration_field="primary",
        test="mcnemar_exact",
        compare=["a", "b"],
        favours=None,
        sides="two-sided",
        alpha=0.05,
        aggregate="majority",
        outcome="success",
        estimate=0.0,
        estimate_label="difference",
        interval=_iv(-0.5, 0.5),
        pvalue=0.5,
        n=4,
        discordant=Discordant(b=1, c=1, n=2),
        decision="no_reject",
        reason="r",
        method="m",
        provenance=_prov(),
    )
    fields.update(over)
    return ReportedTest(**fields)


def _report(**over: Any) -> Report:
    """A consistent two-arm report (no violation); ``over`` sets fields."""
    arms = [_arm("a"), _arm("b", successes=3, interval=(0.3, 0.95))]
    fields: dict[str, Any] = dict(
        registration="r",
        title="t",
        digest="sha256:" + "1" * 64,
        kind="exploratory",
        mode="exploratory",
        exploratory_reasons=["the registration is exploratory"],
        complete=True,
        verdict="not_supported",
        verdict_detail=VerdictReport(value="not_supported", decided_by="primary test", reason="r"),
        hypothesis="h",
        falsification="f",
        experiment="e",
        split="dev",
        outcome="success",
        host={"driver": "local"},
        primary=_test(),
        secondary=[],
        multiplicity=None,
        per_intent=[],
        per_intent_registered=False,
        stopping=None,
        arms=arms,
        feasibility=None,
        completeness=Completeness(
            complete=True,
            planned=8,
            completed=8,
            missing=0,
            missing_units=[],
            infra_errors_open=0,
            basis="every planned unit",
        ),
        runs=RunsSummary(
            records=8,
            used=8,
            infra_errors=0,
            evidence_class="local",
            drivers=["local"],
            models_requested=[],
            models_returned=[],
            spend_usd=None,
            spend_measured_runs=0,
            tokens=None,
            units=[f"{a}/t{k}/r0" for a in "ab" for k in range(4)],
        ),
        surfaces=[],
        tasks=[],
        exploratory={},
        registration_document={},
        provenance=ReportProvenance(
            prereg_version="0",
            analysed_at="now",
            ledger_head={},
            registered_at="then",
            ledger_seq=1,
            frozen_path="registry/frozen/r.json",
            superseded_by=None,
            command="prereg analyse",
        ),
    )
    fields.update(over)
    return Report(**fields)


def _stage(
    stage: str, successes: int, trials: int, posterior: Interval | None = None
) -> StageEstimate:
    rate = successes / trials if trials else 0.5
    return StageEstimate(
        stage=stage,
        successes=successes,
        trials=trials,
        rho=0.0,
        rho_source="default",
        design_effect=1.0,
        effective_successes=float(successes),
        effective_trials=float(trials),
        prior_alpha=1.0,
        prior_beta=1.0,
        capped=False,
        posterior_mean=rate,
        posterior=posterior or _iv(max(0.0, rate - 0.2), min(1.0, rate + 0.2), 0.9),
        displayed=_iv(max(0.0, rate - 0.25), min(1.0, rate + 0.25), 0.9),
    )


def _ir_arm(**over: Any) -> ArmInvokeRank:
    fields: dict[str, Any] = dict(
        arm="a",
        surface="s",
        evidence_class="local",
        level="full",
        label="InvokeRank",
        symbol="IR",
        reason="every stage measured",
        stages=["surfaced", "selected"],
        q=0.5,
        intervals=[_iv(0.4, 0.6, 0.9), _iv(0.35, 0.65, 0.95)],
    )
    fields.update(over)
    return ArmInvokeRank(**fields)


def _with_ir(arm: ArmInvokeRank) -> Report:
    ir = InvokeRankReport(
        note="n", display_rule="d", levels=[0.9, 0.95], draws=4000, seed=1, pass_k=2, arms=[arm]
    )
    return _report(invokerank=ir)


def _found(report: Report) -> set[tuple[str, str]]:
    return {(v.path, v.rule) for v in check(report)}


def _rules_at(report: Report, path: str) -> set[str]:
    return {v.rule for v in check(report) if v.path == path}


def test_the_consistent_fragment_breaks_no_rule() -> None:
    assert check(_report()) == []
    assert check(_with_ir(_ir_arm())) == []


# --- (1) support -----------------------------------------------------------------------


def test_a_rate_interval_past_one_breaks_its_support() -> None:
    report = _report()
    report.arms[1].interval.high = 1.2
    assert ("/arms/1/interval", "support") in _found(report)


def test_a_difference_interval_past_minus_one_breaks_its_support() -> None:
    report = _report(primary=_test(interval=_iv(-1.3, 0.2), estimate=-0.5))
    assert _rules_at(report, "/primary/interval") == {"support"}
    # the same bounds are inside a difference's support [-1, 1] once within it
    assert check(_report(primary=_test(interval=_iv(-1.0, 0.2), estimate=-0.5))) == []


def test_a_contrast_interval_is_held_to_its_weights() -> None:
    contrast = ContrastReport(
        id="v",
        weights={"a": -0.25, "b": 0.25},
        test="paired_bootstrap",
        sides="two-sided",
        alpha=0.05,
        unit="task",
        outcome="success",
        tasks=4,
        units=4,
        estimate=0.1,
        interval=_iv(-0.2, 0.3),  # above the contrast's support [-0.25, 0.25]
        pvalue=0.4,
        method="m",
        provenance=_prov(),
    )
    report = _report(contrasts=[contrast])
    assert _rules_at(report, "/contrasts/0/interval") == {"support"}
    # a test of the contrast is held to the same weights
    contrast.interval = _iv(-0.2, 0.2)
    primary = _test(contrast="v", compare=["a", "b"], interval=_iv(-0.2, 0.26), estimate=0.1)
    report = _report(contrasts=[contrast], primary=primary)
    assert _rules_at(report, "/primary/interval") == {"support"}


def test_a_controls_support_follows_its_statistic() -> None:
    def control(kind: str, low: float) -> ControlReport:
        return ControlReport(
            arm="c",
            control=kind,  # type: ignore[arg-type]
            reference="a",
            check="c",
            statistic="s",
            outcome="success",
            estimate=0.0,
            summary="s",
            interval=_iv(low, 0.1),
            rule="r",
            verdict="pass",
            reason="r",
            provenance=_prov(),
        )

    assert check(_report(controls=[control("placebo", -0.2)])) == []
    found = _found(_report(controls=[control("decoy", -0.2)]))  # a share: [0, 1]
    assert ("/controls/0/interval", "support") in found


def test_an_invokerank_score_interval_is_a_proportion() -> None:
    """The model keeps the score as q in [0, 1] (printed as 100 q points)."""
    report = _with_ir(_ir_arm(q=0.5, intervals=[_iv(0.4, 1.4, 0.9), _iv(0.3, 1.5, 0.95)]))
    assert ("/invokerank/arms/0/intervals/0", "support") in _found(report)


def test_a_rating_interval_is_unbounded() -> None:
    row = RatingRow(
        integration="x",
        role="focal",
        listed=10,
        chosen=4,
        beta=1.0,
        se=0.5,
        rating=1200.0,
        intervals=[_iv(900.0, 1500.0, 0.9), _iv(800.0, 1600.0, 0.95)],
    )
    rating = InvokeRating(
        method="m",
        reason="fitted",
        runs=10,
        prompts=5,
        no_tool=3,
        dropped=0,
        position=None,
        position_se=None,
        branded=None,
        branded_se=None,
        prior_sd=1.0,
        resamples=200,
        unidentified_resamples=0,
        rows=[row],
        provenance=_prov(),
    )
    assert check(_with_ir(_ir_arm(rating=rating))) == []


def test_a_kappa_kept_in_a_dict_is_held_to_minus_one_one() -> None:
    """The judged section keeps Cohen's kappa as keys: 0.74 (0.28 to 1.21) breaks it."""
    rate = JudgedRate(
        arm="a",
        judge="completion",
        outcome="completed",
        needed=11,
        judged=11,
        unparseable=0,
        unjudged=0,
        met=9,
        rate=9 / 11,
        label="uncalibrated judge",
        oracle_agreement={
            "runs": 11,
            "agree": 10,
            "kappa": 0.74,
            "kappa_low": 0.28,
            "kappa_high": 1.21,
            "level": 0.95,
            "note": None,
        },
        provenance=_prov(),
    )
    report = _report(judged=JudgedReport(note="n", judges=[], rates=[rate]))
    assert _rules_at(report, "/judged/rates/0/oracle_agreement") == {"support"}
    assert rate.oracle_agreement is not None
    rate.oracle_agreement["kappa_high"] = 1.0
    assert check(report) == []


def test_the_prediction_powered_rate_and_difference_with_their_gold_intervals() -> None:
    def corrected(gold_low: float) -> dict[str, Any]:
        interval = {"estimate": 0.6, "low": 0.4, "high": 0.8, "level": 0.95, "reason": None}
        gold = {"gold_rate": 0.5, "gold_low": 0.2, "gold_high": 0.8}
        difference = {**interval, "estimate": -0.1, "gold_rate": -0.3, "gold_low": gold_low}
        difference.update(low=-0.4, high=0.2, gold_high=0.1)
        return {**interval, **gold, "difference": {"control": "a", **difference}}

    def report(gold_low: float) -> Report:
        rate = JudgedRate(
            arm="b",
            judge="completion",
            outcome="completed",
            needed=10,
            judged=10,
            unparseable=0,
            unjudged=0,
            met=6,
            rate=0.6,
            label="l",
            corrected=corrected(gold_low),
            provenance=_prov(),
        )
        return _report(judged=JudgedReport(note="n", judges=[], rates=[rate]))

    assert check(report(-0.7)) == []
    path = "/judged/rates/0/corrected/difference"
    assert _rules_at(report(-1.2), path) == {"support"}  # a CLT bound past -1


# --- (2) the estimate inside its interval ----------------------------------------------


def test_an_estimate_outside_its_interval() -> None:
    report = _report()
    report.arms[0].interval = _iv(0.6, 0.9)  # rate 0.5
    assert _rules_at(report, "/arms/0/interval") == {"estimate"}


def test_a_stage_posterior_mean_outside_its_posterior_interval() -> None:
    stage = _stage("surfaced", 4, 8, posterior=_iv(0.6, 0.9, 0.9))  # mean 0.5
    report = _with_ir(_ir_arm(funnel=[stage]))
    assert _rules_at(report, "/invokerank/arms/0/funnel/0/posterior") == {"estimate"}


def test_every_score_interval_contains_the_score() -> None:
    """The published and calibrated intervals (the latter a bootstrap of the plug-in
    score, made to contain the score) are printed beside q."""
    for method in ("published", "calibrated", "intervals"):
        arm = _ir_arm(q=0.5, **{method: [_iv(0.55, 0.7, 0.9), _iv(0.52, 0.75, 0.95)]})
        assert _rules_at(_with_ir(arm), f"/invokerank/arms/0/{method}/0") == {"estimate"}


def test_an_estimate_kept_in_a_dict_outside_its_bounds() -> None:
    control = ControlReport(
        arm="c",
        control="decoy",
        reference="a",
        check="c",
        statistic="s",
        outcome="first_server",
        estimate=0.1,
        summary="s",
        interval=_iv(0.0, 0.3, 0.9),
        rule="r",
        verdict="pass",
        reason="r",
        details={
            "positive": {"estimate": 0.5, "low": 0.0, "high": 0.3, "successes": 1, "trials": 2}
        },
        provenance=_prov(),
    )
    found = _found(_report(controls=[control]))
    assert ("/controls/0/details/positive", "estimate") in found


# --- (3) nesting -----------------------------------------------------------------------


def test_a_90_interval_not_inside_the_95_interval() -> None:
    arm = _ir_arm(intervals=[_iv(0.3, 0.6, 0.9), _iv(0.35, 0.65, 0.95)])
    assert ("/invokerank/arms/0/intervals/0", "nesting") in _found(_with_ir(arm))


def test_nesting_within_one_method_only() -> None:
    """The published and calibrated intervals are two methods, not two levels."""
    arm = _ir_arm(
        published=[_iv(0.4, 0.6, 0.9), _iv(0.35, 0.65, 0.95)],
        calibrated=[_iv(0.3, 0.7, 0.9), _iv(0.25, 0.75, 0.95)],
    )
    assert check(_with_ir(arm)) == []


# --- (4) zero width --------------------------------------------------------------------


def test_an_unlabelled_zero_width_interval() -> None:
    change = PairwiseChange(
        control="a",
        treatment="b",
        same_configuration=False,
        tasks=4,
        control_rate=0.0,
        treatment_rate=0.0,
        estimate=0.0,
        interval=_iv(0.0, 0.0),
    )
    assert _rules_at(_report(pairwise=[change]), "/pairwise/0/interval") == {"zero-width"}


def test_a_labelled_zero_width_interval_passes() -> None:
    caution = "caution: only 2 tasks, and a percentile bootstrap over fewer than 10 clusters"
    assert check(_report(primary=_test(interval=_iv(0.0, 0.0), note=caution))) == []
    unlabelled = _report(primary=_test(interval=_iv(0.0, 0.0), note="the decision uses it"))
    assert _rules_at(unlabelled, "/primary/interval") == {"zero-width"}


def test_an_intent_rows_note_labels_it() -> None:
    def row(note: str | None) -> IntentRow:
        return IntentRow(
            intent="i",
            tasks=3,
            control_rate=0.0,
            treatment_rate=0.0,
            difference=0.0,
            interval=_iv(0.0, 0.0),
            interval_note=note,
            discordant=None,
            provenance=_prov(),
        )

    assert check(_report(per_intent=[row("too few tasks (3 < 5)")])) == []
    assert _rules_at(_report(per_intent=[row(None)]), "/per_intent/0/interval") == {"zero-width"}


def test_a_labelled_interval_says_why_it_has_no_width() -> None:
    def share(reason: str | None) -> ChoiceShares:
        row = ShareRow(
            intent="i",
            integration="x",
            hits=1,
            share=0.2,
            intervals=[LabelledInterval(low=0.2, high=0.2, level=0.9, method="m", reason=reason)],
        )
        return ChoiceShares(
            label="Selection Share",
            reason="r",
            eligible="e",
            contested_intents=["i"],
            rows=[row],
            provenance=_prov(),
        )

    why = "zero width: every resample gives the same value"
    assert check(_with_ir(_ir_arm(shares=share(why)))) == []
    path = "/invokerank/arms/0/shares/rows/0/intervals/0"
    assert _rules_at(_with_ir(_ir_arm(shares=share(None))), path) == {"zero-width"}
    assert _rules_at(_with_ir(_ir_arm(shares=share("extended"))), path) == {"zero-width"}


def test_a_boundary_stage_posterior_is_labelled_by_its_prior() -> None:
    stage = _stage("surfaced", 8, 8, posterior=_iv(1.0, 1.0, 0.9))
    prior = StagePrior(
        stage="surfaced",
        method="method of moments (boundary: every cell at 1)",
        mu=1.0,
        kappa=10_000.0,
        converged=False,
        cells_with_trials=1,
        capped_cells=[],
        pooled_rho=None,
    )
    intent = IntentScore(
        intent="i",
        prompts=4,
        runs=8,
        weight=1.0,
        q=0.5,
        intervals=[_iv(0.4, 0.6, 0.9), _iv(0.35, 0.65, 0.95)],
        stages=[stage],
        loss_shares={},
        lever={},
        pass_k=None,
        pass_k_prompts=0,
        provenance=_prov(),
    )
    path = "/invokerank/arms/0/intents/0/stages/0/posterior"
    assert check(_with_ir(_ir_arm(intents=[intent], priors=[prior]))) == []
    assert _rules_at(_with_ir(_ir_arm(intents=[intent])), path) == {"zero-width"}


# --- (5) order, finite numbers, level --------------------------------------------------


def test_low_above_high() -> None:
    report = _report()
    report.arms[0].interval = _iv(0.8, 0.2)
    assert _rules_at(report, "/arms/0/interval") == {"order"}


def test_a_nan_or_infinite_number_anywhere() -> None:
    report = _report()
    report.arms[0].design_effect = math.nan
    report.arms[1].interval.high = math.inf
    found = _found(report)
    assert ("/arms/0/design_effect", "finite") in found
    assert ("/arms/1/interval", "finite") in found
    report = _report(exploratory={"selection_rate": {"a": {"mean": math.nan}}})
    assert ("/exploratory/selection_rate/a/mean", "finite") in _found(report)


def test_null_bounds_print_not_computed() -> None:
    report = _report()
    report.arms[0].interval = _iv(None, None)
    assert check(report) == []


def test_a_level_outside_zero_one() -> None:
    report = _report()
    report.arms[0].interval.level = 95.0
    assert _rules_at(report, "/arms/0/interval") == {"level"}


# --- intervals at places the tables do not name -----------------------------------------


def test_an_unregistered_interval_kept_in_a_dict() -> None:
    control = ControlReport(
        arm="c",
        control="decoy",
        reference="a",
        check="c",
        statistic="s",
        outcome="first_server",
        estimate=0.1,
        summary="s",
        interval=_iv(0.0, 0.3, 0.9),
        rule="r",
        verdict="pass",
        reason="r",
        details={"new_share": {"estimate": 0.1, "low": 0.0, "high": 0.3}},
        provenance=_prov(),
    )
    found = _found(_report(controls=[control]))
    assert ("/controls/0/details/new_share", "unregistered") in found


def test_the_registrations_words_are_not_figures() -> None:
    """A factor's levels named low and high in the registration are not an interval."""
    levels = {"factors": [{"id": "cap", "sets": {"low": 512, "high": 4096}}]}
    assert check(_report(registration_document=levels)) == []
    assert ("/exploratory/cap", "unregistered") in _found(
        _report(exploratory={"cap": levels["factors"][0]["sets"]})
    )


def _annotation_has_interval(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, Interval):
        return True
    return any(_annotation_has_interval(a) for a in typing.get_args(annotation))


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _reachable() -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [Report]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for info in model.model_fields.values():
            todo += _models(info.annotation)
    return seen


def test_every_interval_field_of_the_model_is_in_the_table() -> None:
    """A new Interval field of the report model cannot escape the rule: it must be given
    its quantity in INTERVALS (and nothing stale stays there)."""
    typed = {
        (model, name)
        for model in _reachable()
        for name, info in model.model_fields.items()
        if not issubclass(model, Interval) and _annotation_has_interval(info.annotation)
    }
    assert typed, "the walk found no Interval field"
    assert typed - set(INTERVALS) == set(), "Interval fields without a quantity in INTERVALS"
    assert set(INTERVALS) - typed == set(), "INTERVALS names fields the model does not have"
    for model, name in BOUNDS:
        assert model in _reachable() and name in model.model_fields, (model, name)
        annotation = model.model_fields[name].annotation
        assert dict in {typing.get_origin(a) for a in (annotation, *typing.get_args(annotation))}


def test_every_rule_a_violation_names_is_described() -> None:
    assert {"support", "estimate", "nesting", "zero-width", "order", "finite"} <= set(RULES)


# --- counting identities and p-values ---------------------------------------------------


def test_an_arms_runs_do_not_add_up() -> None:
    report = _report()
    report.arms[0].runs = 5  # runs_ok 4 + infra_errors 0
    assert _rules_at(report, "/arms/0") == {"count"}


def test_more_successes_than_trials() -> None:
    report = _report()
    report.arms[0].successes = 5
    report.arms[0].rate = 5 / 4
    report.arms[0].interval = _iv(0.5, 1.0)
    assert "count" in _rules_at(report, "/arms/0")


def test_no_unit_missing_but_an_arm_short_of_its_plan() -> None:
    report = _report()
    report.arms[1].runs_ok = 3
    report.arms[1].runs = 3
    report.arms[1].measured = 3
    report.arms[1].successes = 2
    report.arms[1].rate = 2 / 3
    report.arms[1].interval = _iv(0.2, 0.95)
    found = _found(report)
    assert ("/arms/1", "count") in found  # ok + counted + missing != planned
    assert ("/completeness", "count") in found  # the arms sum to 7 completed, not 8


def test_counted_failures_add_up_across_the_report() -> None:
    report = _report()
    comp = report.completeness
    comp.infrastructure = "count_as_failure"
    comp.attempts = 1
    arm = report.arms[0]
    arm.runs_ok, arm.counted_as_failure, arm.infra_errors, arm.runs = 3, 1, 1, 4
    assert _found(report) == {("/completeness", "count"), ("/runs", "count")}
    comp.counted_as_failure = 1
    report.runs.infra_errors = 1
    assert check(report) == []  # records 8 = used 8 - counted 1 + infra 1


def test_counted_failures_under_retry() -> None:
    report = _report()
    arm = report.arms[0]
    arm.runs_ok, arm.counted_as_failure = 3, 1
    report.completeness.counted_as_failure = 1
    assert ("/arms/0", "count") in _found(report)


def test_completeness_adds_up() -> None:
    report = _report()
    report.completeness.missing = 1
    assert ("/completeness", "count") in _found(report)


def test_a_funnel_that_grows() -> None:
    arm = _ir_arm(funnel=[_stage("surfaced", 4, 8), _stage("selected", 5, 8)])
    assert ("/invokerank/arms/0/funnel/1", "count") in _found(_with_ir(arm))


def test_a_server_funnel_that_grows_or_exceeds_its_listings() -> None:
    funnel = ServerFunnel(
        integration="x",
        role="focal",
        listed=8,
        stages=[
            ServerStage(stage="surfaced", reached=4, rate=0.5, interval=_iv(0.2, 0.8, 0.9)),
            ServerStage(stage="selected", reached=None, rate=None, interval=None),
            ServerStage(stage="invoked", reached=6, rate=0.75, interval=_iv(0.4, 0.9, 0.9)),
        ],
        note="n",
        provenance=_prov(),
    )
    assert ("/invokerank/arms/0/server_funnel/0/stages/2", "count") in _found(
        _with_ir(_ir_arm(server_funnel=[funnel]))
    )


def test_the_exploratory_funnel_is_nested() -> None:
    stages = {
        "surfaced": {"reached": 7, "of": 8},
        "selected": {"reached": 8, "of": 8},
    }
    report = _report(exploratory={"funnel": {"a": {"stages": stages}}})
    assert _found(report) == {("/exploratory/funnel/a/stages/selected", "count")}


def test_terminal_and_resolution_classes_sum_to_their_runs() -> None:
    row = TerminalRow(intent="all intents", polarity="positive", runs=8, counts={"focal": 7})
    split = ResolutionSplitReport(
        runs=8,
        counts={"focal": 6, "unjudged": 1},
        shares={},
        weighted_shares={},
        unjudged=1,
        degenerate=True,
        note="n",
        host_self_serve=None,
        no_tool_decline=None,
        provenance=_prov(),
    )
    found = _found(_with_ir(_ir_arm(terminal=[row], resolution=split)))
    assert ("/invokerank/arms/0/terminal/0", "count") in found
    assert ("/invokerank/arms/0/resolution", "count") in found


def test_negative_rates_shares_and_discordant_pairs_count() -> None:
    neg = NegativeRate(
        definition="d",
        calls=5,
        runs=4,
        prompts=2,
        rate=1.0,
        interval=_iv(0.5, 1.0, 0.9),
        rho=0.0,
        rho_source="s",
        design_effect=1.0,
        provenance=_prov(),
    )
    assert ("/invokerank/arms/0/false_invoke", "count") in _found(
        _with_ir(_ir_arm(false_invoke=neg))
    )
    report = _report(primary=_test(discordant=Discordant(b=1, c=2, n=2)))
    assert ("/primary/discordant", "count") in _found(report)


def test_judged_counts_add_up() -> None:
    rate = JudgedRate(
        arm="a",
        judge="j",
        outcome="completed",
        needed=10,
        judged=8,
        unparseable=1,
        unjudged=1,
        met=9,
        rate=9 / 8,
        label="l",
        provenance=_prov(),
    )
    found = _found(_report(judged=JudgedReport(note="n", judges=[], rates=[rate])))
    assert ("/judged/rates/0", "count") in found


def test_a_p_value_outside_zero_one() -> None:
    assert _rules_at(_report(primary=_test(pvalue=1.2)), "/primary/pvalue") == {"p-value"}
    stop = StoppingReport(
        rule="r",
        threshold=20.0,
        min_prompts=5,
        prior=[1.0, 1.0],
        order="o",
        n_stream=4,
        crossed=False,
        stop_at=None,
        evalue=1.0,
        max_evalue=1.0,
        pvalue=-0.1,
        discordant=Discordant(b=0, c=0, n=0),
        path=[],
        reading="inconclusive",
        reason="r",
        provenance=_prov(),
    )
    assert _rules_at(_report(stopping=stop), "/stopping/pvalue") == {"p-value"}


def _family(method: str, members: list[FamilyMember]) -> MultiplicityReport:
    return MultiplicityReport(
        method=method,
        q=0.1,
        family="secondary",
        members=members,
        n_rejected=sum(m.reject for m in members),
        note="n",
        provenance=_prov(),
    )


def _member(adjusted: float) -> FamilyMember:
    return FamilyMember(
        hypothesis="h", n=4, estimate=0.1, pvalue=0.04, adjusted=adjusted, reject=True
    )


def test_an_adjusted_p_below_its_raw_p() -> None:
    member = FamilyMember(
        hypothesis="h", n=4, estimate=0.1, pvalue=0.04, adjusted=0.03, reject=True
    )
    found = _found(_report(multiplicity=_family("holm", [member])))
    assert ("/multiplicity/members/0/adjusted", "adjusted") in found
    member.adjusted = 0.08
    assert check(_report(multiplicity=_family("holm", [member]))) == []
    # e-BH adjusts min(1, 1/e), not the member's p
    e_member = FamilyMember(
        hypothesis="h", n=4, estimate=0.1, pvalue=0.5, evalue=25.0, adjusted=0.04, reject=True
    )
    assert check(_report(multiplicity=_family("e-bh", [e_member]))) == []
    e_member.adjusted = 0.03  # below 1/25
    found = _found(_report(multiplicity=_family("e-bh", [e_member])))
    assert ("/multiplicity/members/0/adjusted", "adjusted") in found


def test_a_family_counts_its_rejections() -> None:
    member = FamilyMember(
        hypothesis="h", n=4, estimate=0.1, pvalue=0.04, adjusted=0.08, reject=True
    )
    family = _family("holm", [member])
    family.n_rejected = 2
    assert ("/multiplicity", "count") in _found(_report(multiplicity=family))


def test_a_contrasts_adjusted_p_below_its_raw_p() -> None:
    contrast = ContrastReport(
        id="v",
        weights={"a": -1.0, "b": 1.0},
        test="paired_bootstrap",
        sides="two-sided",
        alpha=0.05,
        unit="task",
        outcome="success",
        tasks=4,
        units=4,
        estimate=0.1,
        interval=_iv(-0.2, 0.3),
        pvalue=0.4,
        adjusted=0.2,
        method="m",
        provenance=_prov(),
    )
    assert ("/contrasts/0/adjusted", "adjusted") in _found(_report(contrasts=[contrast]))


# --- the study's formatted tables -------------------------------------------------------


def _study(columns: list[str], rows: list[list[str]]) -> Report:
    table = StudyTable(title="t", columns=columns, rows=rows)
    return _report(toolbottleneck=StudyReport(label="SIMULATED", tables=[table]))


def test_study_cells_are_read_back() -> None:
    ok = _study(
        ["contrast", "estimate", "95% interval", "p", "Holm p"],
        [["v", "-28.1", "[-37.5, -18.8]", "0.008", "0.047"]],
    )
    assert check(ok) == []
    path = "/toolbottleneck/tables/0/rows/0"
    assert (f"{path}/0", "order") in _found(_study(["95% interval"], [["[+5.0, -3.0]"]]))
    assert (f"{path}/0", "support") in _found(_study(["acc"], [["120.0% [110.0, 130.0]"]]))
    assert (f"{path}/0", "estimate") in _found(_study(["L"], [["+81.2 pp [+62.5, +70.0]"]]))
    assert (f"{path}/0", "zero-width") in _found(_study(["95% interval"], [["[-9.4, -9.4]"]]))
    assert (f"{path}/1", "adjusted") in _found(_study(["p", "Holm p"], [["0.040", "0.030"]]))
    assert (f"{path}/0", "p-value") in _found(_study(["p"], [["1.200"]]))
    assert (f"{path}/0", "finite") in _found(_study(["estimate"], [["nan"]]))
    assert (f"{path}/0", "finite") in _found(_study(["95% interval"], [["[-inf, 3.0]"]]))
    assert check(_study(["arm", "note"], [["menu-inf--nan", "infeasible"]])) == []


# --- enforce and the switch --------------------------------------------------------------


def test_enforce_raises_an_internal_error_naming_the_figure() -> None:
    report = _report()
    report.arms[1].interval.high = 1.2
    with pytest.raises(ReportInvariantError) as caught:
        enforce(report)
    error = caught.value
    assert isinstance(error, PreregError) and error.exit_code == 1
    assert error.field == "/arms/1/interval"
    assert "support" in error.message and "internal error" in error.message
    assert error.details == [
        str(Violation("/arms/1/interval", "support", check(report)[0].message))
    ]
    enforce(_report())  # a sound report passes


def test_the_switch_turns_enforcement_off(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _report()
    report.arms[1].interval.high = 1.2
    monkeypatch.setattr(invariants, "ENFORCE", False)
    enforce(report)  # no raise
    assert check(report)  # the checker still finds it


# --- the hook: prereg analyse refuses a planted broken figure ----------------------------


def _planted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second arm's rate interval reaches past 1 (a planted bug upstream of the hook)."""
    original: Callable[..., ArmReport] = analysis.arm_report

    def broken(reg: Any, arm_id: str, *args: Any, **kwargs: Any) -> ArmReport:
        arm = original(reg, arm_id, *args, **kwargs)
        if arm_id == "semantic":
            arm.interval.high = 1.25
        return arm

    monkeypatch.setattr(analysis, "arm_report", broken)


def test_analyse_refuses_a_broken_figure_and_writes_nothing(
    ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "invariants-hook"
    assert cli("-w", ws, "register", draft(ws, name), "--json").code == 0
    assert cli("-w", ws, "run", name, "--no-progress").code == 0
    _planted(monkeypatch)
    result = cli("-w", ws, "analyse", name)
    assert result.code == 1, result.stdout + result.stderr
    assert "/arms/1/interval" in result.stderr and "support" in result.stderr
    assert not (ws / "reports" / name).exists()
    document = cli("-w", ws, "analyse", name, "--json")
    assert document.code == 1
    error = document.json()
    assert error["error"] == "ReportInvariantError" and error["exit_code"] == 1
    assert error["field"] == "/arms/1/interval"
    assert any(d.startswith("/arms/1/interval: support:") for d in error["details"])
    assert not (ws / "reports" / name).exists()
    # the switch off, the same report is written (the hook is the only guard)
    monkeypatch.setattr(invariants, "ENFORCE", False)
    assert cli("-w", ws, "analyse", name).code == 0
    assert (ws / "reports" / name / "report.json").is_file()


def test_analyse_writes_a_sound_report(ws: Path, cli: Any) -> None:
    name = "invariants-sound"
    assert cli("-w", ws, "register", draft(ws, name), "--json").code == 0
    assert cli("-w", ws, "run", name, "--no-progress").code == 0
    result = cli("-w", ws, "analyse", name)
    assert result.code == 0, result.stderr
    assert (ws / "reports" / name / "report.json").is_file()
