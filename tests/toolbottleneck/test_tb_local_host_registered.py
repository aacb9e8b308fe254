"""A registered study on the local host's profiles (issue 19, item 7; docs/toolbottleneck.md,
readings 34 and 39-42): which host plays an arm, what register refuses, and the bundled
draft (registry/drafts/toolbottleneck-local.yaml) end to end through the CLI, offline.

References computed here: each stored record's verdicts are recomputed by replaying its
recorded calls on a freshly built sandbox of its variant (the menu shown at each call,
the sandbox's execution, the recorded answer and stops) and grading that episode with
:func:`verify`; the contract's call limit is the variant's certified minimum + 2; which
profile played an arm is read from the draft's own arm ids and host blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import FactValue, load_family
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.experiments.toolbottleneck.verify import Episode, EpisodeCall, Limit, verify
from prereg.experiments.toolbottleneck.world import Returned
from prereg.runners.record import RunRecord, TraceEvent
from prereg.runners.store.choose import open_store
from tests.conftest import tree_digest
from tests.toolbottleneck.helpers import BUNDLED

DRAFT = "drafts/toolbottleneck-local.yaml"
BUDGETS = {
    "completion_cap": 1024,
    "episode_tokens": 128000,
    "call_limit_over_certified": 2,
    "turn_limit_over_calls": 2,
}


def _small(host: dict[str, Any], **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": "local-refusals",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": "toolbottleneck",
        "kind": "exploratory",
        "split": "dev",
        "arms": [
            {"id": "a", "surface": "variants", "toolbottleneck": {"menu": 8}},
            {"id": "b", "surface": "variants", "toolbottleneck": {"menu": 8, "workflow": "high"}},
        ],
        "host": host,
        "budgets": BUDGETS,
        "design": {"repeats": 1, "seed": 1},
        "primary": {"test": "mcnemar_exact", "compare": ["b", "a"]},
    }
    doc.update(over)
    return doc


def _register(ws: Path, cli: Any, doc: dict[str, Any]) -> Any:
    path = ws / "reg.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return cli("-w", ws, "register", path, "--json")


def _refused(ws: Path, cli: Any, doc: dict[str, Any], field: str, *words: str) -> None:
    before = tree_digest(ws / "registry")
    result = _register(ws, cli, doc)
    assert result.code == 2, result.stderr
    assert field in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    assert tree_digest(ws / "registry") == before  # nothing written


def test_register_refuses_an_arm_with_both_players_or_neither(ws: Path, cli: Any) -> None:
    local = {"driver": "local", "model": "local-default"}
    # both: a local profile and a simulated policy named on one arm
    doc = _small(local)
    doc["arms"][1]["toolbottleneck"]["policy"] = "sim-steady"
    _refused(ws, cli, doc, "arms[1].toolbottleneck.policy", "local-default", "sim-steady")
    # both, through a factorial's base cell
    draft = yaml.safe_load((ws / DRAFT).read_text())
    draft["factorial"]["base"]["toolbottleneck"]["policy"] = "sim-exact"
    _refused(ws, cli, draft, "toolbottleneck.policy", "sim-exact")
    # neither: params with no profile (the simulated policy reads none)
    _refused(ws, cli, _small({"driver": "local", "params": {"threshold": 2.0}}), "host.params")
    # neither: a model the local host has no profile of
    _refused(ws, cli, _small({"driver": "local", "model": "local-wild"}), "host.model")


def test_register_refuses_a_study_that_mixes_players(ws: Path, cli: Any) -> None:
    doc = _small({"driver": "local"})
    doc["arms"][1]["host"] = {"driver": "local", "model": "local-careful"}
    _refused(ws, cli, doc, "arms[1].host.model", "simulated policy", "never pooled")
    # the other way round: a profile registration-wide, a simulated-policy arm
    doc = _small({"driver": "local", "model": "local-hasty"})
    doc["arms"][0]["toolbottleneck"]["policy"] = "sim-steady"
    _refused(ws, cli, doc, "arms[0].toolbottleneck.policy")
    # a model host beside a local profile: two evidence classes (invariant 8)
    doc = _small({"driver": "local", "model": "local-default"})
    doc["arms"][1]["host"] = {"driver": "anthropic", "model": "claude-haiku-4-5"}
    _refused(ws, cli, doc, "arms", "evidence class")
    # the local host reads no system prompt either
    _refused(
        ws,
        cli,
        _small({"driver": "local", "model": "local-default"}, system_prompt="x"),
        "system_prompt",
        "local host",
    )
    # and the well-formed small study registers
    ok = _register(ws, cli, _small({"driver": "local", "model": "local-careful"}))
    assert ok.code == 0, ok.stderr


def _sandbox(record: RunRecord, cells: dict[str, dict[str, Any]]) -> tuple[Sandbox, str]:
    cell = cells[record.arm]
    family, seed = record.task_id.rsplit("-s", 1)  # reading 26: <family>-s<seed>
    assert family == record.cluster
    built = build_sandbox(
        load_family(BUNDLED / f"{family}.yaml"),
        Cell("capacity", cell["menu"], cell.get("workflow", "low"), 0, cell.get("encoding", "raw")),
        seed=int(seed),
    )
    return built, cell.get("menu_mode", "routed")


def _replayed(sandbox: Sandbox, mode: str, trace: Sequence[TraceEvent]) -> Episode:
    """The episode the record describes, re-executed on the sandbox: the menu shown at
    each call (routed: the operational tools after the first executed operational call
    that returned something), each executed call run again, the answer and the stops."""
    changes: dict[tuple[str, str], FactValue] = {}
    calls: list[EpisodeCall] = []
    routed = False
    pending: tuple[str, Any] | None = None
    answer: str | None = None
    limits: set[Limit] = set()
    for event in trace:
        if event.kind == "tool_call":
            assert event.tool is not None
            pending = (event.tool, event.arguments)
        elif event.kind == "tool_result":
            assert pending is not None
            name, args = pending
            shown = sandbox.operational if routed else sandbox.menu
            fn = sandbox.function(name) if any(f.name == name for f in shown) else None
            results: list[Returned] = []
            if fn is not None and isinstance(args, dict) and list(args) == [fn.arg]:
                results, changes = sandbox.call(name, args[fn.arg], changes)
                assert event.result == sandbox.observation(len(calls), name, results)
            op = None if fn is None else fn.operation
            calls.append(EpisodeCall(name, args, fn is not None, op, tuple(results)))
            routed = routed or (
                fn is not None and fn.operational and bool(results) and mode == "routed"
            )
            pending = None
        elif event.kind == "final":
            answer = event.text
        elif event.kind == "stop":
            assert event.text is not None
            limits.add(event.text)  # type: ignore[arg-type]
            answer = None  # a stop after an answer (over the budget) keeps none
    return Episode(tuple(calls), answer, changes, frozenset(limits))


def test_the_local_draft_runs_end_to_end_offline(ws: Path, cli: Any) -> None:
    registered = cli("-w", ws, "register", ws / DRAFT, "--json")
    assert registered.code == 0, registered.stderr
    run = cli("-w", ws, "run", "toolbottleneck-local", "--json", "--concurrency", "2")
    assert run.code == 0, run.stderr
    summary = run.json()
    # the draft: 2 x 2 x 2 cells + 4 fixed-menu arms; the tasks are the bundled study
    # experiment's families x seeds, read from its file (issue 42 grew the families)
    spec = yaml.safe_load((BUNDLED.parent / "experiment.yaml").read_text())
    arms, tasks, repeats = 12, len(spec["families"]) * len(spec["seeds"]), 2
    assert summary["planned"] == summary["completed"] == arms * tasks * repeats
    assert summary["failed"] == 0
    assert (summary["driver"], summary["evidence_class"]) == ("local", "local")

    draft = yaml.safe_load((ws / DRAFT).read_text())
    frozen = yaml.safe_load((ws / "registry" / "frozen" / "toolbottleneck-local.json").read_text())
    cells = {a["id"]: a["toolbottleneck"] for a in frozen["document"]["registration"]["arms"]}
    extra = {a["id"]: a["host"]["model"] for a in draft["factorial"]["extra_arms"]}
    store = open_store(ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "toolbottleneck-local"]
    finally:
        store.close()
    assert len(records) == arms * tasks * repeats
    behaviour: dict[tuple[str, str, int], list[str]] = {}
    for record in records:
        profile = extra.get(record.arm) or record.arm.split("--profile-")[1]
        assert record.model_requested == profile  # the profile played, not a policy
        assert (record.status, record.driver, record.evidence_class) == ("ok", "local", "local")
        assert record.cost_usd is None and record.latency_ms is not None
        assert record.tokens.input and record.tokens.output
        sandbox, mode = _sandbox(record, cells)
        assert record.variant_digest == sandbox.variant.digest
        assert record.calls is not None
        assert record.calls <= sandbox.key.certified_minimum + 2
        v = verify(sandbox.key, _replayed(sandbox, mode, record.trace))
        assert record.obligations == dict(v.verdicts)
        assert (record.success, record.first_unmet_obligation, record.terminal_flag) == (
            v.success,
            v.first_unmet,
            v.flag,
        )
        cell = (cells[record.arm]["menu"], cells[record.arm].get("workflow", "low"))
        key = (f"{cell}/{cells[record.arm].get('menu_mode')}", record.task_id, record.repeat)
        calls = [str(e.tool) for e in record.trace if e.kind == "tool_call"]
        behaviour.setdefault(key, []).append(f"{profile}:{calls}")
    # the switch is a switch: the two profiles act differently on some unit
    assert any(len({b.split(":", 1)[1] for b in pair}) > 1 for pair in behaviour.values())

    out = cli("-w", ws, "analyse", "toolbottleneck-local", "--json")
    assert out.code == 0, out.stderr
    study = out.json()["toolbottleneck"]
    assert study["label"].startswith("LOCAL HOST (local-default, local-hasty).")
    assert "not models" in study["label"] and "SIMULATED POLICY" not in study["label"]
    titles = [t["title"] for t in study["tables"]]
    for needed in (
        "Contrasts by resampling unit",
        "Failure census",
        "Repairs against",
        "Decision matrix",
    ):
        assert any(t.startswith(needed) for t in titles), (needed, titles)
    markdown = (ws / "reports" / "toolbottleneck-local" / "report.md").read_text()
    assert markdown.index("LOCAL HOST (local-default") < markdown.index("## Registration")
