"""Judges in the InvokeRank section (issue 41, item 3): every completion judge feeds its
own Completed stage under its name; a judge per arm (host) fills only its arms; a judge
below the registered kappa trust threshold is untrusted and its figures are withheld.

Expected values are counted by hand from the verdicts and labels built here; Cohen's
kappa is computed in the test with numpy."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from prereg.registry.judges import TRUST_KAPPA, Judge, judge_digest
from prereg.registry.schema import Registration
from prereg.reports.invokerank.section import invokerank_parts
from prereg.reports.judged.section import (
    Judgements,
    judge_trust,
    judged_report,
    verdict_map,
    with_completed,
)
from prereg.reports.judged.text import judged_lines
from prereg.reports.observations import Obs
from prereg.runners.judging.gold import GoldLabel
from prereg.runners.judging.verdicts import Verdict
from tests.judging.gold_helpers import stored_verdicts
from tests.judging.helpers import RUBRIC, entry_of, registration, write
from tests.reports import observation

NOW = datetime.now(UTC)
DIGEST = "sha256:" + "1" * 64
RUBRIC_DIGEST = "sha256:" + "3" * 64


def _judge(key: str, version: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": key,
        "outcome": "completed",
        "driver": "local",
        "rubric": RUBRIC,
        "rubric_version": version,
        **extra,
    }


def _reg(judges: list[dict[str, Any]]) -> Registration:
    return Registration.model_validate(registration("judged", judge=judges))


def _runs(arms: tuple[str, ...] = ("a", "b"), tasks: int = 12) -> list[Obs]:
    """Positive runs whose first call executed and whose Completed no oracle decided."""
    funnel = {s: True for s in ("surfaced", "selected", "invoked", "executed")}
    return [
        observation(
            record_id=f"{arm}{t:03d}",
            arm=arm,
            task_id=f"t{t:03d}",
            intent=f"i{t % 2}",
            funnel={**funnel, "completed": None},
        )
        for arm in arms
        for t in range(tasks)
    ]


def _verdict(judge: Judge, record_id: str, met: bool) -> Verdict:
    return Verdict(
        verdict_id=f"v-{judge.key}-{record_id}",
        record_id=record_id,
        registration_id="judged",
        registration_digest=DIGEST,
        judge=judge.key,
        judge_digest=judge_digest(judge, RUBRIC_DIGEST),
        outcome="completed",
        rubric=RUBRIC,
        rubric_version=judge.rubric_version,
        rubric_digest=RUBRIC_DIGEST,
        driver="local",
        prompt="p",
        raw_response="r",
        parse="ok",
        met=met,
        started_at=NOW,
        finished_at=NOW,
    )


def _gold(record_id: str, label: bool, line: int) -> GoldLabel:
    return GoldLabel(
        record_id=record_id,
        registration_id="judged",
        registration_digest=DIGEST,
        outcome="completed",
        label=label,
        annotator="ann1",
        source="gold.csv",
        source_digest="sha256:" + "4" * 64,
        line=line,
        loaded_at=NOW,
    )


def _kappa(a: list[int], b: list[int]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    po = np.mean(x == y)
    pe = np.mean(x) * np.mean(y) + (1 - np.mean(x)) * (1 - np.mean(y))
    return float((po - pe) / (1 - pe))


def _section(reg: Registration, runs: list[Obs], verdicts: Any) -> Any:
    parts = invokerank_parts(reg, with_completed(reg, runs, verdicts))
    return parts.assembled([block() for block in parts.arms])


def _completed(arm: Any) -> int:
    """Runs reaching Completed in an arm's pooled funnel."""
    return next(s.successes for s in arm.funnel if s.stage == "completed")


