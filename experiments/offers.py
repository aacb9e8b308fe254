"""What each arm offers a host: its surface and pool, transformed by its control.

A pure function of the experiment definitions, an arm's registered control and
the design seed, so the registry checks at ``register`` that every control can
apply, and the runners build the same offers before a run (their listing order
per unit is the functions at the end of this module):

- the arm's surface (the *focal* integration) followed by the experiment's pool
  members in their listed order (competitors and decoys), as
  :meth:`Experiment.offered` gives them;
- transformed by the arm's control (:mod:`prereg.experiments.controls`):
  ``blinded`` replaces the focal surface by its blinded form; ``decoy`` appends
  the named server to the pool with role ``decoy``; ``clone_swap`` replaces the
  focal surface by two labelled copies (keys ``<surface>:a`` and
  ``<surface>:b``, both role ``focal``); ``placebo`` changes nothing and must
  offer exactly what its reference offers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prereg.core.errors import BadInput
from prereg.experiments.controls import blinded, clone_copy, clone_labels
from prereg.experiments.loader import Experiment
from prereg.experiments.surfaces import Role, Surface, Tool


@dataclass(frozen=True)
class ArmSpec:
    """One registered arm with its control (see ``prereg.experiments.controls``)."""

    id: str
    surface: str
    control: str | None = None
    reference: str | None = None
    decoy: str | None = None


@dataclass(frozen=True)
class Server:
    """One integration as an arm offers it: ``key`` is unique within the arm."""

    key: str
    surface: Surface
    role: Role
    source: str  # the experiment's surface id it comes from

    @property
    def digest(self) -> str:
        return self.surface.digest


@dataclass(frozen=True)
class ArmOffer:
    """An arm's integrations in canonical order (focal block first, then the pool)."""

    arm: str
    surface: str
    control: str | None
    reference: str | None
    servers: tuple[Server, ...]  # the focal block is servers[0]
    # clone_swap: copies (a, b) per label assignment (0: a has labels[0]); else empty
    clones: tuple[tuple[Server, Server], ...] = ()
    labels: tuple[str, str] | None = None

    @property
    def is_clone(self) -> bool:
        return bool(self.clones)

    def every_server(self) -> list[Server]:
        """Every server the arm may list in some unit (both labelings of a clone pair)."""
        out = list(self.servers if not self.clones else self.servers[1:])
        for a, b in self.clones:
            out += [a, b]
        return out


def _check_names(arm: str, servers: Sequence[Server]) -> None:
    owner: dict[str, str] = {}
    for server in servers:
        for tool in server.surface.tools:
            if tool.name in owner:
                raise BadInput(
                    f"arm '{arm}': tool name '{tool.name}' is offered by both "
                    f"'{owner[tool.name]}' and '{server.key}' (hosts call tools "
                    "by name)",
                    field="arms",
                )
            owner[tool.name] = server.key


def arm_offer(spec: ArmSpec, experiment: Experiment, seed: int) -> ArmOffer:
    """The offer of one arm (BadInput if its control cannot apply to this experiment)."""
    if spec.surface not in experiment.surfaces:
        raise BadInput(
            f"arm '{spec.id}': surface '{spec.surface}' is not defined by the experiment",
            field="arms",
        )
    base = experiment.offered(spec.surface)
    focal_surface = base[0][0]
    focal = Server(spec.surface, focal_surface, "focal", spec.surface)
    others = [Server(s.id, s, role, s.id) for s, role in base[1:]]
    clones: list[tuple[Server, Server]] = []
    labels = None
    if spec.control == "blinded":
        focal = Server(spec.surface, blinded(focal_surface), "focal", spec.surface)
    elif spec.control == "decoy":
        decoy = spec.decoy or ""
        offered = {spec.surface, *(s.key for s in others)}
        if decoy not in experiment.surfaces:
            raise BadInput(
                f"arm '{spec.id}': decoy '{decoy}' is not a surface of the "
                f"experiment (known: {', '.join(sorted(experiment.surfaces))})",
                field="arms",
            )
        if decoy in offered:
            raise BadInput(
                f"arm '{spec.id}': decoy '{decoy}' is already offered in the "
                "reference's pool; a decoy control adds a server the reference "
                "does not offer",
                field="arms",
            )
        others.append(Server(decoy, experiment.surfaces[decoy], "decoy", decoy))
    elif spec.control == "clone_swap":
        labels = clone_labels(seed, spec.id)
        taken = {s.surface.name for s in others}
        if set(labels) & taken:
            raise BadInput(
                f"arm '{spec.id}': a clone label collides with a pool member's name", field="arms"
            )
        for bit in (0, 1):
            la, lb = (labels[0], labels[1]) if bit == 0 else (labels[1], labels[0])
            clones.append(
                (
                    Server(
                        f"{spec.surface}:a",
                        clone_copy(focal_surface, la, f"{spec.surface}:a"),
                        "focal",
                        spec.surface,
                    ),
                    Server(
                        f"{spec.surface}:b",
                        clone_copy(focal_surface, lb, f"{spec.surface}:b"),
                        "focal",
                        spec.surface,
                    ),
                )
            )
    elif spec.control not in (None, "placebo"):
        raise BadInput(f"arm '{spec.id}': unknown control '{spec.control}'", field="arms")
    servers = (focal, *others)
    if clones:
        for pair in clones:
            _check_names(spec.id, [*pair, *others])
    else:
        _check_names(spec.id, servers)
    return ArmOffer(
        arm=spec.id,
        surface=spec.surface,
        control=spec.control,
        reference=spec.reference,
        servers=servers,
        clones=tuple(clones),
        labels=labels,
    )


def offers_for(specs: Sequence[ArmSpec], experiment: Experiment, seed: int) -> dict[str, ArmOffer]:
    """Every arm's offer; BadInput when a control cannot apply to this experiment.

    Called at ``register`` (so a design that could never run is refused before it
    is recorded) and again before a run.
    """
    offers = {spec.id: arm_offer(spec, experiment, seed) for spec in specs}
    for spec in specs:
        if spec.control == "placebo" and spec.reference in offers:
            a, b = offers[spec.id], offers[spec.reference]
            if [s.digest for s in a.servers] != [s.digest for s in b.servers]:
                raise BadInput(
                    f"arm '{spec.id}': a placebo must offer exactly what its "
                    f"reference '{spec.reference}' offers",
                    field="arms",
                )
    return offers


# ---- listing order: in which order one unit lists what its arm offers ----------------------
#
# Integrations rotate as blocks (each keeps its own tool order): rotation r of R shifts
# the blocks by floor(r n / R) places, n the arm's number of blocks. A clone pair is one
# block, so the copies stay adjacent and their relative order is the unit's 2 x 2 cell's
# alone: cell c gives copy a the second label when c & 1 and lists copy b first when
# c & 2. Balance: within an arm every rotation (and cell) is used floor or ceil of
# (prompts x repeats) / R times; each block sits in each position equally often when R is
# a multiple of n and the prompts x repeats a multiple of R.


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
