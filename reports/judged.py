"""Judged outcomes in the report (issue 18): the verdicts, checked, and what consumes them.

``analyse`` reads the verdicts of the registration's digest (their hash chain verified by
the store) and refuses, exit 3, any verdict of a judge or rubric the registration does
not name: a verdict under a rubric revised after the fact is never mixed in (InvokeRank
5.5, 7.6). Then:

- the Completed stage: a run whose record leaves Completed null (no oracle decided it)
  takes the first registered completion judge's parsed verdict, for the InvokeRank
  section only; a recorded Completed (an oracle's) is never replaced;
- the Agent Resolution Split: no-tool runs take the first registered native judge's
  parsed verdict; runs without one stay "unjudged", counted first, and the class
  shares that would drop them are not shown (:mod:`prereg.reports.invokerank`);
- the judged-outcome section: per judge and arm, the judge's rate over parsed verdicts
  with the unparseable and unjudged counts, labelled "uncalibrated judge" (no gold set
  corrects it yet: the prediction-powered rate needs registered gold labels).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prereg import stats
from prereg.core.errors import IntegrityError
from prereg.registry.judges import Judge, judge_digest
from prereg.registry.registry import Entry
from prereg.registry.schema import Registration
from prereg.reports.model import JudgedRate, JudgedReport, JudgeInfo, Provenance
from prereg.reports.observations import Obs
from prereg.reports.pairs import runset
from prereg.runners.verdicts import Verdict, VerdictStore

UNCALIBRATED = "uncalibrated judge"
NOTE = (
    "Verdicts of the registered judges, kept apart from the run records. A judge's rate "
    "is its own outcome, labelled 'uncalibrated judge' until a registered gold set "
    "corrects it (prediction-powered inference); it is never a finding by itself. "
    "Unparseable answers count as unjudged, never guessed."
)
_NO_CALL = frozenset({"answered_without_search", "searched_then_declined"})


def registered_digests(entry: Entry) -> dict[str, tuple[Judge, str]]:
    """judge digest -> (judge, rubric digest) of every registered judge."""
    out = {}
    for judge in entry.registration.judge or []:
        rubric = entry.files[judge.rubric]
        out[judge_digest(judge, rubric)] = (judge, rubric)
    return out


def load_verdicts(runs: Path, entry: Entry) -> list[Verdict]:
    """The digest's verdicts, each of a registered judge and rubric, else exit 3."""
    if not entry.registration.judge:
        return []
    with VerdictStore(runs) as store:
        verdicts = store.verdicts(entry.digest)
    known = registered_digests(entry)
    for v in verdicts:
        judge = known.get(v.judge_digest)
        if judge is None or v.rubric_digest != judge[1]:
            expected = ", ".join(f"{j.key}: {r}" for j, r in known.values()) or "none"
            raise IntegrityError(
                f"verdict {v.verdict_id} on run {v.record_id} (judge '{v.judge}', rubric "
                f"{v.rubric} {v.rubric_version}, digest {v.rubric_digest}) is not of a "
                f"registered judge and rubric of '{entry.id}' (registered: {expected}); a "
                "rubric revised after registration needs a new registration",
                file=str(runs),
                field="judge",
            )
    return verdicts


def _first(reg: Registration, outcome: str) -> Judge | None:
    return next((j for j in reg.judge or [] if j.outcome == outcome), None)


def verdict_map(reg: Registration, verdicts: Sequence[Verdict], outcome: str) -> dict[str, bool]:
    """record id -> the first registered ``outcome`` judge's parsed verdict."""
    judge = _first(reg, outcome)
    if judge is None:
        return {}
    return {
        v.record_id: v.met
        for v in verdicts
        if v.judge == judge.key and v.parse == "ok" and v.met is not None
    }


