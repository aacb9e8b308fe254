"""The fake providers' connector mode: an MCP client as the provider's side of it.

A request that names MCP servers (Anthropic ``mcp_servers``; OpenAI tools of ``type:
mcp``) is answered as the providers answer it: the fake connects to each server URL
with the official ``mcp`` SDK client over streamable HTTP, lists its tools, calls the
first tool of the first server with arguments made from its schema, and returns the
provider's event shapes (Anthropic ``mcp_tool_use`` / ``mcp_tool_result`` blocks, and an
``mcp_tool_listing`` block when ``anthropic_listing``; OpenAI ``mcp_list_tools`` and
``mcp_call`` items). What it listed and called is kept in :attr:`ConnectorLog` so a test
can compare the records with what the server actually served.

The fake runs in the fake's request thread, so each request gets its own event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from mcp import Client

_ids = itertools.count(1)


@dataclass
class Visit:
    """One server the fake connected to: what it listed and the call it made, if any."""

    url: str
    label: str
    listed: list[dict[str, Any]]
    called: str | None = None
    arguments: dict[str, Any] | None = None
    result_text: str = ""
    is_error: bool = False


@dataclass
class ConnectorLog:
    visits: list[Visit] = field(default_factory=list)


def _value(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    return {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(
        str(kind), "lumen drift"
    )


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: _value(props[name]) for name in schema.get("required") or []}


async def _visit(url: str, label: str, call: bool) -> Visit:
    async with Client(url, mode="legacy") as client:
        listed = await client.list_tools()
        tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
        visit = Visit(url, label, tools)
        if call and tools:
            tool = tools[0]
            visit.called = tool["name"]
            visit.arguments = arguments_for(tool.get("inputSchema") or {})
            result = await client.call_tool(tool["name"], visit.arguments)
            visit.is_error = bool(result.is_error)
            visit.result_text = "".join(getattr(c, "text", "") for c in result.content)
        return visit


def visit_all(servers: list[tuple[str, str]], log: ConnectorLog) -> list[Visit]:
    """Connect to each (url, label), list, and call a tool of the first."""

    async def every() -> list[Visit]:
        return [await _visit(url, label, i == 0) for i, (url, label) in enumerate(servers)]

    visits = asyncio.run(asyncio.wait_for(every(), timeout=20))
    log.visits.extend(visits)
    return visits


def is_connector(provider: str, body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    if provider == "anthropic":
        return bool(body.get("mcp_servers"))
    return any(isinstance(t, dict) and t.get("type") == "mcp" for t in body.get("tools") or [])


def anthropic_reply(
    body: dict[str, Any], log: ConnectorLog, *, model: str, listing: bool
) -> dict[str, Any]:
    servers = [(s["url"], s["name"]) for s in body["mcp_servers"]]
    visits = visit_all(servers, log)
    content: list[dict[str, Any]] = []
    if listing:
        content += [
            {
                "type": "mcp_tool_listing",
                "mcp_server_name": v.label,
                "tools": [
                    {
                        "name": t["name"],
                        "description": t.get("description"),
                        "input_schema": t.get("inputSchema") or {},
                    }
                    for t in v.listed
                ],
            }
            for v in visits
        ]
    content.append({"type": "text", "text": "Let me look that up."})
    first = visits[0]
    if first.called is not None:
        use_id = f"mcptoolu_{next(_ids)}"
        content += [
            {
                "type": "mcp_tool_use",
                "id": use_id,
                "name": first.called,
                "server_name": first.label,
                "input": first.arguments,
            },
            {
                "type": "mcp_tool_result",
                "tool_use_id": use_id,
                "is_error": first.is_error,
                "content": [{"type": "text", "text": first.result_text}],
            },
        ]
    content.append({"type": "text", "text": "The tool could not help: nothing was found."})
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 400,
            "output_tokens": 60,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def openai_reply(body: dict[str, Any], log: ConnectorLog, *, model: str) -> dict[str, Any]:
    servers = [(t["server_url"], t["server_label"]) for t in body["tools"] if t["type"] == "mcp"]
    visits = visit_all(servers, log)
    output: list[dict[str, Any]] = [
        {
            "type": "mcp_list_tools",
            "id": f"mcpl_{next(_ids)}",
            "server_label": v.label,
            "tools": [
                {
                    "name": t["name"],
                    "description": t.get("description"),
                    "input_schema": t.get("inputSchema") or {},
                    "annotations": t.get("annotations"),
                }
                for t in v.listed
            ],
        }
        for v in visits
    ]
    first = visits[0]
    if first.called is not None:
        call: dict[str, Any] = {
            "type": "mcp_call",
            "id": f"mcp_{next(_ids)}",
            "name": first.called,
            "server_label": first.label,
            "arguments": json.dumps(first.arguments),
            "status": "completed" if not first.is_error else "failed",
        }
        if first.is_error:
            call["error"] = {
                "type": "mcp_tool_execution_error",
                "content": [{"type": "text", "text": first.result_text}],
            }
        else:
            call["output"] = first.result_text
        output.append(call)
    output.append(
        {
            "type": "message",
            "id": f"msg_{next(_ids)}",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "The tool could not help: nothing was found.",
                    "annotations": [],
                }
            ],
        }
    )
    return {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 420,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 70,
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": 490,
        },
    }
