"""A small MCP server written for prereg's tests: a podcast directory (a competitor).

Run over stdio: ``python podcatch.py``. Its snapshot is bundled with the
podcast-selection experiment (``snapshots/podcatch.json``), made with
``prereg mcp snapshot --out podcatch.json -- python podcatch.py`` from this folder.
Its tools really answer (from a fixed, invented directory), so tests can use it as
a registered live integration. Every show is invented.
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
