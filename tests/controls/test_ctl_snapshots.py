"""Surfaces from MCP snapshots: loaded into the digest, offered with server text per driver
capability, their calls refused (never executed)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from prereg.registry.resolve import resolve
from prereg.registry.units import build_offers, expand_units
from prereg.runners.drivers import anthropic, openai
from prereg.runners.drivers.base import Episode, OfferedTool, ToolCall, server_text
from prereg.runners.drivers.local import LocalHost, LocalParams
from prereg.runners.harness import Harness
from prereg.runners.orchestrate import run_unit
from tests.controls.helpers import (
    PODCAST,
    PODCATCH_SERVER,
    SERVERS,
    copy_podcast,
    plan,
    podcast,
    registration,
    single,
)
from tests.controls.test_ctl_rotations import Recorder

POOLED = "    - {id: podcatch, role: competitor, surface: snapshots/podcatch.json}\n"


def _pooled(text: str) -> str:
    """The bundled experiment with the podcatch snapshot as a pool member, not a surface."""
    text = text.replace("  podcatch: snapshots/podcatch.json\n", "")
    return text.replace(
        "    - {id: weather, role: decoy, surface: surfaces/weather.yaml}\n",
        "    - {id: weather, role: decoy, surface: surfaces/weather.yaml}\n" + POOLED,
    )


def test_a_snapshot_pool_member_offers_the_recorded_tools_and_server_text(tmp_path) -> None:
    folder = copy_podcast(tmp_path, _pooled)
    exp = load_experiment(folder_reader(folder), "podcast-selection")
    assert "snapshots/podcatch.json" in exp.files  # resolved into the digest
    offered = exp.offered("focal")
    assert [(s.id, role) for s, role in offered] == [
        ("focal", "focal"),
        ("castaway", "competitor"),
        ("earbud", "competitor"),
        ("weather", "decoy"),
        ("podcatch", "competitor"),
    ]
    pc = exp.surfaces["podcatch"]
    recorded = json.loads((folder / "snapshots/podcatch.json").read_text())
    tools = recorded["server"]["lists"]["tools/list"]["pages"][0]["tools"]
    assert [t.name for t in pc.tools] == [t["name"] for t in tools]
    assert [t.description for t in pc.tools] == [t["description"] for t in tools]
    assert [t.input_schema for t in pc.tools] == [t["inputSchema"] for t in tools]
    assert pc.name == "podcatch" and pc.title == "Podcatch"
    assert pc.description == recorded["server"]["initialize"]["serverInfo"]["description"]
    assert pc.replay_only and pc.source == "snapshot" and not any(t.steps for t in pc.tools)


def _offered_episode(driver: Any, surface: str = "focal") -> Episode:
    p = plan(single(surface, design={"repeats": 1, "rotations": 1, "seed": 1}))
    exp = podcast()
    unit = next(u for u in expand_units(p, exp) if u.arm == "arm")
    harness = Harness(exp, p.budgets, "m", {}, 1, offers=build_offers(p, exp))
    return harness.episode_for(unit, driver, harness.offered(unit))


def test_snapshot_server_text_reaches_the_openai_path_but_not_the_anthropic_path() -> None:
    description = podcast().surfaces["podcatch"].description
    oa, an = openai.create(model="gpt-test"), anthropic.create(model="claude-test")
    assert (server_text(oa), server_text(an)) == ("name_and_description", "none")
    episode = _offered_episode(oa, surface="podcatch")
    tools = [t for t in episode.tools if t.integration == "podcatch"]
    assert tools and all(t.integration_description == description for t in tools)
    body = oa.build_request(episode, [])
    namespace = next(n for n in body["tools"] if n["name"] == "podcatch")
    assert namespace["description"] == description
    assert [f["name"] for f in namespace["tools"]] == ["podcatch_search", "podcatch_follow"]
    body = an.build_request(episode, [])
    assert description not in json.dumps(body)  # no field for it on this path
    assert {"podcatch_search", "podcatch_follow"} <= {t["name"] for t in body["tools"]}


def test_the_local_host_reads_server_text_only_when_its_capability_says_so() -> None:
    tool = OfferedTool(
        name="lookup",
        title="Lookup",
        description="Look something up.",
        input_schema={"type": "object", "properties": {}},
        integration="zephyrcast",
        integration_description="Zephyr forecasts.",
    )
    episode = Episode(
        prompt="zephyr forecasts please",
        tools=(tool,),
        completion_cap=100,
        model=None,
        params={},
        seed=1,
        prompt_seed=2,
    )
    plain = LocalHost(LocalParams())
    reads = LocalHost(LocalParams.from_params({"server_text": True}))
    assert (plain.server_text, reads.server_text) == ("none", "name_and_description")
    assert asyncio.run(plain.next_turn(episode, [])).surfaced == ()
    assert asyncio.run(reads.next_turn(episode, [])).surfaced == ("lookup",)
    with pytest.raises(ValueError, match="server_text"):
        LocalParams.from_params({"server_text": "yes"})


@pytest.mark.parametrize(
    ("driver", "expected"),
    [(Recorder(), "none"), (Recorder("name_and_description"), "name_and_description")],
)
def test_the_record_says_what_server_text_the_host_could_read(driver, expected) -> None:
    p = plan(single("focal"))
    exp = podcast()
    unit = expand_units(p, exp)[0]
    harness = Harness(exp, p.budgets, None, {}, p.rotations, offers=build_offers(p, exp))
    rec = asyncio.run(run_unit(p, harness, unit, driver))
    assert rec.offer is not None and rec.offer.server_text == expected


class CallFirst:
    """Calls one named tool, then answers."""

    name = "local"
    evidence_class = "local"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool, self.arguments = tool, arguments

    async def next_turn(self, episode, history):
        from prereg.runners.drivers.base import FinalAnswer, Turn

        if not history:
            return Turn(ToolCall(self.tool, self.arguments))
        return Turn(FinalAnswer("done"))

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize(
    ("arm_surface", "role", "selected"),
    [("focal", "competitor", False), ("podcatch", "focal", True)],
)
def test_calls_to_snapshot_tools_are_refused_never_executed(
    tmp_path, arm_surface, role, selected
) -> None:
    folder = copy_podcast(tmp_path, _pooled) if role == "competitor" else PODCAST
    exp = load_experiment(folder_reader(folder), "podcast-selection")
    p = plan(single(arm_surface))
    unit = next(u for u in expand_units(p, exp) if u.task.polarity == "positive" and u.arm == "arm")
    harness = Harness(exp, p.budgets, None, {}, p.rotations, offers=build_offers(p, exp))
    rec = asyncio.run(
        run_unit(p, harness, unit, CallFirst("podcatch_search", {"query": "astronomy"}))
    )
    assert rec.status == "ok"
    assert rec.terminal_class == ("focal" if selected else "competitor")
    assert rec.funnel.selected is selected
    assert rec.funnel.invoked is selected and rec.funnel.executed is False
    result = next(e for e in rec.trace if e.kind == "tool_result")
    assert result.is_error and "not run" in (result.text or "") and result.result is None
    assert rec.offer.first_server == "podcatch"
    assert (
        next(s for s in rec.offer.servers if s.key == "podcatch").snapshot_digest
        == exp.surfaces["podcatch"].snapshot_digest
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="nope"), "prereg-mcp-snapshot/1"),
        (
            lambda d: d["server"]["lists"]["tools/list"]["pages"][0]["tools"][0][
                "inputSchema"
            ].update({"$ref": "https://example.invalid/schema.json"}),
            "points outside the schema",
        ),
        (
            lambda d: d["server"]["lists"]["tools/list"]["pages"][0]["tools"][1].update(
                name="podcatch_search"
            ),
            "duplicate tool name",
        ),
        (
            lambda d: d["server"]["lists"]["tools/list"]["pages"][0]["tools"][0].update(
                name="bad name!"
            ),
            "cannot be offered",
        ),
        (
            lambda d: d["server"]["lists"]["tools/list"]["pages"][0]["tools"][0][
                "inputSchema"
            ].update(type="string"),
            "type 'object'",
        ),
    ],
)
def test_a_bad_snapshot_is_bad_input_naming_the_file(tmp_path, mutate, message) -> None:
    folder = copy_podcast(tmp_path)
    path = folder / "snapshots" / "podcatch.json"
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=message) as info:
        load_experiment(folder_reader(folder), "podcast-selection")
    assert info.value.file == "snapshots/podcatch.json"


def test_one_byte_of_a_snapshot_changes_the_registration_digest(tmp_path) -> None:
    draft = tmp_path / "reg.yaml"
    draft.write_text(json.dumps({**registration().model_dump(mode="json")}))
    first = resolve(draft, PODCAST.parent)
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    folder = copy_podcast(experiments)
    path = folder / "snapshots" / "tidewatch.json"
    path.write_text(path.read_text().replace("Tide times", "Tide Times", 1))
    second = resolve(draft, experiments)
    assert first.digest != second.digest
    assert (
        first.document["experiment"]["files"]["snapshots/tidewatch.json"]
        != second.document["experiment"]["files"]["snapshots/tidewatch.json"]
    )


@pytest.mark.parametrize("name", ["tidewatch", "podcatch"])
def test_the_bundled_snapshots_are_snapshots_of_the_test_servers(tmp_path, name) -> None:
    """Re-recording the servers written for these tests (podcatch: the copy the
    podcast-invokerank experiment ships) gives the bundled digests."""
    from prereg.runners.mcp import read_snapshot, snapshot_digest

    server = PODCATCH_SERVER if name == "podcatch" else SERVERS / f"{name}.py"
    out = tmp_path / f"{name}.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "prereg",
            "mcp",
            "snapshot",
            "--out",
            str(out),
            "--json",
            "--timeout",
            "30",
            "--no-negotiate",  # recorded before snapshots negotiated protocol revisions
            "--",
            sys.executable,
            f"{name}.py",
        ],
        cwd=server.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    bundled = read_snapshot(PODCAST / "snapshots" / f"{name}.json")
    assert json.loads(done.stdout)["digest"] == snapshot_digest(bundled)
