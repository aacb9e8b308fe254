"""Compiled variants run offline: the sandbox, the simulated policy under the seed's harness
contract, the study records, the report's census and capacity contrasts.

References: the compiled variant itself (the sandbox must reproduce its menu and its
observations byte for byte); the seed's contract (limits = certified minimum + 2, + 2);
exact arithmetic on the records (contrast weights by hand, Holm by hand).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.sandbox import build_sandbox
from prereg.experiments.toolbottleneck.study import load_study
from prereg.reports.toolbottleneck.study import capacity_contrasts, study_markdown, write_study
from prereg.runners.toolbottleneck.host import PROFILES, Contract, SimParams, play, unit_rng
from prereg.runners.toolbottleneck.study import StudyRun, run_study
from tests.toolbottleneck.helpers import BUNDLED, as_yaml, family, family_doc

EXACT = PROFILES["sim-exact"]
CELLS = [
    Cell("capacity", v, w, 0, d)  # type: ignore[arg-type]
    for v, w, d in itertools.product([8, 12], ["low", "medium", "high"], ["raw", "linked"])
]


def _second_doc() -> dict[str, Any]:
    doc = family_doc(action=False)
    doc["id"] = "test-readonly"
    doc["intent"] = "lookup"
    return doc


def test_the_exact_policy_passes_every_cell_in_exactly_the_certified_calls() -> None:
    for doc in (family_doc(), _second_doc()):
        fam = family(doc)
        for cell in CELLS:
            sandbox = build_sandbox(fam, cell, seed=3)  # checks menu and observations
            played = play(sandbox, EXACT, Contract(), unit_rng("t", cell.code))
            v = played.verification
            assert v.success, (cell.code, v.verdicts)
            calls = [(c.function, next(iter(c.arguments.values()))) for c in played.episode.calls]
            program = [(c.function, c.arg) for c in sandbox.workflow.program]
            assert calls == program  # found every id through the tools, in certified order
            assert played.call_limit == sandbox.key.certified_minimum + 2
            assert played.turn_limit == played.call_limit + 2


@pytest.mark.parametrize("mode", ["routed", "fixed"])
def test_the_routed_menu_narrows_after_the_first_executed_operational_call(mode: str) -> None:
    fam = family(family_doc())
    sandbox = build_sandbox(fam, Cell("capacity", 12, "medium", 0, "raw"))
    played = play(sandbox, EXACT, Contract(menu_mode=mode), unit_rng("t"))  # type: ignore[arg-type]
    shown = [t["schemas"] for t in played.trace if t["kind"] == "response"]
    operational = len(fam.tools)
    assert len(shown) == sandbox.key.certified_minimum + 1  # every call, then the answer
    if mode == "routed":
        assert shown == [12] + [operational] * (len(shown) - 1)
    else:
        assert shown == [12] * len(shown)


def test_a_turn_limit_equal_to_the_call_limit_stops_the_answer() -> None:
    fam = family(family_doc())
    sandbox = build_sandbox(fam, CELLS[0])
    played = play(sandbox, EXACT, Contract(call_slack=0, turn_slack=0), unit_rng("t"))
    v = played.verification
    assert len(played.episode.calls) == sandbox.key.certified_minimum
    assert (v.flag, v.first_unmet) == ("turn_limit", "evidence")


def test_a_policy_that_repeats_itself_is_stopped_as_infeasible_within_the_call_limit() -> None:
    fam = family(family_doc())
    sandbox = build_sandbox(fam, CELLS[0])
    stuck = SimParams.from_params({"repeat_slip": 1.0}, EXACT)
    played = play(sandbox, stuck, Contract(), unit_rng("t"))
    v = played.verification
    assert v.flag == "infeasible"
    calls = len(played.episode.calls)
    assert calls < played.call_limit
    # the stop comes at the first call after which the missing reference calls (all but
    # the first search) outnumber the calls left
    missing = sandbox.key.certified_minimum - 1
    assert missing > played.call_limit - calls
    assert missing <= played.call_limit - (calls - 1)


def test_thinking_past_the_cap_truncates_before_the_first_call() -> None:
    fam = family(family_doc())
    sandbox = build_sandbox(fam, CELLS[0])
    verbose = SimParams.from_params({"think_per_kb": 10_000.0}, EXACT)
    played = play(sandbox, verbose, Contract(), unit_rng("t"))
    v = played.verification
    assert played.episode.calls == ()
    assert (v.first_unmet, v.flag) == ("selection", "completion_cap")


def test_unknown_policy_params_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown simulated policy params"):
        SimParams.from_params({"temperature": 1.0})
    with pytest.raises(ValueError, match=">= 0"):
        SimParams.from_params({"route_slip": -0.1})


# ---- a study on disk ------------------------------------------------------------------------

ARMS = [
    {"id": f"v{v}-{w}-{d}", "menu": v, "workflow": w, "encoding": d}
    for v, w, d in itertools.product([8, 12], ["low", "high"], ["raw", "linked"])
] + [
    {"id": "v8-low-compact", "menu": 8, "workflow": "low", "encoding": "compact"},
    {"id": "v8-low-typed", "menu": 8, "workflow": "low", "encoding": "typed"},
]


def _study(tmp_path: Path, **extra: Any) -> Path:
    (tmp_path / "families").mkdir(exist_ok=True)
    (tmp_path / "families" / "a.yaml").write_text(as_yaml(family_doc()))
    (tmp_path / "families" / "b.yaml").write_text(as_yaml(_second_doc()))
    doc: dict[str, Any] = {
        "id": "tiny",
        "families": ["families/a.yaml", "families/b.yaml"],
        "seeds": [0, 1],
        "repeats": 2,
        "baseline": "v8-low-raw",
        "policy": {"profile": "sim-steady", "params": {"misread_linked": 0.2, "stop_slip": 0.1}},
        "arms": ARMS,
        **extra,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_study_runs_deterministically_and_its_digest_covers_the_families(
    tmp_path: Path,
) -> None:
    path = _study(tmp_path)
    first = run_study(load_study(path))
    again = run_study(load_study(path))
    assert first.digest == again.digest
    assert [r.model_dump() for r in first.records] == [r.model_dump() for r in again.records]
    assert len(first.records) == len(ARMS) * 2 * 2 * 2
    assert {r.call_limit - r.turn_limit for r in first.records} == {-2}
    fam = tmp_path / "families" / "b.yaml"
    fam.write_text(fam.read_text().replace("Dana Okafor", "Dana Okafor-Ito"))
    assert run_study(load_study(path)).digest != first.digest


def test_bad_study_input_names_the_file_and_field(tmp_path: Path) -> None:
    path = _study(tmp_path, policy={"profile": "gpt-9"})
    with pytest.raises(BadInput) as info:
        run_study(load_study(path), str(path))
    assert info.value.field == "policy.profile"
    path = _study(tmp_path, families=["../outside.yaml"])
    with pytest.raises(BadInput) as info:
        load_study(path)
    assert info.value.field == "families[0]"
    path = _study(tmp_path, arms=[{**ARMS[0], "colour": "red"}])
    with pytest.raises(BadInput):
        load_study(path)


def _holm_by_hand(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> StudyRun:
    return run_study(load_study(_study(tmp_path_factory.mktemp("study"))))


def test_the_eight_contrasts_agree_with_numpy_by_hand(tiny_run: StudyRun) -> None:
    run = tiny_run
    rows = capacity_contrasts(list(run.records), "v8-low-raw", draws=2000)
    assert [r.name for r in rows][-2:] == [
        "compact - raw (baseline cell)",
        "typed - raw (baseline cell)",
    ]
    assert len(rows) == 8
    # by hand from the exported records: task means per arm, the seed's E_a = 1/4 sum s m
    # and E_ab = 1/2 sum s s m over the 2^3 cells, then the mean over tasks of a family
    # and over families
    exported = [r.model_dump(mode="json") for r in run.records]
    means: dict[tuple[str, str], list[int]] = defaultdict(list)
    family_of: dict[str, str] = {}
    for r in exported:
        means[(r["task_id"], r["arm"])].append(int(r["success"]))
        family_of[r["task_id"]] = r["family"]
    tasks = sorted(family_of)

    def m(task: str, v: int, w: str, d: str) -> float:
        got = means[(task, f"v{v}-{w}-{d}")]
        return sum(got) / len(got)

    sign = {8: -1, 12: 1, "low": -1, "high": 1, "raw": -1, "linked": 1}
    corners = list(itertools.product([8, 12], ["low", "high"], ["raw", "linked"]))

    def effect(task: str, factors: tuple[int, ...]) -> float:
        scale = 1 / 4 if len(factors) == 1 else 1 / 2
        return scale * sum(np.prod([sign[c[f]] for f in factors]) * m(task, *c) for c in corners)

    def checkpoint(task: str, encoding: str) -> float:
        got = means[(task, f"v8-low-{encoding}")]
        return sum(got) / len(got) - m(task, 8, "low", "raw")

    per_task = [
        [effect(t, f) for f in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2)]]
        + [checkpoint(t, "compact"), checkpoint(t, "typed")]
        for t in tasks
    ]
    matrix = np.array(per_task)
    families = sorted(set(family_of.values()))
    by_family = np.array(
        [matrix[[family_of[t] == f for t in tasks]].mean(axis=0) for f in families]
    )
    expected = by_family.mean(axis=0)
    assert np.any(np.abs(expected) > 0)  # the policy slips: the contrasts are not all zero
    assert [r.estimate for r in rows] == pytest.approx(list(expected), abs=1e-12)
    assert all(r.units == 2 for r in rows)
    assert [r.holm for r in rows] == pytest.approx(_holm_by_hand([r.pvalue for r in rows]))
    for row in rows:
        assert row.low <= row.estimate <= row.high


def test_the_report_shows_the_contrasts_and_the_census(tiny_run: StudyRun, tmp_path: Path) -> None:
    run = tiny_run
    text = study_markdown(list(run.records), "v8-low-raw", digest=run.digest, draws=500)
    assert "Simulated policy" in text.splitlines()[2]
    assert "## Capacity contrasts" in text
    assert "### Failure census: how failed episodes ended (terminal flag)" in text
    assert "### Truncation stratum and worst-case bounds" in text
    written = write_study(tmp_path / "out", run, "v8-low-raw", draws=500)
    lines = written[0].read_text().splitlines()
    assert len(lines) == len(run.records)
    with pytest.raises(BadInput):
        write_study(written[0], run, "v8-low-raw")


def test_the_bundled_study_is_the_seeds_capacity_factorial_with_its_checkpoints() -> None:
    study = load_study(BUNDLED.parent / "study.yaml")
    cells = {(a.menu, a.workflow, a.encoding) for a in study.spec.arms if a.policy is None}
    corners = set(itertools.product([8, 128], ["low", "high"], ["raw", "linked"]))
    checkpoints = {(32, "low", "raw"), (8, "medium", "raw"), (8, "low", "compact")}
    assert corners | checkpoints | {(8, "low", "typed")} <= cells
    assert study.spec.budgets.call_limit_over_certified == 2
    assert study.spec.budgets.turn_limit_over_calls == 2
    assert study.spec.budgets.completion_cap == 1024


def test_discovery_cells_run_on_the_shortlist_and_stop_without_availability() -> None:
    outcomes = []
    for seed in (0, 1):
        fam = family(family_doc())
        for size, retriever in itertools.product([16, 48], ["flat-lexical", "connector-first"]):
            cell = Cell("discovery", 8, "low", 0, "raw", size, retriever)  # type: ignore[arg-type]
            sandbox = build_sandbox(fam, cell, seed=seed)  # the menu is the compiled shortlist
            available = sandbox.variant.component("catalog")["availability"]["available"]
            played = play(sandbox, EXACT, Contract(), unit_rng("t", cell.code))
            v = played.verification
            assert v.success == available
            if not available:  # stopped before any request (seed 5.3, Discovery)
                assert (v.first_unmet, v.flag) == ("availability", "infeasible")
                assert played.episode.calls == () and played.turns == 0
            outcomes.append(available)
    assert True in outcomes and False in outcomes  # both kinds of cell are exercised


@pytest.mark.parametrize("action", [True, False])
def test_frontier_cells_run_through_every_handoff(action: bool) -> None:
    fam = family(family_doc(action=action))
    for handoffs in (1, 2):
        sandbox = build_sandbox(fam, Cell("frontier", 8, "low", handoffs, "raw"))
        played = play(sandbox, EXACT, Contract(), unit_rng("t", handoffs))
        assert played.verification.success
        # the seed's frontier: h handoffs behind one record cost 2 (h + 1) calls (2, 6, 14,
        # 30 for 0, 2, 6, 14); frontier tasks are read-only, the action dropped (reading 4)
        assert len(played.episode.calls) == 2 * (handoffs + 1)
        assert played.episode.final_state == {}


def test_a_frontier_arm_sits_in_front_of_the_low_workflow(tmp_path: Path) -> None:
    arm = {"id": "h2", "menu": 8, "workflow": "high", "encoding": "raw", "handoffs": 2}
    with pytest.raises(BadInput) as info:
        load_study(_study(tmp_path, arms=[arm]))
    assert "handoffs" in str(info.value.field)
