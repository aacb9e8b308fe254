"""A fast typed reader for some fields of a pydantic model's JSON: a msgspec Struct made
from the model's own declarations.

Reading tens of thousands of stored records for a few of their fields, pydantic's
``model_validate_json`` of a partial model costs about 50 us a 4 KB body (it builds the
whole document, then a model per nested object); msgspec decodes the declared fields
straight from the bytes, skipping the rest, in about a sixth of that. The Struct is not a
second schema: :func:`struct_view` derives it from the model's fields, each with its type,
its constraints (``ge``, ``le``, ``gt``, ``lt``, ``min_length``, ``max_length``,
``pattern``) and its default, nested models as nested Structs that refuse unknown
fields as the models do (``extra="forbid"``). Both libraries are strict in the same way
here, or msgspec is the stricter (pydantic's lax mode takes ``"3"`` or ``3.0`` for an
integer, msgspec neither): a view refuses no less than the model, so a reader that falls
back to the model where a view refuses gets the model's answer. Patterns are searched as
pydantic's regex engine does (a final ``$`` is the end of the text).

Validators: a nested model's own "after" model validators run on its Struct (a
funnel's nesting rule, say); the viewed model's own validators do not (its cross-field
rules need fields the view does not read). A reader uses a view only for bytes a full
validation accepted before (a run store's links the registry's anchor pins), so those
rules held then. A field type, constraint or validator the translation does not know
(a field or "before" validator, an alias) raises TypeError when the view is made (at
import), never silently passes.
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import msgspec
from pydantic import BaseModel
from pydantic.fields import FieldInfo

#: constraint metadata (annotated-types) -> msgspec.Meta keyword
_BOUNDS: dict[type, str] = {
    annotated_types.Ge: "ge",
    annotated_types.Le: "le",
    annotated_types.Gt: "gt",
    annotated_types.Lt: "lt",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}


#: a pattern's final ``$``: pydantic's (Rust) regex reads it as the end of the text,
#: Python's re (msgspec's) also as just before a final newline; ``\Z`` is the former
_END = re.compile(r"(?<!\\)\$\Z")


def _meta(metadata: list[Any], where: str) -> dict[str, Any]:
    """msgspec.Meta keywords for a field's pydantic metadata (TypeError on anything else)."""
    meta: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, FieldInfo):  # ``Annotated[int, Field(ge=0)]``
            meta.update(_meta(list(item.metadata), where))
            continue
        keyword = _BOUNDS.get(type(item))
        if keyword is not None:
            meta[keyword] = getattr(item, keyword)
            continue
        pattern = getattr(item, "pattern", None)
        if type(item).__name__ == "_PydanticGeneralMetadata" and isinstance(pattern, str):
            if set(vars(item)) != {"pattern"}:
                raise TypeError(f"{where}: constraints {vars(item)} have no view")
            meta["pattern"] = _END.sub(r"\\Z", pattern)
            continue
        raise TypeError(f"{where}: constraint {item!r} has no view")
    return meta


def _type(annotation: Any, where: str, structs: dict[type, type]) -> Any:
    """The msgspec type of a pydantic annotation (nested models as Structs)."""
    if annotation is Any or annotation in (str, int, float, bool, type(None)):
        return annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _struct(annotation, tuple(annotation.model_fields), structs, forbid=True)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return annotation
    if origin in (Union, types.UnionType):
        return Union[tuple(_type(a, where, structs) for a in args)]  # noqa: UP007
    if origin is list:
        return list[_type(args[0], where, structs)]  # type: ignore[misc]
    if origin is dict and args[0] is str:
        return dict[str, _type(args[1], where, structs)]  # type: ignore[misc]
    if origin is Annotated:
        return _constrained(_type(args[0], where, structs), _meta(list(args[1:]), where))
    raise TypeError(f"{where}: the type {annotation!r} has no view")


def _constrained(kind: Any, meta: dict[str, Any]) -> Any:
    """``kind`` under the constraints ``meta``: on each member of an optional type but
    null (msgspec constrains a concrete type, as pydantic applies them to a value)."""
    if not meta:
        return kind
    if get_origin(kind) in (Union, types.UnionType):
        members = [m if m is type(None) else _constrained(m, meta) for m in get_args(kind)]
        return Union[tuple(members)]  # noqa: UP007
    return Annotated[kind, msgspec.Meta(**meta)]


def _kind(name: str, info: FieldInfo, owner: str, structs: dict[type, type]) -> Any:
    """The msgspec type of a field: its annotation under its constraints."""
    where = f"{owner}.{name}"
    if info.alias not in (None, name):
        raise TypeError(f"{where}: an aliased field has no view")
    return _constrained(_type(info.annotation, where, structs), _meta(list(info.metadata), where))


