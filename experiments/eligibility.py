"""Neutral eligibility proposals (InvokeRank 3.4 and its appendix on eligibility; issue 41,
item 2): two model families judge, for every (intent, competitor), whether the competitor
can serve the intent, each with a quote from the competitor's pinned tool text; the
pairs are combined by agreement only and disagreements go to a person.

Pure functions over a loaded :class:`~prereg.experiments.loader.Experiment`; the
append-only record of proposals and human decisions is
:mod:`prereg.registry.eligibility`, the command ``prereg corpus eligibility``.

Readings of the seed (docs/invokerank.md, "Neutral eligibility proposals"):

1. **Quotes are verbatim.** A quote must occur in the competitor's pinned surface (its
   server name, title and description, and every tool's name, title and description, as
   frozen in the experiment: the snapshot a host is offered) after only Unicode NFC and
   collapsing runs of white space (a model re-wraps lines; it must not paraphrase, and
   confusable or invisible characters are not folded away). A quote shorter than
   :data:`MIN_QUOTE` characters counts only when it is a whole field (a tool's name): a
   two-word fragment such as "the" would otherwise be found in any snapshot.
2. **A "yes" needs a valid quote; a "no" needs none.** Absence of a capability cannot be
   quoted. A "no" that does carry a quote must still find it (a quote not in the snapshot
   is a fabrication whatever the answer). A family's answer is therefore ``yes`` (with a
   quote found), ``no``, or ``invalid`` (a "yes" without a quote, any quote not found)
   or ``missing`` (no answer for the pair).
3. **Agreement only.** A pair is ``eligible`` when both families answer ``yes``,
   ``ineligible`` when both answer ``no``; ``disagree`` (one yes, one no) and
   ``unresolved`` (either answer invalid or missing: the seed's "unknown") are flagged for
   the human, and count as not eligible until a person accepts them.
4. **The person decides last.** A recorded decision (accept or reject, with a reason)
   overrides the agreement for its pair; the newest decision for a pair wins, and every
   decision stays in the record. The proposed set of an intent is its ``eligible`` pairs
   not rejected plus its flagged or ``ineligible`` pairs accepted.
5. **Stale proposals.** A proposal pins the digest of each competitor's surface it judged;
   when a competitor's surface differs now, its pairs are reported ``stale`` (the seed's
   version drift between the judged and the run snapshot) and no set is proposed for an
   intent with a stale pair until a new proposal is made. Decisions answer one proposal:
   a new proposal starts the review again.

Two deterministic offline judges (:data:`FAKE_JUDGES`) stand in for the model families
when no provider is used: they are labelled as such in every output and are not
independent model families.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from prereg.experiments.loader import Experiment
from prereg.experiments.surfaces import Surface

#: The shortest quote that counts unless it is a whole field of the surface.
MIN_QUOTE = 12
Answer = Literal["yes", "no", "invalid", "missing"]
Status = Literal["eligible", "ineligible", "disagree", "unresolved"]
FLAGGED: frozenset[str] = frozenset({"disagree", "unresolved"})
Decision = Literal["accept", "reject"]


@dataclass(frozen=True)
class Judgement:
    """One family's answer for one (intent, competitor): untrusted data."""

    family: str
    intent: str
    competitor: str
    eligible: bool | None  # None: no usable answer
    quote: str | None = None
    model: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Checked:
    """A judgement with its quote checked against the pinned surface."""

    judgement: Judgement
    answer: Answer
    found_in: str | None  # the field the quote was found in (``tools[name].description``)
    reason: str | None  # why the answer is invalid

    def to_json(self) -> dict[str, Any]:
        return {
            **self.judgement.to_json(),
            "answer": self.answer,
            "found_in": self.found_in,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class PairProposal:
    intent: str
    competitor: str
    status: Status
    answers: Mapping[str, Checked]  # family -> its checked answer

    @property
    def flagged(self) -> bool:
        return self.status in FLAGGED

    def to_json(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "competitor": self.competitor,
            "status": self.status,
            "flagged": self.flagged,
            "answers": {f: c.to_json() for f, c in self.answers.items()},
        }


def normalise(text: str) -> str:
    """The form quotes are matched in: NFC, white space runs collapsed (reading 1)."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def surface_fields(surface: Surface) -> list[tuple[str, str]]:
    """(field, text) of everything a quote may come from: the server's and every tool's
    name, title and description, as the host is offered them."""
    out = [
        ("server.name", surface.name),
        ("server.title", surface.title),
        ("server.description", surface.description),
    ]
    for tool in surface.tools:
        for key in ("name", "title", "description"):
            out.append((f"tools[{tool.name}].{key}", str(getattr(tool, key) or "")))
    return [(where, text) for where, text in out if text]


def find_quote(surface: Surface, quote: str) -> tuple[str | None, str | None]:
    """(field where ``quote`` occurs verbatim, None) or (None, why not) (reading 1)."""
    q = normalise(quote)
    if not q:
        return None, "the quote is empty"
    fields = [(where, normalise(text)) for where, text in surface_fields(surface)]
    for where, text in fields:
        if q == text:
            return where, None
    if len(q) < MIN_QUOTE:
        return None, (
            f"the quote has {len(q)} characters: one shorter than {MIN_QUOTE} must be a "
            "whole field (a tool's name)"
        )
    for where, text in fields:
        if q in text:
            return where, None
    return None, "the quote is not in the competitor's pinned snapshot"


def check(judgement: Judgement, surface: Surface) -> Checked:
    """A judgement's answer after its quote is checked (reading 2)."""
    if judgement.eligible is None:
        return Checked(judgement, "invalid", None, "no yes/no answer")
    found_in, why = (None, None)
    if judgement.quote is not None:
        found_in, why = find_quote(surface, judgement.quote)
        if found_in is None:
            return Checked(judgement, "invalid", None, why)
    if judgement.eligible and judgement.quote is None:
        return Checked(judgement, "invalid", None, "a yes needs a quote from the snapshot")
    return Checked(judgement, "yes" if judgement.eligible else "no", found_in, None)


def combine(answers: Mapping[str, Checked | None]) -> Status:
    """Agreement only (reading 3) over exactly two families' checked answers."""
    values = [a.answer if a is not None else "missing" for a in answers.values()]
    if any(v in ("invalid", "missing") for v in values):
        return "unresolved"
    if all(v == "yes" for v in values):
        return "eligible"
    if all(v == "no" for v in values):
        return "ineligible"
    return "disagree"


def competitors(experiment: Experiment) -> list[str]:
    """The pool's competitors (decoys are never eligible), in pool order."""
    return [m.id for m in experiment.pool if m.role == "competitor"]


#: a judge: (intent id, intent definition, competitor surface) -> (eligible, quote)
JudgeFn = Callable[[str, str, Surface], tuple[bool | None, str | None]]


def propose(
    experiment: Experiment,
    judges: Mapping[str, JudgeFn],
    models: Mapping[str, str | None] | None = None,
) -> list[PairProposal]:
    """Every (intent, competitor) of ``experiment`` judged by both families and combined.

    ``judges`` maps exactly two family names to their judge; ``models`` the model each
    family's answers came from (for the record).
    """
    if len(judges) != 2:
        raise ValueError(f"a proposal needs exactly two families, got {len(judges)}")
    out: list[PairProposal] = []
    for intent, definition in experiment.intents.items():
        for comp in competitors(experiment):
            surface = experiment.surfaces[comp]
            answers: dict[str, Checked] = {}
            for family, judge in judges.items():
                eligible, quote = judge(intent, definition, surface)
                j = Judgement(family, intent, comp, eligible, quote, (models or {}).get(family))
                answers[family] = check(j, surface)
            out.append(PairProposal(intent, comp, combine(answers), answers))
    return out


# ---- the deterministic offline judges ----------------------------------------------------

_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
_STOP = frozenset(
    "about after also and any are been being both but can could does each else ever "
    "every from have into just like make many more most much must need only other over "
    "same should some such than that their them then there these they this those through "
    "under very want what when where which while will with would your".split()
)


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)} - _STOP


