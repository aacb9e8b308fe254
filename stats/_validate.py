"""Argument checks shared by the modules (private).

numpy is imported on first use (:class:`prereg.stats._scipy.LazyModule`): the scalar
checks of plain Python numbers (:func:`probability`, :func:`positive`) never touch it, so
:mod:`prereg.stats.sizing` (``prereg plan`` from options) runs without importing it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from prereg.stats._scipy import LazyModule

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    np = LazyModule("numpy")


def refuse_text(values: Any, name: str) -> None:
    """ValueError naming ``name`` when ``values`` is, or holds, text (a string or bytes).

    numpy would otherwise parse "5" as 5.0: a count or a rate read from a file as text
    must be converted deliberately, not silently.
    """
    if isinstance(values, (str, bytes)):  # numpy's str_ and bytes_ among them
        raise ValueError(f"{name} must be numeric, got text {values!r}")
    if isinstance(values, (int, float)) or isinstance(values, (np.number, np.bool_)):
        return
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind in "US" or (
        arr.dtype.kind == "O" and any(isinstance(v, (str, bytes)) for v in arr.ravel())
    ):
        raise ValueError(f"{name} must be numeric, got text")


def vector(values: Any, name: str, *, allow_empty: bool = False) -> NDArray[np.float64]:
    """A finite one-dimensional float array, or ValueError naming ``name``."""
    refuse_text(values, name)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains nan or infinite values")
    return arr


def probability(
    value: float,
    name: str,
    *,
    low_open: bool = True,
    high_open: bool = True,
) -> float:
    """A float in (0, 1) (ends open or closed as asked), or ValueError."""
    refuse_text(value, name)
    v = float(value)
    ok_low = v > 0 if low_open else v >= 0
    ok_high = v < 1 if high_open else v <= 1
    if not (math.isfinite(v) and ok_low and ok_high):
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}0, 1{hi}, got {value!r}")
    return v


def positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    refuse_text(value, name)
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return v


def count(value: Any, name: str) -> int:
    """A non-negative integer (numpy integers and integral floats accepted; text and
    booleans refused)."""
    refuse_text(value, name)
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}") from None
    if not math.isfinite(f) or f < 0 or f != int(f):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(f)


def counts(values: Any, name: str) -> NDArray[np.int64]:
    """An array of non-negative integers (any shape)."""
    refuse_text(values, name)
    arr = np.asarray(values)
    farr = arr.astype(np.float64)
    if not np.all(np.isfinite(farr)) or np.any(farr < 0) or np.any(farr != np.floor(farr)):
        raise ValueError(f"{name} must hold non-negative integers")
    return farr.astype(np.int64)


def alternative(value: str) -> str:
    if value not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be 'two-sided', 'greater' or 'less', got {value!r}")
    return value


def scalar_or_array(arr: NDArray[Any]) -> Any:
    """Return a Python float for 0-d results, the array otherwise."""
    if np.ndim(arr) == 0:
        return float(arr)
    return arr
