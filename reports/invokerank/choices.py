"""An arm's positive runs as first choices over the servers their offers listed: the
data of the Invoke Rating, the Selection Share and the Lever against the best
competitor (:mod:`prereg.reports.invokerank.rating`).

Gathering the choice sets only reads observations, so it is apart from the fits.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from prereg.reports.observations import Obs

# A run's choice set is the servers its offer listed, in listing order (position 0 is
# listed first), with the outside option "no tool"; its first choice is the offer's
# ``first_server`` (no external call: the outside option). A run whose first call went
# to nothing listed cannot be placed and is dropped (counted). A task may record that its
# prompt names the focal integration (``branded: true`` in the corpus): the branded-prompt
# term is then 1 for the focal servers listed to that task's runs and 0 elsewhere; it is
# fitted when some run's task is branded and reported null otherwise (not identified).

NO_TOOL = frozenset({"answered_without_search", "searched_then_declined", "unresolved"})


@dataclass(frozen=True)
class Choices:
    """An arm's positive runs as first choices over their listed servers."""

    keys: list[str]
    roles: list[str]
    chosen: list[int]  # -1: no tool
    available: list[list[bool]]
    position: list[list[float]]
    intents: list[str]
    cell: list[int]
    prompt: list[int]
    units: list[tuple[str, str, int]]
    dropped: int
    branded: list[list[float]] | None = None  # None: no run's task is branded


def first_choices(runs: Sequence[Obs], branded: Collection[str] = frozenset()) -> Choices | None:
    """The runs that recorded an offer and a terminal class, as choice sets (or None);
    ``branded``: the task ids whose prompt names the focal integration."""
    usable = [o for o in runs if o.ok and o.offer is not None and o.terminal_class is not None]
    keys: dict[str, str] = {}
    for o in usable:
        for server in (o.offer or {}).get("servers") or []:
            keys.setdefault(str(server["key"]), str(server["role"]))
    placed, dropped = [], 0
    for o in usable:
        first = o.first_server
        if (first is None and o.terminal_class not in NO_TOOL) or (
            first is not None and first not in keys
        ):
            dropped += 1
            continue
        placed.append(o)
    if not placed or not keys:
        return None
    order = list(keys)
    column = {k: j for j, k in enumerate(order)}
    intents = sorted({o.intent for o in placed})
    cells = {intent: c for c, intent in enumerate(intents)}
    tasks = {task: i for i, task in enumerate(dict.fromkeys(o.task_id for o in placed))}
    by_listing: dict[tuple[str, ...], tuple[list[bool], list[float]]] = {}
    sets = [_choice_set(o, order, by_listing) for o in placed]
    return Choices(
        keys=order,
        roles=[keys[k] for k in order],
        chosen=[-1 if o.first_server is None else column[o.first_server] for o in placed],
        available=[a for a, _ in sets],
        position=[p for _, p in sets],
        intents=intents,
        cell=[cells[o.intent] for o in placed],
        prompt=[tasks[o.task_id] for o in placed],
        units=[o.unit for o in placed],
        dropped=dropped,
        branded=_branded(placed, [keys[k] for k in order], branded),
    )


def _choice_set(
    o: Obs,
    order: Sequence[str],
    seen: dict[tuple[str, ...], tuple[list[bool], list[float]]] | None = None,
) -> tuple[list[bool], list[float]]:
    """Which of ``order``'s servers run ``o`` listed, and at which position (0: first);
    ``seen``: the answers so far by listing (the runs of an arm mostly list the same
    servers in the same order), each run getting its own copy of the lists."""
    listed = tuple(str(s["key"]) for s in (o.offer or {}).get("servers") or [])
    if seen is not None and listed in seen:
        available, position = seen[listed]
        return list(available), list(position)
    at = {k: i for i, k in reversed(list(enumerate(listed)))}  # first listing wins
    answer = [k in at for k in order], [float(at[k]) if k in at else 0.0 for k in order]
    if seen is not None:
        seen[listed] = (list(answer[0]), list(answer[1]))
    return answer


def _branded(
    placed: Sequence[Obs], roles: Sequence[str], branded: Collection[str]
) -> list[list[float]] | None:
    """1 for the focal servers of runs whose task is branded (None: no such run)."""
    if not any(o.task_id in branded for o in placed):
        return None
    return [[float(o.task_id in branded and r == "focal") for r in roles] for o in placed]