def _lexical(
    parts: Callable[[Surface], Iterable[str]],
) -> JudgeFn:
    def judge(intent: str, definition: str, surface: Surface) -> tuple[bool | None, str | None]:
        wanted = _words(f"{intent.replace('-', ' ')} {definition}")
        best: tuple[int, str] | None = None
        for text in parts(surface):
            score = len(wanted & _words(text.replace("_", " ").replace("-", " ")))
            if score and (best is None or score > best[0]):
                best = (score, text)
        return (True, best[1]) if best is not None else (False, None)

    return judge


def _names(surface: Surface) -> Iterable[str]:
    for tool in surface.tools:
        yield tool.name
        if tool.title:
            yield tool.title


def _descriptions(surface: Surface) -> Iterable[str]:
    for text in (surface.description, *(t.description for t in surface.tools)):
        if text and len(normalise(text)) >= MIN_QUOTE:
            yield text


#: Offline stand-ins for two model families: word overlap of the intent's id and
#: definition with the competitor's tool names and titles, or with its descriptions,
#: quoting the best-matching field whole. Deterministic; not model families.
FAKE_JUDGES: Mapping[str, JudgeFn] = {
    "fake-names": _lexical(_names),
    "fake-descriptions": _lexical(_descriptions),
}


# ---- state from the record ---------------------------------------------------------------