def test_each_completion_judge_feeds_its_own_invokerank() -> None:
    reg = _reg([_judge("completion-v1", "v1"), _judge("completion-v2", "v2")])
    assert reg.judge is not None
    v1, v2 = reg.judge
    runs = _runs()
    # v1 says met on every third run, v2 on every other one
    verdicts = [_verdict(v1, o.record_id, int(o.record_id[1:]) % 3 == 0) for o in runs]
    verdicts += [_verdict(v2, o.record_id, int(o.record_id[1:]) % 2 == 0) for o in runs]
    section = _section(reg, runs, verdicts)
    assert section is not None
    # the main section: the first completion judge (v1) on every arm: 4 of 12 per arm
    assert [(a.arm, a.level, _completed(a)) for a in section.arms] == [
        ("a", "full", 4),
        ("b", "full", 4),
    ]
    assert "judge 'completion-v1'" in (section.completed_by or "")
    # each judge's own InvokeRank, under its name: v2 met on 6 of 12 per arm
    by = {j.judge: j for j in section.by_judge}
    assert list(by) == ["completion-v1", "completion-v2"]
    assert by["completion-v2"].rubric_version == "v2"
    assert [(a.arm, _completed(a)) for a in by["completion-v1"].arms] == [("a", 4), ("b", 4)]
    assert [(a.arm, _completed(a)) for a in by["completion-v2"].arms] == [("a", 6), ("b", 6)]
    assert by["completion-v1"].arms[0].q == section.arms[0].q
    assert by["completion-v2"].arms[0].q is not None
    assert by["completion-v2"].arms[0].q > by["completion-v1"].arms[0].q
    text = " ".join(
        judged_lines(
            SimpleNamespace(judged=SimpleNamespace(judges=[], rates=[]), invokerank=section)
        )
    )  # type: ignore[arg-type]
    assert "InvokeRank under judge completion-v2 (rubric v2, not assessed)" in text


def test_judge_per_arm_fills_only_its_arms() -> None:
    # the seed's judge per host: x judges arm a's runs, y judges arm b's (crossed: no arms)
    reg = _reg([_judge("x", "v1", arms=["a"]), _judge("y", "v1", arms=["b"])])
    assert reg.judge is not None
    x, y = reg.judge
    runs = _runs()
    verdicts = [_verdict(x, o.record_id, True) for o in runs if o.arm == "a"]
    verdicts += [_verdict(y, o.record_id, int(o.record_id[1:]) < 3) for o in runs if o.arm == "b"]
    section = _section(reg, runs, verdicts)
    assert section is not None
    assert [(a.arm, _completed(a)) for a in section.arms] == [("a", 12), ("b", 3)]
    by = {j.judge: [a.arm for a in j.arms] for j in section.by_judge}
    assert by == {"x": ["a"], "y": ["b"]}
    # the judged section: each judge's rate on the arms it decides only
    entry = entry_of(reg, {RUBRIC: RUBRIC_DIGEST})
    judged = judged_report(entry, runs, verdicts)  # type: ignore[arg-type]
    assert judged is not None
    assert [(r.judge, r.arm, r.met, r.judged) for r in judged.rates] == [
        ("x", "a", 12, 12),
        ("y", "b", 3, 12),
    ]


def test_judge_arms_must_be_registered_arms(cli, ws: Path) -> None:
    doc = registration("bad-arms", judge=[_judge("x", "v1", arms=["nope"])])
    path = write(ws, doc)
    result = cli("--workspace", ws, "register", path)
    assert result.code == 2
    assert "judge[0].arms" in result.stderr and "nope" in result.stderr
    assert "bad-arms.yaml" in result.stderr


def _trust_case(met_of: dict[int, bool], gold_of: dict[int, bool], threshold: float | None):
    extra = {} if threshold is None else {"trust_kappa": threshold}
    reg = _reg([_judge("completion", "v1", **extra)])
    assert reg.judge is not None
    judge = reg.judge[0]
    runs = _runs(("a", "b"), tasks=10)
    verdicts = [_verdict(judge, o.record_id, met_of[int(o.record_id[1:])]) for o in runs]
    gold = [
        _gold(o.record_id, gold_of[int(o.record_id[1:])], n + 1)
        for n, o in enumerate(runs)
        if int(o.record_id[1:]) in gold_of
    ]
    return reg, judge, runs, Judgements(verdicts, gold)


# gold tasks 0-7, met on 0-3; the judge says met on 0-2 and 4 (and on 8-9, not gold):
# 6 of 8 agree, p_o = 0.75, both raters at 1/2, p_e = 0.5, kappa = 0.5
MET = {t: t < 3 or t == 4 or t >= 8 for t in range(10)}
GOLD = {t: t < 4 for t in range(8)}


