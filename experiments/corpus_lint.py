"""Corpus hygiene (InvokeRank 5.2 and the guardrail of its ethical considerations; issue
41, item 5): ``prereg corpus lint`` and the confirmatory ``register`` gate.

A loaded :class:`~prereg.experiments.loader.Experiment` is checked by four rule families,
each finding naming the file, the task (or the surface and tool), the rule and the
matched text:

- ``near-duplicate``: two prompts of the corpus whose 5-character shingles of the reader's
  form (:mod:`.unicode.shingles`, the index the locked split's check uses) have a Jaccard
  similarity at or above the experiment's threshold (``corpus_lint.near_duplicate`` in
  experiment.yaml, default :data:`~prereg.experiments.unicode.shingles.THRESHOLD`),
  within or across splits and intents;
- ``realism.*`` (:data:`REALISM_RULES`): a prompt that refers to context the harness never
  supplies (an attachment, a screenshot or image, "this file", "the above", an earlier
  conversation);
- ``brand`` and ``canary``: a declared brand name (``corpus_lint.brands``) in a prompt, a
  declared canary string (``corpus_lint.canaries``) in a prompt or a tool's text;
- ``guardrail.*`` (:data:`GUARDRAIL_RULES`, plus ``guardrail.competitor`` and
  ``guardrail.hidden``): a surface's server or tool text that tells the model to prefer
  the tool, praises it, carries prompt-injection imperatives or hidden characters,
  claims every request, or names another integration.

The rules are deliberately conservative phrase rules: a finding is a prompt or a
description a person should look at, not a verdict; a registration may waive a finding
with a reason (``corpus_lint.waive``), which the report shows. The lists are documented
in docs/experiments.md, "Corpus lint". Texts are untrusted data: they are matched,
never interpreted, and the caller escapes what it prints.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prereg.experiments.loader import Experiment
from prereg.experiments.models import CorpusLintSpec
from prereg.experiments.surfaces import Surface
from prereg.experiments.unicode.fold import describe, fold, invisible_in
from prereg.experiments.unicode.shingles import THRESHOLD, ShingleIndex

#: Realism rules (rule id, pattern, what it catches): a prompt that refers to context the
#: harness never supplies. Matched case-insensitively on the NFKC form without invisible
#: characters. Conservative: only phrases that cannot be satisfied by the prompt alone.
REALISM_RULES: tuple[tuple[str, str, str], ...] = (
    (
        "realism.attachment",
        r"\b(?:attached|attachments?|enclosed (?:file|document)s?|"
        r"I(?:'ve| have)? (?:uploaded|attached|pasted|shared)|"
        r"(?:the )?uploaded (?:file|document))\b",
        "an attachment or upload the harness never sends",
    ),
    (
        "realism.screenshot",
        r"\b(?:screen ?shots?|screen ?grabs?|screen captures?)\b",
        "a screenshot the harness never sends",
    ),
    (
        "realism.image",
        r"\b(?:this|the following|the attached|my) (?:image|picture|photo|diagram|scan)s?\b",
        "an image the harness never sends",
    ),
    (
        "realism.this-file",
        r"\b(?:this|the following) (?:file|document|pdf|spreadsheet|csv|email|page)s?\b",
        "a file or document the harness never sends",
    ),
    (
        "realism.above",
        r"\b(?:the above|(?:shown|listed|mentioned|quoted|pasted) (?:above|below)|"
        r"(?:above|below) (?:message|text|list|table|code|snippet))\b",
        "text above or below the prompt, which has none",
    ),
    (
        "realism.earlier-conversation",
        r"\b(?:(?:earlier|previous|last|our) (?:conversation|chat|message|session)s?|"
        r"as I (?:said|mentioned)|you (?:said|told me|mentioned|suggested) (?:earlier|before)|"
        r"like (?:last time|before))\b",
        "an earlier conversation the harness never replays",
    ),
)

#: Description guardrail rules (rule id, pattern, what it catches) on every surface's
#: server description and tool names, titles and descriptions.
GUARDRAIL_RULES: tuple[tuple[str, str, str], ...] = (
    (
        "guardrail.prefer",
        r"\b(?:always (?:use|call|choose|pick|prefer)|prefer (?:this|these|our)|"
        r"(?:use|call) (?:this|these) (?:tool|tools|server) "
        r"(?:first|whenever|for (?:any|every|all))|"
        r"must (?:always )?(?:use|call)|do not (?:use|call) (?:any )?(?:other|another)|"
        r"don't (?:use|call) (?:any )?(?:other|another)|instead of (?:any )?(?:other|another)|"
        r"rather than (?:any )?(?:other|another)|the only (?:tool|server|app) (?:you|that))\b",
        "tells the model to prefer this tool",
    ),
    (
        "guardrail.superlative",
        r"(?:\b(?:the best|best[- ]in[- ]class|number one|industry[- ]leading|world'?s leading|"
        r"unrivall?ed|unbeatable|superior to|better than|most (?:accurate|reliable|powerful|"
        r"trusted|advanced))\b|#1\b)",
        "praises the tool (a superlative or a comparison)",
    ),
    (
        "guardrail.injection",
        r"(?:\b(?:ignore (?:all |any )?(?:previous|prior|above|earlier|other) "
        r"(?:instructions|messages|prompts|tools)|disregard (?:the |all |any )?(?:previous|prior|"
        r"above|system|other)|system prompt|you are now|new instructions|"
        r"(?:do not|don't|never) (?:tell|inform|show) the user|without telling the user|"
        r"important instructions?)\b|<\s*/?\s*(?:system|important|instructions?)\s*>|"
        r"\[\s*(?:system|inst)\s*\])",
        "a prompt-injection style imperative aimed at the model",
    ),
    (
        "guardrail.over-broad",
        r"\b(?:(?:use|call) (?:this|it|me) for (?:any|every|all)|"
        r"(?:any|every) (?:request|question|task|query|prompt)|"
        r"all (?:requests|questions|tasks|queries|prompts))\b",
        "claims every request (an over-broad trigger)",
    ),
)

#: The near-duplicate rule's id, and the default threshold (the locked split's).
NEAR_DUPLICATE = "near-duplicate"
DEFAULT_NEAR_DUPLICATE = THRESHOLD


@dataclass(frozen=True)
class Finding:
    """One problem: which file, which task (or surface and tool), which rule, what text."""

    rule: str
    file: str
    matched: str
    message: str
    task: str | None = None
    #: ``surface`` or ``surface/tool`` for a guardrail or canary finding on tool text
    tool: str | None = None
    field: str | None = None
    #: the other task of a near-duplicate pair
    other_task: str | None = None
    similarity: float | None = None

    @property
    def family(self) -> str:
        return self.rule.split(".", 1)[0]

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def where(self) -> str:
        place = self.task or self.tool or ""
        return f"{self.file}: {place}" if place else self.file


@dataclass(frozen=True)
class LintSettings:
    """The experiment's ``corpus_lint`` block (all optional)."""

    near_duplicate: float = DEFAULT_NEAR_DUPLICATE
    brands: tuple[str, ...] = ()
    canaries: tuple[str, ...] = ()


