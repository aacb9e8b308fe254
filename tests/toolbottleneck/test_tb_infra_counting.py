"""Infrastructure failures in a registered study's tables count as the registration says.

Two registrations of one small study (V x W x D on the routed menu, a fixed-menu lane
and a policy switch on it, three families in three tool clusters and three intents)
differ only in ``harness.infrastructure``; the simulated host fails on infrastructure
for the large-menu factorial arms on one family's task (every repeat) and for the linked
encoding at the baseline on one unit, identically in both. Under ``count_as_failure``
(attempts 1) those units are failures of their arms in the registered contrasts, and
every table of the ToolBottleneckBench section must count them the same way: the
contrasts by family and intent and the sign-flip table (the registered contrast's
value), the failure census (failures of class ``infrastructure``), truncation
denominators, the repairs and the decoder's packets, with a table of the infrastructure
failures. Under ``retry`` they are left out of every table, and every table says so.
Everything is recomputed by hand from the exported records.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from prereg.runners.scoring import infra_record
from prereg.runners.toolbottleneck.study import StudyUnits
from tests.toolbottleneck.helpers import as_yaml, family_doc
from tests.toolbottleneck.helpers import run_cli as _run

STUDY = "infra-study"
ITT, RETRY = "infra-itt", "infra-retry"
FAILING_FAMILY = "test-escalation"
LARGE_MENU = 12
BASE = "menu-8--workflow-low--encoding-raw"
REPAIRED = f"menu-{LARGE_MENU}--workflow-low--encoding-raw"
LINKED = "menu-8--workflow-low--encoding-linked"


def _families() -> list[dict[str, Any]]:
    """Three families with an intent each, on three routes (so three tool clusters)."""
    first = family_doc(action=True)
    second = family_doc(action=False)
    second["id"], second["intent"] = "test-review", "review"
    second["route"] = {**second["route"], "workspace": "southwind"}
    third = family_doc(action=False)
    third["id"], third["intent"] = "test-audit", "audit"
    third["route"] = {**third["route"], "workspace": "eastwind"}
    return [first, second, third]


def _registration(reg_id: str, harness: dict[str, Any] | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": reg_id,
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "factorial": {
            "base": {"surface": "variants", "toolbottleneck": {"policy": "sim-truncating"}},
            "factors": [
                {"id": "menu", "sets": "toolbottleneck.menu", "levels": [8, LARGE_MENU]},
                {"id": "workflow", "sets": "toolbottleneck.workflow", "levels": ["low", "high"]},
                {"id": "encoding", "sets": "toolbottleneck.encoding", "levels": ["raw", "linked"]},
            ],
            "extra_arms": [  # the fixed-menu lane, and a switch of policy on it
                {
                    "id": f"v{m}-fixed{s}",
                    "toolbottleneck": {"menu": m, "menu_mode": "fixed", "policy": p},
                }
                for m in (8, LARGE_MENU)
                for s, p in (("", "sim-truncating"), ("-steady", "sim-steady"))
            ],
        },
        "contrasts": [
            {"id": "v", "effect": ["menu"], "unit": "cluster", "draws": 200},
            {"id": "w", "effect": ["workflow"], "unit": "cluster", "draws": 200},
        ],
        "repairs": [
            {
                "id": "routed-menu",
                "pressure": "V",
                "repaired": {"stressed": REPAIRED, "unstressed": BASE},
                "control": {"stressed": f"v{LARGE_MENU}-fixed", "unstressed": "v8-fixed"},
                "switches": [
                    {
                        "id": "steady",
                        "stressed": f"v{LARGE_MENU}-fixed-steady",
                        "unstressed": "v8-fixed-steady",
                    }
                ],
            }
        ],
        "host": {"driver": "local"},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "design": {"repeats": 2, "seed": 3},
        "primary": {"test": "paired_bootstrap", "contrast": "v", "unit": "cluster"},
    }
    if harness is not None:
        doc["harness"] = harness
    return doc


def _failing(arm: str, task: str, repeat: int) -> bool:
    """The large-menu factorial arms on the failing family's task (every repeat), and the
    linked encoding at the baseline on another family's task (repeat 0)."""
    if arm.startswith(f"menu-{LARGE_MENU}-") and task.startswith(FAILING_FAMILY):
        return True
    return (arm, task, repeat) == (LINKED, "test-review-s0", 0)


