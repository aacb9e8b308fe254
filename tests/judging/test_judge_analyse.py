"""analyse consumes verdicts: the split's unjudged count, the label, the rubric refusal."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from prereg.registry.judges import judge_digest
from prereg.registry.schema import Registration
from prereg.reports.judged.section import judged_report, with_completed
from prereg.reports.judged.text import judged_lines
from prereg.reports.observations import Obs
from prereg.runners.judging.verdicts import Verdict, VerdictStore
from tests.judging.helpers import entry_of, local_judges, registration, write
from tests.reports import observation


def test_verdict_under_another_rubric_is_refused(cli, ws: Path) -> None:
    path = write(ws, registration("judged", judge=local_judges()[:1], repeats=1))
    assert cli("--workspace", ws, "register", path).code == 0
    assert cli("--workspace", ws, "run", "judged", "--no-progress").code == 0
    judged = cli("--workspace", ws, "judge", "judged", "--json")
    assert judged.code == 0
    with VerdictStore(ws / "runs") as store:
        digest = judged.json()["registration_digest"]
        good = store.verdicts(digest)[0]
        foreign = good.model_copy(
            update={
                "verdict_id": "f" * 32,
                "record_id": "another-run-0001",
                "rubric_version": "v2",
                "rubric_digest": "sha256:" + "0" * 64,
                "chain": None,
            }
        )
        store.append(foreign)
    result = cli("--workspace", ws, "analyse", "judged")
    assert result.code == 3
    assert "rubric" in result.stderr and "v2" in result.stderr


def _obs(record_id: str, completed: bool | None, executed: bool | None) -> Obs:
    return observation(
        record_id=record_id,
        evidence_class="api",
        driver="anthropic",
        model_requested="m",
        model_returned="m",
        funnel={"executed": executed, "completed": completed},
    )


def test_completed_takes_verdicts_only_where_no_oracle_decided() -> None:
    reg_doc = registration("judged", judge=local_judges())
    reg = Registration.model_validate(reg_doc)
    now = datetime.now(UTC)

    def verdict(record_id: str, met: bool | None, parse: str = "ok") -> Verdict:
        return Verdict(
            verdict_id=f"v-{record_id}-0000",
            record_id=record_id,
            registration_id="judged",
            registration_digest="sha256:" + "1" * 64,
            judge="completed",
            judge_digest="sha256:" + "2" * 64,
            outcome="completed",
            rubric="judge-rubric.md",
            rubric_version="v1",
            rubric_digest="sha256:" + "3" * 64,
            driver="local",
            prompt="p",
            raw_response="r",
            parse=parse,  # type: ignore[arg-type]
            met=met,
            started_at=now,
            finished_at=now,
        )

    obs = [_obs("live", None, True), _obs("oracle", False, True), _obs("bad", None, True)]
    verdicts = [verdict("live", True), verdict("oracle", True), verdict("bad", None, "unparseable")]
    out = {o.record_id: o.funnel["completed"] for o in with_completed(reg, obs, verdicts)}
    assert out == {"live": True, "oracle": False, "bad": None}

    # the judged section says how many of the InvokeRank Completed stages came from the
    # judge (one: "live"; "oracle" keeps its oracle's, "bad" did not parse), labelled
    rubric = "sha256:" + "3" * 64
    judge = reg.judge[0] if reg.judge else None
    assert judge is not None
    entry = entry_of(reg, {"judge-rubric.md": rubric})
    digest = judge_digest(judge, rubric)
    mine = [v.model_copy(update={"judge_digest": digest}) for v in verdicts]
    section = judged_report(entry, obs, mine)  # type: ignore[arg-type]
    assert section is not None
    rate = next(r for r in section.rates if r.arm == "a" and r.outcome == "completed")
    assert rate.provenance.parameters["fills_invokerank_completed"] == 1
    report = SimpleNamespace(judged=section)
    text = " ".join(judged_lines(report))  # type: ignore[arg-type]
    assert "the InvokeRank Completed stage takes 1 of these verdicts" in text
    assert "uncalibrated judge" in text


def test_judged_section_escapes_hostile_strings(cli, ws: Path) -> None:
    hostile = "<script>alert(1)</script> **x** [red]y[/red]"
    judge = {**local_judges()[0], "rubric_version": hostile}
    path = write(ws, registration("judged", judge=[judge], repeats=1))
    assert cli("--workspace", ws, "register", path).code == 0
    assert cli("--workspace", ws, "run", "judged", "--no-progress").code == 0
    assert cli("--workspace", ws, "judge", "judged").code == 0
    result = cli("--workspace", ws, "analyse", "judged")
    assert result.code == 0, result.stderr
    folder = ws / "reports" / "judged"
    html = (folder / "report.html").read_text()
    md = (folder / "report.md").read_text()
    assert "Judged outcomes" in html and "Judged outcomes" in md
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in md and "**x**" not in md
    assert "uncalibrated judge" in md
