"""A provider's JSON reply read as plain data, exactly as the SDK's typed parse would hand it on.

The SDK's typed parse (``construct_type`` over the response type, then the driver's
``model_dump(mode="json", exclude_none=True)`` of each content block) was about a tenth of the
provider path's CPU (issue 15). The drivers read only a few plain fields of a reply, so for the
common shapes (text, a function call, usage) they take the decoded JSON instead, converted to
what the typed path yields: a block's ``None`` fields dropped, its declared fields in the SDK
model's order, then nothing else. Anything outside those shapes (an unknown block type, a
non-empty citation list, an unknown field with a value, a NaN or infinity, a missing required
field) is not guessed at: the whole reply goes through the SDK's own typed parse.
``tests/providers/test_prov_plain.py`` checks that both roads give the driver the same turn
and the same stored blocks, on the shapes the drivers read and on the ones that fall back.

A :class:`Shape` is derived from the SDK's model class itself (field names, aliases, order,
which are required), so a new SDK field without a converter here makes that reply fall back
instead of being dropped or passed through.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

#: a converter's answer when the value is not one the fast road reproduces
NO: Any = object()

Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class Shape:
    """One SDK model as plain data: its wire field names in declaration order, the required
    ones, and a converter for each field the fast road handles (others must be ``None``)."""

    order: tuple[str, ...]
    required: frozenset[str]
    convert: Mapping[str, Convert]


def shape(model: Any, **convert: Convert) -> Shape:
    """The :class:`Shape` of the pydantic ``model`` class (wire names: aliases where set)."""
    order = tuple(f.alias or name for name, f in model.model_fields.items())
    required = frozenset(
        f.alias or name for name, f in model.model_fields.items() if f.is_required()
    )
    unknown = set(convert) - set(order)
    if unknown:
        raise ValueError(f"{model.__name__} declares no field {sorted(unknown)}")
    return Shape(order, required, convert)


def verbatim(*types: type) -> Convert:
    """A field kept as decoded when it has one of ``types`` (what ``model_dump`` gives back
    for a scalar field or a ``Dict[str, object]`` one)."""

    def convert(value: Any) -> Any:
        return value if isinstance(value, types) else NO

    return convert


def empty_list(value: Any) -> Any:
    """A list-of-models field (citations, annotations, logprobs): only an empty one is plain."""
    return [] if value == [] and isinstance(value, list) else NO


def each(by_type: Mapping[str, Shape]) -> Convert:
    """A list of models told apart by their ``type`` (content blocks, output items)."""

    def convert(value: Any) -> Any:
        if not isinstance(value, list):
            return NO
        out = []
        for item in value:
            kind = item.get("type") if isinstance(item, dict) else None
            found = by_type.get(kind) if isinstance(kind, str) else None
            plain_item = NO if found is None else plain(item, found)
            if plain_item is NO:
                return NO
            out.append(plain_item)
        return out

    return convert


def nested(inner: Shape) -> Convert:
    """A field holding one model."""

    def convert(value: Any) -> Any:
        return plain(value, inner) if isinstance(value, dict) else NO

    return convert


def plain(value: Mapping[str, Any], form: Shape) -> Any:
    """``value`` as ``model_dump(mode="json", exclude_none=True)`` of the SDK's model built from
    it would give it, or :data:`NO` when that is not certain."""
    missing = form.required - value.keys()
    if missing:
        return NO
    out: dict[str, Any] = {}
    for key in form.order:
        field = value.get(key)
        if field is None:
            continue
        convert = form.convert.get(key)
        converted = NO if convert is None else convert(field)
        if converted is NO:
            return NO
        out[key] = converted
    for key, field in value.items():
        if field is not None and key not in out:
            return NO  # a field the SDK does not declare, with a value: typed road
    return out


def _refuse(constant: str) -> Any:
    raise ValueError(f"JSON constant {constant}")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: infinite once decoded
        raise ValueError(f"JSON number {text} is not finite")
    return value


def decode(raw: bytes) -> Any:
    """The reply's JSON as the SDK decodes it, except that NaN and infinities (which its
    ``mode="json"`` dump would turn into null) are refused: such a reply takes the typed road."""
    return json.loads(raw, parse_constant=_refuse, parse_float=_finite)


def plain_dict(value: Any) -> bool:
    """A sub-object the drivers read field by field (usage, its details, an error): the same
    values whether it is a dict or the model the SDK would build from it."""
    return value is None or isinstance(value, dict)


def _details(value: Any, *names: str) -> bool:
    return plain_dict(value) and (value is None or all(plain_dict(value.get(n)) for n in names))


_STR = verbatim(str)


# ---- the three replies the drivers read --------------------------------------------------------


@cache
def _anthropic_blocks() -> Convert:
    from anthropic.types import TextBlock, ToolUseBlock  # lazy: loaded with the SDK

    return each(
        {
            "text": shape(TextBlock, citations=empty_list, text=_STR, type=_STR),
            "tool_use": shape(
                ToolUseBlock,
                id=_STR,
                input=verbatim(dict),
                name=_STR,
                type=_STR,
                toolset_name=_STR,
            ),
        }
    )


def anthropic_message(data: dict[str, Any]) -> dict[str, Any] | None:
    """A Messages reply (``Message``) with its content blocks as the driver's typed parse
    dumps them; None when only the SDK can say."""
    blocks = _anthropic_blocks()(data.get("content"))
    if blocks is NO or not _details(data.get("usage"), "output_tokens_details"):
        return None
    return {**data, "content": blocks}


@cache
def _openai_items() -> Convert:
    from openai.types.responses import (  # lazy: loaded with the SDK
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputRefusal,
        ResponseOutputText,
    )

    parts = {
        "output_text": shape(
            ResponseOutputText, annotations=empty_list, text=_STR, type=_STR, logprobs=empty_list
        ),
        "refusal": shape(ResponseOutputRefusal, refusal=_STR, type=_STR),
    }
    call = {"arguments": _STR, "call_id": _STR, "name": _STR, "type": _STR, "id": _STR}
    call |= {"async": verbatim(bool), "namespace": _STR, "status": _STR}
    return each(
        {
            "function_call": shape(ResponseFunctionToolCall, **call),
            "message": shape(
                ResponseOutputMessage,
                id=_STR,
                content=each(parts),
                role=_STR,
                status=_STR,
                type=_STR,
                phase=_STR,
            ),
        }
    )


def openai_response(data: dict[str, Any]) -> dict[str, Any] | None:
    """A Responses reply (``Response``) with its output items as the driver's typed parse
    dumps them; None when only the SDK can say."""
    items = _openai_items()(data.get("output"))
    if (
        items is NO
        or not _details(data.get("usage"), "input_tokens_details", "output_tokens_details")
        or not plain_dict(data.get("error"))
        or not plain_dict(data.get("incomplete_details"))
    ):
        return None
    return {**data, "output": items}


@cache
def _chat_message() -> Shape:
    from openai.types.chat import ChatCompletionMessage  # lazy: loaded with the SDK
    from openai.types.chat.chat_completion_message_function_tool_call import (  # lazy: SDK
        ChatCompletionMessageFunctionToolCall,
        Function,
    )

    function = shape(Function, arguments=_STR, name=_STR)
    call = shape(
        ChatCompletionMessageFunctionToolCall, id=_STR, function=nested(function), type=_STR
    )
    return shape(
        ChatCompletionMessage,
        content=_STR,
        refusal=_STR,
        role=_STR,
        annotations=empty_list,
        tool_calls=each({"function": call}),
    )


def chat_completion(data: dict[str, Any]) -> dict[str, Any] | None:
    """A Chat Completions reply (``ChatCompletion``) with its first choice's message as the
    driver's typed parse dumps it (the driver reads no other choice); None when only the SDK
    can say."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not _details(
        data.get("usage"), "prompt_tokens_details", "completion_tokens_details"
    ):
        return None
    if not choices:
        return data
    first = choices[0]
    if not isinstance(first, dict):
        return None
    message = first.get("message")
    message = plain(message, _chat_message()) if isinstance(message, dict) else NO
    if message is NO:
        return None
    return {**data, "choices": [{**first, "message": message}, *choices[1:]]}