@contextlib.contextmanager
def _failing_host() -> Iterator[None]:
    """The simulated host fails on infrastructure for the large-menu arms on the failing
    family's task (an infra_error record, as a raising host gives one)."""
    original = StudyUnits.arun

    async def arun(self: StudyUnits, unit: Any, driver: Any) -> Any:
        if _failing(unit.arm, unit.task.id, unit.repeat):
            now = datetime.now(UTC)
            return infra_record(self.plan, unit, driver, "injected: host down", now, now)
        return await original(self, unit, driver)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StudyUnits, "arun", arun)
        yield


def run_infra_reports(root: Path) -> dict[str, dict[str, Any]]:
    """Both registrations (ITT and retry) run with injected infrastructure failures and
    analysed, with their exported records: the session's ``reports`` fixture
    (tests/toolbottleneck/conftest.py), run once per worker."""
    assert _run("init", root)[0] == 0
    folder = root / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    names = []
    for doc in _families():
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    entry = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": [0]}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    out: dict[str, dict[str, Any]] = {}
    harnesses = {ITT: {"infrastructure": "count_as_failure", "attempts": 1}, RETRY: None}
    for reg_id, harness in harnesses.items():
        path = root / f"{reg_id}.yaml"
        path.write_text(yaml.safe_dump(_registration(reg_id, harness), sort_keys=False))
        code, text = _run("-w", root, "register", path, "--json")
        assert code == 0, text
        with _failing_host():
            code, text = _run("-w", root, "run", reg_id, "--json")
        assert code == 0, text
        code, text = _run("-w", root, "analyse", reg_id, "--json", "--allow-incomplete")
        assert code == 0, text
        report: dict[str, Any] = json.loads(text)
        exported = root / f"{reg_id}.jsonl"
        assert _run("-w", root, "export", reg_id, "--out", exported)[0] == 0
        report["records"] = [json.loads(line) for line in exported.read_text().splitlines()]
        failed = [r for r in report["records"] if r["status"] == "infra_error"]
        assert len(failed) == 4 * 2 + 1  # four large-menu arms x two repeats, and one
        assert all(_failing(r["arm"], r["task_id"], r["repeat"]) for r in failed)
        out[reg_id] = report
    return out


