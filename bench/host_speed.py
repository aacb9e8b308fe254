"""How fast this host runs plain Python now, printed by the benches beside the load average.

A shared or throttled machine does not run the same code equally fast from one session to
the next (issue 15's provider bench: 0.89-0.92 of the limit in one session, 0.83-0.89 in
the next, the provider path unchanged). Two bench figures compare only beside this one:
the best of ``repeats`` timings of a fixed loop, in seconds (lower is faster).
"""

from __future__ import annotations

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


def describe(seconds: float) -> str:
    return f"plain-Python speed: {LOOP // 1_000_000}M-iteration loop {seconds:.2f} s (best of 3)"
