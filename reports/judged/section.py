"""Judged outcomes in the report (issue 18): the verdicts, checked, and what consumes them.

``analyse`` reads the verdicts of the registration's digest (their hash chain verified by
the store) and refuses, exit 3, any verdict of a judge or rubric the registration does
not name: a verdict under a rubric revised after the fact is never mixed in (InvokeRank
5.5, 7.6). Then:

- trust (:func:`judge_trust`): each judge's Cohen's kappa against unanimous gold labels
  against its registered threshold (``trust_kappa``, default 0.70); an untrusted judge's
  figures are withheld (its rate and prediction-powered figures null, ``withheld`` says
  why; it fills no Completed stage and no native class);
- the Completed stage: a run whose record leaves Completed null (no oracle decided it)
  takes the parsed verdict of the first registered completion judge that decides its
  arm (``Judge.arms``), for the InvokeRank section only; a recorded Completed (an
  oracle's) is never replaced; with two or more completion judges each also gets its own
  InvokeRank (:class:`JudgedObservations`);
- the Agent Resolution Split: no-tool runs take the first registered native judge's
  parsed verdict; runs without one stay "unjudged", counted first, and the class
  shares that would drop them are not shown (:mod:`prereg.reports.invokerank.terminal`);
- the judged-outcome section: per judge and arm, the judge's rate over parsed verdicts
  on *positive* prompts (a judged outcome is defined on them, as every funnel stage is:
  the completion judge is also asked about a negative prompt whose call executed, a
  false invoke, and that verdict is counted as left out, never in the rate, its gold
  labels and the agreement figures included), with the unparseable and unjudged counts,
  always labelled "uncalibrated judge"; beside
  it, when gold labels exist (``prereg judge ID --gold FILE``, :mod:`prereg.runners.judging.gold`),
  ``corrected``: the agreement of the annotators with each other and of the judge with
  the gold (Cohen's kappa with its interval, the judge's TPR and FPR with Jeffreys
  intervals) and, from ``PPI_MIN_GOLD`` gold tasks up, the prediction-powered rate
  (:func:`prereg.stats.ppi_mean`, PPI++, on per-task means) and, on the treatment arm of the
  primary comparison, the paired prediction-powered difference
  (:func:`prereg.stats.ppi_difference` on tasks paired across the two arms).

Per-task means: repeats of a task are not independent, so the unit of the correction is
the task. A task with at least one gold-labelled run whose verdict parsed is a gold
unit: Y the mean gold label and f the mean verdict over those runs (a run's gold label is
the mean of its annotators' labels: 1/2 when two disagree); every other task with a
parsed verdict is unlabelled, f~ the mean of its verdicts. The correction assumes the
gold runs were drawn at random before verdicts were read (docs/judging.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prereg import stats
from prereg.core.errors import IntegrityError, WriteFailure
from prereg.registry.judges import Judge
from prereg.registry.registrations import VERDICT_CHAINS, Entry, Registry
from prereg.registry.schema import Registration
from prereg.reports.model import (
    JudgedRate,
    JudgedReport,
    JudgeInfo,
    JudgeTrust,
    PostHocJudge,
    Provenance,
)
from prereg.reports.observations import Obs, replaced
from prereg.reports.pairs import runset
from prereg.runners.judging.anchors import heads_of, verified_judgements
from prereg.runners.judging.gold import GoldLabel, annotator_pairs, consensus
from prereg.runners.judging.verdicts import Verdict, VerdictStore

UNCALIBRATED = "uncalibrated judge"
NOTE = (
    "Verdicts of the registered judges, kept apart from the run records. A judge's rate "
    "is its own outcome, always labelled 'uncalibrated judge' and never a finding by "
    "itself; where gold labels exist, the agreement of annotators and judge with them and, "
    "from 100 gold tasks, the prediction-powered rate (PPI on per-task means) stand beside "
    "it. Unparseable answers count as unjudged, never guessed."
)
_NO_CALL = frozenset({"answered_without_search", "searched_then_declined"})
#: PPI++ (power-tuned): in a small study the gold set can be most of the judged tasks,
#: where plain PPI (lambda = 1) is wider than the gold labels alone; PPI++ tunes lambda
#: with the (1 + n / N) factor and is asymptotically never wider (docs/judging.md).
PPI_METHOD = "ppi++"


def registered_digests(entry: Entry) -> dict[str, tuple[Judge, str]]:
    """judge digest -> (judge, rubric digest) of every judge of the registration:
    registered, then added post hoc (:mod:`prereg.registry.addenda`)."""
    return {j.digest: (j.judge, j.rubric_digest) for j in entry.judges}


def post_hoc_judges(entry: Entry) -> list[Judge]:
    """The judges added after registration (post-hoc rubric revisions), in ledger order."""
    return [j.judge for j in entry.judges if j.post_hoc]


class Judgements(list[Verdict]):
    """The verdicts ``analyse`` reads, with the registration's gold labels beside them
    (a list of verdicts, so every consumer of verdicts takes it unchanged)."""

    def __init__(
        self,
        verdicts: Sequence[Verdict],
        gold: Sequence[GoldLabel] = (),
        anchor: int | None = None,
    ) -> None:
        super().__init__(verdicts)
        self.gold: tuple[GoldLabel, ...] = tuple(gold)
        #: the ledger seq of the verdicts-anchor that pins both heads (None: unpinned)
        self.anchor = anchor

    def heads(self) -> dict[str, dict[str, Any]]:
        """The verdict and gold chains read, as (count, head hash) and the ledger seq
        that anchors them: a report that carries them pins what it analysed."""
        out: dict[str, dict[str, Any]] = {}
        for name, items in (("verdicts", list(self)), ("gold", list(self.gold))):
            last = items[-1].chain if items else None
            out[name] = {
                "count": len(items),
                "head": None if last is None else last.hash,
                "anchor": self.anchor,
            }
        return out


def _anchored(
    registry: Registry, entry: Entry, verdicts: Sequence[Verdict], gold: Sequence[GoldLabel]
) -> int | None:
    """Pin the verified verdict and gold heads in the ledger (best effort: a read-only
    workspace can still be analysed, its report then says unpinned); the anchoring seq."""
    heads = heads_of(verdicts, gold, entry.digest)
    try:
        registry.anchor_verdicts(entry, heads)
    except (OSError, WriteFailure):
        pass
    pinned = [
        a["seq"]
        for a in registry.verdict_anchors(entry.digest)
        if all(a.get(n) == heads[n] for n in VERDICT_CHAINS)
    ]
    return pinned[-1] if pinned else None


def load_verdicts(runs: Path, entry: Entry, registry: Registry | None = None) -> Judgements:
    """The digest's verdicts, each of a registered judge and rubric, and its gold labels,
    both chains verified (with ``registry``: against the ledger's anchors too, and their
    heads then anchored); else exit 3."""
    if not entry.judges:
        return Judgements([])
    anchor = None
    if registry is None:
        with VerdictStore(runs) as store:
            verdicts = store.verdicts(entry.digest)
            gold = store.gold(entry.digest)
    else:
        verdicts, gold = verified_judgements(registry, entry, runs)
    known = registered_digests(entry)
    for v in verdicts:
        judge = known.get(v.judge_digest)
        if judge is None or v.rubric_digest != judge[1]:
            expected = ", ".join(f"{j.key}: {r}" for j, r in known.values()) or "none"
            raise IntegrityError(
                f"verdict {v.verdict_id} on run {v.record_id} (judge '{v.judge}', rubric "
                f"{v.rubric} {v.rubric_version}, digest {v.rubric_digest}) is not of a "
                f"registered judge and rubric of '{entry.id}' (registered: {expected}); a "
                "rubric revised after registration is added with `prereg judge ID "
                "--add-judge FILE` before its verdicts are asked",
                file=str(runs),
                field="judge",
            )
    if registry is not None and (verdicts or gold):
        anchor = _anchored(registry, entry, verdicts, gold)
    return Judgements(verdicts, gold, anchor)


def _post_hoc(line: Mapping[str, Any] | None) -> PostHocJudge | None:
    """What the report says of a judge added after registration (its ledger line)."""
    if line is None:
        return None
    return PostHocJudge(
        reason=str(line.get("reason", "")),
        added_at=str(line.get("time", "")),
        ledger_seq=int(line.get("seq", 0)),
        rubric_path=str(line.get("rubric_path", "")),
    )


def _first(reg: Registration, outcome: str, arm: str | None = None) -> Judge | None:
    """The first registered ``outcome`` judge (that decides ``arm``, when given)."""
    return next(
        (j for j in reg.judge or [] if j.outcome == outcome and (arm is None or j.decides(arm))),
        None,
    )


def _of(judge: Judge, verdicts: Sequence[Verdict]) -> dict[str, Verdict]:
    """record id -> this judge's verdict (verdicts are of registered judges: checked)."""
    return {v.record_id: v for v in verdicts if v.judge == judge.key}