def _episode_tables(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The section's tables that count episodes: all but Figure 5's table, the compiled
    variants of one family (an illustration; no episode, so no infrastructure note)."""
    tables: list[dict[str, Any]] = report["toolbottleneck"]["tables"]
    return [t for t in tables if not t["title"].startswith("Example task family compiled")]


def _table(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    tables = report["toolbottleneck"]["tables"]
    found: dict[str, Any] = next(t for t in tables if t["title"].startswith(prefix))
    return found


def _unit(r: dict[str, Any]) -> tuple[str, str, int]:
    return (r["arm"], r["task_id"], r["repeat"])


def _scored(records: list[dict[str, Any]], counting: bool) -> list[dict[str, Any]]:
    """The registered rule by hand: the ok records, and under count_as_failure (attempts
    1) one failure per unit with an infra_error record and no ok record."""
    ok = {_unit(r) for r in records if r["status"] == "ok"}
    out = [r for r in records if r["status"] == "ok"]
    if counting:
        seen = set()
        for r in records:
            if r["status"] == "infra_error" and _unit(r) not in ok and _unit(r) not in seen:
                seen.add(_unit(r))
                out.append({**r, "success": False, "counted": True})
    return out


def _family(task: str) -> str:
    return task.rsplit("-s", 1)[0]


def _contrast_by_hand(
    report: dict[str, Any], scored: list[dict[str, Any]], name: str, by: str
) -> float:
    """The registered weights over task means, tasks measured in every weighted arm,
    averaged within each unit (``by``: a record field) and then over units."""
    weights = {c["id"]: c for c in report["contrasts"]}[name]["weights"]
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    unit_of: dict[str, str] = {}
    for r in scored:
        if r["arm"] in weights:
            runs[(r["task_id"], r["arm"])].append(float(r["success"]))
            unit_of[r["task_id"]] = r[by]
    per_unit: dict[str, list[float]] = defaultdict(list)
    for task in sorted(unit_of):
        if all((task, a) in runs for a in weights):
            value = sum(w * np.mean(runs[(task, a)]) for a, w in weights.items())
            per_unit[unit_of[task]].append(float(value))
    return float(np.mean([np.mean(v) for v in per_unit.values()]))


@pytest.mark.parametrize("contrast", ["v", "w"])
def test_count_as_failure_every_contrast_table_agrees_with_the_registered(
    reports: dict[str, dict[str, Any]], contrast: str
) -> None:
    report = reports[ITT]
    registered = {c["id"]: c for c in report["contrasts"]}[contrast]
    scored = _scored(report["records"], counting=True)
    # the registered analysis counts the units as failures: its value is the one by hand
    assert registered["units"] == 3
    by_hand = _contrast_by_hand(report, scored, contrast, "cluster")
    assert registered["estimate"] == pytest.approx(by_hand, abs=1e-12)
    if contrast == "v":
        assert registered["estimate"] < 0  # the failing units are in the large-menu arms
    shown = f"{100 * registered['estimate']:+.1f}"
    table = _table(report, "Contrasts by resampling unit")
    rows = {(r[0], r[1].split(" ")[0]): r for r in table["rows"]}
    assert rows[(contrast, "family")][1:3] == ["family (3)", shown]
    assert rows[(contrast, "intent")][1:3] == ["intent (3)", shown]
    assert f"{100 * _contrast_by_hand(report, scored, contrast, 'intent'):+.1f}" == shown
    flips = {r[0]: r for r in _table(report, "Exact sign-flip")["rows"]}
    assert flips[contrast][1:3] == ["3", shown]


def test_count_as_failure_the_census_shows_the_infrastructure_failures(
    reports: dict[str, dict[str, Any]],
) -> None:
    report = reports[ITT]
    records = report["records"]
    scored = _scored(records, counting=True)
    counted = [r for r in scored if r.get("counted")]
    assert len(counted) == 9
    census = _table(report, "Failure census")
    assert "infrastructure" in census["columns"]
    at = census["columns"].index("infrastructure")
    rows = {r[0]: r for r in census["rows"]}
    for arm in [*sorted({r["arm"] for r in records}), "(all)"]:
        mine = [r for r in scored if arm in ("(all)", r["arm"])]
        failures = sum(1 for r in mine if not r["success"])
        settled = sum(1 for r in mine if r.get("counted"))
        assert rows[arm][1:3] == [str(len(mine)), str(failures)], arm
        assert rows[arm][at].split(" ")[0] == str(settled), arm
    assert rows["(all)"][census["columns"].index("infra_error left out")] == "0"
    # the obligation x class table has them on their own row and in their own column
    crossed = _table(report, "First unmet obligation x terminal flag")
    row = next(r for r in crossed["rows"] if r[0] == "infrastructure")
    assert row[1:] == ["0"] * 7 + [str(len(counted))]
    # truncation denominators count every settled unit (never as truncated)
    trunc = {r[0]: r for r in _table(report, "Truncation at the completion cap")["rows"]}
    for arm in {r["arm"] for r in counted}:
        assert trunc[arm][1] == "6"  # three tasks x two repeats, all counted
    # the section's table of infrastructure failures, and a note under every table
    listed = _table(report, "Infrastructure failures")
    assert "count_as_failure" in listed["title"]
    by_arm: dict[str, int] = defaultdict(int)
    for unit in counted:
        by_arm[unit["arm"]] += 1
    assert {row[0]: row[1:] for row in listed["rows"]} == {
        arm: [str(n), str(n), "0"] for arm, n in by_arm.items()
    }
    for table in _episode_tables(report):
        note = table["note"] or ""
        assert "count_as_failure, attempts 1): 9 unit(s)" in note, table["title"]


def test_count_as_failure_the_repairs_and_the_decoder_count_them_as_failures(
    reports: dict[str, dict[str, Any]],
) -> None:
    report = reports[ITT]
    scored = _scored(report["records"], counting=True)
    success = {_unit(r): bool(r["success"]) for r in scored}
    tasks = sorted({r["task_id"] for r in scored})

    def mean(arm: str) -> float:  # tasks of a family, then families (one task each here)
        return float(np.mean([np.mean([success[(arm, t, k)] for k in (0, 1)]) for t in tasks]))

    # Gamma = mu^l_{l1} - mu^0_{l1}: the repaired lane at the stressed cell (a failing arm)
    gamma = mean(REPAIRED) - mean(f"v{LARGE_MENU}-fixed")
    loss = mean("v8-fixed") - mean(f"v{LARGE_MENU}-fixed")
    row = _table(report, "Repairs against switches")["rows"][0]
    assert row[2].startswith(f"{100 * loss:+.1f} pp")
    assert row[3].startswith(f"{100 * gamma:+.1f} pp")
    assert gamma < 0
    # the decoder's packets (seed appendix H): a packet with an infrastructure failure in
    # any of its four cells is left out and counted; of the others, those whose baseline
    # succeeds and exactly one stressed cell fails
    stressed = {
        "V": f"menu-{LARGE_MENU}--workflow-low--encoding-raw",
        "W": "menu-8--workflow-high--encoding-raw",
        "D": LINKED,
    }
    infra = {_unit(r) for r in scored if r.get("counted")}
    classes = dict.fromkeys(stressed, 0)
    left_out = 0
    for task in tasks:
        for k in (0, 1):
            if any((arm, task, k) in infra for arm in (BASE, *stressed.values())):
                left_out += 1
                continue
            if not success[(BASE, task, k)]:
                continue
            failed = [p for p, arm in stressed.items() if not success[(arm, task, k)]]
            if len(failed) == 1:
                classes[failed[0]] += 1
    assert left_out > 0
    decoder = _table(report, "Does the failure record reveal the pressure?")
    assert f"({sum(classes.values())} single-failure packets" in decoder["title"]
    assert ", ".join(f"{p} {n}" for p, n in classes.items()) in decoder["note"]
    assert f"{left_out} with an infrastructure failure" in decoder["note"]


def test_retry_leaves_the_infrastructure_failures_out_and_says_so(
    reports: dict[str, dict[str, Any]],
) -> None:
    report = reports[RETRY]
    records = report["records"]
    scored = _scored(records, counting=False)
    table = _table(report, "Contrasts by resampling unit")
    rows = {(r[0], r[1]): r for r in table["rows"]}
    for contrast in ("v", "w"):
        registered = {c["id"]: c for c in report["contrasts"]}[contrast]
        assert registered["units"] == 2  # the failing family's task is left out
        by_hand = _contrast_by_hand(report, scored, contrast, "cluster")
        assert registered["estimate"] == pytest.approx(by_hand, abs=1e-12)
        assert rows[(contrast, "family (2)")][2] == f"{100 * registered['estimate']:+.1f}"
    census = _table(report, "Failure census")
    assert "infrastructure" not in census["columns"]
    by_arm = {r[0]: r for r in census["rows"]}
    at = census["columns"].index("infra_error left out")
    assert by_arm["(all)"][1] == str(len(scored))
    assert by_arm["(all)"][at] == "9"
    assert by_arm[LINKED][1] == "5" and by_arm[LINKED][at] == "1"
    infra = _table(report, "Infrastructure failures")
    assert "retry" in infra["title"]
    assert all(r[2] == "0" and r[1] == r[3] for r in infra["rows"])
    for table in _episode_tables(report):
        note = table["note"] or ""
        assert "harness.infrastructure: retry): 9 infra_error record(s) left out" in note, table[
            "title"
        ]
