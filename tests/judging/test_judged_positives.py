"""Judged rates are computed on the positive prompts they are defined on (issue 39).

A negative prompt whose call executed is a false invoke: whether the judge calls it
completed is no part of the completion rate. Before the fix the completion judge's rate
counted it (9/11 where the positives give 9/10).
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from prereg.registry.judges import judge_digest
from prereg.registry.schema import Registration
from prereg.reports.judged.section import judged_report
from prereg.reports.judged.text import judged_lines
from prereg.reports.observations import Obs
from prereg.runners.judging.verdicts import Verdict
from tests.judging.helpers import entry_of, local_judges, registration
from tests.reports import observation

RUBRIC = "sha256:" + "3" * 64
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _obs(record_id: str, polarity: str, task: str) -> Obs:
    return observation(
        record_id=record_id,
        task_id=task,
        polarity=polarity,
        funnel={"executed": True, "completed": None},
    )


def _verdict(record_id: str, met: bool, digest: str) -> Verdict:
    return Verdict(
        verdict_id=f"v-{record_id}-0000",
        record_id=record_id,
        registration_id="judged",
        registration_digest="sha256:" + "1" * 64,
        judge="completed",
        judge_digest=digest,
        outcome="completed",
        rubric="judge-rubric.md",
        rubric_version="v1",
        rubric_digest=RUBRIC,
        driver="local",
        prompt="p",
        raw_response="r",
        parse="ok",
        met=met,
        started_at=NOW,
        finished_at=NOW,
    )


def test_completion_rate_counts_positive_prompts_only() -> None:
    reg = Registration.model_validate(registration("judged", judge=local_judges()[:1]))
    judge = (reg.judge or [])[0]
    digest = judge_digest(judge, RUBRIC)
    # ten positive prompts, nine completed; one negative prompt whose call executed
    positives = [_obs(f"pos{i:02d}", "positive", f"t{i}") for i in range(10)]
    negative = _obs("neg00", "negative", "n0")
    verdicts = [_verdict(o.record_id, i < 9, digest) for i, o in enumerate(positives)]
    verdicts.append(_verdict(negative.record_id, False, digest))
    entry = entry_of(reg, {"judge-rubric.md": RUBRIC})

    section = judged_report(entry, [*positives, negative], verdicts)  # type: ignore[arg-type]

    assert section is not None
    rate = next(r for r in section.rates if r.arm == "a" and r.outcome == "completed")
    assert (rate.met, rate.judged, rate.needed, rate.unjudged) == (9, 10, 10, 0)
    assert rate.rate == 0.9  # 9/10, not 9/11
    runs = rate.provenance.runs
    assert runs is not None and (runs.count, runs.tasks) == (10, 10)
    # the negative prompt's verdict is counted as left out, not silently dropped
    assert rate.provenance.parameters["negative_prompts_left_out"] == 1
    # the InvokeRank Completed stage takes the verdicts of positive prompts only
    assert rate.provenance.parameters["fills_invokerank_completed"] == 10
    text = " ".join(judged_lines(SimpleNamespace(judged=section)))  # type: ignore[arg-type]
    assert "judge rate 9/10 = 90.0%" in text
    assert "1 run(s) on negative prompts judged and left out" in text
