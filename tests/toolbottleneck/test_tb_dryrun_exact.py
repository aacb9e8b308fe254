"""``prereg run --dry-run`` on a study: exact per-unit bounds (issue 19, reading 38).

Each unit's turn limit is resolved from its own compiled variant (certified minimum + 2,
plus 2), and an arm's request and spend bounds are sums over its units, so an arm at a
short workflow is no longer charged the longest workflow of the registration. The
figures are recomputed here from the compiler's variants (their certified minima, and a
Discovery variant's availability: a unit whose required tools are not in the shortlist
stops before any request) and the seed's contract, and priced by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.experiments.models import Solution, Task
from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.registry.units import ArmConfig, Budgets, RunUnit
from prereg.runners.providers.runs import _arm_estimate
from prereg.runners.store.choose import open_store
from prereg.runners.toolbottleneck import study as toolbottleneck_study
from tests.conftest import tree_digest
from tests.toolbottleneck.helpers import as_yaml, family, family_doc

STUDY = "dry-study"
SEEDS = (0, 1)
REPEATS = 2
CAP, EPISODE = 512, 20_000
#: arm -> its compiler cell (the Discovery arm's menu is the family's shortlist, 8)
CELLS = {
    "low": Cell("capacity", 8, "low", 0, "raw"),
    "high": Cell("capacity", 8, "high", 0, "raw"),
    "frontier": Cell("frontier", 8, "low", 2, "raw"),
    "discovery": Cell("discovery", 8, "low", 0, "raw", 48, "flat-lexical"),
}
ARMS = {
    "low": {"menu": 8, "workflow": "low"},
    "high": {"menu": 8, "workflow": "high"},
    "frontier": {"menu": 8, "handoffs": 2},
    "discovery": {"catalog": 48, "retriever": "flat-lexical"},
}


def _families() -> list[dict[str, Any]]:
    first = family_doc(action=True)
    second = family_doc(action=False)
    second["id"], second["intent"] = "test-review", "review"
    # a third with a two-record high layout: workflow lengths differ between families
    third = family_doc(action=True)
    third["id"], third["intent"] = "test-short", "short"
    third["layouts"]["high"] = [["status", "due"], ["contact"]]
    third["sizes"]["workflow_reads"] = {"low": 2, "medium": 4, "high": 4}
    third["route"] = {"workspace": "globex", "region": "ap-south", "collection": "support"}
    return [first, second, third]


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    names = []
    for doc in _families():
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    entry = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": list(SEEDS)}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _register(ws: Path, cli: Any, driver: dict[str, Any]) -> None:
    doc: dict[str, Any] = {
        "id": "dry",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [
            {"id": arm, "surface": "variants", "toolbottleneck": cell} for arm, cell in ARMS.items()
        ],
        "host": driver,
        "budgets": {
            "completion_cap": CAP,
            "episode_tokens": EPISODE,
            "call_limit_over_certified": 2,
            "turn_limit_over_calls": 2,
        },
        "design": {"repeats": REPEATS, "seed": 1},
        "primary": {"test": "mcnemar_exact", "compare": ["low", "high"]},
    }
    path = ws / "dry.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stdout + result.stderr


def _turns() -> dict[str, list[int]]:
    """arm -> each unit's turn limit, from the compiler: 0 for a Discovery unit whose
    required tools are not in the shortlist, else certified minimum + 2 + 2."""
    out: dict[str, list[int]] = {}
    for arm, cell in CELLS.items():
        turns = []
        for doc in _families():
            fam = family(doc)
            for seed in SEEDS:
                variant = compile_cell(fam, cell, seed=seed)
                minimum = variant.component("workflow")["certified_minimum"]
                # the compiler's minimum is the hand count: a search and a read per record
                # and per handoff, and the action except on the read-only frontier
                # (readings 2, 4, 5)
                records = len(doc["layouts"][cell.workflow]) + cell.handoffs
                assert minimum == 2 * records + ("action" in doc and cell.block != "frontier")
                available = (
                    cell.block != "discovery"
                    or variant.component("catalog")["availability"]["available"]
                )
                turns += [minimum + 2 + 2 if available else 0] * REPEATS
        out[arm] = turns
    return out


def _usd(turns: int, price: dict[str, Any]) -> float:
    """The harness's worst case for one unit, by hand (runs.py's module docstring)."""
    if turns == 0:
        return 0.0
    input_tokens = EPISODE * (1 if turns == 1 else 2)
    output_tokens = min(EPISODE, (turns - 1) * CAP) + CAP
    rate = max(price["input"], price.get("cache_write") or 0.0)
    return (input_tokens * rate + output_tokens * price["output"]) / 1_000_000


def test_the_dry_run_sums_each_units_own_limits(
    study_ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "PREREG_PRICES"):
        monkeypatch.delenv(name, raising=False)
    _register(study_ws, cli, {"driver": "anthropic", "model": "claude-haiku-4-5"})
    runs = tree_digest(study_ws / "runs")
    out = cli("-w", study_ws, "run", "dry", "--dry-run", "--json")
    assert out.code == 0, out.stderr
    assert tree_digest(study_ws / "runs") == runs  # nothing written
    data = out.json()
    turns = _turns()
    assert set(data["arms"]) == set(ARMS)
    for arm, figures in data["arms"].items():
        units = turns[arm]
        assert figures["units_to_run"] == len(units) == len(_families()) * len(SEEDS) * REPEATS
        assert figures["requests"] == {
            "min": sum(1 for t in units if t),
            "max": sum(units),
        }
        assert figures["per_unit_max"]["requests"] == max(units)
        assert figures["spend_upper_bound_usd"] == pytest.approx(
            sum(_usd(t, figures["price"]) for t in units), abs=2e-6
        )
        assert figures["per_unit_max"]["usd"] == pytest.approx(
            _usd(max(units), figures["price"]), abs=1e-6
        )
    assert data["requests"]["max"] == sum(sum(t) for t in turns.values())
    assert data["spend_upper_bound_usd"] == pytest.approx(
        sum(a["spend_upper_bound_usd"] for a in data["arms"].values()), abs=1e-5
    )
    # the low workflow's units are shorter than the high's, task by task
    assert all(a < b for a, b in zip(turns["low"], turns["high"], strict=True))
    # before: every unit of an arm was charged the widest task's longest certified minimum
    # over the registration's arms (here the high workflow or the frontier), plus 2 + 2
    longest = max(max(t) for t in turns.values())
    low = data["arms"]["low"]
    assert low["requests"]["max"] < len(turns["low"]) * longest
    assert low["spend_upper_bound_usd"] < len(turns["low"]) * _usd(longest, low["price"])
    assert low["spend_upper_bound_usd"] < data["arms"]["high"]["spend_upper_bound_usd"]


def test_a_discovery_unit_without_its_tools_makes_no_request(study_ws: Path, cli: Any) -> None:
    """On the simulated policy (nothing paid) the request bounds are the same sums; a
    Discovery unit whose shortlist misses a required tool stops before any request."""
    _register(study_ws, cli, {"driver": "local"})
    data = cli("-w", study_ws, "run", "dry", "--dry-run", "--json").json()
    turns = _turns()
    assert 0 in turns["discovery"]  # the small catalog leaves some tool out of a shortlist
    for arm, figures in data["arms"].items():
        assert figures["requests"]["max"] == sum(turns[arm])
        assert figures["requests"]["min"] == sum(1 for t in turns[arm] if t)
        assert figures["spend_upper_bound_usd"] == 0.0
    # the records agree: the unavailable units made no request, the others stayed in bounds
    assert cli("-w", study_ws, "run", "dry", "--json").code == 0
    store = open_store(study_ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "dry"]
    finally:
        store.close()
    for arm in ARMS:
        mine = [r for r in records if r.arm == arm]
        assert sum(1 for r in mine if r.turns) == data["arms"][arm]["requests"]["min"]
        assert max(r.turns for r in mine) <= data["arms"][arm]["per_unit_max"]["requests"]


def test_a_dry_run_refuses_a_variant_that_is_not_the_registered_one(
    study_ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run builds each unit's variant as the run does, so a compiler that compiles
    otherwise is refused (exit 3) before any figure is shown."""
    _register(study_ws, cli, {"driver": "local"})
    real = toolbottleneck_study.build_sandbox

    def other(family: Any, cell: Any, *, seed: int = 0) -> Any:
        return real(family, cell, seed=seed + 1)

    monkeypatch.setattr(toolbottleneck_study, "build_sandbox", other)
    result = cli("-w", study_ws, "run", "dry", "--dry-run", "--json")
    assert result.code == 3
    error = json.loads(result.stdout)
    assert error["error"] == "IntegrityError" and "register anew" in error["message"]


