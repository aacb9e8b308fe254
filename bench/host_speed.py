"""How fast this host runs plain Python now, printed by the benches beside the load average.

A shared or throttled machine does not run the same code equally fast from one session to
the next (issue 15's provider bench: 0.89-0.92 of the limit in one session, 0.83-0.89 in
the next, the provider path unchanged). Two bench figures compare only beside this one:
the best of ``repeats`` timings of a fixed loop, in seconds (lower is faster).

The loop fits in the processor's caches, so it does not see the other way this host
varies: on 2026-12-03 ``analyse`` at 27,000 runs, which walks hundreds of megabytes of
objects, ran 1.5-2 times slower than the day before while the loop ran as fast.
:func:`memory_walk_s` times that kind of work (objects read in an order the caches
cannot follow), so a bench states both.
"""

from __future__ import annotations

import random
import time

#: the loop's length: a few tenths of a second on the machines prereg is benched on
LOOP = 5_000_000


def python_loop_s(repeats: int = 3) -> float:
    """The best of ``repeats`` timings of summing ``range(LOOP)`` in a Python loop."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for i in range(LOOP):
            total += i
        best = min(best, time.perf_counter() - started)
    return best


#: how many small objects the memory walk reads: about 150 MB of them, far beyond any cache
OBJECTS = 500_000


def memory_walk_s(repeats: int = 2) -> float:
    """The best of ``repeats`` timings of reading one field of each of :data:`OBJECTS`
    small dicts (built once) in a shuffled order: bound by memory latency, not by the
    interpreter's speed (lower is faster)."""
    objects = [{"arm": str(i % 7), "value": i, "text": "x" * (i % 64)} for i in range(OBJECTS)]
    order = list(range(OBJECTS))
    random.Random(0).shuffle(order)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for i in order:
            total += objects[i]["value"]
        best = min(best, time.perf_counter() - started)
    return best


def describe(seconds: float, walk: float | None = None) -> str:
    loop = f"plain-Python speed: {LOOP // 1_000_000}M-iteration loop {seconds:.2f} s (best of 3)"
    if walk is None:
        return loop
    return f"{loop}; memory walk {OBJECTS // 1000}k objects {walk:.2f} s (best of 2)"