def test_kappa_below_the_threshold_withholds_the_judge() -> None:
    pairs = [(int(GOLD[t]), int(MET[t])) for t in sorted(GOLD)] * 2  # both arms
    expected = _kappa([g for g, _ in pairs], [m for _, m in pairs])
    assert expected == pytest.approx(0.5) and expected < TRUST_KAPPA  # by hand (above)
    reg, judge, runs, verdicts = _trust_case(MET, GOLD, None)
    trust = judge_trust(judge, {v.record_id: v for v in verdicts}, verdicts.gold, runs)
    assert trust.status == "untrusted" and trust.threshold == TRUST_KAPPA
    assert trust.kappa == pytest.approx(expected, abs=1e-12)
    assert trust.runs == 16 and trust.agree == 12

    # its figures are withheld: no Completed from it (the score falls to IR_DS, and says
    # why), no rate, no prediction-powered figure; the report says why
    section = _section(reg, runs, verdicts)
    assert section is not None
    assert {a.level for a in section.arms} == {"selection"}
    assert "untrusted" in (section.completed_by or "")
    entry = entry_of(reg, {RUBRIC: RUBRIC_DIGEST})
    judged = judged_report(entry, runs, verdicts)  # type: ignore[arg-type]
    assert judged is not None
    assert judged.judges[0].trust is not None and judged.judges[0].trust.status == "untrusted"
    for rate in judged.rates:
        assert rate.rate is None and rate.withheld is not None
        assert "below the registered trust threshold 0.70" in rate.withheld
        assert rate.corrected is not None and rate.corrected["estimate"] is None
        assert rate.corrected["gold"]["judge_vs_gold"]["kappa"] is not None  # the evidence
    text = " ".join(judged_lines(SimpleNamespace(judged=judged, invokerank=section)))  # type: ignore[arg-type]
    assert "UNTRUSTED" in text and "judge rate withheld" in text


def test_registered_threshold_decides_trust() -> None:
    # the same kappa (0.5) trusted under a registered threshold of 0.5, not under 0.51
    for threshold, status in ((0.5, "trusted"), (0.51, "untrusted")):
        reg, judge, runs, verdicts = _trust_case(MET, GOLD, threshold)
        trust = judge_trust(judge, {v.record_id: v for v in verdicts}, verdicts.gold, runs)
        assert trust.status == status, (threshold, trust)
        section = _section(reg, runs, verdicts)
        assert section is not None
        assert {a.level for a in section.arms} == {"full" if status == "trusted" else "selection"}
    # absent threshold: not digested (the judge's dump is as before the field existed)
    assert "trust_kappa" not in _reg([_judge("c", "v1")]).model_dump(mode="json")["judge"][0]
    assert "arms" not in _reg([_judge("c", "v1")]).model_dump(mode="json")["judge"][0]


def test_no_gold_leaves_the_judge_uncalibrated_and_shown() -> None:
    reg, judge, runs, verdicts = _trust_case(MET, {}, None)
    trust = judge_trust(judge, {v.record_id: v for v in verdicts}, verdicts.gold, runs)
    assert trust.status == "not_assessed"
    section = _section(reg, runs, verdicts)
    assert section is not None and {a.level for a in section.arms} == {"full"}
    assert [_completed(a) for a in section.arms] == [6, 6]  # tasks 0-2, 4, 8, 9


def test_prereg_judge_assigns_and_the_report_withholds_an_untrusted_judge(cli, ws: Path) -> None:
    judges = [_judge("x", "v1", arms=["a"]), _judge("y", "v2", arms=["b"])]
    doc = registration("assigned", judge=judges, repeats=2)
    doc["arms"] = [{"id": "a", "surface": "focal"}, {"id": "b", "surface": "focal"}]
    doc["primary"] = {"test": "mcnemar_exact", "compare": ["a", "b"], "alpha": 0.05}
    path = write(ws, doc)
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", "assigned", "--no-progress").code == 0
    assert cli("-w", ws, "judge", "assigned").code == 0
    export = ws.parent / "runs.jsonl"
    assert cli("-w", ws, "export", "assigned", "--out", export).code == 0
    arm_of = {}
    for line in export.read_text().splitlines():
        record = json.loads(line)
        arm_of[record["record_id"]] = record["arm"]
    verdicts = stored_verdicts(ws)
    assert {(v["judge"], arm_of[v["record_id"]]) for v in verdicts} == {("x", "a"), ("y", "b")}

    # the local judge says met on every run of arm a; gold labels say met on every other
    # one: agreement no better than chance, kappa 0 < 0.70
    xs = [v for v in verdicts if v["judge"] == "x" and v["parse"] == "ok"]
    assert len(xs) >= 4 and {v["met"] for v in xs} == {True}
    labels = [1 - n % 2 for n in range(len(xs))]
    gold = ws.parent / "gold.csv"
    gold.write_text(
        "run_id,label,annotator\n"
        + "".join(f"{v['record_id']},{y},ann1\n" for v, y in zip(xs, labels, strict=True))
    )
    assert cli("-w", ws, "judge", "assigned", "--gold", gold).code == 0
    result = cli("-w", ws, "analyse", "assigned")
    assert result.code == 0, result.stderr
    report = json.loads((ws / "reports" / "assigned" / "report.json").read_text())
    info = {j["judge"]: j for j in report["judged"]["judges"]}
    assert info["x"]["arms"] == ["a"] and info["y"]["arms"] == ["b"]
    kappa = _kappa(labels, [int(v["met"]) for v in xs])
    assert kappa == pytest.approx(0.0)
    assert info["x"]["trust"]["status"] == "untrusted"
    assert info["x"]["trust"]["kappa"] == pytest.approx(kappa)
    assert info["y"]["trust"]["status"] == "not_assessed"
    rates = {(r["judge"], r["arm"]): r for r in report["judged"]["rates"]}
    assert set(rates) == {("x", "a"), ("y", "b")}
    assert rates[("x", "a")]["rate"] is None and "untrusted" in rates[("x", "a")]["withheld"]
    assert rates[("y", "b")]["rate"] is not None and rates[("y", "b")]["withheld"] is None
    by = {j["judge"]: j for j in report["invokerank"]["by_judge"]}
    assert "untrusted" in by["x"]["withheld"] and by["x"]["arms"] == []
    assert by["y"]["withheld"] is None and [a["arm"] for a in by["y"]["arms"]] == ["b"]
    completed_by = report["invokerank"]["completed_by"]
    assert "arm a: withheld: judge 'x' is untrusted" in completed_by
    assert "arm b from judge 'y'" in completed_by
    md = (ws / "reports" / "assigned" / "report.md").read_text()
    assert "UNTRUSTED" in md and "below the registered trust threshold 0.70" in md


