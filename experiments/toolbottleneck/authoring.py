"""``prereg study new-family``: a task family scaffolded from a short description.

Issue 42, item 5. The author gives the family's id, its intent and domain, the chain of
source record kinds (``--records``, the primary record first: the one the request names
and the action changes) and the operations beyond search and read (``--operation act``
adds the one reversible action on the primary record). The scaffold is a complete family
(seed 3.1) that compiles as written and lints clean, with placeholder facts, decision
labels and request text, and comments telling the author what to replace: the facts that
decide the task, the decision label and its alternative, the request, the route, the
tools' descriptions and connectors.

Reading K1 (docs/toolbottleneck.md): every kind gets a search and a read tool on one
connector (``<kind>s``), the action (if any) a ``set_<primary>_state`` tool on the
primary's connector; the three workflow levels spread one fact per record kind over 1,
2 and 3 records (the seed's 2, 4 and 6 reads), so exactly three record kinds are needed
with the default sizes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.family import parse_family

_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
#: How many record kinds the default sizes need: low, medium and high = 2, 4, 6 reads.
RECORDS = 3
OPERATIONS = ("search", "read", "act")
DEFAULT_RECORDS = ("primary-record", "linked-record", "owner-record")
#: Route coordinates a scaffold starts from (the author replaces them).
ROUTE = {"workspace": "acme", "region": "eu-north", "collection": "operations"}


@dataclass(frozen=True)
class Scaffold:
    """A scaffolded family: its YAML text and what it was made from."""

    family: str
    intent: str
    domain: str
    records: tuple[str, ...]
    operations: tuple[str, ...]
    text: str

    def to_json(self) -> dict[str, object]:
        return {
            "family": self.family,
            "intent": self.intent,
            "domain": self.domain,
            "records": list(self.records),
            "operations": list(self.operations),
            "yaml": self.text,
        }


def _check(value: str, pattern: re.Pattern[str], field: str, what: str) -> str:
    if not pattern.match(value):
        raise BadInput(
            f"'{value}' is not {what} (lowercase letters, digits and hyphens, starting "
            "with a letter or digit)",
            field=field,
        )
    return value


def _snake(kind: str) -> str:
    return kind.replace("-", "_")


def _plural(kind: str) -> str:
    base = _snake(kind)
    return base + ("es" if base.endswith(("s", "x", "ch", "sh")) else "s")


def _quote(text: str) -> str:
    """A YAML flow scalar: JSON strings are valid YAML."""
    return json.dumps(text)


def scaffold(
    name: str,
    intent: str,
    domain: str,
    records: Sequence[str] = DEFAULT_RECORDS,
    operations: Sequence[str] = ("search", "read"),
) -> Scaffold:
    """The YAML text of a new family; BadInput naming the option on a bad description."""
    _check(name, _ID, "NAME", "a family id")
    _check(intent, _SLUG, "--intent", "an intent slug")
    _check(domain, _SLUG, "--domain", "a domain slug")
    kinds = [_check(k.strip(), _SLUG, "--records", "a record kind") for k in records]
    if len(kinds) != RECORDS or len(set(kinds)) != len(kinds):
        raise BadInput(
            f"give {RECORDS} distinct record kinds, the primary record first (the "
            f"default sizes spread the facts over 1, 2 and 3 records: 2, 4, 6 reads); "
            f"got {len(kinds)}",
            field="--records",
        )
    for op in operations:
        if op not in OPERATIONS:
            raise BadInput(
                f"unknown operation '{op}' (operations: {', '.join(OPERATIONS)})",
                field="--operation",
            )
    acts = "act" in operations
    ops = tuple(o for o in OPERATIONS if o in {"search", "read", *operations})
    text = _render(name, intent, domain, kinds, acts)
    parse_family(text, f"<scaffold {name}>")  # a scaffold that does not load is a bug
    return Scaffold(name, intent, domain, tuple(kinds), ops, text)


def _render(name: str, intent: str, domain: str, kinds: list[str], acts: bool) -> str:
    primary = kinds[0]
    facts = [f"{kind}-fact" for kind in kinds]
    title = name.replace("-", " ").capitalize()
    action_sentence = (
        " If it should proceed, also set the state of the {primary} (one reversible change)."
        if acts
        else ""
    ).replace("{primary}", primary.replace("-", " "))
    request = (
        f"Should {primary.replace('-', ' ')} {{ref}} proceed? Use only the tools whose route "
        f"is {{route}}. Check {', '.join(f.replace('-', ' ') for f in facts)}, then answer "
        'as JSON {"decision": "proceed" or "wait", "facts": {...}, "sources": [...]}.'
        + action_sentence
    )
    lines = [
        "# A ToolBottleneckBench task family (seed 001, section 3.1), scaffolded by",
        f"# `prereg study new-family {name}`. Replace every TODO, then check it:",
        f"#   prereg study lint {name}.yaml      (the seed's rules, file and field named)",
        f"#   prereg study compile {name}.yaml   (the matched variants and their digests)",
        "# Every record is synthetic; record ids are opaque and made at compile time, so",
        "# never write one here (the request names its record through {ref}).",
        f"id: {name}",
        f"intent: {intent}",
        f"domain: {domain}",
        f"title: {_quote(title)}  # TODO: a short title (never shown to the model)",
        "# TODO: the user request. It must contain {ref} (the primary record's lookup key)",
        "# and {route} (the route of the operational tools), offer the decision labels as",
        '# a quoted choice ("proceed" or "wait"), and never name a fact value or the answer.',
        f"request: {_quote(request)}",
        "# TODO: the route every operational tool shares (reading 1)",
        "route: {" + ", ".join(f"{k}: {v}" for k, v in ROUTE.items()) + "}",
        "# the chain of source record kinds: the first is the record the request names"
        + (" and the action changes" if acts else ""),
        f"sources: [{', '.join(kinds)}]",
        "# TODO: the facts that decide the task, with their values (types: string,",
        '# integer, number, boolean, date as "YYYY-MM-DD", money as "12.50")',
        "facts:",
        *(f"  {fact}: {{value: todo-value-{i + 1}}}" for i, fact in enumerate(facts)),
        "# TODO: the decision label the facts imply (one of the request's quoted choice)",
        "decision: proceed",
        "evidence: fact-sources  # cite every record that holds a decision fact",
    ]
    if acts:
        lines += [
            "# the one reversible action on the primary record: TODO the field it sets",
            "# (not a decision fact), its value before and after",
            f"action: {{tool: set_{_snake(primary)}_state, field: {primary}-state, "
            "before: open, value: done}",
        ]
    lines += [
        "# the operational tools: a search and a read per record kind, on the kind's",
        "# connector; TODO say what each finds or reads (never the answer or a fact value)",
        "tools:",
    ]
    for kind in kinds:
        connector = f"{_plural(kind).replace('_', '-')}"
        words = kind.replace("-", " ")
        lines.append(
            f"  - {{name: search_{_plural(kind)}, operation: search, kind: {kind}, "
            f"connector: {connector}, description: Find a {words} by its key.}}"
        )
        lines.append(
            f"  - {{name: read_{_snake(kind)}, operation: read, kind: {kind}, "
            f"connector: {connector}, description: Read one {words}.}}"
        )
        if acts and kind == primary:
            lines.append(
                f"  - {{name: set_{_snake(kind)}_state, operation: act, kind: {kind}, "
                f"connector: {connector}, description: Set the state of a {words} "
                "(reversible).}"
            )
    lines += [
        "# which record holds which fact at each workflow level (2, 4 and 6 reads)",
        "layouts:",
        f"  low: [[{', '.join(facts)}]]",
        f"  medium: [[{facts[0]}], [{', '.join(facts[1:])}]]",
        f"  high: [{', '.join(f'[{f}]' for f in facts)}]",
        "# optional: sizes (the seed's defaults), tool_cluster (join families into one",
        "# tool cluster), a tool's cluster (the tool is shared with families that give the",
        "# same label); see docs/toolbottleneck.md, 'Writing a family'",
    ]
    return "\n".join(lines) + "\n"
