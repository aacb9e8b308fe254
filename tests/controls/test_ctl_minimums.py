"""Controls are read with the primary test's minimums (issue 39).

The primary analysis refuses to read a paired bootstrap over fewer than
``stats.bootstrap.FEW_CLUSTERS`` prompts (too few clusters: the interval is too narrow).
A placebo or blinded control rests on the same bootstrap, so below that many prompts it
reads "too few prompts" (not measured), never pass or fail; from the minimum up it reads
as it always did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from prereg.reports.invokerank.controls import Context, control_reports
from prereg.reports.observations import from_record
from prereg.stats.bootstrap import FEW_CLUSTERS
from tests.controls.helpers import ARMS, record, registration

REG = registration(ARMS)


def _selected(arm: str, task: int, repeat: int, selected: bool) -> dict[str, Any]:
    return record(
        arm=arm,
        task_id=f"t{task}",
        repeat=repeat,
        funnel={"surfaced": True, "selected": selected},
        terminal_class="focal" if selected else "competitor",
    )


def _report(
    arm: str,
    tasks: int,
    reference: Callable[[int], bool],
    other: Callable[[int], bool],
    repeats: int = 2,
) -> Any:
    records = [
        r
        for j in range(tasks)
        for k in range(repeats)
        for r in (_selected("reference", j, k, reference(j)), _selected(arm, j, k, other(j)))
    ]
    order = [f"t{j}" for j in range(tasks)]
    ctx = Context(REG, [from_record(r) for r in records], order, {t: "i" for t in order}, offers={})
    return {c.arm: c for c in control_reports(ctx)}[arm]


def test_blinded_on_five_prompts_reads_too_few_prompts_not_pass() -> None:
    # selection falls from 100% to 0% on every prompt: a "pass" on today's rule
    report = _report("blinded", 5, lambda j: True, lambda j: False)
    assert report.verdict == "not_measured"
    assert report.reason.startswith("too few prompts")
    assert f"5 prompts, fewer than {FEW_CLUSTERS}" in report.reason
    # the figures are still shown, only the verdict is withheld
    assert report.estimate == pytest.approx(-1.0) and report.interval is not None
    assert report.details["prompts"] == 5 and report.details["min_prompts"] == FEW_CLUSTERS


def test_placebo_on_five_prompts_reads_too_few_prompts_not_pass_or_fail() -> None:
    same = _report("placebo", 5, lambda j: j % 2 == 0, lambda j: j % 2 == 0)
    differ = _report("placebo", 5, lambda j: False, lambda j: True)
    for report in (same, differ):
        assert report.verdict == "not_measured"
        assert report.reason.startswith("too few prompts")


@pytest.mark.parametrize("tasks", [FEW_CLUSTERS - 1])
def test_one_prompt_below_the_minimum_is_still_too_few(tasks: int) -> None:
    report = _report("blinded", tasks, lambda j: True, lambda j: False)
    assert report.verdict == "not_measured" and report.reason.startswith("too few prompts")


def test_from_the_minimum_up_the_controls_read_as_before() -> None:
    n = FEW_CLUSTERS
    blinded = _report("blinded", n, lambda j: True, lambda j: False)
    assert blinded.verdict == "pass" and "by at least half" in blinded.reason
    less = _report("blinded", n, lambda j: j < 16, lambda j: j < 10)
    assert less.verdict == "fail" and "by less than half" in less.reason
    placebo = _report("placebo", n, lambda j: j % 3 != 0, lambda j: j % 3 != 0)
    assert placebo.verdict == "pass" and "covers 0" in placebo.reason
    differ = _report("placebo", n, lambda j: j % 4 == 0, lambda j: True)
    assert differ.verdict == "fail" and "excludes 0" in differ.reason
    assert blinded.details["min_prompts"] == FEW_CLUSTERS