def _unit(task: str, steps: int) -> RunUnit:
    solution = Solution(certified=True, steps=[{"op": "op"}] * steps)
    return RunUnit(
        arm="a",
        surface="s",
        task=Task(id=task, intent="i", cluster="c", prompt="p", solution=solution),
        split="dev",
        repeat=0,
        rotation=0,
        seed=0,
        prompt_seed=0,
    )


def test_an_arms_bounds_are_sums_over_its_units_own_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per-task rules (certified minimum + 2, + 2) on units of 1 and 3 steps: the sums of
    each unit's worst case; one limit for every unit gives n times the one unit's, as
    before; an arm with nothing pending has nothing to spend."""
    monkeypatch.delenv("PREREG_PRICES", raising=False)
    rules = Budgets(
        completion_cap=CAP,
        episode_tokens=EPISODE,
        call_limit_over_certified=2,
        turn_limit_over_calls=2,
    )
    config = ArmConfig("anthropic", "claude-haiku-4-5", budgets=rules)
    units = [_unit("t1", 1), _unit("t2", 3), _unit("t3", 3)]
    out = _arm_estimate(config, units, batch=False, prices=None)
    price = out["price"]
    assert out["requests"] == {"min": 3, "max": 5 + 7 + 7}
    assert out["per_unit_max"]["requests"] == 7
    assert out["spend_upper_bound_usd"] == pytest.approx(
        _usd(5, price) + 2 * _usd(7, price), abs=1e-6
    )
    fixed = ArmConfig(
        "anthropic",
        "claude-haiku-4-5",
        budgets=Budgets(completion_cap=CAP, episode_tokens=EPISODE, turn_limit=6),
    )
    same = _arm_estimate(fixed, units, batch=False, prices=None)
    assert same["requests"] == {"min": 3, "max": 18}
    assert same["spend_upper_bound_usd"] == round(same["per_unit_max"]["usd"] * 3, 6)
    idle = _arm_estimate(config, [], batch=False, prices=None)
    assert idle["requests"] == {"min": 0, "max": 0}
    assert idle["spend_upper_bound_usd"] == 0.0 and not idle["notes"]
