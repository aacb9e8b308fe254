"""A pilot's subset of a plan's units: ``prereg run --limit/--task/--arm/--intent``.

Exploratory registrations only. A confirmatory run is the whole registered design, so
every filter is refused for it (exit 4) before anything runs or is claimed. The
selection rides on the :class:`~prereg.registry.units.RunPlan` of the run being made
(``RunPlan.selection``), so :func:`~prereg.registry.units.expand_units` gives the same
subset to every path that runs units (``run``, ``--workers``, ``--batch``,
``--dry-run``); plans made for analysis come from the registration and never carry
one: the report always counts the registered design, and says how much of it has runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prereg.core.errors import BadInput, ProtocolRefusal
from prereg.experiments import Task

if TYPE_CHECKING:
    from prereg.registry.units import RunPlan, RunUnit


@dataclass(frozen=True)
class UnitSelection:
    """Which units of the plan to run; empty fields select everything.

    ``limit``: the first N tasks of the split, in the order ``prereg split show
    EXPERIMENT --tasks`` lists them, after ``tasks`` and ``intents`` (each kept with all
    its arms and repeats, so a pilot of N tasks is paired)."""

    tasks: tuple[str, ...] = ()
    arms: tuple[str, ...] = ()
    intents: tuple[str, ...] = ()
    limit: int | None = None

    def __bool__(self) -> bool:
        return bool(self.tasks or self.arms or self.intents or self.limit is not None)

    def describe(self) -> dict[str, object]:
        """The selection as ``run --json`` reports it."""
        return {
            "tasks": list(self.tasks),
            "arms": list(self.arms),
            "intents": list(self.intents),
            "limit": self.limit,
        }

    def check(self, plan: RunPlan, split_tasks: Sequence[Task]) -> None:
        """Refuse the selection for a confirmatory plan (exit 4), and names the plan does
        not have (exit 2, naming the option)."""
        if not self:
            return
        if plan.kind == "confirmatory":
            raise ProtocolRefusal(
                f"'{plan.registration_id}' is confirmatory: it runs its whole registered "
                "design, so --limit, --task, --arm and --intent are refused (they are for "
                "exploratory pilots)",
                field="kind",
            )
        if self.limit is not None and self.limit < 1:
            raise BadInput("--limit must be at least 1", field="limit")
        _known("--task", self.tasks, [t.id for t in split_tasks], f"split '{plan.split}'")
        _known("--arm", self.arms, [a for a, _ in plan.arms], "the registration's arms")
        _known("--intent", self.intents, [t.intent for t in split_tasks], f"split '{plan.split}'")
        if not self.chosen_tasks(split_tasks):
            raise BadInput(
                "no task of split "
                f"'{plan.split}' has both a --task and an --intent selected: nothing to run",
                field="task",
            )

    def chosen_tasks(self, split_tasks: Sequence[Task]) -> set[str]:
        """The ids of the split's tasks the selection keeps."""
        kept = [
            t
            for t in split_tasks
            if (not self.tasks or t.id in self.tasks)
            and (not self.intents or t.intent in self.intents)
        ]
        if self.limit is not None:
            kept = kept[: self.limit]
        return {t.id for t in kept}

    def apply(self, units: list[RunUnit], split_tasks: Sequence[Task]) -> list[RunUnit]:
        """The selected units, in plan order."""
        if not self:
            return units
        tasks = self.chosen_tasks(split_tasks)
        return [u for u in units if u.task.id in tasks and (not self.arms or u.arm in self.arms)]


def _known(option: str, given: Iterable[str], known: Sequence[str], where: str) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        shown = ", ".join(sorted(set(known))[:12])
        raise BadInput(
            f"{option} {unknown[0]!r} is not in {where} (it has: {shown}"
            f"{', ...' if len(set(known)) > 12 else ''})",
            field=option.removeprefix("--"),
        )
