"""Each control's report rule on constructed records, passing and failing (Figure 6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from prereg.experiments.controls import clone_labels
from prereg.reports.invokerank.controls import Context, control_reports
from prereg.reports.observations import from_record
from tests.controls.helpers import ARMS, record, registration

REG = registration(ARMS)
LABELS = clone_labels(REG.design.seed, "clone")


def _judge(records: list[dict[str, Any]], tasks: int) -> dict[str, Any]:
    observations = [from_record(r) for r in records]
    order = [f"t{j}" for j in range(tasks)]
    ctx = Context(REG, observations, order, {t: "i" for t in order}, offers={})
    return {c.arm: c for c in control_reports(ctx)}


def _selected(arm: str, task: int, repeat: int, selected: bool, **over: Any) -> dict[str, Any]:
    return record(
        arm=arm,
        task_id=f"t{task}",
        repeat=repeat,
        funnel={"surfaced": True, "selected": selected},
        terminal_class="focal" if selected else "competitor",
        **over,
    )


def _paired(
    reference: Callable[[int, int], bool],
    other_arm: str,
    other: Callable[[int, int], bool],
    tasks: int = 20,
    repeats: int = 2,
) -> list[dict[str, Any]]:
    out = []
    for j in range(tasks):
        for k in range(repeats):
            out.append(_selected("reference", j, k, reference(j, k)))
            out.append(_selected(other_arm, j, k, other(j, k)))
    return out


def _verdict(records: list[dict[str, Any]], arm: str, tasks: int = 20) -> Any:
    return _judge(records, tasks)[arm]


# ---- placebo --------------------------------------------------------------------------------


def test_placebo_passes_when_the_interval_covers_zero() -> None:
    outcome = lambda j, k: (j * 7 + k) % 3 != 0  # noqa: E731 - the same outcomes in both arms
    report = _verdict(_paired(outcome, "placebo", outcome), "placebo")
    assert report.verdict == "pass" and report.estimate == 0.0
    assert report.interval.level == 0.95 and report.interval.low <= 0 <= report.interval.high
    assert report.rule == "95% interval of the difference covers 0"
    assert report.provenance.function == "prereg.stats.paired_bootstrap"
    assert report.reference == "reference" and report.outcome == "selected"


def test_placebo_fails_when_identical_arms_differ() -> None:
    report = _verdict(_paired(lambda j, k: j % 4 == 0, "placebo", lambda j, k: True), "placebo")
    assert report.verdict == "fail" and report.estimate == pytest.approx(0.75)
    assert report.interval.low > 0 and "excludes 0" in report.reason


# ---- blinded --------------------------------------------------------------------------------


def test_blinded_passes_when_selection_falls_by_half_and_the_upper_bound_is_below_zero() -> None:
    report = _verdict(_paired(lambda j, k: j < 16, "blinded", lambda j, k: j < 2), "blinded")
    assert report.verdict == "pass"
    assert report.details["reference_rate"] == pytest.approx(0.8)
    assert report.details["blinded_rate"] == pytest.approx(0.1)
    assert report.estimate == pytest.approx(-0.7) and report.interval.high < 0
    assert report.summary.startswith("80.0% to 10.0%; change -70.0 points")


def test_blinded_fails_when_selection_falls_by_less_than_half() -> None:
    report = _verdict(_paired(lambda j, k: j < 16, "blinded", lambda j, k: j < 10), "blinded")
    assert report.interval.high < 0  # a clear fall, but not by half
    assert report.verdict == "fail" and "by less than half" in report.reason


def test_blinded_fails_when_the_upper_bound_is_not_below_zero() -> None:
    # one reference success in 20 prompts: the blinded rate falls to 0, by more than half,
    # but the interval's upper bound is not below 0
    records = _paired(lambda j, k: j == 0, "blinded", lambda j, k: False, tasks=20)
    report = _verdict(records, "blinded", tasks=20)
    assert report.details["blinded_rate"] == 0.0
    assert report.interval.high >= 0
    assert report.verdict == "fail" and "is not below 0" in report.reason


# ---- decoy ----------------------------------------------------------------------------------


def _decoy_runs(
    tasks: int, repeats: int, picked: Callable[[int, int], bool], negatives: int = 0
) -> list[dict[str, Any]]:
    out = []
    for j in range(tasks):
        for k in range(repeats):
            pick = picked(j, k)
            out.append(
                record(
                    arm="decoy",
                    task_id=f"t{j}",
                    repeat=k,
                    polarity="negative" if j < negatives else "positive",
                    funnel={"surfaced": True, "selected": False},
                    terminal_class="other_external" if pick else "competitor",
                    offer={"control": "decoy", "first_server": "tidewatch" if pick else "earbud"},
                )
            )
    return out


def test_decoy_passes_with_no_pick_and_reports_upper_bounds_by_polarity() -> None:
    report = _verdict(_decoy_runs(20, 2, lambda j, k: False, negatives=5), "decoy")
    assert report.verdict == "pass" and report.estimate == 0.0
    assert report.interval.level == 0.90 and report.interval.low == 0.0
    pos, neg = report.details["positive"], report.details["negative"]
    assert (pos["trials"], neg["trials"], pos["prompts"], neg["prompts"]) == (30, 10, 15, 5)
    assert 0 < pos["high"] < neg["high"] < 1  # fewer negatives: a weaker floor
    assert "upper 90% bounds" in report.summary


def test_decoy_passes_unless_the_lower_bound_exceeds_two_percent() -> None:
    rare = _decoy_runs(100, 2, lambda j, k: j == 0 and k == 0)
    report = _verdict(rare, "decoy", tasks=100)
    assert report.details["all"]["successes"] == 1
    assert report.interval.low < 0.02 and report.verdict == "pass"
    often = _decoy_runs(20, 2, lambda j, k: j % 2 == 0)
    report = _verdict(often, "decoy")
    assert report.interval.low > 0.02 and report.verdict == "fail"
    assert "exceeds 2%" in report.reason


def test_decoy_without_recorded_offers_is_not_measured() -> None:
    runs = [r | {"offer": None} for r in _decoy_runs(5, 2, lambda j, k: False)]
    report = _verdict(runs, "decoy", tasks=5)
    assert report.verdict == "not_measured" and report.estimate is None


# ---- clone_swap -----------------------------------------------------------------------------


def _clone_runs(
    choose: Callable[[str, str, str], str], tasks: int = 16, repeats: int = 4
) -> list[dict[str, Any]]:
    """Runs of the clone arm over the balanced 2 x 2; ``choose(label_a, label_b, first)``
    returns the copy picked ('a' or 'b')."""
    out = []
    for j in range(tasks):
        for k in range(repeats):
            cell = (j + k) % 4
            label_a, label_b = LABELS if not cell & 1 else LABELS[::-1]
            first = "b" if cell & 2 else "a"
            pick = choose(label_a, label_b, first)
            out.append(
                record(
                    arm="clone",
                    task_id=f"t{j}",
                    repeat=k,
                    offer={
                        "control": "clone_swap",
                        "first_server": f"focal:{pick}",
                        "clone": {
                            "cell": cell,
                            "label_a": label_a,
                            "label_b": label_b,
                            "first": first,
                        },
                    },
                )
            )
    return out


def test_clone_swap_passes_when_identical_copies_split_the_picks() -> None:
    # a over the 2 x 2: copy a in cells 0 and 3, copy b in cells 1 and 2
    report = _verdict(
        _clone_runs(lambda la, lb, first: "a" if (la == LABELS[0]) == (first == "a") else "b"),
        "clone",
        tasks=16,
    )
    assert report.verdict == "pass"
    assert report.details["label_bias"]["estimate"] == pytest.approx(0.5)
    assert report.details["position_bias"]["estimate"] == pytest.approx(0.5)
    assert report.estimate == pytest.approx(0.5)
    assert report.interval.level == 0.90 and report.interval.low <= 0.5 <= report.interval.high
    assert set(report.details) >= {"pair_share", "label_bias", "position_bias", "cells"}
    assert len(report.details["cells"]) == 4


def test_clone_swap_fails_when_the_host_tells_identical_copies_apart() -> None:
    report = _verdict(_clone_runs(lambda la, lb, first: "a"), "clone", tasks=16)
    assert report.verdict == "fail" and report.estimate == 1.0
    assert "excludes 50%" in report.reason
    # whatever the label or the position: neither explains the picks
    assert report.details["label_bias"]["estimate"] == pytest.approx(0.5)
    assert report.details["position_bias"]["estimate"] == pytest.approx(0.5)


def test_clone_swap_separates_label_bias_from_position_bias() -> None:
    by_label = _verdict(
        _clone_runs(lambda la, lb, first: "a" if la == LABELS[0] else "b"), "clone", tasks=16
    )
    assert by_label.verdict == "pass" and by_label.estimate == pytest.approx(0.5)
    assert by_label.details["label_bias"]["estimate"] == 1.0
    assert by_label.details["label_bias"]["label"] == LABELS[0]
    assert by_label.details["position_bias"]["estimate"] == pytest.approx(0.5)

    by_position = _verdict(_clone_runs(lambda la, lb, first: first), "clone", tasks=16)
    assert by_position.verdict == "pass" and by_position.estimate == pytest.approx(0.5)
    assert by_position.details["position_bias"]["estimate"] == 1.0
    assert by_position.details["label_bias"]["estimate"] == pytest.approx(0.5)
    assert "position bias (listed first) 100.0%" in by_position.summary


def test_clone_swap_counts_only_picks_of_the_pair() -> None:
    runs = _clone_runs(lambda la, lb, first: first)
    for r in runs[::2]:
        r["offer"] = {**r["offer"], "first_server": "castaway"}
    report = _verdict(runs, "clone", tasks=16)
    assert report.details["pair_share"]["trials"] == len(runs) // 2


def test_controls_never_change_the_verdict_and_are_listed_in_order() -> None:
    reports = _judge(_paired(lambda j, k: True, "placebo", lambda j, k: True), 20)
    assert list(reports) == ["placebo", "blinded", "decoy", "clone"]
    assert reports["blinded"].verdict == "not_measured"  # no blinded runs at all
    assert reports["clone"].verdict == "not_measured"
