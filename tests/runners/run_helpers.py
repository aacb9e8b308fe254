"""Helpers for the runner tests: a record factory and a bundled-experiment reader."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prereg.runners.record import RunRecord

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "experiments" / "bundled"
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def record(**over: Any) -> RunRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base: dict[str, Any] = dict(
        record_id=uuid.uuid4().hex,
        registration_id="reg-1",
        registration_digest=DIGEST_A,
        experiment="music-library",
        arm="baseline",
        surface="baseline",
        task_id="t001",
        intent="find-tracks",
        cluster="c01",
        split="dev",
        polarity="positive",
        repeat=0,
        rotation=0,
        driver="replay",
        evidence_class="replay",
        started_at=now,
        finished_at=now,
        success=True,
        status="ok",
    )
    base.update(over)
    return RunRecord.model_validate(base)


def bundled_reader(name: str) -> Callable[[str], bytes]:
    root = BUNDLED / name

    def read(rel: str) -> bytes:
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(rel)
        return path.read_bytes()

    return read


# ---- drivers and plans for harness tests ------------------------------------------------------

import asyncio  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from prereg.experiments import Experiment, load_experiment  # noqa: E402
from prereg.registry.units import Budgets, RunPlan  # noqa: E402
from prereg.runners.drivers.base import (  # noqa: E402
    Action,
    Episode,
    Exchange,
    Turn,
    Usage,
)


def experiment(name: str = "music-library") -> Experiment:
    return load_experiment(bundled_reader(name), name)


def plan(**over: Any) -> RunPlan:
    base: dict[str, Any] = dict(
        registration_id="reg-1",
        digest=DIGEST_A,
        experiment="music-library",
        kind="exploratory",
        split="dev",
        arms=(("baseline", "baseline"), ("semantic", "semantic")),
        driver="replay",
        budgets=Budgets(1024, 32000, 12, 16),
        repeats=1,
        rotations=1,
        seed=7,
    )
    base.update(over)
    return RunPlan(**base)


class ScriptedDriver:
    """Returns scripted turns (a function of the history length); for harness tests."""

    name = "scripted"
    sees_solution = False

    def __init__(
        self,
        turns: Sequence[Action | Turn],
        *,
        evidence_class: str = "api",
        loads_all_tools: bool = True,
        usage: Usage | None = None,
        cost: float | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.turns = list(turns)
        self.evidence_class = evidence_class
        self.loads_all_tools = loads_all_tools
        self.usage = usage
        self.cost = cost
        self.latency_s = latency_s
        self.seen: list[Episode] = []

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        self.seen.append(episode)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        step = self.turns[min(len(history), len(self.turns) - 1)]
        if isinstance(step, Turn):
            return step
        return Turn(
            step,
            usage=self.usage,
            cost_usd=self.cost,
            model_returned="scripted-1" if self.evidence_class == "api" else None,
        )

    async def aclose(self) -> None:
        return None


def play(
    driver: Any,
    task_id: str,
    *,
    surface: str = "baseline",
    name: str = "music-library",
    budgets: Budgets | None = None,
    exp: Experiment | None = None,
    task: Any = None,
) -> Any:
    """Run one unit of ``task_id`` (or of ``task``) through the harness; returns the record."""
    from prereg.registry.units import RunUnit
    from prereg.runners.harness import Harness
    from prereg.runners.orchestrate import run_unit

    exp = exp or experiment(name)
    t = task or exp.task(task_id)
    p = plan(
        experiment=name, arms=((surface, surface),), budgets=budgets or Budgets(1024, 32000, 12, 16)
    )
    h = Harness(exp, p.budgets, p.model, {}, p.rotations)
    unit = RunUnit(
        arm=surface,
        surface=surface,
        task=t,
        split="dev",
        repeat=0,
        rotation=0,
        seed=1,
        prompt_seed=2,
    )
    return asyncio.run(run_unit(p, h, unit, driver))
