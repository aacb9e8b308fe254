"""Fixtures of the connector tests: a snapshot-only experiment, the replay over HTTP on
localhost (logging every message it answers), and the fake providers in connector mode."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from prereg.experiments.mcp_snapshot import read_snapshot
from prereg.runners.drivers.base import Episode, OfferedTool
from prereg.runners.mcp.replay import ReplayServer
from prereg.runners.mcp.serve_http import base_url, bind, build_app
from tests.providers.fakes import FakeProviders, provider_env
from tests.waiting import wait_until

EXPERIMENT = """\
name: podcast-connector
title: A podcast directory in a pool with a tide server, both MCP snapshots
description: Every offered integration is a recorded MCP server, so a replay can serve it.
service: service.yaml
corpus: corpus.yaml
surfaces:
  podcatch: snapshots/podcatch.json
pool:
  members:
    - {id: tidewatch, role: decoy, surface: snapshots/tidewatch.json}
splits:
  seed: 5
  fractions: {dev: 0.5, validation: 0.25, test: 0.25}
"""

DRAFT = """\
id: {id}
title: Podcast selection through the provider's MCP connector
hypothesis: The host selects the podcast directory over the tide server.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-connector
kind: exploratory
split: validation
arms:
  - {{id: podcatch, surface: podcatch}}
  - {{id: placebo, surface: podcatch, control: placebo}}
host: {{driver: {driver}, model: {model}{host_extra}}}
budgets: {{completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: 6,
          spend_usd: 5}}
design: {{repeats: 1, rotations: 2, seed: 3}}
outcome: success
primary: {{test: mcnemar_exact, alpha: 0.05, sides: two-sided}}
"""

MODELS = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-5-mini",
    "openai-chat": "qwen2.5:7b-instruct",
    "local": "local-default",
    "replay": "recorded",
}
SNAPSHOTS = ("podcatch", "tidewatch")


class LoggingReplay(ReplayServer):
    """The replay server, keeping every JSON-RPC request it answered (method, params)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def handle(self, message: Any, version: str | None = None) -> Any:
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            self.requests.append((message["method"], dict(message.get("params") or {})))
        return super().handle(message, version)

    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (p["name"], p.get("arguments") or {}) for m, p in self.requests if m == "tools/call"
        ]


def write_experiment(ws: Path) -> Path:
    """The snapshot-only experiment, made from the bundled podcast-selection's files."""
    bundled = ws / "experiments" / "podcast-selection"
    folder = ws / "experiments" / "podcast-connector"
    (folder / "snapshots").mkdir(parents=True)
    for name in ("service.yaml", "corpus.yaml"):
        shutil.copy(bundled / name, folder / name)
    for name in SNAPSHOTS:
        shutil.copy(bundled / "snapshots" / f"{name}.json", folder / "snapshots" / f"{name}.json")
    (folder / "experiment.yaml").write_text(EXPERIMENT)
    return folder


def register(cli: Any, ws: Path, driver: str, *, reg_id: str, host_extra: str = "") -> Any:
    draft = ws / "drafts" / f"{reg_id}.yaml"
    draft.write_text(
        DRAFT.format(id=reg_id, driver=driver, model=MODELS[driver], host_extra=host_extra)
    )
    return cli("-w", ws, "register", draft, "--json")


@pytest.fixture
def connector_ws(ws: Path) -> Path:
    write_experiment(ws)
    return ws


@pytest.fixture
def replay(connector_ws: Path) -> Iterator[tuple[str, list[LoggingReplay]]]:
    """``prereg mcp serve --http``'s app on the experiment's snapshots, on localhost."""
    folder = connector_ws / "experiments" / "podcast-connector" / "snapshots"
    servers = [LoggingReplay(read_snapshot(folder / f"{name}.json")) for name in SNAPSHOTS]
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(list(servers), "127.0.0.1"),
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the connector server started", poll_s=0.02)
    try:
        yield base_url(sock), servers
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeProviders() as server:
        provider_env(monkeypatch, server)
        monkeypatch.delenv("PREREG_CONNECTOR_URL", raising=False)
        monkeypatch.delenv("PREREG_CONNECTOR_TOKEN", raising=False)
        yield server


def offered_episode(servers: list[LoggingReplay], *, cap: int = 256) -> Episode:
    """An episode offering every tool of ``servers`` as recorded (with its snapshot digest)."""
    tools = tuple(
        OfferedTool(
            name=str(tool["name"]),
            title="",
            description=str(tool.get("description", "")),
            input_schema=tool.get("inputSchema") or {},
            integration=server.snapshot.server_name,
            integration_description="Recorded server.",
            snapshot_digest=server.digest,
        )
        for server in servers
        for tool in server.snapshot.tools()
    )
    return Episode(
        prompt="Find a podcast about astronomy.",
        tools=tools,
        completion_cap=cap,
        model=None,
        params={},
        seed=1,
        prompt_seed=1,
        label="podcatch/p01/0",
    )


def served_tools(servers: list[LoggingReplay]) -> dict[str, list[str]]:
    """Server name -> the tool names it serves (from its snapshot)."""
    return {s.snapshot.server_name: list(s.snapshot.tool_names()) for s in servers}


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