#: the most near-duplicate pairs listed (see :func:`near_duplicates`)
MAX_NEAR_DUPLICATES = 500


@dataclass
class LintResult:
    experiment: str
    settings: LintSettings
    findings: list[Finding] = field(default_factory=list)
    #: rule families not applied, with the reason (a ToolBottleneckBench study's prompts)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "settings": {
                "near_duplicate": self.settings.near_duplicate,
                "brands": list(self.settings.brands),
                "canaries": list(self.settings.canaries),
            },
            "findings": [f.to_json() for f in self.findings],
            "skipped": dict(self.skipped),
            "counts": counts(self.findings),
        }


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in findings:
        out[f.rule] = out.get(f.rule, 0) + 1
    return dict(sorted(out.items()))


def _plain(text: str) -> str:
    """The text the phrase rules read: NFKC, invisible characters removed, one space."""
    hidden = invisible_in(text)
    if hidden:
        text = "".join(c for c in text if c not in hidden)
    return " ".join(unicodedata.normalize("NFKC", text).split())


@dataclass(frozen=True)
class _Rule:
    id: str
    pattern: re.Pattern[str]
    what: str


def _compile(rules: Sequence[tuple[str, str, str]]) -> tuple[_Rule, ...]:
    return tuple(_Rule(i, re.compile(p, re.IGNORECASE), w) for i, p, w in rules)


