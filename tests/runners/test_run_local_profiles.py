"""The local host's named profiles (``host.model``): simulated hosts that differ measurably.

Each profile is a set of ``LocalParams`` values (``prereg.runners.drivers.local.PROFILES``);
``host.params`` override them; no ``host.model`` is today's host, unchanged. The
behavioural comparisons replay the same units (same seeds) of the bundled music-library
dev split under each profile, so differences are the profiles', not the draws'.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from run_helpers import experiment, plan

from prereg.registry.hosts import DRIVERS, model_problem, params_problem
from prereg.runners.drivers.local import BM25, PROFILES, LocalHost, LocalParams, create
from prereg.runners.orchestrate import run_plan
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore
from tests.conftest import CliResult, tree_digest

MUSIC_ARMS = (("baseline", "baseline"), ("semantic", "semantic"))
PILOT = "drafts/music-library-pilot.yaml"
UnitKey = tuple[str, str, int]  # (arm, task, repeat)


def run_dev(
    tmp: Path,
    driver: LocalHost,
    model: str | None = None,
    params: Mapping[str, Any] | None = None,
    repeats: int = 3,
) -> dict[UnitKey, RunRecord]:
    """Every unit of music-library dev (both arms, seed 7) on ``driver``, by unit key."""
    store = RunStore(tmp)
    p = plan(
        experiment="music-library",
        split="dev",
        arms=MUSIC_ARMS,
        repeats=repeats,
        seed=7,
        driver="local",
        model=model,
        params=dict(params or {}),
    )
    asyncio.run(run_plan(p, experiment("music-library"), store, driver, concurrency=4))
    return {r.unit_key: r for r in store.records()}


def outcome(r: RunRecord) -> tuple[Any, ...]:
    """What a unit did: its verdict and every event of its trace."""
    trace = [(e.kind, e.tool, repr(e.arguments), e.surfaced, e.text) for e in r.trace]
    return (r.success, r.terminal_flag, r.first_unmet_obligation, trace)


def outcomes(records: Mapping[UnitKey, RunRecord]) -> dict[UnitKey, tuple[Any, ...]]:
    return {key: outcome(r) for key, r in records.items()}


def acted(r: RunRecord) -> bool:
    return any(e.kind == "tool_call" for e in r.trace)


@pytest.fixture(scope="module")
def by_profile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[UnitKey, RunRecord]]:
    return {
        name: run_dev(tmp_path_factory.mktemp(name), create(name), model=name) for name in PROFILES
    }


# ---- the profiles themselves -----------------------------------------------------------------


def test_the_registry_lists_the_profiles() -> None:
    assert DRIVERS["local"].models == tuple(PROFILES)
    assert PROFILES["local-default"] == LocalParams()
    for name, values in PROFILES.items():
        as_params = dataclasses.asdict(values)
        # every profile's values are valid host.params at register and at run
        assert params_problem("local", as_params) is None, name
        assert LocalParams.from_params(as_params) == values
        assert create(name).params == values


def test_no_model_is_the_defaults() -> None:
    assert create().params == create(None, {}).params == LocalParams()
    # the BM25 weights the host used before they were settings are the defaults
    sig = inspect.signature(BM25.__init__).parameters
    assert (sig["k1"].default, sig["b"].default) == (LocalParams().bm25_k1, LocalParams().bm25_b)


def test_params_override_the_profiles_values() -> None:
    careful = PROFILES["local-careful"]
    got = create("local-careful", {"threshold": 1.0, "search_k": 2}).params
    assert got == dataclasses.replace(careful, threshold=1.0, search_k=2)
    assert got.temperature == careful.temperature  # the rest is the profile's
    with pytest.raises(ValueError, match="unknown local host params"):
        create("local-hasty", {"treshold": 1.0})
    with pytest.raises(ValueError, match="bm25_b"):
        create("local-hasty", {"bm25_b": 1.5})
    assert params_problem("local", {"bm25_b": 1.5}) is not None
    assert params_problem("local", {"bm25_k1": -1}) is not None


def test_an_unknown_profile_is_refused_by_the_driver_and_the_registry() -> None:
    with pytest.raises(ValueError, match="local-reckless") as err:
        create("local-reckless")
    for name in PROFILES:
        assert name in str(err.value)
    problem = model_problem("local", "local-reckless")
    assert problem is not None and all(name in problem for name in PROFILES)
    assert model_problem("local", None) is None
    assert model_problem("anthropic", "claude-anything") is None  # providers: any model


# ---- behaviour on the bundled experiment ------------------------------------------------------


def test_no_model_behaves_exactly_as_the_default_params(
    tmp_path: Path, by_profile: dict[str, dict[UnitKey, RunRecord]]
) -> None:
    """Absent model = LocalParams() = local-default, unit by unit (the same seeds)."""
    absent = run_dev(tmp_path / "absent", create())
    direct = run_dev(tmp_path / "direct", LocalHost(LocalParams()))
    assert outcomes(absent) == outcomes(direct)
    assert outcomes(by_profile["local-default"]) == outcomes(direct)


def test_a_profile_overridden_back_to_the_defaults_is_the_default_host(
    tmp_path: Path, by_profile: dict[str, dict[UnitKey, RunRecord]]
) -> None:
    params = dataclasses.asdict(LocalParams())
    hasty = run_dev(tmp_path, create("local-hasty", params), model="local-hasty", params=params)
    assert outcomes(hasty) == outcomes(by_profile["local-default"])


def test_profiles_replay_the_same_units_and_carry_their_name(
    by_profile: dict[str, dict[UnitKey, RunRecord]],
) -> None:
    keys = {name: set(records) for name, records in by_profile.items()}
    assert len({frozenset(k) for k in keys.values()}) == 1  # the same units ...
    for name, records in by_profile.items():
        for r in records.values():
            assert r.evidence_class == "local" and r.driver == "local"
            assert r.model_requested == name and r.model_returned is None
            assert r.cost_usd is None
    # ... with different outcomes
    careful, hasty = by_profile["local-careful"], by_profile["local-hasty"]
    differ = [k for k in careful if outcome(careful[k]) != outcome(hasty[k])]
    assert len(differ) >= 0.25 * len(careful)


def test_careful_declines_more_and_is_right_more_often_when_it_acts(
    by_profile: dict[str, dict[UnitKey, RunRecord]],
) -> None:
    def tool_use(name: str) -> float:
        records = list(by_profile[name].values())
        return sum(acted(r) for r in records) / len(records)

    def precision(name: str) -> float:
        """Success among the units where it used a tool (positive prompts)."""
        used = [r for r in by_profile[name].values() if acted(r) and r.polarity == "positive"]
        return sum(bool(r.success) for r in used) / len(used)

    # measured on this split (seed 7, 3 repeats): tool use .40 / .66 / .74,
    # precision .75 / .62 / .55
    assert tool_use("local-careful") < tool_use("local-default") - 0.15
    assert tool_use("local-hasty") > tool_use("local-default") + 0.03
    assert precision("local-careful") > precision("local-hasty") + 0.1
    # hasty looks at fewer tools (search_k = 3 against 5)
    assert surfaced("local-hasty", by_profile) < surfaced("local-default", by_profile) - 0.5


def surfaced(name: str, by_profile: dict[str, dict[UnitKey, RunRecord]]) -> float:
    """Mean number of tools surfaced by a unit's first search."""
    counts = [
        len(next(e.surfaced or [] for e in r.trace if e.kind == "search"))
        for r in by_profile[name].values()
        if any(e.kind == "search" for e in r.trace)
    ]
    return sum(counts) / len(counts)


