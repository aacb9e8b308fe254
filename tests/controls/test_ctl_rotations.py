"""Rotations and clone cells: balanced across prompts; the driver is offered what they say."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from prereg.experiments.offers import arrange
from prereg.registry.units import build_offers, expand_units
from prereg.runners.drivers.base import Episode, Exchange, FinalAnswer, Turn
from prereg.runners.harness import Harness
from prereg.runners.orchestrate import run_unit
from tests.controls.helpers import ARMS, plan, podcast, registration

EXP = podcast()
TASKS = len(EXP.tasks_in_split("dev"))


class Recorder:
    """A host that answers at once and keeps every episode it was offered."""

    name = "local"
    evidence_class = "local"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, server_text: str = "none") -> None:
        self.server_text = server_text
        self.seen: dict[str, Episode] = {}

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        self.seen[episode.label] = episode
        return Turn(FinalAnswer("no tool needed"))

    async def aclose(self) -> None:
        return None


def _play(p: Any, driver: Recorder) -> list[Any]:
    offers = build_offers(p, EXP)
    harness = Harness(EXP, p.budgets, None, {}, p.rotations, offers=offers)

    async def main() -> list[Any]:
        return [await run_unit(p, harness, u, driver) for u in expand_units(p, EXP)]

    return asyncio.run(main())


@pytest.mark.parametrize(("arms", "blocks"), [(ARMS[:3] + ARMS[4:], 4), ([ARMS[0], ARMS[3]], 5)])
def test_each_rotation_and_each_position_is_used_equally_often_in_every_arm(arms, blocks) -> None:
    """R equal to the number of blocks and R repeats: each prompt sees each rotation once, so
    every rotation is used TASKS times per arm and every block sits in every position
    TASKS times. (The decoy arm lists one more block than the others, so positions are
    exact for it at R = 5 and for the others at R = 4.)"""
    reg = registration(
        arms,
        design={"repeats": blocks, "rotations": blocks, "seed": 11},
        primary={"test": "mcnemar_exact"},
    )
    p = plan(reg)
    units = expand_units(p, EXP)
    offers = build_offers(p, EXP)
    for arm in {u.arm for u in units}:
        mine = [u for u in units if u.arm == arm]
        assert Counter(u.rotation for u in mine) == {r: TASKS for r in range(blocks)}
        for task in {u.task.id for u in mine}:
            assert sorted(u.rotation for u in mine if u.task.id == task) == list(range(blocks))
        if len(offers[arm].servers) != blocks:
            continue
        positions: Counter[tuple[str, int]] = Counter()
        for u in mine:
            listed = arrange(offers[arm], u.rotation, p.rotations, u.cell)
            block_keys = list(dict.fromkeys(s.key.split(":")[0] for s in listed))
            assert len(block_keys) == blocks
            positions.update((key, i) for i, key in enumerate(block_keys))
        assert set(positions.values()) == {TASKS}, (arm, positions)


def test_rotations_stay_balanced_when_they_cannot_be_exact() -> None:
    reg = registration(
        design={"repeats": 3, "rotations": 5, "seed": 2}, primary={"test": "mcnemar_exact"}
    )
    units = expand_units(plan(reg), EXP)
    for arm in {a["id"] for a in ARMS}:
        for repeat in range(3):
            counts = Counter(u.rotation for u in units if u.arm == arm and u.repeat == repeat)
            assert max(counts.values()) - min(counts.values()) <= 1
    # a (task, repeat) has the same rotation and cell in every arm
    key: dict[tuple[str, int], set[tuple[int, int]]] = {}
    for u in units:
        key.setdefault((u.task.id, u.repeat), set()).add((u.rotation, u.cell))
    assert all(len(v) == 1 for v in key.values())


def test_clone_cells_cross_labels_and_order_in_a_balanced_two_by_two() -> None:
    reg = registration(
        design={"repeats": 4, "rotations": 4, "seed": 5}, primary={"test": "mcnemar_exact"}
    )
    p = plan(reg)
    offers = build_offers(p, EXP)
    clone = [u for u in expand_units(p, EXP) if u.arm == "clone"]
    assert Counter(u.cell for u in clone) == {c: TASKS for c in range(4)}
    assert all(
        sorted(u.cell for u in clone if u.task.id == t) == [0, 1, 2, 3]
        for t in {u.task.id for u in clone}
    )
    crossed: Counter[tuple[str, str]] = Counter()
    for u in clone:
        listed = arrange(offers["clone"], u.rotation, p.rotations, u.cell)
        pair = [s for s in listed if s.key.startswith("focal:")]
        assert len(pair) == 2 and abs(listed.index(pair[0]) - listed.index(pair[1])) == 1
        first = pair[0].key[-1]
        label_of_a = next(s.surface.name for s in pair if s.key == "focal:a")
        crossed[(first, label_of_a)] += 1
    assert crossed == {(f, lab): TASKS for f in "ab" for lab in offers["clone"].labels}


def test_the_driver_is_offered_the_units_rotation_and_the_record_says_so() -> None:
    reg = registration(
        design={"repeats": 4, "rotations": 4, "seed": 9}, primary={"test": "mcnemar_exact"}
    )
    p = plan(reg)
    driver = Recorder()
    records = _play(p, driver)
    offers = build_offers(p, EXP)
    units = {u.label: u for u in expand_units(p, EXP)}
    assert len(records) == len(units) == 5 * TASKS * 4
    for rec in records:
        unit = units[f"{rec.arm}/{rec.task_id}/{rec.repeat}"]
        listed = arrange(offers[rec.arm], unit.rotation, p.rotations, unit.cell)
        episode = driver.seen[unit.label]
        assert [t.name for t in episode.tools] == [t.name for s in listed for t in s.surface.tools]
        assert [t.integration for t in episode.tools] == [
            s.surface.name for s in listed for _ in s.surface.tools
        ]
        assert rec.rotation == unit.rotation
        assert rec.offer is not None
        assert [s.key for s in rec.offer.servers] == [s.key for s in listed]
        assert [s.digest for s in rec.offer.servers] == [s.digest for s in listed]
        assert rec.offer.control == offers[rec.arm].control
        assert (rec.offer.clone is not None) == (rec.arm == "clone")
        if rec.offer.clone is not None:
            assert rec.offer.clone.cell == unit.cell
            assert rec.offer.clone.first == ("b" if unit.cell & 2 else "a")
    # the rotation moves the focal integration through every position of the listing
    focal_positions = Counter(
        [s.key for s in r.offer.servers].index("focal") for r in records if r.arm == "reference"
    )
    assert focal_positions == {i: TASKS for i in range(4)}