_REALISM = _compile(REALISM_RULES)
_GUARDRAIL = _compile(GUARDRAIL_RULES)


def _phrase_hits(rules: Sequence[_Rule], text: str) -> list[tuple[_Rule, str]]:
    plain = _plain(text)
    out = []
    for rule in rules:
        found = rule.pattern.search(plain)
        if found:
            out.append((rule, found.group(0)))
    return out


def _names_in(names: Iterable[str], text: str) -> list[str]:
    """The names whose reader's form occurs in ``text``'s as whole words."""
    folded = f" {_wordy(fold(text))} "
    out = []
    for name in names:
        form = _wordy(fold(name))
        if form and f" {form} " in folded:
            out.append(name)
    return out


def _wordy(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def settings_of(spec: CorpusLintSpec | None) -> LintSettings:
    """The experiment's ``corpus_lint`` block, or the documented defaults."""
    if spec is None:
        return LintSettings()
    return LintSettings(spec.near_duplicate, tuple(spec.brands), tuple(spec.canaries))


def lint(experiment: Experiment, *, near_duplicates_too: bool = True) -> LintResult:
    """Every finding of the four rule families on ``experiment`` (corpus order).

    ``near_duplicates_too`` false: every rule but the near-duplicate pairs, whose shingle
    index is most of the lint's time and memory on a large corpus (an exploratory
    ``register`` warns without it; ``prereg corpus lint`` and a confirmatory ``register``
    apply it)."""
    settings = settings_of(experiment.corpus_lint)
    result = LintResult(experiment.name, settings)
    corpus = experiment.corpus_file
    if not near_duplicates_too:
        result.skipped[NEAR_DUPLICATE] = (
            "not checked at an exploratory register: run `prereg corpus lint`"
        )
    elif experiment.toolbottleneck is not None:
        # generated from (family, seed): they differ by design only in their ids
        result.skipped[NEAR_DUPLICATE] = (
            "a ToolBottleneckBench study's prompts are generated and differ only in ids"
        )
    else:
        pairs = near_duplicates(experiment, settings.near_duplicate)
        result.findings += pairs
        if len(pairs) >= MAX_NEAR_DUPLICATES:
            result.skipped[NEAR_DUPLICATE] = (
                f"stopped after {MAX_NEAR_DUPLICATES} near-duplicate pairs (a templated "
                "corpus): the rest are not listed"
            )
    for task in experiment.tasks:
        for rule, matched in _phrase_hits(_REALISM, task.prompt):
            result.findings.append(
                Finding(rule.id, corpus, matched, rule.what, task=task.id, field="prompt")
            )
        for name in _names_in(settings.brands, task.prompt):
            result.findings.append(
                Finding(
                    "brand",
                    corpus,
                    name,
                    "a declared brand name in a prompt",
                    task=task.id,
                    field="prompt",
                )
            )
        for canary in settings.canaries:
            if canary and canary in task.prompt:
                result.findings.append(
                    Finding(
                        "canary",
                        corpus,
                        canary,
                        "a declared canary string in a prompt",
                        task=task.id,
                        field="prompt",
                    )
                )
    result.findings += guardrails(experiment, settings)
    return result


def near_duplicates(
    experiment: Experiment, threshold: float, limit: int | None = None
) -> list[Finding]:
    """Every pair of the corpus's prompts at or above ``threshold``, once per pair, up to
    ``limit`` pairs (:data:`MAX_NEAR_DUPLICATES`).

    The limit keeps the lint (run by every ``register``) from going quadratic on a
    templated corpus, where every prompt is near every other one (issue 40: registration
    cost bounded); one finding is enough to refuse, and a corpus with that many has one
    problem to fix, not thousands to read."""
    limit = MAX_NEAR_DUPLICATES if limit is None else limit
    tasks = list(experiment.tasks)
    index = ShingleIndex(((i, t.prompt) for i, t in enumerate(tasks)), threshold)
    out: list[Finding] = []
    for i, task in enumerate(tasks):
        if len(out) >= limit:
            del out[limit:]
            break
        for match in index.matches(task.prompt):
            j = int(match.key)  # type: ignore[call-overload]  # the keys are corpus positions
            if j <= i:
                continue
            other = tasks[j]
            split_a, split_b = experiment.split_of(task), experiment.split_of(other)
            where = (
                f"across splits ({split_a}, {split_b})"
                if split_a != split_b
                else f"within split {split_a}"
            )
            intents = (
                f"across intents ({task.intent}, {other.intent})"
                if task.intent != other.intent
                else f"intent {task.intent}"
            )
            out.append(
                Finding(
                    NEAR_DUPLICATE,
                    experiment.corpus_file,
                    other.prompt,
                    f"near-duplicate of {other.id} at Jaccard {match.similarity:.2f} "
                    f"(threshold {threshold:g}), {where}, {intents}",
                    task=task.id,
                    field="prompt",
                    other_task=other.id,
                    similarity=round(match.similarity, 4),
                )
            )
    return out


def _texts(surface: Surface) -> list[tuple[str, str, str]]:
    """(tool key, field, text) of a surface: its server text and each tool's text."""
    out = [
        (surface.id, "name", surface.name),
        (surface.id, "title", surface.title),
        (surface.id, "description", surface.description),
    ]
    for tool in surface.tools:
        key = f"{surface.id}/{tool.name}"
        out += [
            (key, "title", tool.title),
            (key, "description", tool.description),
        ]
    return [t for t in out if t[2]]


def guardrails(experiment: Experiment, settings: LintSettings) -> list[Finding]:
    """The description guardrail on every surface's server and tool text."""
    out: list[Finding] = []
    names = {sid: s.name for sid, s in experiment.surfaces.items()}
    for sid, surface in experiment.surfaces.items():
        own = fold(surface.name)
        # other integrations' names, and declared brands other than this surface's own
        others = sorted(
            {
                n
                for other, n in names.items()
                if other != sid and n and fold(n) not in own and own not in fold(n)
            }
            | {b for b in settings.brands if fold(b) not in own}
        )
        for key, where, text in _texts(surface):
            if where != "name":
                for rule, matched in _phrase_hits(_GUARDRAIL, text):
                    out.append(
                        Finding(rule.id, surface.file, matched, rule.what, tool=key, field=where)
                    )
                for name in _names_in(others, text):
                    out.append(
                        Finding(
                            "guardrail.competitor",
                            surface.file,
                            name,
                            "names another integration",
                            tool=key,
                            field=where,
                        )
                    )
            hidden = invisible_in(text)
            if hidden:
                out.append(
                    Finding(
                        "guardrail.hidden",
                        surface.file,
                        ", ".join(describe(c) for c in hidden),
                        "hidden (invisible) characters in tool text",
                        tool=key,
                        field=where,
                    )
                )
            for canary in settings.canaries:
                if canary and canary in text:
                    out.append(
                        Finding(
                            "canary",
                            surface.file,
                            canary,
                            "a declared canary string in tool text",
                            tool=key,
                            field=where,
                        )
                    )
    return out


# ---- waivers ------------------------------------------------------------------------------


def waived_by(finding: Finding, waiver: Mapping[str, Any]) -> bool:
    """Whether a registration's waiver (rule, optional task, optional tool) covers it.

    ``rule`` is a rule id or a family (``realism``); ``task`` matches either task of a
    near-duplicate pair; ``tool`` is ``surface`` (its every tool) or ``surface/tool``.
    """
    rule = waiver.get("rule")
    if rule not in (finding.rule, finding.family):
        return False
    task = waiver.get("task")
    if task is not None and task not in (finding.task, finding.other_task):
        return False
    tool = waiver.get("tool")
    if tool is not None:
        if finding.tool is None:
            return False
        if tool != finding.tool and not finding.tool.startswith(f"{tool}/"):
            return False
    return True


def split_waived(
    findings: Sequence[Finding], waivers: Sequence[Mapping[str, Any]]
) -> tuple[list[Finding], list[tuple[Finding, Mapping[str, Any]]], list[Mapping[str, Any]]]:
    """(open findings, (waived finding, its waiver) pairs, waivers that matched nothing)."""
    open_: list[Finding] = []
    waived: list[tuple[Finding, Mapping[str, Any]]] = []
    used: set[int] = set()
    for f in findings:
        for n, w in enumerate(waivers):
            if waived_by(f, w):
                waived.append((f, w))
                used.add(n)
                break
        else:
            open_.append(f)
    unused = [w for n, w in enumerate(waivers) if n not in used]
    return open_, waived, unused
