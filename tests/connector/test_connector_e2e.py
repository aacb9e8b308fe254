"""Acceptance (issue 16, item 3): ``host.tool_access: connector`` end to end.

``prereg run`` through the real ``anthropic`` and ``openai`` SDK clients against the local
fake providers, which, given the request's MCP server URLs, connect to the replay server
(``prereg mcp serve --http``'s app, on localhost) with the official ``mcp`` client, list
its tools and call one, as a provider does. The records must say what the replay served
and what it was asked: surfaced = the tools the provider listed, the call = the call the
replay received, executed = false (the replay refuses every call).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.runners.mcp.replay import REFUSAL_TEXT
from prereg.runners.store.sqlite import RunStore
from tests.connector.conftest import DRAFT, LoggingReplay, register, served_tools
from tests.providers.fakes import ANTHROPIC_KEY, OPENAI_KEY, FakeProviders

TOKEN = "connector-token-5f1e2d3c4b"  # noqa: S105 - a test value, checked never written


@pytest.mark.parametrize("driver", ["anthropic", "openai"])
def test_the_provider_calls_the_replay_and_the_records_say_what_it_served(
    connector_ws: Path,
    cli: Any,
    fake: FakeProviders,
    replay: tuple[str, list[LoggingReplay]],
    monkeypatch: pytest.MonkeyPatch,
    driver: str,
) -> None:
    url, servers = replay
    monkeypatch.setenv("PREREG_CONNECTOR_URL", url)
    monkeypatch.setenv("PREREG_CONNECTOR_TOKEN", TOKEN)
    reg_id = f"connector-{driver}"
    registered = register(
        cli, connector_ws, driver, reg_id=reg_id, host_extra=", tool_access: connector"
    )
    assert registered.code == 0, registered.stderr
    result = cli("-w", connector_ws, "run", reg_id, "--json")
    assert result.code == 0, result.stderr
    records = RunStore(connector_ws / "runs").records(registration_id=reg_id)
    assert records and {r.status for r in records} == {"ok"}, [r.error for r in records]

    # what the provider was sent: the servers' URLs on the replay, no client-side tools
    bodies = fake.model_bodies(driver)
    assert len(bodies) == len(records)  # one request per episode: the provider loops
    paths = {f"{url}/servers/0/mcp", f"{url}/servers/1/mcp"}
    for body in bodies:
        if driver == "anthropic":
            assert {s["url"] for s in body["mcp_servers"]} == paths
            assert all(s["authorization_token"] == TOKEN for s in body["mcp_servers"])
            assert all(t["type"] == "mcp_toolset" for t in body["tools"])
        else:
            assert {t["server_url"] for t in body["tools"]} == paths
            assert all(
                t["type"] == "mcp" and t["require_approval"] == "never" for t in body["tools"]
            )
            assert all(t["authorization"] == TOKEN for t in body["tools"])
    if driver == "anthropic":
        sent = [s.headers for s in fake.seen if s.path.startswith("/v1/messages")]
        assert all(h["anthropic-beta"].startswith("mcp-client-") for h in sent)

    # each record's call is one the replay received, with the same arguments, refused
    received = sorted(
        (name, repr(sorted(args.items()))) for s in servers for name, args in s.calls()
    )
    recorded = []
    served = served_tools(servers)
    focal = set(served["podcatch"])
    for r in records:
        assert r.config is not None and r.config.tool_access == "connector"
        assert r.driver == driver and r.evidence_class == "api"
        assert r.tokens.input and r.cost_usd is not None and r.latency_ms is not None
        calls = [e for e in r.trace if e.kind == "tool_call"]
        results = [e for e in r.trace if e.kind == "tool_result"]
        assert len(calls) == 1 and len(results) == 1 and r.calls == 1
        recorded.append((calls[0].tool, repr(sorted(calls[0].arguments.items()))))
        assert results[0].is_error and results[0].text == REFUSAL_TEXT
        selected = calls[0].tool in focal
        assert r.funnel.selected is selected
        assert r.funnel.invoked is selected  # schema-made arguments validate
        assert r.funnel.executed is False  # the replay refuses every call
        assert r.terminal_class == ("focal" if selected else "other_external")
        if driver == "openai":  # the provider's mcp_list_tools: every served tool
            search = [e for e in r.trace if e.kind == "search"]
            assert search and set(search[0].surfaced or []) == {
                t for tools in served.values() for t in tools
            }
            assert r.funnel.surfaced is True
        else:  # the Messages API reports no listing here: not measured
            assert r.funnel.surfaced is None
    assert sorted(recorded) == received
    assert {name for name, _ in recorded} == {
        v.called for v in fake.connector_log.visits if v.called
    }
    # both rotations' first servers were called: the listing order reached the provider
    assert any(name in focal for name, _ in recorded)
    for server in servers:
        assert sum(m == "tools/list" for m, _ in server.requests) == len(records)

    # the connector token and the keys are never written
    for path in (p for p in connector_ws.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for secret in (TOKEN, ANTHROPIC_KEY, OPENAI_KEY):
            assert secret.encode() not in data, f"{secret} written to {path}"
    assert TOKEN not in result.stdout + result.stderr

    # the analysis and verify read connector records as any others
    verified = cli("-w", connector_ws, "verify", "--json")
    assert verified.code == 0, verified.stderr
    if driver == "anthropic":
        return  # one analysis is enough (it is the slow part)
    analysed = cli("-w", connector_ws, "analyse", reg_id, "--json")
    assert analysed.code == 0, analysed.stderr
    arms = analysed.json()["arms"]
    assert {a["configuration"]["tool_access"] for a in arms} == {"connector"}


def test_a_connector_arm_beside_a_client_arm_of_the_same_model(
    connector_ws: Path,
    cli: Any,
    fake: FakeProviders,
    replay: tuple[str, list[LoggingReplay]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Arms are configurations: one arm reaches the tools through the connector, the other
    as client tools the harness executes (here: refuses, they are snapshots); one evidence
    class, two configurations with their own digests."""
    url, servers = replay
    monkeypatch.setenv("PREREG_CONNECTOR_URL", url)
    draft = connector_ws / "drafts" / "mixed.yaml"
    draft.write_text(
        DRAFT.format(id="mixed", driver="openai", model="gpt-5-mini", host_extra="").replace(
            "{id: placebo, surface: podcatch, control: placebo}",
            "{id: connector, surface: podcatch, host: {tool_access: connector}}",
        )
    )
    assert cli("-w", connector_ws, "register", draft, "--json").code == 0
    result = cli("-w", connector_ws, "run", "mixed", "--json")
    assert result.code == 0, result.stderr
    records = RunStore(connector_ws / "runs").records(registration_id="mixed")
    assert {r.status for r in records} == {"ok"}
    by_arm = {arm: [r for r in records if r.arm == arm] for arm in ("podcatch", "connector")}
    assert all(r.config is not None for r in records)
    assert {r.config.tool_access for r in by_arm["connector"]} == {"connector"}  # type: ignore[union-attr]
    assert {r.config.tool_access for r in by_arm["podcatch"]} == {None}  # type: ignore[union-attr]
    digests = {arm: {r.config.digest for r in rs} for arm, rs in by_arm.items()}  # type: ignore[union-attr]
    assert len(digests["podcatch"]) == len(digests["connector"]) == 1
    assert digests["podcatch"] != digests["connector"]
    assert {r.evidence_class for r in records} == {"api"}
    # only the connector arm's requests named the replay; its calls reached the replay
    bodies = fake.model_bodies("openai")
    mcp = [b for b in bodies if any(t.get("type") == "mcp" for t in b.get("tools") or [])]
    assert len(mcp) == len(by_arm["connector"])
    assert len([c for s in servers for c in s.calls()]) == len(by_arm["connector"])
    # the client arm's calls were refused by the harness itself, never sent anywhere
    client_results = [e for r in by_arm["podcatch"] for e in r.trace if e.kind == "tool_result"]
    assert client_results and all(e.is_error and e.text != REFUSAL_TEXT for e in client_results)