@dataclass(frozen=True)
class PairState:
    intent: str
    competitor: str
    status: Status
    decision: Decision | None
    reason: str | None
    stale: bool

    @property
    def eligible(self) -> bool:
        """Whether the pair is in the proposed set (reading 4)."""
        if self.decision is not None:
            return self.decision == "accept"
        return self.status == "eligible"

    @property
    def needs_review(self) -> bool:
        return self.decision is None and self.status in FLAGGED

    def to_json(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "competitor": self.competitor,
            "status": self.status,
            "decision": self.decision,
            "reason": self.reason,
            "stale": self.stale,
            "eligible": self.eligible,
            "needs_review": self.needs_review,
        }


def state(
    proposal: Mapping[str, Any],
    decisions: Sequence[Mapping[str, Any]],
    current_digests: Mapping[str, str],
) -> list[PairState]:
    """Each pair of the newest ``proposal`` event with its newest decision (made after the
    proposal) and whether its competitor's surface changed since (reading 5)."""
    newest: dict[tuple[str, str], Mapping[str, Any]] = {}
    for event in decisions:
        newest[(event["intent"], event["competitor"])] = event
    pinned = proposal.get("surfaces", {})
    out = []
    for pair in proposal["pairs"]:
        key = (pair["intent"], pair["competitor"])
        d: Mapping[str, Any] | None = newest.get(key)
        out.append(
            PairState(
                intent=key[0],
                competitor=key[1],
                status=pair["status"],
                decision=None if d is None else d["decision"],
                reason=None if d is None else d["reason"],
                stale=pinned.get(key[1]) != current_digests.get(key[1]),
            )
        )
    return out


def proposed_sets(pairs: Sequence[PairState]) -> dict[str, list[str] | None]:
    """intent -> its proposed eligible competitors (pool order as recorded), or None while
    any of its pairs is flagged without a decision or stale (no set is proposed yet)."""
    sets: dict[str, list[str] | None] = {}
    for p in pairs:
        current = sets.setdefault(p.intent, [])
        if current is None:
            continue
        if p.needs_review or p.stale:
            sets[p.intent] = None
        elif p.eligible:
            current.append(p.competitor)
    return sets


def yaml_block(sets: Mapping[str, Sequence[str] | None]) -> str:
    """The ``eligible:`` block of corpus.yaml for the intents with a proposed set (ids are
    ``[a-z0-9][a-z0-9-]*``, so they need no quoting)."""
    lines = ["eligible:"]
    for intent, comps in sets.items():
        if comps is not None:
            lines.append(f"  {intent}: [{', '.join(comps)}]")
    return "\n".join(lines) + "\n"