def _field(name: str, info: FieldInfo, owner: str, structs: dict[type, type]) -> tuple[Any, ...]:
    kind = _kind(name, info, owner, structs)
    if info.is_required():
        return (name, kind)
    factory = info.default_factory
    default = _default(info)
    if isinstance(default, BaseModel):  # a nested model's default: its Struct
        plain = default.model_dump(mode="json")
        return (name, kind, msgspec.field(default_factory=lambda: msgspec.convert(plain, kind)))
    if factory is not None:
        return (name, kind, msgspec.field(default_factory=factory))  # type: ignore[arg-type]
    return (name, kind, default)


def _checks(model: type[BaseModel]) -> dict[str, Any] | None:
    """A nested model's own "after" validators as its Struct's ``__post_init__`` (msgspec
    reports their ValueError as a ValidationError), so a nested object is checked as the
    model checks it; TypeError for a validator of any other kind."""
    found = model.__pydantic_decorators__
    other = [*found.field_validators, *found.validators, *found.root_validators]
    other += [name for name, d in found.model_validators.items() if d.info.mode != "after"]
    if other:
        raise TypeError(f"{model.__name__}: validator(s) {', '.join(other)} have no view")
    after = [d.func for d in found.model_validators.values()]
    if not after:
        return None

    def __post_init__(self: Any) -> None:
        for check in after:
            check(self)

    return {"__post_init__": __post_init__}


def _struct(
    model: type[BaseModel], names: tuple[str, ...], structs: dict[type, type], *, forbid: bool
) -> type:
    if forbid and model in structs:
        return structs[model]
    fields = model.model_fields
    made = msgspec.defstruct(
        f"{model.__name__}View",
        [_field(name, fields[name], model.__name__, structs) for name in names],
        forbid_unknown_fields=forbid,
        frozen=True,
        kw_only=True,
        namespace=_checks(model) if forbid else None,
    )
    if forbid:
        structs[model] = made
    return made


def _default(info: FieldInfo) -> Any:
    """A field's default value (its default factory's, where it has one)."""
    factory = info.default_factory
    return factory() if factory is not None else info.default  # type: ignore[call-arg]


def _raw_field(name: str, info: FieldInfo) -> tuple[Any, ...]:
    """A field read as its JSON text (:func:`struct_view`'s ``raw``); a missing one as its
    default's JSON text (a nested model's default as its model dumps it)."""
    if info.alias not in (None, name):
        raise TypeError(f"{name}: an aliased field has no view")
    if info.is_required():
        return (name, msgspec.Raw)
    default = _default(info)
    text = (
        default.model_dump_json().encode()
        if isinstance(default, BaseModel)
        else msgspec.json.encode(default)
    )
    return (name, msgspec.Raw, msgspec.field(default_factory=lambda: msgspec.Raw(text)))


def field_decoder(model: type[BaseModel], name: str) -> msgspec.json.Decoder[Any]:
    """A JSON decoder of one field's value as ``model`` declares it (type, constraints,
    nested models as :func:`struct_view` makes them): what reads a ``raw`` field's text."""
    return msgspec.json.Decoder(_kind(name, model.model_fields[name], model.__name__, {}))


def struct_view(
    model: type[BaseModel],
    names: tuple[str, ...],
    *,
    raw: tuple[str, ...] = (),
    **more: tuple[type[BaseModel], tuple[str, ...]],
) -> msgspec.json.Decoder[Any]:
    """A JSON decoder of ``names`` of ``model`` (each as the model declares it; any other
    member of the object skipped, not decoded), raising ``msgspec.ValidationError`` (a
    ValueError) where a value is not of its declared type or constraints.

    ``raw``: fields among ``names`` read as their JSON text (``msgspec.Raw``), not
    decoded here: a reader decodes them with :func:`field_decoder`, once per distinct
    text where many documents repeat the same value (the offer a programme's runs
    share). ``more``: a list field read for some members of its items, ``name=(item
    model, fields)``: a list of that model's ``fields`` only, unknown members skipped (a
    trace whose events are read for a few of their members); empty where the field is
    not required."""
    structs: dict[type, type] = {}
    fields = [
        _raw_field(name, model.model_fields[name])
        if name in raw
        else _field(name, model.model_fields[name], model.__name__, structs)
        for name in names
    ]
    for name, (item_model, item_names) in more.items():
        info = model.model_fields[name]
        item = _struct(item_model, item_names, structs, forbid=False)
        if info.is_required():
            fields.append((name, list[item]))  # type: ignore[valid-type]
        else:
            fields.append((name, list[item], msgspec.field(default_factory=list)))  # type: ignore[valid-type]
    view = msgspec.defstruct(f"{model.__name__}View", fields, frozen=True, kw_only=True)
    return msgspec.json.Decoder(view)
