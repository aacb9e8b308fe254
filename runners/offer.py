"""In which order each run unit lists what its arm offers.

What an arm offers (its surface and pool, transformed by its control) is
:mod:`prereg.experiments.offers`; :func:`build_offers` builds every arm's offer
once per run from the plan.

:func:`arrange` lists one unit's servers. Integrations rotate as blocks (each
keeps its own tool order): rotation r of R shifts the blocks by floor(r n / R)
places, n the arm's number of blocks. A clone pair is one block, so the copies
stay adjacent and their relative order is the unit's 2 x 2 cell's alone:
cell c gives copy a the second label when c & 1 and lists copy b first when
c & 2. Balance: within an arm every rotation (and cell) is used floor or ceil of
(prompts x repeats) / R times; each block sits in each position equally often
when R is a multiple of n and the prompts x repeats a multiple of R.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prereg.experiments import Experiment
from prereg.experiments.offers import ArmOffer, ArmSpec, Server, arm_offer, offers_for
from prereg.experiments.surfaces import Role, Surface, Tool
from prereg.runners.units import RunPlan, RunUnit

__all__ = [
    "ArmOffer",
    "ArmSpec",
    "Server",
    "arm_offer",
    "arrange",
    "build_offers",
    "listed_tools",
    "offered_items",
    "plain_offer",
    "rotate_single",
    "unit_servers",
]


def build_offers(plan: RunPlan, experiment: Experiment) -> dict[str, ArmOffer]:
    """Every arm's offer; BadInput (nothing run) when a control cannot apply."""
    return offers_for(plan.specs(), experiment, plan.seed)


def plain_offer(experiment: Experiment, surface: str) -> ArmOffer:
    """The offer of an arm without a control on ``surface``."""
    return arm_offer(ArmSpec(surface, surface), experiment, 0)


def arrange(offer: ArmOffer, rotation: int, rotations: int, cell: int = 0) -> list[Server]:
    """The servers one unit lists, in order (see the module docstring)."""
    if offer.clones:
        a, b = offer.clones[cell & 1]
        first: list[Server] = [b, a] if cell & 2 else [a, b]
        others = list(offer.servers[1:])
    else:
        first = [offer.servers[0]]
        others = list(offer.servers[1:])
    blocks = [first] + [[s] for s in others]
    shift = (rotation * len(blocks)) // max(rotations, 1)
    ordered = blocks[shift:] + blocks[:shift]
    return [server for block in ordered for server in block]


def unit_servers(offers: Mapping[str, ArmOffer], unit: RunUnit, rotations: int) -> list[Server]:
    return arrange(offers[unit.arm], unit.rotation, rotations, unit.cell)


def listed_tools(servers: Sequence[Server]) -> list[tuple[Tool, Role, Surface]]:
    """The tools of the listed servers, in order; a server keeps its own tool order.

    Without a pool, a single surface's *tools* rotate instead (there are no blocks);
    :func:`rotate_single` does that.
    """
    return [
        (tool, server.role, server.surface) for server in servers for tool in server.surface.tools
    ]


def rotate_single(
    items: list[tuple[Tool, Role, Surface]], rotation: int, rotations: int
) -> list[tuple[Tool, Role, Surface]]:
    shift = (rotation * len(items)) // max(rotations, 1)
    return items[shift:] + items[:shift]


def offered_items(
    offer: ArmOffer, rotation: int, rotations: int, cell: int = 0
) -> tuple[list[Server], list[tuple[Tool, Role, Surface]]]:
    """(listed servers, offered tools) of one unit.

    With one server and no clone pair the tools themselves rotate; otherwise the
    servers rotate as blocks.
    """
    servers = arrange(offer, rotation, rotations, cell)
    items = listed_tools(servers)
    if len(servers) == 1:
        items = rotate_single(items, rotation, rotations)
    return servers, items
