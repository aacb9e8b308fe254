"""A scripted model for the provider fakes (tests/providers/fakes.py) that plays
ToolBottleneckBench units of the bundled case-escalation and invoice families (raw
encoding, any workflow and menu).

It reads only the wire: the system prompt names its mode, the user prompt the lookup key
and the route, the offered tools their operation, record kind and route (in their
descriptions), and the tool results (the variant's encoded observations) the record
ids, the facts, the next lookup keys and the source labels. It is told, as the request
spells out, the decision and the fact names (:data:`TASKS`). Modes:

- ``correct``: follow the chain (search, read, next key ...), act on the first record, answer;
- ``sloppy``: the same but stop after the first record (fails a longer workflow);
- ``neighbour``: the action goes to a route neighbour of the action tool;
- ``waste``: the first search three times, then the chain, then the search once more;
- ``cut``: the first response is cut at the completion cap.

On a frontier cell it follows a record's ``next_handoff`` (the search its ``query``
names); a read-only request ("This task is read-only") is answered without the action;
records delivered canonically (``{"records": [{id, kind, fields}]}``) read as raw ones,
and a result carrying ``controller_calls`` (the public-handoff controller's calls after
the model's, reading H1) is read as the model's result followed by each of theirs.

A model named ``*sonnet*`` follows the chain even when told ``sloppy`` (a switch). Every
response reports the same usage (:data:`USAGE_IN`, :data:`USAGE_OUT`), so a test knows
the tokens of an episode from its number of turns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.providers.fake_chat import chat_text, chat_tool_calls, chat_usage, tool_call
from tests.providers.fakes import (
    anthropic_text,
    anthropic_tool_use,
    anthropic_usage,
    openai_call_item,
    openai_response,
    openai_text,
    openai_usage,
)

ROUTE = "workspace=northwind region=eu-west collection=support"
FACTS = ("status", "commitment-date", "contact")
USAGE_IN, USAGE_OUT = 300, 40
_DESC = re.compile(r"^(Search|Read|Update) (\S+) records")


@dataclass(frozen=True)
class Task:
    """What the request spells out (the decision, the fact names, whether to act), as
    the simulated policy is told too: the family file's, read by the test."""

    decision: str
    facts: tuple[str, ...]
    act: bool


#: the bundled families the tests use, by the prefix of their request's lookup key
TASKS = {
    "CAS": Task("escalate", FACTS, True),
    "INV": Task("approve", ("amount", "due-date", "vendor-standing"), True),
}


def _mode(system: Any) -> str:
    text = system if isinstance(system, str) else json.dumps(system)
    found = re.search(r"mode: (\w+)", text or "")
    return found.group(1) if found else "correct"


def _tool(tools: list[dict[str, Any]], verb: str, kind: str, route: str, on: bool = True) -> str:
    """The offered tool doing ``verb`` on ``kind`` on the request's route (or off it)."""
    for tool in tools:
        text = tool.get("description", "")
        found = _DESC.match(text)
        if found and found.groups() == (verb, kind) and (route in text) == on:
            return str(tool["name"])
    raise AssertionError(f"no offered tool to {verb} {kind} (on route: {on})")


def decide(
    mode: str, prompt: str, tools: list[dict[str, Any]], results: list[Any]
) -> tuple[str, dict[str, str]] | dict[str, Any]:
    """The next call (tool name, arguments), or the answer document.

    It follows the chain from the request's key: a search gives the id to read; a read
    gives the facts and the lookup keys (``<kind>_ref``) of the next records (``sloppy``
    stops after the first record). ``waste`` repeats the first search twice first and
    calls it once more instead of answering.
    """
    ref = re.search(r"\b([A-Z]{3}-[0-9A-F]{6,})\b", prompt)
    where = re.search(r"route is ([^/\s]+)/([^/\s]+)/([^\s]+?)\.", prompt)
    assert ref is not None and where is not None
    route = "workspace={} region={} collection={}".format(*where.groups())
    task = TASKS[ref.group(1)[:3]]
    act = task.act and "This task is read-only" not in prompt
    results = [r for result in results for r in _delivered(result)]
    kinds = {m.group(2) for t in tools if (m := _DESC.match(t.get("description", "")))}
    primary = next(k for k in sorted(kinds) if k[:3].upper() == ref.group(1)[:3])
    first = (_tool(tools, "Search", primary, route), {"query": ref.group(1)})
    if mode == "waste":
        if len(results) < 2:
            return first
        results = results[2:]
    todo: list[tuple[str, str, str]] = [("Search", primary, ref.group(1))]
    facts: dict[str, Any] = {}
    sources: list[str] = []
    primary_id: str | None = None
    acted = False
    for result in results:
        if not todo:
            acted = True
            continue
        verb, kind, _ = todo.pop(0)
        obj = _first(result)
        if verb == "Search":
            todo.insert(0, ("Read", kind, obj["id"]))
            continue
        primary_id = primary_id or obj["id"]
        held = [n for n in task.facts if n in obj["payload"]]
        facts |= {n: obj["payload"][n] for n in held}
        sources += [result["source"]] if held else []
        if mode == "sloppy":
            continue
        hop = obj["payload"].get("next_handoff")
        if isinstance(hop, dict):
            query = str(hop["query"])
            todo.append(
                ("Search", next(k for k in sorted(kinds) if k[:3].upper() == query[:3]), query)
            )
        for name, value in obj["payload"].items():
            if name.endswith("_ref"):
                base = name.removesuffix("_ref").replace("_", "-")
                todo.append(("Search", next(k for k in kinds if k == base), value))
    if todo:
        verb, kind, arg = todo[0]
        return _tool(tools, verb, kind, route), {("query" if verb == "Search" else "id"): arg}
    if act and not acted:
        assert primary_id is not None
        return _tool(tools, "Update", primary, route, mode != "neighbour"), {"id": primary_id}
    if mode == "waste":
        return first
    return {"decision": task.decision, "facts": facts, "sources": sources}


