"""The registered order in which a stopping rule's e-process reads the tasks.

An anytime-valid e-process is valid in any order fixed before the data, but the path,
the crossing point and so the verdict depend on the order. The defensible reading
(issue 14) is a *registered, seeded random order*: a permutation of the split's tasks
drawn from ``design.seed``, which the registration digest pins, and not the order the
corpus happens to list them in (intent by intent, so one intent's tasks would decide
alone) nor the order runs finished (scheduling).

The permutation sorts the tasks by sha256("prereg/stopping-order/v1/<seed>/<task id>"):
it depends on the seed and the task ids only, is the same on every machine and for every
version of numpy, and a task keeps its relative place when other tasks are added. The
stopping monitor, the report's completeness cut and anything that schedules tasks for a
stopping rule share this one function.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

PREFIX = "prereg/stopping-order/v1"


def _key(seed: int, task: str) -> str:
    return hashlib.sha256(f"{PREFIX}/{seed}/{task}".encode()).hexdigest()


def stream_order(tasks: Iterable[str], seed: int) -> list[str]:
    """``tasks`` in the registered stopping order for ``seed`` (duplicates dropped)."""
    unique = list(dict.fromkeys(tasks))
    return sorted(unique, key=lambda task: (_key(seed, task), task))


def describe(seed: int) -> str:
    return f"registered random order of the split's tasks (seed {seed}, sha256 of seed and id)"
