"""``host.tool_access``: the default digests as before; a connector the host cannot have is
refused at register (exit 2 naming the field); a run without the replay's URL is refused
before anything is written or sent; a replay that does not serve the registered
snapshots fails the units as infrastructure, naming the integration, before any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.runners.store.sqlite import RunStore
from tests.conftest import tree_digest
from tests.connector.conftest import DRAFT, LoggingReplay, register
from tests.providers.fakes import FakeProviders

#: a registration with a provider host and an arm's host override, and the digests the
#: code at commit 545bc1a (before ``tool_access`` existed) computed for it
PINNED = {
    "id": "hosts-pin",
    "title": "t",
    "hypothesis": "h",
    "falsification": "f",
    "experiment": "music-library",
    "kind": "exploratory",
    "split": "dev",
    "arms": [
        {"id": "baseline", "surface": "baseline"},
        {"id": "semantic", "surface": "semantic", "host": {"model": "claude-sonnet-4-5"}},
    ],
    "host": {"driver": "anthropic", "model": "claude-haiku-4-5"},
    "budgets": {"completion_cap": 256, "episode_tokens": 8000, "call_limit": 4, "turn_limit": 6},
    "design": {"repeats": 1, "rotations": 1, "seed": 7},
    "outcome": "success",
    "primary": {"test": "mcnemar_exact", "alpha": 0.05, "sides": "two-sided"},
}
DIGEST_BEFORE = "sha256:5536e7342d41fc2c5026696d75bea36c5e19a8df4a798265b9f38b4a5566a442"
ARM_DIGEST_BEFORE = "sha256:bd1f4feb12310d7fd8d3396918a79e4ab00bdaa320e9459733158c8abd0a49cf"
FILES = {"corpus.yaml": b"x"}


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES))


def test_a_host_without_tool_access_digests_as_before_the_field_existed() -> None:
    assert _digest(PINNED) == DIGEST_BEFORE
    assert arm_config(Registration.model_validate(PINNED), "semantic").digest() == (
        ARM_DIGEST_BEFORE
    )
    explicit = {**PINNED, "host": {**PINNED["host"], "tool_access": "client"}}  # type: ignore[dict-item]
    assert _digest(explicit) == DIGEST_BEFORE  # the default, spelled out, is the same
    connector = {**PINNED, "host": {**PINNED["host"], "tool_access": "connector"}}  # type: ignore[dict-item]
    assert _digest(connector) != DIGEST_BEFORE  # how the host reaches the tools is digested
    reg = Registration.model_validate(connector)
    assert arm_config(reg, "semantic").tool_access == "connector"
    assert arm_config(reg, "semantic").digest() != ARM_DIGEST_BEFORE


@pytest.mark.parametrize(
    ("driver", "extra", "needle"),
    [
        ("openai-chat", "", "openai-chat driver has no MCP connector"),
        ("local", "", "local driver has no MCP connector"),
        ("replay", "", "replay driver has no MCP connector"),
        ("openai", ", tool_search: true", "tool_search"),
        ("anthropic", ", batch: true", "batch"),
        ("openai", ", tool_access: remote", "'client' or 'connector'"),
    ],
)
def test_a_connector_the_host_cannot_have_is_refused_at_register(
    connector_ws: Path, cli: Any, driver: str, extra: str, needle: str
) -> None:
    before = tree_digest(connector_ws / "registry")
    access = "" if "tool_access" in extra else ", tool_access: connector"
    refused = register(cli, connector_ws, driver, reg_id="refused", host_extra=access + extra)
    assert refused.code == 2, refused.stdout
    error = refused.json()
    assert error["field"] == "host.tool_access" and needle in error["message"]
    assert tree_digest(connector_ws / "registry") == before


def test_an_arm_cannot_ask_a_connector_of_a_driver_without_one(
    connector_ws: Path, cli: Any
) -> None:
    draft = connector_ws / "drafts" / "arm.yaml"
    text = DRAFT.format(id="arm", driver="openai", model="gpt-5-mini", host_extra="")
    draft.write_text(
        text.replace(
            "{id: placebo, surface: podcatch, control: placebo}",
            "{id: chat, surface: podcatch, host: {driver: openai-chat, model: m, "
            "tool_access: connector}}",
        )
    )
    refused = cli("-w", connector_ws, "register", draft, "--json")
    assert refused.code == 2 and "no MCP connector" in refused.json()["message"]


def test_a_run_without_the_replay_url_is_refused_before_anything_is_written(
    connector_ws: Path, cli: Any, fake: FakeProviders
) -> None:
    reg = register(
        cli, connector_ws, "openai", reg_id="no-url", host_extra=", tool_access: connector"
    )
    assert reg.code == 0, reg.stderr
    before = tree_digest(connector_ws)
    refused = cli("-w", connector_ws, "run", "no-url", "--json")
    assert refused.code == 2
    assert refused.json()["field"] == "PREREG_CONNECTOR_URL"
    assert tree_digest(connector_ws) == before and not fake.seen


def test_a_url_with_credentials_is_refused(
    connector_ws: Path, cli: Any, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = register(
        cli, connector_ws, "openai", reg_id="creds", host_extra=", tool_access: connector"
    )
    assert reg.code == 0, reg.stderr
    monkeypatch.setenv("PREREG_CONNECTOR_URL", "https://user:pw@example.org")
    refused = cli("-w", connector_ws, "run", "creds", "--json")
    assert refused.code == 2 and refused.json()["field"] == "PREREG_CONNECTOR_URL"
    assert "pw" not in refused.stdout.replace("password", "")


def test_a_replay_that_does_not_serve_the_registered_snapshots_fails_before_a_request(
    connector_ws: Path,
    cli: Any,
    fake: FakeProviders,
    replay: tuple[str, list[LoggingReplay]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, servers = replay
    monkeypatch.setenv("PREREG_CONNECTOR_URL", url)
    # the registered podcatch snapshot changes after the replay was started: its digest
    # is no longer one the pool serves
    snap = connector_ws / "experiments" / "podcast-connector" / "snapshots" / "podcatch.json"
    snap.write_text(snap.read_text().replace("Find podcasts in the directory", "Find shows"))
    reg = register(
        cli, connector_ws, "openai", reg_id="stale", host_extra=", tool_access: connector"
    )
    assert reg.code == 0, reg.stderr
    result = cli("-w", connector_ws, "run", "stale", "--json")
    assert result.code == 0, result.stderr
    failed = RunStore(connector_ws / "runs").records(registration_id="stale")
    assert failed and {r.status for r in failed} == {"infra_error"}
    assert all("does not serve integration 'podcatch'" in (r.error or "") for r in failed)
    assert not fake.model_bodies("openai")  # nothing was sent to the provider
    assert not any(m == "tools/call" for s in servers for m, _ in s.requests)


def test_a_surface_that_is_not_a_snapshot_cannot_be_served(
    ws: Path, cli: Any, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bundled podcast-selection offers YAML surfaces: no replay can serve them
    monkeypatch.setenv("PREREG_CONNECTOR_URL", "http://127.0.0.1:9")
    draft = ws / "drafts" / "yaml.yaml"
    text = DRAFT.format(
        id="yaml", driver="openai", model="gpt-5-mini", host_extra=", tool_access: connector"
    )
    draft.write_text(
        text.replace("podcast-connector", "podcast-selection").replace("podcatch", "focal")
    )
    assert cli("-w", ws, "register", draft, "--json").code == 0
    result = cli("-w", ws, "run", "yaml", "--json")
    assert result.code == 0, result.stderr
    failed = RunStore(ws / "runs").records(registration_id="yaml")
    assert failed and {r.status for r in failed} == {"infra_error"}
    assert all("is not an MCP snapshot" in (r.error or "") for r in failed)
    assert not fake.model_bodies("openai")
