"""Podcatch, the focal integration of podcast-invokerank: a tiny offline MCP server.

Run over stdio: ``python podcatch.py`` (the ``mcp`` SDK prereg depends on is its only
requirement; no network). The draft podcast-invokerank.yaml starts it for its execution
arms as ``[python, bundled:podcast-invokerank/servers/podcatch.py]``: prereg runs it under
its own interpreter from its bundled experiments (docs/invokerank.md, "The seed-shaped
draft"). It serves exactly the bundled snapshot (``snapshots/podcatch.json``, made with
``prereg mcp snapshot --out podcatch.json -- python podcatch.py``), which every execution
run verifies first; its tools really answer from a fixed, invented directory. It is the
same server as prereg's test fixture tests/controls/servers/podcatch.py.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

SHOWS = [
    {"id": "pc-1", "name": "Orbit Notes", "topic": "astronomy and space"},
    {"id": "pc-2", "name": "Money Minutes", "topic": "personal finance"},
    {"id": "pc-3", "name": "Trail Talk", "topic": "hiking and the outdoors"},
]

server = MCPServer(
    name="podcatch",
    title="Podcatch",
    description="A podcast directory: find podcasts and follow shows.",
    version="2.1.0",
)


@server.tool(
    title="Search the podcast directory",
    description="Find podcasts in the directory by topic, host or show name.",
)
def podcatch_search(query: str) -> list[dict[str, str]]:
    words = {w.lower() for w in query.split()}
    return [s for s in SHOWS if words & set(f"{s['name']} {s['topic']}".lower().split())]


@server.tool(title="Follow a podcast", description="Follow a podcast show by its id.")
def podcatch_follow(show_id: str) -> str:
    if show_id not in {s["id"] for s in SHOWS}:
        raise ValueError(f"no show {show_id}")
    return f"following {show_id}"


if __name__ == "__main__":
    server.run()
