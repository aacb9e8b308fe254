"""The eligibility record: proposals of per-intent eligible sets and the human decisions
on them, append-only and hash-chained in ``registry/eligibility/<experiment>.jsonl``
(:class:`~prereg.registry.audit_log.AuditLog`; InvokeRank 3.4: "a human review with an
append-only audit log").

Two events: ``eligibility-proposal`` (the families, the digest of every competitor's
surface judged, every pair's checked answers and agreement status) and
``eligibility-decision`` (a pair, accept or reject, the reason, the proposal it answers).
What they add up to is :func:`prereg.experiments.eligibility.state`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.experiments.eligibility import (
    Decision,
    PairProposal,
    PairState,
    competitors,
    proposed_sets,
    state,
    yaml_block,
)
from prereg.experiments.loader import Experiment
from prereg.registry.audit_log import AuditLog

PROPOSAL = "eligibility-proposal"
DECISION = "eligibility-decision"


def log_path(registry_dir: Path, experiment: str) -> Path:
    return Path(registry_dir) / "eligibility" / f"{experiment}.jsonl"


def record_proposal(
    log: AuditLog,
    experiment: Experiment,
    pairs: Sequence[PairProposal],
    families: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Append one proposal; returns the line written."""
    event = {
        "event": PROPOSAL,
        "experiment": experiment.name,
        "families": {k: dict(v) for k, v in families.items()},
        "surfaces": {c: experiment.surfaces[c].digest for c in competitors(experiment)},
        "pairs": [p.to_json() for p in pairs],
    }
    return log.append([event])[0]


@dataclass(frozen=True)
class Current:
    """The newest proposal and what the decisions after it make of it."""

    proposal: Mapping[str, Any] | None
    pairs: tuple[PairState, ...]
    decisions: int

    def to_json(self) -> dict[str, Any]:
        sets = proposed_sets(self.pairs)
        answers = {
            (p["intent"], p["competitor"]): p["answers"]
            for p in (self.proposal or {}).get("pairs", [])
        }
        return {
            "proposal": None
            if self.proposal is None
            else {
                "seq": self.proposal["seq"],
                "time": self.proposal["time"],
                "families": self.proposal["families"],
            },
            "pairs": [
                {**p.to_json(), "answers": answers.get((p.intent, p.competitor), {})}
                for p in self.pairs
            ],
            "needs_review": [f"{p.intent}:{p.competitor}" for p in self.pairs if p.needs_review],
            "stale": sorted({p.competitor for p in self.pairs if p.stale}),
            "decisions": self.decisions,
            "eligible": sets,
            "yaml": yaml_block(sets) if any(v is not None for v in sets.values()) else None,
        }


def current(log: AuditLog, experiment: Experiment) -> Current:
    """The record as it stands, verified first (IntegrityError, exit 3, when tampered)."""
    events = log.verified_events()
    proposals = [e for e in events if e.get("event") == PROPOSAL]
    if not proposals:
        return Current(None, (), 0)
    newest = proposals[-1]
    decisions = [
        e for e in events if e.get("event") == DECISION and e.get("proposal") == newest["seq"]
    ]
    digests = {c: experiment.surfaces[c].digest for c in competitors(experiment)}
    return Current(newest, tuple(state(newest, decisions, digests)), len(decisions))


def parse_pair(text: str, option: str) -> tuple[str, str]:
    """``INTENT:COMPETITOR`` (exit 2 otherwise, naming the option)."""
    intent, sep, comp = text.partition(":")
    if not sep or not intent or not comp:
        raise BadInput(f"expected INTENT:COMPETITOR, got {text!r}", field=option)
    return intent, comp


def record_decisions(
    log: AuditLog,
    experiment: Experiment,
    decisions: Sequence[tuple[Decision, str, str]],
    reason: str,
) -> list[dict[str, Any]]:
    """Append one decision per (decision, intent, competitor), all or none: each must name
    a pair of the newest proposal (exit 2 otherwise, nothing written)."""
    if not reason.strip():
        raise BadInput("a decision needs a reason (--reason TEXT)", field="--reason")
    now = current(log, experiment)
    if now.proposal is None:
        raise BadInput(
            f"no eligibility proposal for '{experiment.name}' yet: run "
            f"`prereg corpus eligibility {experiment.name} --propose` first",
            field="--accept/--reject",
        )
    known = {(p.intent, p.competitor) for p in now.pairs}
    seen: set[tuple[str, str]] = set()
    for decision, intent, comp in decisions:
        option = f"--{decision}"
        if intent not in experiment.intents:
            raise BadInput(
                f"unknown intent '{intent}' (intents: {', '.join(experiment.intents)})",
                field=option,
            )
        if (intent, comp) not in known:
            raise BadInput(
                f"'{comp}' is not a competitor of the proposal "
                f"(competitors: {', '.join(competitors(experiment))})",
                field=option,
            )
        if (intent, comp) in seen:
            raise BadInput(f"{intent}:{comp} is decided twice in one command", field=option)
        seen.add((intent, comp))
    events = [
        {
            "event": DECISION,
            "experiment": experiment.name,
            "proposal": now.proposal["seq"],
            "intent": intent,
            "competitor": comp,
            "decision": decision,
            "reason": reason,
        }
        for decision, intent, comp in decisions
    ]
    return log.append(events)
