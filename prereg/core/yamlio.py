"""YAML and model loading with errors that name the file, the field and the line.

Shared by every package that reads user-written files (registrations,
experiments), so that bad input always reads the same way: ``file:line:col:
field: what was expected`` and exit code 2.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from functools import cached_property
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from prereg.core.errors import BadInput

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
    marks is composed by the pure-Python parser only when an error needs it.
    """

    def __init__(self, data: Any, text: str, filename: str) -> None:
        self.data = data
        self.text = text
        self.filename = filename

    @cached_property
    def root(self) -> yaml.Node | None:
        return yaml.compose(self.text, Loader=yaml.SafeLoader)

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


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str | bytes, filename: str) -> Located:
    """Parse one YAML document; a syntax error names the file, line and column."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInput(f"not UTF-8 text ({exc})", file=filename) from None
    try:
        data = yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        try:  # the pure-Python parser gives the most precise marks
            yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"{filename}:{mark.line + 1}:{mark.column + 1}" if mark else filename
            problem = exc.problem or exc.context or "invalid YAML"
            raise BadInput(f"malformed YAML: {problem}", file=where) from None
        except yaml.YAMLError as exc:
            raise BadInput(f"malformed YAML: {exc}", file=filename) from None
        raise BadInput("malformed YAML", file=filename) from None
    return Located(data=data, text=text, filename=filename)


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
        raise BadInput("the file is empty; expected a YAML mapping", file=filename)
    if not isinstance(located.data, dict):
        kind = type(located.data).__name__
        raise BadInput(f"expected a YAML mapping at the top level, got {kind}", file=filename)
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
        raise BadInput(
            message,
            file=where if located else (filename or where),
            field=field,
            details=[f"{w}: {m}" for w, m in problems[1:]],
        ) from None