def judge_trust(
    judge: Judge,
    mine: Mapping[str, Verdict],
    gold: Sequence[GoldLabel],
    runs: Sequence[Obs] | None = None,
) -> JudgeTrust:
    """Whether ``judge`` is trusted (seed 5.5): Cohen's kappa of its parsed verdicts
    against the unanimous gold labels of its outcome, over ``runs`` (the positive-prompt
    runs it decides; None: every run it has a verdict on), at least its threshold.
    No such gold run, or kappa undefined (every gold run and verdict of one outcome): not
    assessed (the judge stays "uncalibrated"); kappa below the threshold: untrusted."""
    threshold = judge.threshold
    ids = None if runs is None else {o.record_id for o in runs if _needs(judge, o)}
    labels = [g for g in gold if g.outcome == judge.outcome and (ids is None or g.record_id in ids)]
    agreement = _judge_vs_gold(consensus(labels), mine) if labels else None
    if agreement is None:
        return JudgeTrust(
            status="not_assessed",
            threshold=threshold,
            reason="no gold-labelled run with a parsed verdict: trust not assessed "
            "(uncalibrated judge)",
        )
    kappa = agreement["kappa"]
    fields = {
        "threshold": threshold,
        "kappa": kappa,
        "kappa_low": agreement["kappa_low"],
        "kappa_high": agreement["kappa_high"],
        "runs": agreement["runs"],
        "agree": agreement["agree"],
    }
    if kappa is None:
        why = agreement["note"] or "undefined"
        return JudgeTrust(
            status="not_assessed",
            reason=f"Cohen's kappa against gold is undefined ({why}) on {agreement['runs']} "
            "gold run(s): trust not assessed (uncalibrated judge); label runs of both "
            "outcomes",
            **fields,
        )
    if kappa < threshold:
        return JudgeTrust(
            status="untrusted",
            reason=f"Cohen's kappa against gold {kappa:.2f} on {agreement['runs']} gold "
            f"run(s) is below the registered trust threshold {threshold:.2f}",
            **fields,
        )
    return JudgeTrust(
        status="trusted",
        reason=f"Cohen's kappa against gold {kappa:.2f} on {agreement['runs']} gold run(s) "
        f"is at least the registered trust threshold {threshold:.2f}",
        **fields,
    )


