"""A scripted model for the provider fakes (tests/providers/fakes.py) that plays a
ToolBottleneckBench unit of the bundled overdue-case family on its low workflow.

It reads only the wire: the system prompt names its mode, the user prompt the case key,
the offered tools their names and routes (in their descriptions), and the tool results
(the variant's encoded observations, raw encoding) the record ids, the facts and the
source labels. Modes:

- ``correct``: search the case, read it, request escalation, answer;
- ``neighbour``: the same, but the escalation goes to a route neighbour of the action tool;
- ``waste``: the search three times, then read and act, then one more search;
- ``cut``: the first response is cut at the completion cap.

Every response reports the same usage (:data:`USAGE_IN`, :data:`USAGE_OUT`), so a test
knows the tokens of an episode from its number of turns.
"""

from __future__ import annotations

import json
import re
from typing import Any

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


def _mode(system: Any) -> str:
    text = system if isinstance(system, str) else json.dumps(system)
    found = re.search(r"mode: (\w+)", text or "")
    return found.group(1) if found else "correct"


def _tool(tools: list[dict[str, Any]], base: str, on_route: bool = True) -> str:
    """The offered tool of this base on the request's route (or off it)."""
    for tool in tools:
        name, text = tool["name"], tool.get("description", "")
        if name.startswith(base + "_") and (ROUTE in text) == on_route:
            return str(name)
    raise AssertionError(f"no offered tool {base} (on route: {on_route})")


def _steps(mode: str) -> list[tuple[str, str, bool]]:
    """(tool base, argument source, on route) per call: ``ref`` the request's key, ``id``
    the id the first search returned."""
    search = ("search_cases", "ref", True)
    read = ("read_case", "id", True)
    act = ("request_escalation", "id", mode != "neighbour")
    if mode == "waste":
        return [search, search, search, read, act, search]
    return [search, read, act]


def decide(
    mode: str, prompt: str, tools: list[dict[str, Any]], results: list[Any]
) -> tuple[str, dict[str, str]] | dict[str, Any]:
    """The next call (tool name, arguments), or the answer document."""
    steps = _steps(mode)
    if len(results) < len(steps):
        base, source, on_route = steps[len(results)]
        ref = re.search(r"case (\S+) be escalated", prompt)
        assert ref is not None
        if source == "ref":
            return _tool(tools, base, on_route), {"query": ref.group(1)}
        record = results[0]["objects"][0]["id"]
        return _tool(tools, base, on_route), {"id": record}
    read = next(r for r in results if r and r["tool"].startswith("read_case_"))
    payload = read["objects"][0]["payload"]
    return {
        "decision": "escalate",
        "facts": {name: payload[name] for name in FACTS},
        "sources": [read["source"]],
    }


def _parse(content: Any) -> Any:
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


class StudyBrain:
    """The fake's brain for both wire formats (Anthropic Messages, OpenAI Responses)."""

    suffix = "-20991231"

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model")) + self.suffix
        usage = anthropic_usage(USAGE_IN, USAGE_OUT)
        mode = _mode(body.get("system"))
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

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
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
