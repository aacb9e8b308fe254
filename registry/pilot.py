"""A pilot's options: ``prereg run --limit/--task/--arm/--intent`` and ``--cache``; and
``--session K``, which keeps one replicate session's units (:mod:`prereg.registry.sessions`:
not a pilot's option, but a selection of units that rides on the same plan field).

Exploratory registrations only. A confirmatory run is the whole registered design with
fresh responses, so every filter and the cache are refused for it (exit 4) before
anything runs or is claimed. The options ride on the
:class:`~prereg.registry.units.RunPlan` of the run being made (``RunPlan.pilot``), so
:func:`~prereg.registry.units.expand_units` gives the same subset to every path that
runs units (``run``, ``--workers``, ``--batch``, ``--dry-run``) and the provider
drivers see the cache flag wherever they are built; plans made for analysis come from
the registration and never carry them: the report always counts the registered design,
and says how much of it has runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from prereg.core.errors import BadInput, ProtocolRefusal
from prereg.experiments import Task
from prereg.registry.hosts import PROVIDER_DRIVERS
from prereg.registry.sessions import check_session


class _Plan(Protocol):
    """What the options read of a :class:`~prereg.registry.units.RunPlan` (which carries
    them, so this module cannot import it)."""

    @property
    def registration_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def split(self) -> str: ...
    @property
    def arms(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def sessions(self) -> int: ...
    def arm_configs(self) -> Mapping[str, Any]: ...


class _Unit(Protocol):
    @property
    def arm(self) -> str: ...
    @property
    def task(self) -> Task: ...
    @property
    def session(self) -> int: ...


U = TypeVar("U", bound=_Unit)


@dataclass(frozen=True)
class PilotOptions:
    """Which units of the plan to run (empty fields select everything), and whether
    provider responses may come from the response cache.

    ``limit``: the first N tasks of the split, in the order ``prereg split show
    EXPERIMENT --tasks`` lists them, after ``tasks`` and ``intents`` (each kept with all
    its arms and repeats, so a pilot of N tasks is paired). ``cache``: see
    :mod:`prereg.runners.providers.response_cache`. ``session``: only this replicate
    session's units (1-based; ``run --session K``, :mod:`prereg.registry.sessions`), a
    registered part of the design, so not among what :attr:`selects` (a pilot's subset)."""

    tasks: tuple[str, ...] = ()
    arms: tuple[str, ...] = ()
    intents: tuple[str, ...] = ()
    limit: int | None = None
    cache: bool = False
    session: int | None = None

    @property
    def selects(self) -> bool:
        """Whether the pilot's options keep only part of the units (``session`` aside)."""
        return bool(self.tasks or self.arms or self.intents or self.limit is not None)

    @property
    def is_pilot(self) -> bool:
        """Whether any pilot's option is given (``session`` is not one)."""
        return self.selects or self.cache

    def __bool__(self) -> bool:
        return self.is_pilot or self.session is not None

    def describe(self) -> dict[str, object]:
        """The options as ``run --json`` reports them."""
        return {
            "tasks": list(self.tasks),
            "arms": list(self.arms),
            "intents": list(self.intents),
            "limit": self.limit,
            "cache": self.cache,
        }

    def check(self, plan: _Plan, split_tasks: Sequence[Task]) -> None:
        """Refuse the selection for a confirmatory plan (exit 4), and names the plan does
        not have (exit 2, naming the option)."""
        if not self:
            return
        if self.session is not None:
            check_session(
                self.session,
                registration_id=plan.registration_id,
                sessions=plan.sessions,
                split=plan.split,
            )
        if plan.kind == "confirmatory" and self.is_pilot:
            raise ProtocolRefusal(
                f"'{plan.registration_id}' is confirmatory: it runs its whole registered "
                "design with fresh responses, so --limit, --task, --arm, --intent and "
                "--cache are refused (they are for exploratory pilots)",
                field="kind",
            )
        if self.cache and not any(
            c.driver in PROVIDER_DRIVERS for c in plan.arm_configs().values()
        ):
            raise BadInput(
                "--cache keeps provider responses: no arm of "
                f"'{plan.registration_id}' runs on a provider host "
                f"({', '.join(sorted(PROVIDER_DRIVERS))}), so there is nothing to cache",
                field="cache",
            )
        if self.limit is not None and self.limit < 1:
            raise BadInput("--limit must be at least 1", field="limit")
        _known("--task", self.tasks, [t.id for t in split_tasks], f"split '{plan.split}'")
        _known("--arm", self.arms, [a for a, _ in plan.arms], "the registration's arms")
        _known("--intent", self.intents, [t.intent for t in split_tasks], f"split '{plan.split}'")
        if self.selects and not self.chosen_tasks(split_tasks):
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

    def apply(self, units: list[U], split_tasks: Sequence[Task]) -> list[U]:
        """The selected units, in plan order."""
        if self.session is not None:
            units = [u for u in units if u.session == self.session - 1]
        if not self.selects:
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
