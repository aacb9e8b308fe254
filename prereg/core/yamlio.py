"""YAML and model loading with errors that name the file, the field and the line.

Shared by every package that reads user-written files (registrations,
experiments), so that bad input always reads the same way: ``file:line:col:
field: what was expected`` and exit code 2.

YAML is parsed and composed by libyaml (the fast path) and constructed by PyYAML's
safe constructor, tightened so that the data is exactly what canonical JSON (the
digest's encoding) can carry, and nothing a hostile file can make expensive:

- a **duplicate key** in a mapping is refused (YAML would silently keep the last one,
  even for ``id`` or ``alpha``); keys brought in by a merge (``<<: *base``) may be
  overridden, as YAML specifies. A key must be a **string**, as in JSON (YAML 1.1 reads
  ``on:``, ``no:``, ``1:`` or ``null:`` as a boolean, a number or null: quote them);
- **NaN and infinity** (``.nan``, ``.inf``, ``-.inf``, or a float that overflows) are
  refused, and so are **integers** beyond +-(2**53 - 1), which canonical JSON cannot
  represent exactly;
- **tags**: only the plain YAML types are allowed (strings, integers, floats, booleans,
  null, sequences, mappings). ``!!binary``, ``!!set``, ``!!omap``, ``!!pairs``,
  ``!!python/...`` and custom ``!tags`` are refused. **Timestamps** are kept as the
  text that was written: ``2024-01-01`` is the string ``"2024-01-01"`` (a value of a
  registration or experiment is never a date object, so what is digested and what a
  tool receives is the text in the file). An explicit ``!!int``, ``!!float`` or
  ``!!bool`` on a value that is not one is refused;
- **aliases** are bounded: at most :data:`~prereg.core.safeio.MAX_YAML_ALIASES` aliases of
  lists and mappings (an alias of a scalar adds one node, like the text it replaces),
  adding at most :data:`~prereg.core.safeio.MAX_ALIAS_EXPANSION` nodes once expanded
  (the "billion laughs" file is refused in milliseconds), no recursive alias (a node
  that contains itself), and no nesting deeper than
  :data:`~prereg.core.safeio.MAX_DEPTH`. The checks run on the composed node graph
  (shared nodes counted once, so checking is linear in the file) before anything is
  constructed.

Every message is escaped (:func:`prereg.core.safeio.escaped`): an echoed key or value
never carries a control character to the terminal.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from functools import cached_property
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from prereg.core.errors import BadInput
from prereg.core.safeio import (
    MAX_ALIAS_EXPANSION,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    MAX_YAML_ALIASES,
    escaped,
)

try:
    from yaml import CSafeLoader as _Base
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    from yaml import SafeLoader as _Base  # type: ignore[assignment]

M = TypeVar("M", bound=BaseModel)


class FieldRuleError(ValueError):
    """Raise from a model validator to attach a cross-field rule to one field.

    Pydantic reports model-level errors at the model's location; this carries
    the dotted path of the field the rule is about, so the message names it.
    """

    def __init__(self, field: str, message: str) -> None:
        parts = field.replace("[", ".").replace("]", "").split(".")
        self.field_path: tuple[int | str, ...] = tuple(int(p) if p.isdigit() else p for p in parts)
        super().__init__(message)


class Located:
    """A parsed YAML document; source positions of its nodes on demand.

    The data comes from libyaml (fast); the node tree with line and column
    marks is composed again (by libyaml, whose marks are the pure-Python parser's)
    only when an error needs it.
    """

    def __init__(self, data: Any, text: str, filename: str) -> None:
        self.data = data
        self.text = text
        self.filename = filename

    @cached_property
    def root(self) -> yaml.Node | None:
        return yaml.compose(self.text, Loader=_Base)

    def line_of(self, loc: Sequence[int | str]) -> tuple[int, int] | None:
        """1-based (line, column) of the node at ``loc``, or of its nearest parent."""
        node = self.root
        best = None
        for part in loc:
            if node is None:
                break
            best = node
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for key, value in node.value:
                    if getattr(key, "value", None) == part:
                        nxt = value
                        best = key
                        break
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                node = node.value[part] if 0 <= part < len(node.value) else None
            else:
                node = None
        target = node if node is not None else best
        if target is None:
            return None
        mark = target.start_mark
        return mark.line + 1, mark.column + 1


# ---- the guarded loader ---------------------------------------------------------------------

_YAML = "tag:yaml.org,2002:"
_MERGE = _YAML + "merge"
_STR = _YAML + "str"
_PLAIN = "only plain YAML is accepted: strings, numbers, booleans, null, lists and mappings"


class _Refused(Exception):
    """A node the guarded loader refuses.

    ``node`` gives the position; the field is the path to ``at`` (a parent and the key
    or index under it, for an alias or a duplicate key) or else to ``node``, found only
    when the error is reported.
    """

    def __init__(
        self, node: yaml.Node, message: str, at: tuple[yaml.Node, int | str] | None = None
    ) -> None:
        self.node = node
        self.message = message
        self.at = at
        super().__init__(message)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_YAML) :] if tag.startswith(_YAML) else tag


class _GuardedLoader(_Base):
    """libyaml's parser and composer; the safe constructor, tightened (module docstring)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = node.value if isinstance(node.value, str) else ""  # "": !!int on a collection
        if len(text.replace("_", "")) > 80:  # far beyond 2**53 in any base; int() is slow
            raise _Refused(node, _range_message(text))
        try:
            value = super().construct_yaml_int(node)
        except (ValueError, IndexError):
            raise _Refused(node, f"{text!r} is not an integer (tagged !!int)") from None
        if abs(value) > MAX_SAFE_INTEGER:
            raise _Refused(node, _range_message(text))
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        text = str(node.value)
        try:
            value = super().construct_yaml_float(node)
        except (ValueError, IndexError):
            raise _Refused(node, f"{text!r} is not a number (tagged !!float)") from None
        if not math.isfinite(value):
            raise _Refused(
                node,
                f"{text!r} is not a finite number: NaN and infinity have no JSON "
                "representation (canonical JSON refuses them)",
            )
        return value

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        try:
            return super().construct_yaml_bool(node)
        except (KeyError, AttributeError):
            raise _Refused(node, f"{str(node.value)!r} is not a boolean (tagged !!bool)") from None

    def construct_text(self, node: yaml.ScalarNode) -> str:
        """A timestamp (or a stray ``=`` / ``<<``) as the text written in the file."""
        return str(self.construct_scalar(node))

    def refuse_tag(self, node: yaml.Node) -> Any:
        """Any tag but plain YAML's (the constructors of those are the only ones kept)."""
        raise _Refused(node, f"the YAML tag '{_short_tag(node.tag)}' is refused: {_PLAIN}")


for _tag, _constructor in (
    ("int", _GuardedLoader.construct_yaml_int),
    ("float", _GuardedLoader.construct_yaml_float),
    ("bool", _GuardedLoader.construct_yaml_bool),
    ("timestamp", _GuardedLoader.construct_text),
    ("value", _GuardedLoader.construct_text),
    ("merge", _GuardedLoader.construct_text),
    ("binary", _GuardedLoader.refuse_tag),
    ("set", _GuardedLoader.refuse_tag),
    ("omap", _GuardedLoader.refuse_tag),
    ("pairs", _GuardedLoader.refuse_tag),
):
    _GuardedLoader.add_constructor(_YAML + _tag, _constructor)
_GuardedLoader.add_constructor(None, _GuardedLoader.refuse_tag)  # any other tag


def _range_message(text: str) -> str:
    shown = text if len(text) <= 24 else text[:21] + "..."
    return (
        f"integer {shown} is outside the range canonical JSON represents exactly "
        f"(|n| <= 2**53 - 1 = {MAX_SAFE_INTEGER})"
    )


def _check_keys(loader: _GuardedLoader, node: yaml.MappingNode) -> None:
    """String keys, none twice among a mapping's own keys (merged keys may be overridden)."""
    pairs = node.value
    if all(k.tag == _STR and type(k) is yaml.ScalarNode for k, _ in pairs):  # the usual case
        if len({k.value for k, _ in pairs}) == len(pairs):
            return
    keys = [
        (loader.construct_object(k), k)  # cached: each key is constructed once
        for k, _ in node.value
        if k.tag != _MERGE
    ]
    if all(type(key) is str for key, _ in keys):
        if len({key for key, _ in keys}) == len(keys):
            return
    first: dict[Any, yaml.Node] = {}
    for key, key_node in keys:
        if type(key) is not str:
            raise _Refused(
                key_node,
                f"a mapping key must be a string, got {_kind(key)} (JSON keys are "
                "strings; quote the key in YAML)",
                (node, _label(key_node)),
            )
        earlier = first.setdefault(key, key_node)
        if earlier is not key_node:
            raise _Refused(
                key_node,
                f"duplicate key {key!r} (first at line {earlier.start_mark.line + 1}): a key "
                "may appear once in a mapping (YAML would silently keep the last value)",
                (node, _label(key_node)),
            )


def _kind(value: Any) -> str:
    """``null``, ``the boolean True``, ``the integer 1``, ``a list``, ..."""
    if value is None:
        return "null"
    names = {bool: "the boolean", int: "the integer", float: "the number"}
    if type(value) in names:
        return f"{names[type(value)]} {value!r}"
    return "a list" if isinstance(value, list) else "a mapping"


#: A collection reached under ``parent`` (None for the root) at ``part``: an index, or
#: the key node of a mapping entry (its label is made only for a message).
_Site = tuple[yaml.Node, yaml.Node | None, "int | yaml.Node"]


def _collections(node: yaml.Node) -> list[_Site]:
    """The collections directly under ``node`` (scalars need no checks of structure)."""
    if type(node) is yaml.MappingNode:
        out: list[_Site] = []
        for k, v in node.value:
            if type(k) is not yaml.ScalarNode:
                out.append((k, node, k))
            if type(v) is not yaml.ScalarNode:
                out.append((v, node, k))
        return out
    return [(v, node, i) for i, v in enumerate(node.value) if type(v) is not yaml.ScalarNode]


def _check_graph(loader: _GuardedLoader, root: yaml.Node) -> None:
    """Duplicate keys, depth, aliases and recursion of the composed graph, before construction.

    A level-by-level pass over the distinct collections checks duplicate keys and depth
    and finds the aliases (a collection reached a second time: libyaml composes an alias
    as the anchored node itself). Only a document with aliases of collections needs the
    second pass (:func:`_check_aliases`). Both are linear in the number of distinct
    nodes. Tags are checked by the constructors (each refused tag has one that refuses),
    and an alias of a scalar costs no more than the scalar it repeats.
    """
    if type(root) is yaml.ScalarNode:
        return
    seen: set[int] = set()
    hits: list[tuple[_Site, int]] = []
    level: list[_Site] = [(root, None, 0)]
    depth = 0
    while level:
        depth += 1
        following: list[_Site] = []
        for site in level:
            node = site[0]
            if id(node) in seen:
                hits.append((site, depth))
                continue
            seen.add(id(node))
            if depth > MAX_DEPTH:
                raise _Refused(node, f"nested more than {MAX_DEPTH} levels deep", _at(site))
            if type(node) is yaml.MappingNode:
                _check_keys(loader, node)
            following.extend(_collections(node))
        level = following
    if hits:
        _check_aliases(hits)


def _where(site: _Site) -> yaml.Node:
    """The node whose mark locates a site: an alias has none of its own (libyaml composes
    it as the anchored node), so its key, or the collection that holds it."""
    node, parent, part = site
    if parent is None:
        return node
    return parent if isinstance(part, int) else part


def _at(site: _Site) -> tuple[yaml.Node, int | str] | None:
    _, parent, part = site
    if parent is None:
        return None
    return parent, part if isinstance(part, int) else _label(part)


def _label(key: yaml.Node) -> str:
    return str(key.value) if type(key) is yaml.ScalarNode else "?"


def _check_aliases(hits: list[tuple[_Site, int]]) -> None:
    """At most so many aliases, adding at most so many nodes; no recursion; depth."""
    if len(hits) > MAX_YAML_ALIASES:
        site = hits[MAX_YAML_ALIASES][0]
        raise _Refused(_where(site), f"more than {MAX_YAML_ALIASES:,} YAML aliases", _at(site))
    memo: dict[int, tuple[int, int]] = {}
    added = 0
    for site, depth in hits:
        size, height = _expanded(site, memo, set())
        added += size
        if added > MAX_ALIAS_EXPANSION:
            raise _Refused(
                _where(site),
                f"YAML aliases expand this document by more than {MAX_ALIAS_EXPANSION:,} "
                "nodes (an alias bomb?)",
                _at(site),
            )
        if depth + height - 1 > MAX_DEPTH:
            raise _Refused(
                _where(site),
                f"nested more than {MAX_DEPTH} levels deep (through an alias)",
                _at(site),
            )


def _expanded(site: _Site, memo: dict[int, tuple[int, int]], active: set[int]) -> tuple[int, int]:
    """(nodes, collection levels) of a collection with every alias expanded; memoised.

    Recursion stops after :data:`MAX_DEPTH` levels (deeper is refused anyway).
    """
    node = site[0]
    known = memo.get(id(node))
    if known is not None:
        return known
    if id(node) in active:
        raise _Refused(
            _where(site), "a recursive alias: the anchored node contains itself", _at(site)
        )
    if len(active) > MAX_DEPTH:
        raise _Refused(
            _where(site), f"nested more than {MAX_DEPTH} levels deep (through an alias)", _at(site)
        )
    active.add(id(node))
    children = _collections(node)
    entries = len(node.value) * (2 if type(node) is yaml.MappingNode else 1)
    size, height = 1 + entries - len(children), 1  # this node and its scalars
    for child in children:
        child_size, child_height = _expanded(child, memo, active)
        size += child_size
        height = max(height, child_height + 1)
        if size > MAX_ALIAS_EXPANSION:
            break  # the caller refuses it; the exact figure does not matter
    active.discard(id(node))
    memo[id(node)] = (size, height)
    return size, height


def _children(node: yaml.Node) -> list[tuple[int | str, yaml.Node]]:
    if type(node) is yaml.MappingNode:
        return [(_label(k), n) for k, v in node.value for n in (k, v)]
    if type(node) is yaml.SequenceNode:
        return list(enumerate(node.value))
    return []


def _path_to(root: yaml.Node, target: yaml.Node) -> tuple[int | str, ...]:
    """The first path from ``root`` to ``target`` (each distinct node visited once)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[int | str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend((child, (*path, part)) for part, child in reversed(_children(node)))
    return ()


def _load_guarded(text: str, filename: str) -> Any:
    loader = _GuardedLoader(text)
    root: yaml.Node | None = None
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_graph(loader, root)
        return loader.construct_document(root)
    except _Refused as exc:
        if root is None:
            path: tuple[int | str, ...] = ()
        elif exc.at is not None:
            path = (*_path_to(root, exc.at[0]), exc.at[1])
        else:
            path = _path_to(root, exc.node)
        mark = exc.node.start_mark
        field = format_loc(path)
        if len(path) > 12:  # a depth refusal: the path itself is as deep as the document
            field = f"{format_loc(path[:6])}...({len(path) - 6} more levels)"
        raise escaped(
            BadInput(exc.message, file=f"{filename}:{mark.line + 1}:{mark.column + 1}", field=field)
        ) from None
    except yaml.YAMLError as exc:
        raise _malformed(text, filename, exc) from None
    finally:
        loader.dispose()


def _malformed(text: str, filename: str, error: yaml.YAMLError) -> BadInput:
    """A YAML error as a BadInput naming the file, line and column.

    libyaml's marks are the pure-Python parser's (its messages are terser); the
    pure-Python parser is not run again: it is quadratic in the nesting of flow
    collections, so a hostile file would make the error itself slow.
    """
    if isinstance(error, yaml.reader.ReaderError):
        position = error.position
        if _Base is not yaml.SafeLoader:  # libyaml counts the bytes of the UTF-8 text
            position = len(text.encode("utf-8")[:position].decode("utf-8", "ignore"))
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        return escaped(
            BadInput(
                f"malformed YAML: character #x{error.character:04x} is not allowed "
                f"({error.reason})",
                file=f"{filename}:{line}:{column}",
            )
        )
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        where = f"{filename}:{mark.line + 1}:{mark.column + 1}" if mark else filename
        problem = error.problem or error.context or "invalid YAML"
        if mark is not None and problem.startswith("found character"):
            lines = text.split("\n", mark.line + 1)
            found = (
                lines[mark.line][mark.column : mark.column + 1] if mark.line < len(lines) else ""
            )
            problem += f" ({found!r})" if found else ""
        return escaped(BadInput(f"malformed YAML: {problem}", file=where))
    return escaped(BadInput(f"malformed YAML: {error}", file=filename))


def load_yaml(text: str | bytes, filename: str) -> Any:
    """The data of one YAML document, guarded (module docstring); BadInput on any problem."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise escaped(BadInput(f"not UTF-8 text ({exc})", file=filename)) from None
    return _load_guarded(text, filename)


def parse_yaml(text: str | bytes, filename: str) -> Located:
    """Parse one YAML document; a syntax error names the file, line and column."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise escaped(BadInput(f"not UTF-8 text ({exc})", file=filename)) from None
    return Located(data=_load_guarded(text, filename), text=text, filename=filename)


def _field_names(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """Known field names of the (nested) model that owns ``loc[-1]``."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        annotation = fields[part].annotation
        current = _unwrap_model(annotation)
        if current is None:
            return []
    fields = getattr(current, "model_fields", None)
    return list(fields) if fields else []


def _unwrap_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _unwrap_model(arg)
        if found is not None:
            return found
    return None


def format_loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(document)"


def validation_problems(
    exc: ValidationError, model: type[BaseModel], located: Located | None
) -> list[tuple[str, str]]:
    """(where, message) pairs, one per pydantic error, with suggestions."""
    problems = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, FieldRuleError):
            loc = loc + ctx_error.field_path
        # pydantic adds the tag of tagged unions and validator names to loc; drop non-fields
        field = format_loc(loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            known = _field_names(model, loc)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) if loc else []
            msg = f"unknown field '{loc[-1]}'"
            if close:
                msg += f" (did you mean '{close[0]}'?)"
            elif known:
                msg += f" (known fields: {', '.join(known)})"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        elif "input" in err and err["type"] != "assertion_error":
            shown = repr(err["input"])
            if len(shown) > 60:
                shown = shown[:57] + "..."
            msg = f"{msg} (got {shown})"
        where = located.filename if located else model.__name__
        if located is not None:
            pos = located.line_of(loc)
            if pos:
                where = f"{located.filename}:{pos[0]}:{pos[1]}"
        problems.append((where, f"{field}: {msg}"))
    return problems


def load_model(model: type[M], text: str | bytes, filename: str) -> M:
    """Parse YAML and validate it into ``model``; any problem is a BadInput."""
    located = parse_yaml(text, filename)
    if located.data is None:
        raise escaped(BadInput("the file is empty; expected a YAML mapping", file=filename))
    if not isinstance(located.data, dict):
        kind = type(located.data).__name__
        raise escaped(
            BadInput(f"expected a YAML mapping at the top level, got {kind}", file=filename)
        )
    return validate(model, located.data, located)


def validate(
    model: type[M], data: Any, located: Located | None = None, filename: str | None = None
) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc, model, located)
        where, first = problems[0]
        field, _, message = first.partition(": ")
        raise escaped(
            BadInput(
                message,
                file=where if located else (filename or where),
                field=field,
                details=[f"{w}: {m}" for w, m in problems[1:]],
            )
        ) from None
