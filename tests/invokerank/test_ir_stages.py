"""Run stages in one registration (issue 41, item 1; seed 5.5): ``arms[].stage`` marks an
arm ``selection`` (every call replayed) or ``execution`` (the focal integration's calls on
its live server, ``host.live``; competitors replayed); both run under one registration,
and the InvokeRank section draws Figure 2 per host with the selection arms beside the
execution arms. A registration without stages keeps its digest and ``host.live`` applies
to every arm as before. The live server is the local MCP fixture the live tests use."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from prereg.registry.units import Budgets, plan_from_registration
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import Report
from prereg.reports.observations import from_record
from prereg.reports.render.invokerank_figures import funnel_rows
from prereg.reports.render.text import analysis_lines, host_funnel_table
from prereg.runners.orchestrate import run_plan
from prereg.runners.store.sqlite import RunStore
from tests.conftest import tree_digest
from tests.controls.helpers import DIGEST, PODCATCH_SERVER, REG_BASE, podcast
from tests.controls.test_ctl_snapshots import CallFirst
from tests.invokerank.test_ir_weights import DIGEST_BEFORE, FILES, REGISTRATION

PODCATCH = [sys.executable, str(PODCATCH_SERVER)]
LIVE = {"surface": "podcatch", "command": PODCATCH, "timeout_s": 30}


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES))


def test_a_registration_without_stages_digests_as_before() -> None:
    assert _digest(REGISTRATION) == DIGEST_BEFORE
    document = build_document(Registration.model_validate(REGISTRATION), FILES)
    assert all("stage" not in arm for arm in document["registration"]["arms"])
    staged = {
        **REGISTRATION,
        "arms": [{**a, "stage": "selection"} for a in REGISTRATION["arms"]],
    }
    assert _digest(staged) != DIGEST_BEFORE
    reloaded = Registration.model_validate(
        build_document(Registration.model_validate(staged), FILES)["registration"]
    )
    assert [a.stage for a in reloaded.arms] == ["selection", "selection"]


def _staged(arms: list[dict[str, Any]], live: dict[str, Any] | None = LIVE) -> Registration:
    host: dict[str, Any] = {"driver": "local"}
    if live is not None:
        host["live"] = live
    return Registration.model_validate(
        {
            **REG_BASE,
            "arms": arms,
            "host": host,
            "primary": {"test": "paired_bootstrap", "compare": [arms[0]["id"], arms[1]["id"]]},
            "design": {"repeats": 1, "rotations": 1, "seed": 1},
        }
    )


SEL_EXE = [
    {"id": "sel", "surface": "podcatch", "stage": "selection"},
    {"id": "exe", "surface": "podcatch", "stage": "execution"},
]


def test_only_execution_arms_run_live_and_old_registrations_run_every_arm_live() -> None:
    plan = plan_from_registration(_staged(SEL_EXE), DIGEST)
    assert plan.runs_live("exe") and not plan.runs_live("sel")
    old = _staged([{"id": a["id"], "surface": "podcatch"} for a in SEL_EXE])
    plan = plan_from_registration(old, DIGEST)
    assert plan.stages == {} and plan.runs_live("sel") and plan.runs_live("exe")
    selection_only = [{**a, "stage": "selection"} for a in SEL_EXE]
    plan = plan_from_registration(_staged(selection_only, live=None), DIGEST)
    assert plan.live is None and not plan.runs_live("sel") and not plan.runs_live("exe")


BAD = [
    (  # a stage on one arm only
        [
            {"id": "sel", "surface": "podcatch", "stage": "selection"},
            {"id": "b", "surface": "focal"},
        ],
        True,
        "arms.1.stage",
        "every arm names one",
    ),
    (  # an execution arm without a live server
        SEL_EXE,
        False,
        "arms.1.stage",
        "host.live",
    ),
    (  # an execution arm whose surface is not the live one
        [SEL_EXE[0], {"id": "exe", "surface": "focal", "stage": "execution"}],
        True,
        "arms.1.stage",
        "live surface 'podcatch'",
    ),
    (  # host.live with stages but no execution arm
        [SEL_EXE[0], {"id": "sel2", "surface": "focal", "stage": "selection"}],
        True,
        "host.live",
        "every arm is a selection arm",
    ),
]


@pytest.mark.parametrize(("arms", "live", "field", "fragment"), BAD)
def test_inconsistent_stages_exit_2_naming_file_and_field(
    ws: Path, cli: Any, arms: list[dict[str, Any]], live: bool, field: str, fragment: str
) -> None:
    host: dict[str, Any] = {"driver": "local", **({"live": LIVE} if live else {})}
    doc = {
        **REG_BASE,
        "id": "staged",
        "arms": arms,
        "host": host,
        "budgets": {"completion_cap": 1024, "episode_tokens": 32000, "call_limit": 8},
        "primary": {"test": "paired_bootstrap", "compare": [arms[0]["id"], arms[1]["id"]]},
    }
    path = ws / "drafts" / "staged.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "staged.yaml" in result.stderr
    dotted = field.replace(".1.", "[1].")
    assert field in result.stderr or dotted in result.stderr, result.stderr
    assert fragment in result.stderr
    assert tree_digest(ws / "registry") == before


def _run(tmp_path: Path) -> list[Any]:
    from dataclasses import replace

    plan = replace(
        plan_from_registration(_staged(SEL_EXE), DIGEST), budgets=Budgets(1024, 32000, 8, 10)
    )
    store = RunStore(tmp_path / "runs")
    driver = CallFirst("podcatch_search", {"query": "astronomy"})
    try:
        asyncio.run(run_plan(plan, podcast(), store, driver, concurrency=2))
        return store.records(registration_id=plan.registration_id)
    finally:
        store.close()


def test_selection_replays_and_execution_runs_live_in_one_registration(tmp_path: Path) -> None:
    records = _run(tmp_path)
    exe = [r for r in records if r.arm == "exe" and r.status == "ok"]
    sel = [r for r in records if r.arm == "sel" and r.status == "ok"]
    assert exe and sel and len(exe) == len(sel)
    for r in exe:  # the focal integration live: executed, Completed not measured
        podcatch = next(s for s in r.offer.servers if s.key == "podcatch")
        assert podcatch.live is True
        assert r.funnel.invoked and r.funnel.executed is True and r.funnel.completed is None
        result = next(e for e in r.trace if e.kind == "tool_result")
        assert "Orbit Notes" in json.dumps(result.result)
    for r in sel:  # the same call replayed: refused, never executed
        assert all(not s.live for s in r.offer.servers)
        assert r.funnel.invoked and r.funnel.executed is not True
        result = next(e for e in r.trace if e.kind == "tool_result")
        assert "Orbit Notes" not in json.dumps(result.result)

    # Figure 2 per host: the selection arm beside the execution arm, counted by hand
    obs = [from_record(r) for r in records]
    metas = [
        ArmMeta("sel", "podcatch", stage="selection", host="local"),
        ArmMeta("exe", "podcatch", stage="execution", host="local"),
    ]
    section = invokerank_section(obs, metas, seed=1)
    assert section is not None
    assert [(h.host, h.selection, h.execution) for h in section.hosts] == [
        ("local", ["sel"], ["exe"])
    ]
    arms = {a.arm: a for a in section.arms}
    assert arms["sel"].stage == "selection" and arms["exe"].stage == "execution"
    for arm, runs in (("sel", sel), ("exe", exe)):
        pos = [r for r in runs if r.polarity == "positive"]
        funnel = {s.stage: (s.successes, s.trials) for s in arms[arm].funnel}
        assert funnel["surfaced"] == (sum(bool(r.funnel.surfaced) for r in pos), len(pos))
        assert funnel["selected"] == (sum(bool(r.funnel.selected) for r in pos), len(pos))
    # the selection run's Executed is the replay's refusal, not a measurement: it is scored
    # at Surfaced x Selected and its Figure 2 stops at Invoked; the execution run's shows
    # Executed, counted here from the records
    assert arms["sel"].level == "selection" and arms["sel"].symbol == "IR_DS"
    assert [s.stage for s in arms["sel"].funnel] == ["surfaced", "selected", "invoked"]
    assert [s.stage for s in arms["exe"].funnel] == ["surfaced", "selected", "invoked", "executed"]
    pos = [r for r in exe if r.polarity == "positive"]
    executed = next(s for s in arms["exe"].funnel if s.stage == "executed")
    assert (executed.successes, executed.trials) == (
        sum(bool(r.funnel.executed) for r in pos),
        len(pos),
    )
    report = Report.model_construct(invokerank=section)
    title, header, rows = host_funnel_table(report)
    assert "Figure 2 per host" in title
    selected = [r for r in rows if r[1] == "selected"]
    assert [r[2] for r in selected] == ["sel (selection)", "exe (execution)"]  # side by side
    labels = [label for label, _, _ in funnel_rows(report)]
    assert labels[:2] == ["local: surfaced: selection (sel)", "local: surfaced: execution (exe)"]
    assert any(line.startswith("Figure 2, host local:") for line in analysis_lines(report))


def _obs(arm: str, task: str, selected: bool) -> Any:
    return from_record(
        {
            "arm": arm,
            "task_id": task,
            "intent": "x",
            "funnel": {"surfaced": True, "selected": selected},
            "evidence_class": "local",
            "terminal_class": "focal" if selected else "answered_without_search",
        }
    )


def test_one_figure_2_group_per_host() -> None:
    runs = [_obs(arm, f"t{j}", j % 2 == 0) for arm in ("a-sel", "a-exe", "b-sel") for j in range(6)]
    metas = [
        ArmMeta("a-sel", "f", stage="selection", host="anthropic m1"),
        ArmMeta("a-exe", "f", stage="execution", host="anthropic m1"),
        ArmMeta("b-sel", "f", stage="selection", host="openai m2"),
    ]
    section = invokerank_section(runs, metas, seed=0)
    assert section is not None
    assert [(h.host, h.selection, h.execution) for h in section.hosts] == [
        ("anthropic m1", ["a-sel"], ["a-exe"]),
        ("openai m2", ["b-sel"], []),
    ]
    # without stages: no per-host grouping, Figure 2 per arm as before
    plain = invokerank_section(runs, [ArmMeta(m.id, "f") for m in metas], seed=0)
    assert plain is not None and plain.hosts == []
    labels = [label for label, _, _ in funnel_rows(Report.model_construct(invokerank=plain))]
    assert labels[0] == "a-sel: surfaced"


DRAFT = {
    "id": "ir-stages",
    "title": "Selection and execution runs in one registration (local host, small)",
    "hypothesis": "The local host selects the podcast directory as often live as replayed.",
    "falsification": "The paired bootstrap's 95% interval excludes 0.",
    "experiment": "podcast-selection",
    "kind": "exploratory",
    "split": "dev",
    "arms": SEL_EXE,
    "host": {"driver": "local", "live": LIVE},
    "budgets": {"completion_cap": 1024, "episode_tokens": 32000, "call_limit": 8},
    "design": {"repeats": 2, "rotations": 1, "seed": 3},
    "outcome": "selected",
    "primary": {"test": "paired_bootstrap", "compare": ["exe", "sel"], "draws": 2000},
}


def test_stages_end_to_end_one_report(ws: Path, cli: Any, tmp_path: Path) -> None:
    draft = tmp_path / "ir-stages.yaml"
    draft.write_text(json.dumps(DRAFT))
    assert cli("-w", ws, "register", draft).code == 0
    ran = cli("-w", ws, "run", "ir-stages", "--json")
    assert ran.code == 0, ran.stderr
    analysed = cli("-w", ws, "analyse", "ir-stages", "--json")
    assert analysed.code == 0, analysed.stderr
    ir = analysed.json()["invokerank"]
    assert [(h["host"], h["selection"], h["execution"]) for h in ir["hosts"]] == [
        ("local", ["sel"], ["exe"])
    ]
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", "ir-stages", "-o", out).code == 0
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    for r in records:  # only the execution arm's offer has a live server
        live = [s["key"] for s in (r["offer"] or {}).get("servers", []) if s.get("live")]
        assert live == (["podcatch"] if r["arm"] == "exe" and live else [])
        if r["arm"] == "sel":
            assert live == []
    for arm in ir["arms"]:
        pos = [
            r
            for r in records
            if r["arm"] == arm["arm"] and r["polarity"] == "positive" and r["status"] == "ok"
        ]
        funnel = {s["stage"]: (s["successes"], s["trials"]) for s in arm["funnel"]}
        assert funnel["selected"] == (sum(bool(r["funnel"]["selected"]) for r in pos), len(pos))
    md = (ws / "reports" / "ir-stages" / "report.md").read_text()
    assert "Figure 2 per host" in md
    assert "Figure 2 per host" in (ws / "reports" / "ir-stages" / "report.html").read_text()
    terminal = cli("-w", ws, "analyse", "ir-stages")
    assert terminal.code == 0 and "Figure 2, host local" in terminal.stdout
