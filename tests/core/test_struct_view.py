"""A struct view decodes what the pydantic model validates, and refuses no less.

The reference is pydantic itself: every body is validated by a partial model of the same
fields (made with ``create_model`` from the model's own field declarations, the way a
model validates a subset of its fields), and the view must give the same values where
pydantic accepts and refuse wherever pydantic refuses.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from prereg.core.struct_view import field_decoder, struct_view
from prereg.runners.record import RunRecord, TraceEvent


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    low: int = Field(0, ge=0, le=3)
    high: int | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Inner:
        if self.high is not None and self.high < self.low:
            raise ValueError("high below low")
        return self


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=2, max_length=5)
    code: str = Field(pattern=r"^[a-f]{3}$")
    share: float | None = Field(None, gt=0, lt=1)
    kind: Literal["a", "b"] = "a"
    flag: bool = False
    tags: list[str] = Field(default_factory=list)
    scores: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    inner: Inner = Field(default_factory=Inner)
    maybe: Inner | None = None
    anything: Any = None
    unread: int = 0


READ = ("name", "code", "share", "kind", "flag", "tags", "scores", "inner", "maybe", "anything")


def _reference(model: type[BaseModel], names: tuple[str, ...]) -> type[BaseModel]:
    declared = model.model_fields
    return create_model(  # type: ignore[call-overload, no-any-return]
        "Reference",
        __config__=ConfigDict(extra="ignore"),
        **{n: (declared[n].annotation, declared[n]) for n in names},
    )


OUTER_VIEW = struct_view(Outer, READ)
OUTER_REFERENCE = _reference(Outer, READ)
#: the same view with some fields kept as their JSON text, decoded apart afterwards
RAW = ("inner", "maybe", "scores")
RAW_VIEW = struct_view(Outer, READ, raw=RAW)
FIELD_DECODERS = {name: field_decoder(Outer, name) for name in RAW}


def _through_raw(body: str) -> dict[str, Any]:
    """``body`` read by :data:`RAW_VIEW`, then each raw field's text by its field decoder."""
    view = msgspec.structs.asdict(RAW_VIEW.decode(body))
    for name in RAW:
        view[name] = FIELD_DECODERS[name].decode(view[name])
    return msgspec.to_builtins(view)  # type: ignore[no-any-return]


VALID = {"name": "ab", "code": "abc"}


def _agree(body: str) -> None:
    """The view and the reference agree on ``body``: the same values, or the view refuses
    (it may refuse more: never accept what the reference refuses), and the view reads
    the model's own dump of what the reference accepted."""
    try:
        validated = OUTER_REFERENCE.model_validate_json(body)
    except ValidationError:
        with pytest.raises(msgspec.ValidationError):
            OUTER_VIEW.decode(body)
        return
    expected = validated.model_dump(mode="json")
    try:
        assert msgspec.to_builtins(OUTER_VIEW.decode(body)) == expected
    except msgspec.ValidationError:
        pass  # stricter than pydantic's lax mode ("3" for an int): the reader falls back
    # what a store holds: the validated model's own dump, always read, to the same values
    assert msgspec.to_builtins(OUTER_VIEW.decode(validated.model_dump_json())) == expected


def _agree_raw(body: str) -> None:
    """Raw fields decoded apart give what the view gives, and refuse where it refuses."""
    try:
        direct = msgspec.to_builtins(OUTER_VIEW.decode(body))
    except msgspec.ValidationError:
        with pytest.raises(msgspec.ValidationError):
            _through_raw(body)
        return
    assert _through_raw(body) == direct


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"unread": "not read at all"},
        {"name": "a"},  # too short
        {"name": "abcdef"},  # too long
        {"name": 12},
        {"code": "abcd"},
        {"code": "abc\n"},  # Python's $ would accept the final newline; pydantic does not
        {"code": "ABC"},
        {"share": 0},
        {"share": 1.0},
        {"share": 0.5},
        {"share": 1},
        {"share": "0.5"},
        {"kind": "c"},
        {"kind": "b"},
        {"flag": 1},
        {"flag": "true"},
        {"flag": True},
        {"tags": ["x", 2]},
        {"tags": "x"},
        {"scores": {"a": -1}},
        {"scores": {"a": 2, "b": 0}},
        {"inner": {"low": 4}},
        {"inner": {"low": 2, "high": 1}},  # the nested model's own check
        {"inner": {"low": 1, "high": 2}},
        {"inner": {"low": 1, "extra": 2}},  # nested models refuse unknown fields
        {"inner": {"low": 1.0}},
        {"inner": {"low": True}},
        {"maybe": None},
        {"maybe": {"low": 3, "high": 0}},
        {"maybe": {"high": 5}},
        {"anything": {"x": [1, 2.5, None, "s"]}},
    ],
)
def test_the_view_agrees_with_pydantic(change: dict[str, Any]) -> None:
    _agree(json.dumps({**VALID, **change}))
    _agree_raw(json.dumps({**VALID, **change}))