def test_untrusted_native_judge_fills_no_native_class() -> None:
    reg = _reg(
        [
            {
                "id": "native",
                "outcome": "native_self_service",
                "driver": "local",
                "rubric": RUBRIC,
                "rubric_version": "v1",
            }
        ]
    )
    assert reg.judge is not None
    judge = reg.judge[0]

    def verdict(record_id: str, met: bool) -> Verdict:
        v = _verdict(judge, record_id, met)
        return v.model_copy(update={"outcome": "native_self_service"})

    ids = [f"n{t:03d}" for t in range(8)]
    met = [t < 3 or t == 4 for t in range(8)]  # the table of MET and GOLD above: kappa 0.5
    labels = [
        _gold(rid, t < 4, t + 1).model_copy(update={"outcome": "native_self_service"})
        for t, rid in enumerate(ids)
    ]
    verdicts = [verdict(rid, m) for rid, m in zip(ids, met, strict=True)]
    assert verdict_map(reg, Judgements(verdicts, labels), "native_self_service") == {}
    # without gold (not assessed) its verdicts fill the class, as before
    assert verdict_map(reg, Judgements(verdicts), "native_self_service") == dict(
        zip(ids, met, strict=True)
    )


def _hosts_doc(judges: list[dict[str, Any]]) -> dict[str, Any]:
    doc = registration("per-host", judge=judges)
    doc["host"] = {"driver": "anthropic", "model": "claude-sonnet-4-5"}
    doc["arms"] = [
        {"id": "claude-api", "surface": "focal"},
        {"id": "gpt-api", "surface": "focal", "host": {"driver": "openai", "model": "gpt-5-mini"}},
    ]
    doc["primary"] = {"test": "mcnemar_exact", "compare": ["claude-api", "gpt-api"]}
    return doc


def test_judge_per_host_needs_no_confound_declaration_but_crossed_does() -> None:
    gpt = {**_judge("gpt-judge", "v2"), "driver": "openai", "model": "gpt-5-mini"}
    claude = {**_judge("claude-judge", "v2"), "driver": "anthropic", "model": "claude-opus-4-1"}
    # the seed's assignment: each host's runs judged by the other family
    reg = Registration.model_validate(
        _hosts_doc([{**gpt, "arms": ["claude-api"]}, {**claude, "arms": ["gpt-api"]}])
    )
    assert reg.judge is not None and [j.arms for j in reg.judge] == [["claude-api"], ["gpt-api"]]
    # crossed: both judges score both hosts, so each judges its own family: declared or refused
    with pytest.raises(Exception, match="confound_declared|own family"):
        Registration.model_validate(_hosts_doc([gpt, claude]))
    crossed = Registration.model_validate(
        _hosts_doc([{**gpt, "confound_declared": True}, {**claude, "confound_declared": True}])
    )
    assert crossed.judge is not None and all(j.arms is None for j in crossed.judge)
