"""The ``inspect`` host: runs made by Inspect AI and imported, never run by prereg.

A registration names ``host: {driver: inspect, model: <provider/model>}`` when its runs
come from Inspect AI eval logs (``prereg import --from inspect``,
:mod:`prereg.runners.exchange.inspect_log`). Its runs carry their own evidence class,
``inspect``, so they are never pooled with runs prereg made (invariant 8).
``prereg run`` refuses such a registration before anything is written
(:func:`prereg.runners.prepare.prepare`, exit 4); this driver exists so the driver table
stays complete, and refuses a turn should it ever be asked for one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prereg.registry.hosts import EvidenceClass
from prereg.runners.drivers.base import Episode, Exchange, InfraError, Turn


class InspectHost:
    name = "inspect"
    evidence_class: EvidenceClass = "inspect"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, model: str | None) -> None:
        self.model = model

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        raise InfraError(
            "the inspect host is not run by prereg: import its runs with "
            "`prereg import --from inspect LOG --registration ID`"
        )

    async def aclose(self) -> None:
        return None


def create(
    model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
) -> InspectHost:
    """The inspect host takes its model (Inspect's name for it) and nothing else."""
    if options:
        raise TypeError(f"the inspect host takes no options (got {sorted(options)})")
    if params:
        raise ValueError(f"the inspect host takes no params (got {sorted(params)})")
    return InspectHost(model)