# ---- through the CLI ---------------------------------------------------------------------------


def _draft(ws: Path, reg_id: str, host: str) -> Path:
    text = (ws / PILOT).read_text()
    assert "host: {driver: local}" in text
    text = text.replace("host: {driver: local}", f"host: {host}", 1)
    text = text.replace("id: music-library-pilot", f"id: {reg_id}", 1)
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    return path


def test_an_unknown_profile_is_refused_at_register(ws: Path, cli: Any) -> None:
    path = _draft(ws, "reckless", "{driver: local, model: local-reckless}")
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "local-reckless" in t)
    before = tree_digest(ws / "registry")
    result: CliResult = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "host.model" in result.stderr and "local-reckless" in result.stderr
    assert f"{path.name}:{line}:" in result.stderr
    for name in PROFILES:
        assert name in result.stderr
    assert tree_digest(ws / "registry") == before


def test_a_profile_registers_runs_and_is_recorded(ws: Path, cli: Any) -> None:
    path = _draft(
        ws, "careful-pilot", "{driver: local, model: local-careful, params: {search_k: 4}}"
    )
    registered = cli("-w", ws, "register", path, "--json")
    assert registered.code == 0, registered.stderr
    ran = cli("-w", ws, "run", "careful-pilot", "--max-units", "12", "--json")
    assert ran.code == 0, ran.stderr
    records = RunStore(ws / "runs").records(registration_id="careful-pilot")
    assert len(records) == 12
    assert {(r.driver, r.model_requested, r.evidence_class) for r in records} == {
        ("local", "local-careful", "local")
    }