def _trusts(
    reg: Registration, verdicts: Sequence[Verdict], observations: Sequence[Obs] | None = None
) -> dict[str, JudgeTrust]:
    """judge key -> its trust (:func:`judge_trust`) for every registered judge."""
    gold = getattr(verdicts, "gold", None) or ()
    return {j.key: judge_trust(j, _of(j, verdicts), gold, observations) for j in reg.judge or []}


def _withheld(judge: Judge, trust: JudgeTrust) -> str:
    return (
        f"withheld: judge '{judge.key}' is untrusted ({trust.reason}); its verdicts fill no figure"
    )


def verdict_map(reg: Registration, verdicts: Sequence[Verdict], outcome: str) -> dict[str, bool]:
    """record id -> the parsed verdict of the first registered ``outcome`` judge that
    decides the run's arm (judges registered with ``arms`` judge only those arms' runs, so
    a run takes the first such judge with a verdict on it, and a judge deciding every arm
    ends the search); an untrusted judge's verdicts are left out."""
    trust = _trusts(reg, verdicts)
    out: dict[str, bool] = {}
    claimed: set[str] = set()
    for judge in reg.judge or []:
        if judge.outcome != outcome:
            continue
        mine = _of(judge, verdicts)
        if trust[judge.key].status != "untrusted":
            for rid, v in mine.items():
                if rid not in claimed and v.parse == "ok" and v.met is not None:
                    out[rid] = v.met
        claimed |= mine.keys()
        if judge.arms is None:
            break
    return out


