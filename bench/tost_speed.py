"""Speed of the exact binary TOST (``prereg.stats.tost_paired``, issue 39 item 9).

For 100, 1,000 and 5,000 pairs (3% and 2.5% discordant, e.g. b = 30 and c = 25 on 1,000
pairs, margin 0.1, alpha 0.05) prints:

* cold: a fresh ``python`` subprocess per measurement, timing ``import prereg.stats``
  and then the first call (which pays every lazy import, scipy.special among them, and
  fills no cache the call could reuse); the median and the minimum over ``--cold``
  processes, and the whole process's wall time;
* warm: in this process, after a warm-up call, the median and minimum of ``--repeats``
  calls, each on different counts (b moves by one per call) so no per-outcome cache
  answers it;
* the paired t TOST on the same data, for scale.

Target (issue 39): under 0.5 s cold on 1,000 pairs. No assertions: figures only.

    python bench/tost_speed.py [--sizes 100 1000 5000] [--cold 3] [--repeats 5]
    python bench/tost_speed.py --module /tmp/paired_before.py   # time another copy
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

_COLD = r"""
import json, sys, time
start = time.perf_counter()
import numpy as np
import prereg.stats
module_path, n, b, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if module_path:
    import importlib.util
    spec = importlib.util.spec_from_file_location("paired_copy", module_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tost = mod.tost_paired
else:
    tost = prereg.stats.tost_paired
imported = time.perf_counter()
d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
res = tost(d, 0.1, 0.05, method="exact")
done = time.perf_counter()
print(json.dumps({"import": imported - start, "call": done - imported,
                  "low": res.low, "high": res.high, "p": res.pvalue}))
"""


def _counts(n: int) -> tuple[int, int]:
    return round(0.03 * n), round(0.025 * n)


def _differences(n: int, b: int, c: int) -> np.ndarray[Any, Any]:
    return np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))


def _cold(n: int, module: str, timeout: float) -> dict[str, float]:
    b, c = _counts(n)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _COLD, module, str(n), str(b), str(c)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    figures["process"] = time.perf_counter() - start
    return figures


def _tost(module: str) -> Any:
    if not module:
        from prereg.stats import tost_paired

        return tost_paired
    import importlib.util

    spec = importlib.util.spec_from_file_location("paired_copy", module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.tost_paired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--cold", type=int, default=3, help="cold processes per size")
    parser.add_argument("--repeats", type=int, default=5, help="warm calls per size")
    parser.add_argument("--module", default="", help="time this copy of stats/paired.py")
    parser.add_argument("--timeout", type=float, default=600.0, help="per cold process, s")
    args = parser.parse_args()

    tost = _tost(args.module)
    print("exact binary TOST (tost_paired, method='exact', margin 0.1, alpha 0.05)")
    if args.module:
        print(f"module: {args.module}")
    header = (
        f"{'pairs':>6} {'b':>4} {'c':>4} | {'import':>7} {'cold call':>18} {'process':>8}"
        f" | {'warm call':>18} | {'t TOST':>8}  interval"
    )
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        b, c = _counts(n)
        colds = [_cold(n, args.module, args.timeout) for _ in range(args.cold)]
        cold_call = [f["call"] for f in colds]
        d = _differences(n, b, c)
        res = tost(d, 0.1, 0.05, method="exact")  # warm-up
        warm = []
        for i in range(args.repeats):
            di = _differences(n, b + 1 + i, c)
            start = time.perf_counter()
            tost(di, 0.1, 0.05, method="exact")
            warm.append(time.perf_counter() - start)
        dt = d + np.linspace(-1e-3, 1e-3, n)  # not binary: the paired t
        start = time.perf_counter()
        for _ in range(100):
            tost(dt, 0.1, 0.05)
        t_call = (time.perf_counter() - start) / 100
        print(
            f"{n:>6} {b:>4} {c:>4} | {statistics.median(f['import'] for f in colds):>6.3f}s"
            f" {statistics.median(cold_call):>7.3f}s (min {min(cold_call):.3f})"
            f" {statistics.median(f['process'] for f in colds):>7.3f}s"
            f" | {statistics.median(warm):>7.3f}s (min {min(warm):.3f})"
            f" | {1e3 * t_call:>6.3f}ms  [{res.low:.6f}, {res.high:.6f}]"
        )
    print()
    print(
        "cold call: the first call in a fresh process after `import prereg.stats` (its lazy"
        " imports included); process: the subprocess's whole wall time (interpreter start"
        " included); warm call: new counts each call, everything imported."
    )


if __name__ == "__main__":
    main()