def test_a_raw_field_is_its_json_text_or_its_defaults() -> None:
    body = '{"name": "ab", "code": "abc", "inner": {"low":  1}, "scores": {}}'
    view = RAW_VIEW.decode(body)
    assert bytes(view.inner) == b'{"low":  1}' and bytes(view.scores) == b"{}"
    missing = RAW_VIEW.decode(json.dumps(VALID))
    assert json.loads(bytes(missing.inner)) == Inner().model_dump(mode="json")
    assert bytes(missing.maybe) == b"null" and bytes(missing.scores) == b"{}"
    with pytest.raises(msgspec.ValidationError):  # the nested model's own check, applied
        FIELD_DECODERS["inner"].decode(b'{"low": 2, "high": 1}')


def test_required_fields_and_defaults() -> None:
    _agree(json.dumps({"name": "ab"}))  # code is required
    view = OUTER_VIEW.decode(json.dumps(VALID))
    assert (view.kind, view.flag, view.tags, view.inner.low, view.maybe) == (
        "a",
        False,
        [],
        0,
        None,
    )
    assert not hasattr(view, "unread")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            **{name: _JSON for name in READ},
            "name": st.sampled_from(["ab", "abcdef", "a", 3]),
            "code": st.sampled_from(["abc", "abcd", "abc\n", "ABC", None]),
            "inner": st.fixed_dictionaries(
                {}, optional={"low": _JSON | st.integers(-1, 4), "high": _JSON | st.integers(-1, 4)}
            ),
        },
    )
)
def test_the_view_never_accepts_what_pydantic_refuses(body: dict[str, Any]) -> None:
    _agree(json.dumps(body))
    _agree_raw(json.dumps(body))


def test_what_has_no_view_is_refused_when_the_view_is_made() -> None:
    class Odd(BaseModel):
        when: set[int] = Field(default_factory=set)

    with pytest.raises(TypeError, match="Odd.when"):
        struct_view(Odd, ("when",))

    class Checked(BaseModel):
        value: int = 0

        @model_validator(mode="before")
        @classmethod
        def _before(cls, data: Any) -> Any:
            return data

    class Holder(BaseModel):
        checked: Checked = Field(default_factory=Checked)

    with pytest.raises(TypeError, match="_before"):
        struct_view(Holder, ("checked",))

    class Aliased(BaseModel):
        value: int = Field(0, alias="Value")

    with pytest.raises(TypeError, match="aliased"):
        struct_view(Aliased, ("value",))


def test_the_run_record_view_reads_the_trace_events_it_names() -> None:
    view = struct_view(RunRecord, ("arm",), trace=(TraceEvent, ("kind", "tool")))
    body = {
        "arm": "a",
        "trace": [{"kind": "tool_call", "turn": 0, "tool": "t", "result": {"big": "x" * 100}}],
    }
    decoded = view.decode(json.dumps(body))
    assert decoded.trace[0].tool == "t" and not hasattr(decoded.trace[0], "result")
    with pytest.raises(msgspec.ValidationError):
        view.decode(json.dumps({**body, "trace": [{"kind": "not-a-kind", "turn": 0}]}))
    assert view.decode(json.dumps({"arm": "a"})).trace == []