class JudgedObservations(tuple[Obs, ...]):
    """The observations the InvokeRank section reads (Completed filled from each arm's
    completion judge), with what it says about the judges beside them (a tuple of
    observations, so every consumer of observations takes it unchanged):

    - ``completed_by``: which judge fills each arm's Completed, and any judge withheld;
    - ``by_judge``: with two or more completion judges, judge key -> (rubric version,
      trust status, withheld reason or None, the observations of the arms it decides with
      Completed from its verdicts), for each judge's own InvokeRank.
    """

    completed_by: str | None
    by_judge: dict[str, tuple[str, str, str | None, tuple[Obs, ...]]]

    def __new__(
        cls,
        observations: Sequence[Obs],
        completed_by: str | None = None,
        by_judge: dict[str, tuple[str, str, str | None, tuple[Obs, ...]]] | None = None,
    ) -> JudgedObservations:
        self = super().__new__(cls, observations)
        self.completed_by = completed_by
        self.by_judge = by_judge or {}
        return self


def _filled(observations: Sequence[Obs], judged: Mapping[str, bool]) -> tuple[Obs, ...]:
    out = []
    for o in observations:
        met = judged.get(o.record_id)
        if met is not None and o.funnel.get("completed") is None:
            o = replaced(o, funnel={**o.funnel, "completed": met})
        out.append(o)
    return tuple(out)


def _parsed_map(mine: Mapping[str, Verdict]) -> dict[str, bool]:
    return {rid: v.met for rid, v in mine.items() if v.parse == "ok" and v.met is not None}


def with_completed(
    reg: Registration,
    observations: Sequence[Obs],
    verdicts: Sequence[Verdict],
    post_hoc: Sequence[Judge] = (),
) -> JudgedObservations:
    """Observations whose null Completed takes the verdict of the first registered
    completion judge that decides the run's arm, unless that judge is untrusted (then
    Completed stays null and ``completed_by`` says why); see :class:`JudgedObservations`.
    A judge added post hoc (``post_hoc``) never fills it: it only gets its own InvokeRank
    beside the registered judges'."""
    registered = [j for j in reg.judge or [] if j.outcome == "completed"]
    judges = registered + [j for j in post_hoc if j.outcome == "completed"]
    if not judges:
        return JudgedObservations(observations)
    trust = _trusts(reg, verdicts, observations)
    gold = getattr(verdicts, "gold", None) or ()
    trust.update({j.key: judge_trust(j, _of(j, verdicts), gold, observations) for j in post_hoc})
    maps = {j.key: _parsed_map(_of(j, verdicts)) for j in judges}
    judged: dict[str, bool] = {}
    said: list[str] = []
    for arm in reg.arms:
        judge = _first(reg, "completed", arm.id)
        if judge is None:
            said.append(f"arm {arm.id}: no completion judge")
            continue
        t = trust[judge.key]
        if t.status == "untrusted":
            said.append(f"arm {arm.id}: {_withheld(judge, t)}")
            continue
        label = "trusted judge" if t.status == "trusted" else UNCALIBRATED
        said.append(f"arm {arm.id} from judge '{judge.key}' ({label})")
        ids = {o.record_id for o in observations if o.arm == arm.id}
        judged.update({rid: met for rid, met in maps[judge.key].items() if rid in ids})
    by_judge: dict[str, tuple[str, str, str | None, tuple[Obs, ...]]] = {}
    if len(judges) >= 2:
        for judge in judges:
            t = trust[judge.key]
            withheld = _withheld(judge, t) if t.status == "untrusted" else None
            mine = [o for o in observations if judge.decides(o.arm)]
            runs = () if withheld else _filled(mine, maps[judge.key])
            by_judge[judge.key] = (judge.rubric_version, t.status, withheld, runs)
    note = (
        "Completed where no oracle decided it: "
        + "; ".join(said)
        + " (a judge's verdicts fill the stage for the InvokeRank section only)"
    )
    return JudgedObservations(_filled(observations, judged), note, by_judge)