def _delivered(result: Any) -> list[Any]:
    """A tool result as the records it delivered: itself, then the public-handoff
    controller's calls after it (``controller_calls``), in the order issued."""
    if not isinstance(result, dict):
        return [result]
    return [result] + [c["result"] for c in result.get("controller_calls", [])]


def _first(result: dict[str, Any]) -> dict[str, Any]:
    """The first record of an observation, as ``{id, payload}``: raw (``objects``) or
    delivered canonically (``records`` of ``{id, kind, fields}``)."""
    if "records" in result:
        record = result["records"][0]
        return {"id": record["id"], "payload": record["fields"]}
    return dict(result["objects"][0])


def _parse(content: Any) -> Any:
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


class StudyBrain:
    """The fake's brain for every wire format (Anthropic Messages, OpenAI Responses,
    Chat Completions)."""

    suffix = "-20991231"

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model")) + self.suffix
        usage = anthropic_usage(USAGE_IN, USAGE_OUT)
        mode = _mode(body.get("system"))
        if mode == "sloppy" and "sonnet" in model:
            mode = "correct"  # the switch: another model follows the chain unprompted
        if mode == "cut":
            return anthropic_text(
                "Let me think", model=model, stop_reason="max_tokens", usage=usage
            )
        messages = body["messages"]
        results = [
            _parse(block.get("content"))
            for m in messages
            if isinstance(m.get("content"), list)
            for block in m["content"]
            if block.get("type") == "tool_result"
        ]
        tools = [t for t in body.get("tools") or [] if "input_schema" in t]
        step = decide(mode, str(messages[0]["content"]), tools, results)
        if isinstance(step, dict):
            return anthropic_text(json.dumps(step), model=model, usage=usage)
        return anthropic_tool_use(step[0], step[1], model=model, usage=usage)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Chat Completions (the openai-chat driver: vLLM, SGLang, Ollama)."""
        model = str(body.get("model")) + self.suffix
        usage = chat_usage(USAGE_IN, USAGE_OUT)
        messages = body.get("messages") or []
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        mode = _mode(system)
        if mode == "cut":
            return chat_text("Let me think", model=model, finish_reason="length", usage=usage)
        results = [_parse(m.get("content")) for m in messages if m.get("role") == "tool"]
        tools = [t["function"] for t in body.get("tools") or [] if t.get("type") == "function"]
        prompt = next(m["content"] for m in messages if m.get("role") == "user")
        step = decide(mode, str(prompt), tools, results)
        if isinstance(step, dict):
            return chat_text(json.dumps(step), model=model, usage=usage)
        return chat_tool_calls(tool_call(step[0], json.dumps(step[1])), model=model, usage=usage)

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        if "messages" in body:
            return self.chat(body)
        model = str(body.get("model")) + self.suffix
        usage = openai_usage(USAGE_IN, USAGE_OUT)
        mode = _mode(body.get("instructions"))
        if mode == "cut":
            return openai_response(
                [],
                model=model,
                status="incomplete",
                incomplete="max_output_tokens",
                usage=usage,
            )
        items = body.get("input") or []
        results = [
            _parse(i.get("output")) for i in items if i.get("type") == "function_call_output"
        ]
        tools: list[dict[str, Any]] = []
        for tool in body.get("tools") or []:
            tools += tool.get("tools") or [] if tool.get("type") == "namespace" else [tool]
        step = decide(mode, str(items[0].get("content", "")), tools, results)
        if isinstance(step, dict):
            return openai_text(json.dumps(step), model=model, usage=usage)
        return openai_response(
            [openai_call_item(step[0], json.dumps(step[1]))], model=model, usage=usage
        )
