"""A small MCP server written for prereg's tests: tide times (an unrelated decoy).

Run over stdio: ``python tidewatch.py``. Its snapshot is bundled with the
podcast-selection experiment (``snapshots/tidewatch.json``), made with
``prereg mcp snapshot --out tidewatch.json -- python tidewatch.py`` from this folder.
Every station and time is invented.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer(
    name="tidewatch",
    title="Tidewatch",
    description="Tide times and tide heights for coastal stations.",
    version="1.0.0",
)


@server.tool(
    title="Tide times", description="High and low tide times at a coastal station on a date."
)
def tide_times(station: str, date: str) -> dict[str, list[str]]:
    return {"high": ["06:12", "18:40"], "low": ["00:05", "12:27"]}


@server.tool(
    title="Find a tide station",
    description="Find tide stations near a harbour, beach or coastal town.",
)
def find_tide_station(place: str) -> list[str]:
    return [f"{place} harbour"]


if __name__ == "__main__":
    server.run()