def _asked(judge: Judge, o: Obs) -> bool:
    """Whether the judge was asked about the run (``prereg judge``'s own rule): any ok run
    whose first call executed for the completion judge, negative prompts included."""
    if not o.ok or not judge.decides(o.arm):
        return False
    if judge.outcome == "completed":
        return o.funnel.get("executed") is True
    return o.polarity == "positive" and o.terminal_class in _NO_CALL


def _needs(judge: Judge, o: Obs) -> bool:
    """Whether the run counts in the judge's rate: a judged outcome is defined on positive
    prompts only, as every funnel stage is (:mod:`prereg.reports.observations`); on a
    negative prompt an executed call is a false invoke, whatever the judge says of it."""
    return o.polarity == "positive" and _asked(judge, o)


def _rate(
    judge: Judge,
    arm: str,
    runs: list[Obs],
    mine: Mapping[str, Verdict],
    gold: Sequence[GoldLabel] = (),
    consumed: bool = False,
    chains: dict[str, dict[str, Any]] | None = None,
    left_out: int = 0,
) -> JudgedRate:
    """One judge's rate on one arm over ``runs`` (positive prompts only); ``left_out``
    counts the arm's negative-prompt runs the judge was asked about and that the rate
    leaves out."""
    parsed = [mine[o.record_id] for o in runs if o.record_id in mine]
    ok = [v for v in parsed if v.parse == "ok" and v.met is not None]
    met = sum(1 for v in ok if v.met)
    agreement = _oracle_agreement(judge, runs, mine) if judge.outcome == "completed" else None
    corrected = gold_section(judge, runs, mine, gold)
    parameters: dict[str, Any] = {"rubric": judge.rubric, "rubric_version": judge.rubric_version}
    if left_out:
        parameters["negative_prompts_left_out"] = left_out
    if chains is not None:
        parameters["chains"] = chains
    if consumed:
        # what the InvokeRank section takes from this judge: labelled where it is shown
        key = "fills_invokerank_completed" if judge.outcome == "completed" else "fills_native_class"
        parameters[key] = sum(
            1
            for o in runs
            if _parsed(mine, o.record_id) is not None
            and (judge.outcome != "completed" or o.funnel.get("completed") is None)
        )
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
        label=_label(corrected),
        corrected=corrected,
        oracle_agreement=agreement,
        provenance=Provenance(
            function="prereg.reports.judged.section.judged_report",
            parameters=parameters,
            registration_field="judge",
            runs=runset(
                [o.unit for o in runs], f"arm {arm}; positive prompts; runs needing {judge.outcome}"
            ),
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
    if not entry.judges:
        return None
    added = {j.digest: j.addendum for j in entry.judges if j.addendum is not None}
    infos: list[JudgeInfo] = []
    rates: list[JudgedRate] = []
    chains = verdicts.heads() if isinstance(verdicts, Judgements) else None
    gold_all = getattr(verdicts, "gold", None) or ()
    for digest, (judge, rubric) in registered_digests(entry).items():
        mine = {v.record_id: v for v in verdicts if v.judge_digest == digest}
        trust = judge_trust(judge, mine, gold_all, observations)
        withheld = _withheld(judge, trust) if trust.status == "untrusted" else None
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
                arms=judge.arms,
                trust=trust,
                post_hoc=_post_hoc(added.get(digest)),
            )
        )
        gold = [g for g in gold_all if g.outcome == judge.outcome]
        decided = [arm.id for arm in reg.arms if judge.decides(arm.id)]
        arm_runs = {
            arm: [o for o in observations if o.arm == arm and _needs(judge, o)] for arm in decided
        }
        left_out = {
            arm: sum(
                1
                for o in observations
                if o.arm == arm and o.polarity != "positive" and _asked(judge, o)
            )
            for arm in decided
        }
        mine_rates = {
            arm: _rate(
                judge,
                arm,
                runs,
                mine,
                gold,
                _first(reg, judge.outcome, arm) == judge and withheld is None,
                chains,
                left_out[arm],
            )
            for arm, runs in arm_runs.items()
        }
        control, treatment = reg.compared_arms() if len(reg.arms) >= 2 else ("", "")
        if gold and control in arm_runs and treatment in arm_runs:
            diff = paired_difference(arm_runs[control], arm_runs[treatment], mine, gold, judge)
            target = mine_rates[treatment]
            if target.corrected is not None:
                target.corrected["difference"] = {"control": control, **diff}
        if withheld is not None:
            mine_rates = {arm: _withhold(r, withheld) for arm, r in mine_rates.items()}
        rates += mine_rates.values()
    return JudgedReport(note=NOTE, judges=infos, rates=rates)


