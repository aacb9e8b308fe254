"""``prereg study lint``: a task family checked against the seed's rules (issue 42, item 5).

Seed 001, section 3.1 and appendix A ("Audits"): matched variants differ only in their
pressure and keep the family's answer and certified minimum; the generator's static
audits cover semantic signatures, shortest programs, the layout of connectors and facts,
task and action logic and deterministic regeneration. The compiler
(:mod:`.compile`) already refuses a family whose variants would move; the lint compiles
the family and then re-checks the compiled variants *independently* of the compiler
(its own arithmetic of the certified minimum, its own digests of the components, the
answer read from the family file, not from the compiler's reference), and adds the rules
the compiler does not state: no leaking of the answer or of the gold record ids into the
text the model reads, tool signatures that say what the tool does, one connector per
record kind, and deterministic regeneration.

Every finding names the file, the field of the family file to change, the rule and what
was found. The rules (:data:`RULES`) are documented in docs/toolbottleneck.md, "Writing a
family". Readings K2 and K3: the text the model reads is the rendered request and the
operational tools' names and descriptions (the compiled schemas add only the route and
the generic verb); a fact value leaks when it occurs there as a whole term (case-folded;
booleans are not checked, since ``true``/``false`` carry no answer by themselves); the
decision label may occur in the request only inside an offered choice of two or more
quoted labels (``"escalate" or "hold"``), which the request must contain; gold ids are
every record id and lookup key of every compiled world except the one the request names.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import rfc8785

from prereg.experiments.toolbottleneck.compile import CompiledFamily, Variant, compile_family
from prereg.experiments.toolbottleneck.family import (
    WORKFLOW_LEVELS,
    FamilyError,
    FamilyFile,
    load_family,
)

#: Rule id -> what it checks (the docs table lists the same).
RULES: dict[str, str] = {
    "compile": "the compiler refuses the family (its variants would move, a workflow it "
    "cannot certify, an encoding that does not round-trip, sizes that do not fit)",
    "answer": "every variant keeps the family's answer: its decision, fact values and "
    "permitted final state",
    "minimum": "every variant's certified minimum is 2 calls per source record and per "
    "handoff, plus 1 for an action; V, D and R variants keep the base's",
    "one-pressure": "each variant of a set differs from the set's base in exactly its "
    "pressure (its cell coordinate and the components that pressure may change)",
    "layout": "every decision fact is placed at every workflow level, and the levels "
    "spread the facts over strictly more records (low < medium < high)",
    "leak.fact": "a decision fact's value occurs in the request or in a tool's name or description",
    "leak.decision": "the decision label occurs in a tool's name or description, or in "
    "the request outside an offered choice of labels",
    "leak.id": "a gold record id or lookup key (other than the one the request names) "
    "occurs in the request or in a tool's text",
    "options": "the request offers no choice of two or more quoted decision labels that "
    "includes the decision",
    "signature": "a tool without a description, two tools with the same description, or "
    "a name whose verb contradicts the tool's operation",
    "connectors": "a record kind's tools on more than one connector (the action's tool included)",
    "regeneration": "compiling the family twice gives other variants or digests",
}

#: The coordinates of a variant's cell and the components each set may change.
SET_CELL: dict[str, frozenset[str]] = {
    "V": frozenset({"V"}),
    "W": frozenset({"W"}),
    "D": frozenset({"D"}),
    "R": frozenset({"R", "retriever"}),
    "W-frontier": frozenset({"handoffs"}),
}
SET_COMPONENTS: dict[str, frozenset[str]] = {
    "V": frozenset({"menu"}),
    "W": frozenset({"workflow"}),
    "D": frozenset({"encoding"}),
    "R": frozenset({"catalog", "menu"}),
    "W-frontier": frozenset({"workflow"}),
}
#: The family field a set's levels come from (where a finding on the set points).
SET_FIELD = {
    "V": "sizes.menus",
    "W": "layouts",
    "D": "sizes.encodings",
    "R": "sizes.catalogs",
    "W-frontier": "sizes.handoffs",
}
_COMPONENTS = ("core", "catalog", "menu", "workflow", "encoding")
#: Name prefixes that state an operation; a tool whose name says another one misleads.
_VERBS = {
    "search": ("search", "find", "lookup", "list", "query"),
    "read": ("read", "get", "fetch", "show", "open", "view"),
}
_QUOTED = re.compile(r'"([^"\n]{1,80})"')
_JOIN = re.compile(r"^\s*(?:,\s*)?(?:or\s*)?$")
_KEY = re.compile(r"\s*:")


@dataclass(frozen=True)
class Finding:
    """One broken rule: the file, the field of the family file, the rule, what was found."""

    rule: str
    file: str
    field: str
    message: str
    family: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def render(self) -> str:
        return f"{self.file}: {self.field}: [{self.rule}] {self.message}"


@dataclass(frozen=True)
class LintResult:
    files: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        counts = Counter(f.rule for f in self.findings)
        return {
            "files": list(self.files),
            "clean": self.clean,
            "findings": [f.to_json() for f in self.findings],
            "counts": {rule: counts[rule] for rule in RULES if counts[rule]},
        }


Compiler = Callable[[FamilyFile, str], CompiledFamily]


def _compile(family: FamilyFile, filename: str) -> CompiledFamily:
    return compile_family(family, seed=0, filename=filename)


def lint_files(paths: Sequence[str], compiler: Compiler = _compile) -> LintResult:
    """Lint each family file. A file that cannot be read or is not a valid family is
    BadInput (exit 2, naming the file and the field) before anything is linted."""
    families = [(load_family(p), str(p)) for p in paths]
    findings: list[Finding] = []
    for family, filename in families:
        findings += lint_family(family, filename, compiler=compiler)
    return LintResult(tuple(name for _, name in families), tuple(findings))


def lint_family(
    family: FamilyFile, filename: str, *, compiler: Compiler = _compile
) -> list[Finding]:
    """Every finding on one family (its text rules, then its compiled variants)."""
    out = text_findings(family, filename)
    try:
        compiled = compiler(family, filename)
    except FamilyError as exc:
        out.append(Finding("compile", filename, exc.field or "family", exc.message, family.id))
        return out
    out += compiled_findings(family, filename, compiled)
    out += id_findings(family, filename, compiled)
    again = compiler(family, filename)
    out += regeneration_findings(family, filename, compiled, again)
    return out


# ---- the family's own text --------------------------------------------------------------


def _term_in(term: str, text: str) -> bool:
    """Whether ``term`` occurs in ``text`` as a whole term (case-folded; ``_`` and ``-``
    separate terms of a tool name, so ``approve`` is in ``approve_invoice``)."""
    needle = re.escape(term.casefold().replace("_", " "))
    haystack = text.casefold().replace("_", " ")
    return re.search(rf"(?<![a-z0-9]){needle}(?![a-z0-9])", haystack) is not None


def tool_texts(
    family: FamilyFile, operations: tuple[str, ...] = ("search", "read", "act")
) -> list[tuple[str, str]]:
    """(field, text) of everything a tool of those operations shows the model: its name
    and description."""
    out = []
    for i, tool in enumerate(family.tools):
        if tool.operation not in operations:
            continue
        out.append((f"tools[{i}].name", tool.name))
        if tool.description:
            out.append((f"tools[{i}].description", tool.description))
    return out


def offered_choices(request: str) -> list[list[str]]:
    """The choices of quoted labels a request offers: runs of two or more quoted strings
    joined only by ``,`` / ``or`` (``"escalate" or "hold"``; ``"a", "b" or "c"``)."""
    groups: list[list[str]] = []
    run: list[str] = []
    last_end = -1
    for match in _QUOTED.finditer(request):
        if _KEY.match(request, match.end()):  # a JSON key ("facts": ...), not a label
            if len(run) >= 2:
                groups.append(run)
            run, last_end = [], -1
            continue
        joined = last_end >= 0 and _JOIN.match(request[last_end : match.start()]) is not None
        if run and joined:
            run.append(match.group(1))
        else:
            if len(run) >= 2:
                groups.append(run)
            run = [match.group(1)]
        last_end = match.end()
    if len(run) >= 2:
        groups.append(run)
    return groups


def text_findings(family: FamilyFile, filename: str) -> list[Finding]:
    """The rules on the family file's own text: leaks, options, signatures, connectors,
    layout."""
    out: list[Finding] = []

    def find(rule: str, field: str, message: str) -> None:
        out.append(Finding(rule, filename, field, message, family.id))

    texts = [("request", family.request), *tool_texts(family)]
    for name, fact in sorted(family.facts.items()):
        if isinstance(fact.value, bool):
            continue
        value = str(fact.value)
        for field, text in texts:
            if _term_in(value, text):
                find("leak.fact", field, f"names the value of fact '{name}' ({value!r})")
    label = family.decision
    for field, text in tool_texts(family, operations=("search", "read")):
        if _term_in(label, text):
            find("leak.decision", field, f"names the decision label {label!r}")
    choices = [c for c in offered_choices(family.request) if label in c]
    if not choices:
        if _term_in(label, family.request):
            find(
                "leak.decision",
                "request",
                f"names the decision label {label!r} without offering another label beside "
                'it (write the choice as "label" or "other")',
            )
        else:
            find(
                "options",
                "request",
                f"offers no choice of quoted labels that includes the decision {label!r} "
                '(write it as {"decision": "label" or "other", ...})',
            )
    out += _signature_findings(family, filename)
    out += _connector_findings(family, filename)
    out += _layout_findings(family, filename)
    return out


def _signature_findings(family: FamilyFile, filename: str) -> list[Finding]:
    out: list[Finding] = []
    seen: dict[str, int] = {}
    for i, tool in enumerate(family.tools):
        description = tool.description.strip()
        if not description:
            out.append(
                Finding(
                    "signature",
                    filename,
                    f"tools[{i}].description",
                    f"tool '{tool.name}' has no description: say what it finds, reads or changes",
                    family.id,
                )
            )
        elif description.casefold() in seen:
            out.append(
                Finding(
                    "signature",
                    filename,
                    f"tools[{i}].description",
                    f"tool '{tool.name}' has the description of "
                    f"'{family.tools[seen[description.casefold()]].name}': the two cannot be "
                    "told apart",
                    family.id,
                )
            )
        else:
            seen[description.casefold()] = i
        verb = tool.name.split("_", 1)[0]
        for operation, verbs in _VERBS.items():
            if verb in verbs and tool.operation != operation:
                out.append(
                    Finding(
                        "signature",
                        filename,
                        f"tools[{i}].name",
                        f"tool '{tool.name}' is named like a '{operation}' tool but its "
                        f"operation is '{tool.operation}'",
                        family.id,
                    )
                )
    return out


def _connector_findings(family: FamilyFile, filename: str) -> list[Finding]:
    out: list[Finding] = []
    first: dict[str, tuple[str, int]] = {}
    for i, tool in enumerate(family.tools):
        if tool.kind not in first:
            first[tool.kind] = (tool.connector, i)
            continue
        connector, j = first[tool.kind]
        if tool.connector != connector:
            out.append(
                Finding(
                    "connectors",
                    filename,
                    f"tools[{i}].connector",
                    f"tool '{tool.name}' serves kind '{tool.kind}' on connector "
                    f"'{tool.connector}', but '{family.tools[j].name}' serves it on "
                    f"'{connector}': a record kind lives on one connector",
                    family.id,
                )
            )
    return out


def _layout_findings(family: FamilyFile, filename: str) -> list[Finding]:
    out: list[Finding] = []
    facts = set(family.facts)
    sizes = []
    for level in WORKFLOW_LEVELS:
        groups = family.layouts.of(level)
        placed = {name for group in groups for name in group}
        for name in sorted(facts - placed):
            out.append(
                Finding(
                    "layout",
                    filename,
                    f"layouts.{level}",
                    f"fact '{name}' is placed in no record at the {level} level, so its "
                    "variants would not ask for it",
                    family.id,
                )
            )
        sizes.append(len(groups))
    for i in range(1, len(WORKFLOW_LEVELS)):
        (a, na), (b, nb) = (WORKFLOW_LEVELS[i - 1], sizes[i - 1]), (WORKFLOW_LEVELS[i], sizes[i])
        if nb <= na:
            out.append(
                Finding(
                    "layout",
                    filename,
                    f"layouts.{b}",
                    f"the {b} level spreads the facts over {nb} record(s), the {a} level "
                    f"over {na}: each level needs more records than the one before",
                    family.id,
                )
            )
    return out


# ---- the compiled variants ----------------------------------------------------------------


def _digest(document: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(document)).hexdigest()


def variant_acts(family: FamilyFile, variant: Variant) -> bool:
    """Whether a variant's task requires the family's action: everywhere but on the
    frontier, which is read-only (reading 4: the seed's frontier minima 2, 6, 14, 30)."""
    return family.action is not None and variant.cell.block != "frontier"


def expected_minimum(family: FamilyFile, variant: Variant) -> int:
    """The certified minimum from the family alone: a search and a read per source record
    of the level's layout and per handoff, and the action where the variant acts."""
    cell = variant.cell
    records = len(family.layouts.of(cell.workflow))
    return 2 * records + 2 * cell.handoffs + (1 if variant_acts(family, variant) else 0)


def _cell_field(set_name: str, variant: Variant) -> str:
    if set_name == "W":
        return f"layouts.{variant.cell.workflow}"
    return SET_FIELD[set_name]


def compiled_findings(family: FamilyFile, filename: str, compiled: CompiledFamily) -> list[Finding]:
    """The rules on the compiled variants: the answer, the certified minimum and one
    pressure at a time, each re-derived here from the family and the documents."""
    out: list[Finding] = []
    reported: set[tuple[str, str, str]] = set()

    def find(rule: str, field: str, message: str) -> None:
        key = (rule, field, message)
        if key not in reported:
            reported.add(key)
            out.append(Finding(rule, filename, field, message, family.id))

    by_id = {v.id: v for v in compiled.variants}
    set_of: dict[str, str] = {}
    for set_name, ids in compiled.sets.items():
        for vid in ids:
            set_of.setdefault(vid, set_name)
    for variant in compiled.variants:
        field = _cell_field(set_of.get(variant.id, "W"), variant)
        _answer(family, variant, find)
        _minimum(family, variant, field, find)
    for set_name, ids in compiled.sets.items():
        members = [by_id[i] for i in ids if i in by_id]
        _one_pressure(set_name, members, find)
    return out


Find = Callable[[str, str, str], None]


def _answer(family: FamilyFile, variant: Variant, find: Find) -> None:
    code = variant.cell.code
    documents: list[tuple[str, Mapping[str, Any]]] = []
    core = variant.component("core")
    workflow = variant.component("workflow")
    documents.append(("core", core))
    documents.append(("reference answer", workflow.get("reference_answer", {})))
    for where, doc in documents:
        if doc.get("decision") != family.decision:
            find(
                "answer",
                "decision",
                f"variant {code}: its {where} decides {doc.get('decision')!r}, the family "
                f"{family.decision!r}",
            )
        facts = doc.get("facts", {})
        for name, fact in sorted(family.facts.items()):
            got = facts.get(name)
            value = got.get("value") if isinstance(got, dict) else got
            if name not in facts or value != fact.value or type(value) is not type(fact.value):
                find(
                    "answer",
                    f"facts.{name}",
                    f"variant {code}: its {where} has {name} = {value!r}, the family "
                    f"{fact.value!r}",
                )
        for name in sorted(set(facts) - set(family.facts)):
            find("answer", "facts", f"variant {code}: its {where} adds fact '{name}'")
    final = core.get("permitted_final_state", [])
    want = (
        []
        if family.action is None or not variant_acts(family, variant)
        else [(family.action.field, family.action.before, family.action.value)]
    )
    got = [(c.get("field"), c.get("before"), c.get("value")) for c in final]
    if got != want:
        find(
            "answer",
            "action",
            f"variant {code}: its permitted final state changes {got}, the family {want}",
        )


def _minimum(family: FamilyFile, variant: Variant, field: str, find: Find) -> None:
    cell = variant.cell
    want = expected_minimum(family, variant)
    got = variant.component("workflow").get("certified_minimum")
    program = variant.component("workflow").get("program", [])
    measured = variant.document.get("measures", {}).get("certified_minimum")
    if got != want or len(program) != want or measured != want:
        find(
            "minimum",
            field,
            f"variant {cell.code}: certified minimum {got} (program of {len(program)} "
            f"calls, measures {measured}), the family's is {want}",
        )


def _one_pressure(set_name: str, members: Sequence[Variant], find: Find) -> None:
    if set_name not in SET_CELL or len(members) < 2:
        return
    base = members[0]
    cell_keys, allowed = SET_CELL[set_name], SET_COMPONENTS[set_name]
    base_cell = dict(base.document["cell"])
    base_digests = {c: _digest(base.component(c)) for c in _COMPONENTS}
    seen_levels = {tuple(base_cell.get(k) for k in sorted(cell_keys))}
    for other in members[1:]:
        field = _cell_field(set_name, other)
        cell = dict(other.document["cell"])
        moved_cell = sorted(
            k for k in set(cell) | set(base_cell) if cell.get(k) != base_cell.get(k)
        )
        stray = [k for k in moved_cell if k not in cell_keys]
        if stray:
            find(
                "one-pressure",
                field,
                f"{set_name} set: variant {other.cell.code} differs from the base "
                f"{base.cell.code} in its cell's {', '.join(stray)} too",
            )
        level = tuple(cell.get(k) for k in sorted(cell_keys))
        if level in seen_levels:
            find(
                "one-pressure",
                field,
                f"{set_name} set: variant {other.cell.code} repeats a level of the set "
                "instead of changing the pressure",
            )
        seen_levels.add(level)
        moved = [
            c
            for c in _COMPONENTS
            if c not in allowed and _digest(other.component(c)) != base_digests[c]
        ]
        if moved:
            find(
                "one-pressure",
                field,
                f"{set_name} set: variant {other.cell.code} differs from the base "
                f"{base.cell.code} in {', '.join(moved)}, outside the {set_name} pressure",
            )


def regeneration_findings(
    family: FamilyFile, filename: str, first: CompiledFamily, second: CompiledFamily
) -> list[Finding]:
    """Deterministic regeneration: the same family compiles to the same variants."""
    a = {v.id: v.digest for v in first.variants}
    b = {v.id: v.digest for v in second.variants}
    differing = sorted(i for i in set(a) | set(b) if a.get(i) != b.get(i))
    if not differing:
        return []
    return [
        Finding(
            "regeneration",
            filename,
            "family",
            f"compiling twice gives other variants or digests ({len(differing)} differ, "
            f"first {differing[0]})",
            family.id,
        )
    ]


def id_findings(family: FamilyFile, filename: str, compiled: CompiledFamily) -> list[Finding]:
    """Gold ids in the model's text: every record id and lookup key of every compiled
    world (other seeds give other ones, so a literal one is always a leak or a mistake;
    the request names its record through ``{ref}``)."""
    golds: set[str] = set()
    for variant in compiled.variants:
        for record in variant.component("workflow").get("records", []):
            golds.add(str(record.get("id")))
            if record.get("ref"):
                golds.add(str(record["ref"]))
    out: list[Finding] = []
    for field, text in [("request", family.request), *tool_texts(family)]:
        for gold in sorted(golds):
            if _term_in(gold, text):
                out.append(
                    Finding(
                        "leak.id",
                        filename,
                        field,
                        f"names the gold record id or lookup key {gold!r} (write {{ref}} "
                        "for the record the request names)",
                        family.id,
                    )
                )
    return out