def with_completed(
    reg: Registration, observations: Sequence[Obs], verdicts: Sequence[Verdict]
) -> tuple[Obs, ...]:
    """Observations whose null Completed takes the completion judge's verdict."""
    judged = verdict_map(reg, verdicts, "completed")
    if not judged:
        return tuple(observations)
    out = []
    for o in observations:
        met = judged.get(o.record_id)
        if met is not None and o.funnel.get("completed") is None:
            o = dataclasses.replace(o, funnel={**o.funnel, "completed": met})
        out.append(o)
    return tuple(out)


def _needs(judge: Judge, o: Obs) -> bool:
    if not o.ok:
        return False
    if judge.outcome == "completed":
        return o.funnel.get("executed") is True
    return o.polarity == "positive" and o.terminal_class in _NO_CALL


def _rate(judge: Judge, arm: str, runs: list[Obs], mine: Mapping[str, Verdict]) -> JudgedRate:
    parsed = [mine[o.record_id] for o in runs if o.record_id in mine]
    ok = [v for v in parsed if v.parse == "ok" and v.met is not None]
    met = sum(1 for v in ok if v.met)
    agreement = _oracle_agreement(judge, runs, mine) if judge.outcome == "completed" else None
    return JudgedRate(
        arm=arm,
        judge=judge.key,
        outcome=judge.outcome,
        needed=len(runs),
        judged=len(ok),
        unparseable=len(parsed) - len(ok),
        unjudged=len(runs) - len(ok),
        met=met,
        rate=met / len(ok) if ok else None,
        label=f"{UNCALIBRATED} (no gold set registered)",
        oracle_agreement=agreement,
        provenance=Provenance(
            function="prereg.reports.judged.judged_report",
            parameters={"rubric": judge.rubric, "rubric_version": judge.rubric_version},
            registration_field="judge",
            runs=runset([o.unit for o in runs], f"arm {arm}; runs needing {judge.outcome}"),
        ),
    )


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _oracle_agreement(
    judge: Judge, runs: list[Obs], mine: Mapping[str, Verdict]
) -> dict[str, Any] | None:
    """The judge against an oracle's Completed on the runs where both decided."""
    pairs = [
        (int(bool(o.funnel.get("completed"))), int(bool(mine[o.record_id].met)))
        for o in runs
        if o.funnel.get("completed") is not None
        and o.record_id in mine
        and mine[o.record_id].parse == "ok"
        and mine[o.record_id].met is not None
    ]
    if not pairs:
        return None
    oracle, verdict = zip(*pairs, strict=True)
    kappa = stats.cohens_kappa(list(oracle), list(verdict), categories=[0, 1], level=0.95)
    return {
        "runs": len(pairs),
        "agree": sum(1 for a, b in pairs if a == b),
        "kappa": _finite(kappa.estimate),
        "kappa_low": _finite(kappa.low),
        "kappa_high": _finite(kappa.high),
        "level": 0.95,
        "function": "prereg.stats.cohens_kappa",
        "note": kappa.note or None,
    }


def judged_report(
    entry: Entry, observations: Sequence[Obs], verdicts: Sequence[Verdict]
) -> JudgedReport | None:
    """The judged-outcome section (None when the registration registers no judge)."""
    reg = entry.registration
    if not reg.judge:
        return None
    infos, rates = [], []
    for digest, (judge, rubric) in registered_digests(entry).items():
        mine = {v.record_id: v for v in verdicts if v.judge_digest == digest}
        infos.append(
            JudgeInfo(
                judge=judge.key,
                outcome=judge.outcome,
                driver=judge.driver,
                model=judge.model_name,
                rubric=judge.rubric,
                rubric_version=judge.rubric_version,
                rubric_digest=rubric,
                judge_digest=digest,
                confound_declared=judge.confound_declared,
                models_returned=sorted({v.model_returned or "" for v in mine.values()}),
            )
        )
        for arm in reg.arms:
            runs = [o for o in observations if o.arm == arm.id and _needs(judge, o)]
            rates.append(_rate(judge, arm.id, runs, mine))
    return JudgedReport(note=NOTE, judges=infos, rates=rates)