def _withhold(rate: JudgedRate, why: str) -> JudgedRate:
    """An untrusted judge's rate: the rate and every prediction-powered figure withheld
    (the counts and the agreement figures, which say why, stay)."""
    corrected = None
    if rate.corrected is not None:
        corrected = {**rate.corrected, **_WITHHELD_FIGURES, "reason": why}
        if "difference" in corrected:
            corrected["difference"] = {
                **corrected["difference"],
                **_WITHHELD_FIGURES,
                "reason": why,
            }
    return rate.model_copy(
        update={
            "rate": None,
            "corrected": corrected,
            "withheld": why,
            "label": f"untrusted judge ({why.removeprefix('withheld: ')})",
        }
    )


_WITHHELD_FIGURES: dict[str, Any] = {
    name: None
    for name in (
        "estimate",
        "low",
        "high",
        "se",
        "judge_rate",
        "rectifier",
    )
}


def _label(corrected: dict[str, Any] | None) -> str:
    if corrected is None:
        return f"{UNCALIBRATED} (no gold labels)"
    if corrected.get("estimate") is None:
        return f"{UNCALIBRATED} (gold labels, no correction: {corrected['reason']})"
    return f"{UNCALIBRATED}; prediction-powered rate beside it ({corrected['n_gold']} gold tasks)"


def _kappa_dict(a: Sequence[int], b: Sequence[int]) -> dict[str, Any]:
    k = stats.cohens_kappa(list(a), list(b), categories=[0, 1], level=0.95)
    return {
        "runs": len(a),
        "agree": sum(1 for x, y in zip(a, b, strict=True) if x == y),
        "kappa": _finite(k.estimate),
        "kappa_low": _finite(k.low),
        "kappa_high": _finite(k.high),
        "level": 0.95,
        "function": "prereg.stats.cohens_kappa",
        "note": k.note or None,
    }


def _parsed(mine: Mapping[str, Verdict], record_id: str) -> bool | None:
    v = mine.get(record_id)
    return v.met if v is not None and v.parse == "ok" else None


