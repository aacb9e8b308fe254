"""What a test decides on a block of simulated data sets, and its sum over blocks.

Every evaluator returns an :class:`Outcome` (per data set: rejected, the sign of the
estimate, whether the interval covered the truth); the driver collects them per (test,
scenario) in an :class:`_Acc`, which the summary turns into rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from prereg.stats.calibration_model import BoolArray, FloatArray


@dataclass
class Outcome:
    """Per data set: rejected, the sign of the estimate, and whether the interval covered
    the truth (None for a test without an interval)."""

    reject: BoolArray
    direction: NDArray[np.int64]
    covered: BoolArray | None = None
    undefined: int = 0


@dataclass
class _Acc:
    """Per data set results of one (test, scenario), concatenated over blocks."""

    reject: list[BoolArray] = field(default_factory=list)
    direction: list[NDArray[np.int64]] = field(default_factory=list)
    covered: list[BoolArray] = field(default_factory=list)
    undefined: int = 0
    used: list[FloatArray] = field(default_factory=list)

    def add(self, out: Outcome) -> None:
        self.reject.append(out.reject)
        self.direction.append(out.direction)
        if out.covered is not None:
            self.covered.append(out.covered)
        self.undefined += out.undefined