def _judge_vs_gold(
    values: Mapping[str, float], mine: Mapping[str, Verdict]
) -> dict[str, Any] | None:
    """The judge against unanimous gold labels: kappa, TPR and FPR (runs whose
    annotators disagree are left out and counted by the caller)."""
    pairs = [
        (int(y), int(met))
        for rid, y in sorted(values.items())
        if y in (0.0, 1.0) and (met := _parsed(mine, rid)) is not None
    ]
    if not pairs:
        return None
    gold, judge = ([p[0] for p in pairs], [p[1] for p in pairs])
    out = _kappa_dict(gold, judge)
    r = stats.judge_rates(gold, judge, level=0.95)
    out.update(
        tp=r.true_positives,
        fp=r.false_positives,
        fn=r.false_negatives,
        tn=r.true_negatives,
        tpr=_finite(float(r.tpr.estimate)),
        tpr_low=float(r.tpr.low),
        tpr_high=float(r.tpr.high),
        fpr=_finite(float(r.fpr.estimate)),
        fpr_low=float(r.fpr.low),
        fpr_high=float(r.fpr.high),
        rates_function="prereg.stats.judge_rates",
    )
    return out


def task_units(
    runs: Sequence[Obs], mine: Mapping[str, Verdict], values: Mapping[str, float]
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """(gold tasks: task -> (mean gold label, mean verdict) over its gold runs with a
    parsed verdict; unlabelled tasks: task -> mean verdict), see the module docstring."""
    by_task: dict[str, list[str]] = {}
    for o in runs:
        by_task.setdefault(o.task_id, []).append(o.record_id)
    gold: dict[str, tuple[float, float]] = {}
    unlabelled: dict[str, float] = {}
    for task, ids in sorted(by_task.items()):
        verdicts = {rid: met for rid in ids if (met := _parsed(mine, rid)) is not None}
        labelled = [rid for rid in verdicts if rid in values]
        if labelled:
            y = sum(values[rid] for rid in labelled) / len(labelled)
            f = sum(verdicts[rid] for rid in labelled) / len(labelled)
            gold[task] = (y, f)
        elif verdicts:
            unlabelled[task] = sum(verdicts.values()) / len(verdicts)
    return gold, unlabelled


def _ppi_fields(res: stats.PPIResult, n_gold: int, n_unlabelled: int) -> dict[str, Any]:
    return {
        "estimate": res.estimate,
        "low": res.low,
        "high": res.high,
        "level": res.level,
        "se": res.se,
        "judge_rate": res.judge_rate,
        "gold_rate": res.gold_rate,
        "gold_low": res.gold_low,
        "gold_high": res.gold_high,
        "rectifier": res.rectifier,
        "n_gold": n_gold,
        "n_unlabelled": n_unlabelled,
        "unit": "task",
        "lambda": list(res.lam),
        "method": res.method,
        "reason": None,
    }


def _too_few(n_gold: int, n_unlabelled: int, what: str) -> str | None:
    if n_gold < stats.PPI_MIN_GOLD:
        return (
            f"{n_gold} gold {what}, fewer than {stats.PPI_MIN_GOLD} (PPI_MIN_GOLD): the "
            "interval is asymptotic in the gold set and under-covers below it"
        )
    if n_unlabelled < 2:
        return f"{n_unlabelled} {what} without gold labels: nothing for the judge to add"
    return None


def _drawn(
    judge: Judge, runs: Sequence[Obs], labels: Sequence[GoldLabel]
) -> tuple[list[GoldLabel], int]:
    """The labels the correction may use (of the registered draw's tasks, or all when no
    draw is registered) and the number of runs labelled outside the draw."""
    sample = judge.gold_sample
    if sample is None:
        return list(labels), 0
    task_of = {o.record_id: o.task_id for o in runs}
    inside = [g for g in labels if sample.drawn(task_of[g.record_id])]
    return inside, len({g.record_id for g in labels} - {g.record_id for g in inside})


def gold_section(
    judge: Judge, runs: Sequence[Obs], mine: Mapping[str, Verdict], gold: Sequence[GoldLabel]
) -> dict[str, Any] | None:
    """Agreement and the prediction-powered rate of one judge on one arm (None without
    gold labels on its runs). With a registered draw, only its tasks' labels correct."""
    ids = {o.record_id for o in runs}
    labels = [g for g in gold if g.record_id in ids]
    if not labels:
        return None
    values = consensus(labels)
    inside, off_sample = _drawn(judge, runs, labels)
    gold_units, unlabelled = task_units(runs, mine, consensus(inside))
    reason = _too_few(len(gold_units), len(unlabelled), "tasks")
    out: dict[str, Any] = {
        "estimate": None,
        "low": None,
        "high": None,
        "n_gold": len(gold_units),
        "n_unlabelled": len(unlabelled),
        "unit": "task",
        "reason": reason,
    }
    if reason is None:
        y, f = zip(*gold_units.values(), strict=True)
        res = stats.ppi_mean(
            list(y), list(f), list(unlabelled.values()), level=0.95, method=PPI_METHOD
        )
        out = _ppi_fields(res, len(gold_units), len(unlabelled))
    out["function"] = "prereg.stats.ppi_mean"
    sample = judge.gold_sample
    out["gold"] = {
        "runs": len(values),
        "labels": len(labels),
        "annotators": sorted({g.annotator for g in labels}),
        "disputed": sum(1 for v in values.values() if v not in (0.0, 1.0)),
        "sample": None if sample is None else sample.model_dump(mode="json"),
        "off_sample": off_sample,
        "judge_vs_gold": _judge_vs_gold(values, mine),
        "annotator_agreement": [
            {"a": a, "b": b, **_kappa_dict(la, lb)} for a, b, la, lb in annotator_pairs(labels)
        ],
    }
    return out


def paired_difference(
    control: Sequence[Obs],
    treatment: Sequence[Obs],
    mine: Mapping[str, Verdict],
    gold: Sequence[GoldLabel],
    judge: Judge | None = None,
) -> dict[str, Any]:
    """treatment - control, prediction-powered, on tasks paired across the two arms: a
    task gold in both arms is a paired gold unit, unlabelled in both an unlabelled one;
    a task gold in one arm only is left out (counted)."""
    both = [*control, *treatment]
    ids = {o.record_id for o in both}
    labels = [g for g in gold if g.record_id in ids]
    values = consensus(labels if judge is None else _drawn(judge, both, labels)[0])
    c_gold, c_unl = task_units(control, mine, values)
    t_gold, t_unl = task_units(treatment, mine, values)
    paired_gold = sorted(c_gold.keys() & t_gold.keys())
    paired_unl = sorted(c_unl.keys() & t_unl.keys())
    mixed = len((c_gold.keys() & t_unl.keys()) | (t_gold.keys() & c_unl.keys()))
    reason = _too_few(len(paired_gold), len(paired_unl), "tasks paired across the arms")
    out: dict[str, Any] = {
        "estimate": None,
        "low": None,
        "high": None,
        "n_gold": len(paired_gold),
        "n_unlabelled": len(paired_unl),
        "left_out": mixed,
        "unit": "task",
        "reason": reason,
        "function": "prereg.stats.ppi_difference",
    }
    if reason is None:
        res = stats.ppi_difference(
            [c_gold[t][0] for t in paired_gold],
            [c_gold[t][1] for t in paired_gold],
            [c_unl[t] for t in paired_unl],
            [t_gold[t][0] for t in paired_gold],
            [t_gold[t][1] for t in paired_gold],
            [t_unl[t] for t in paired_unl],
            paired=True,
            level=0.95,
            method=PPI_METHOD,
        )
        out.update(_ppi_fields(res, len(paired_gold), len(paired_unl)), left_out=mixed)
        out["function"] = "prereg.stats.ppi_difference"
    return out
