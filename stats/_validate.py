"""Argument checks shared by the modules (private).

Every check raises ValueError with a message that names the argument (issue 39: a public
function of :mod:`prereg.stats` never answers bad input silently): NaN, infinity, empty
input, negative counts, mismatched lengths, non-positive draw counts and levels outside
(0, 1). Each kind of check lives here once:

- :func:`refuse_text`: text where numbers belong;
- :func:`array` (any shape; NaN, infinity, emptiness, a range, integrality),
  :func:`vector` (one-dimensional, finite), :func:`counts` (non-negative integers);
- :func:`labels` and :func:`integer_labels`: one label per row, none missing (numpy
  would merge every NaN label into one group);
- :func:`same_length` and :func:`broadcastable`: arguments that go together;
- :func:`count` (a non-negative integer), :func:`at_least` (a draw or resample count,
  or any integer with a floor), :func:`probability` (a level, alpha or rate),
  :func:`levels` (a sequence of levels), :func:`positive` (a scale).

numpy is imported on first use (:class:`prereg.stats._scipy.LazyModule`): the scalar
checks of plain Python numbers (:func:`probability`, :func:`positive`, :func:`count`,
:func:`at_least`) never touch it, so :mod:`prereg.stats.sizing` (``prereg plan`` from
options) runs without importing it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
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


def _scalar(value: Any, name: str) -> float:
    """``float(value)``, or ValueError naming ``name`` (a list or None is a TypeError to
    ``float``)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def probability(
    value: float,
    name: str,
    *,
    low_open: bool = True,
    high_open: bool = True,
) -> float:
    """A float in (0, 1) (ends open or closed as asked), or ValueError naming ``name``:
    "level must be in (0, 1), got 1.5"."""
    refuse_text(value, name)
    v = _scalar(value, name)
    ok_low = v > 0 if low_open else v >= 0
    ok_high = v < 1 if high_open else v <= 1
    if not (math.isfinite(v) and ok_low and ok_high):
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}0, 1{hi}, got {value!r}")
    return v


def positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    """A finite float above 0 (or at least 0), or ValueError naming ``name``."""
    refuse_text(value, name)
    v = _scalar(value, name)
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


def counts(values: Any, name: str, *, allow_empty: bool = True) -> NDArray[np.int64]:
    """An array of non-negative integers (any shape; empty only if ``allow_empty``)."""
    refuse_text(values, name)
    farr = _numeric(values, name)
    if not allow_empty and farr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(farr)) or np.any(farr < 0) or np.any(farr != np.floor(farr)):
        raise ValueError(f"{name} must hold non-negative integers{_first_bad(farr)}")
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


# ---- arrays, labels and lengths (issue 39) ---------------------------------------------


def _plural(k: int, noun: str) -> str:
    return f"{k} {noun} is" if k == 1 else f"{k} {noun}s are"


def _numeric(values: Any, name: str) -> NDArray[np.float64]:
    """``values`` as a float array (any shape), or ValueError naming ``name`` (ragged or
    non-numeric input, which numpy would refuse with a message naming nothing)."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric (a number or an array of numbers)") from None


def _first_bad(arr: NDArray[np.float64]) -> str:
    """Why the first bad entry of a count array is bad (the tail of a message)."""
    flat = arr.ravel()
    for v in flat:
        if math.isnan(v):
            return f": {_plural(int(np.count_nonzero(np.isnan(flat))), 'value')} NaN"
        if math.isinf(v):
            return f": {_plural(int(np.count_nonzero(np.isinf(flat))), 'value')} infinite"
        if v < 0:
            return f": {v:g} is negative"
        if v != math.floor(v):
            return f": {v:g} is not an integer"
    return ""


def array(
    values: Any,
    name: str,
    *,
    allow_empty: bool = False,
    allow_nan: bool = False,
    allow_inf: bool = False,
    low: float | None = None,
    high: float | None = None,
    integer: bool = False,
    noun: str = "value",
) -> NDArray[np.float64]:
    """``values`` as a float array (any shape; a scalar stays 0-d), or ValueError naming
    ``name``: text, an empty array (unless ``allow_empty``), NaN (unless ``allow_nan``),
    an infinite value (unless ``allow_inf``), a value below ``low`` or above ``high``
    (NaN excepted where allowed), a non-integer where ``integer``."""
    refuse_text(values, name)
    arr = _numeric(values, name)
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} is empty")
    nan = np.isnan(arr)
    if not allow_nan and nan.any():
        raise ValueError(f"{name}: {_plural(int(np.count_nonzero(nan)), noun)} NaN")
    inf = np.isinf(arr)
    if not allow_inf and inf.any():
        raise ValueError(f"{name}: {_plural(int(np.count_nonzero(inf)), noun)} infinite")
    seen = arr[~nan]
    if low is not None and np.any(seen < low):
        first = float(seen[seen < low][0])
        what = "negative" if low == 0 else f"below {low:g}"
        raise ValueError(f"{name}: {first:g} is {what}")
    if high is not None and np.any(seen > high):
        first = float(seen[seen > high][0])
        raise ValueError(f"{name}: {first:g} is above {high:g}")
    if integer:
        finite = seen[np.isfinite(seen)]
        fraction = finite != np.floor(finite)
        if fraction.any():
            raise ValueError(f"{name}: {float(finite[fraction][0]):g} is not an integer")
    return arr


def binary(values: Any, name: str, *, allow_empty: bool = False) -> NDArray[np.float64]:
    """An array of 0/1 values (booleans accepted; any shape), or ValueError naming
    ``name``."""
    arr = array(values, name, allow_empty=allow_empty)
    if not np.all((arr == 0.0) | (arr == 1.0)):
        bad = float(arr[(arr != 0.0) & (arr != 1.0)][0])
        raise ValueError(f"{name} must hold 0/1 values (or booleans), got {bad:g}")
    return arr


def labels(values: Any, name: str, *, noun: str = "label") -> NDArray[Any]:
    """One-dimensional labels (any type: numbers, text), none missing, or ValueError
    naming ``name``: a NaN, infinite or None label would otherwise be a group of its own
    or, worse, numpy would merge every NaN label into one group."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "fc":
        nan = np.isnan(arr)
        if nan.any():
            raise ValueError(f"{name}: {_plural(int(np.count_nonzero(nan)), noun)} NaN")
        inf = np.isinf(arr)
        if inf.any():
            raise ValueError(f"{name}: {_plural(int(np.count_nonzero(inf)), noun)} infinite")
    elif arr.dtype.kind == "O":
        items = arr.tolist()
        missing = sum(v is None for v in items)
        if missing:
            raise ValueError(f"{name}: {_plural(missing, noun)} None")
        nan_count = sum(isinstance(v, (float, np.floating)) and math.isnan(float(v)) for v in items)
        if nan_count:
            raise ValueError(f"{name}: {_plural(nan_count, noun)} NaN")
    return arr


def integer_labels(values: Any, name: str) -> NDArray[np.int64]:
    """One-dimensional integer labels (prompt, session or cell codes; any sign), or
    ValueError naming ``name``: a NaN or fractional code would be truncated into another
    label's group."""
    arr = labels(values, name)
    refuse_text(arr, name)
    if arr.dtype.kind == "b":
        return arr.astype(np.int64)
    farr = array(arr, name, allow_empty=True, integer=True, noun="label")
    return farr.astype(np.int64)


def same_length(first: Any, first_name: str, second: Any, second_name: str) -> None:
    """ValueError naming both arguments unless they have as many entries (rows)."""
    a, b = _length(first), _length(second)
    if a != b:
        raise ValueError(
            f"mismatched lengths: {second_name} has {b} entries but {first_name} has {a}"
        )


def _length(values: Any) -> int:
    shape = np.shape(values)
    return int(shape[0]) if shape else 1


def broadcastable(**named: Any) -> tuple[int, ...]:
    """The broadcast shape of the named arrays, or ValueError naming them (numpy's own
    error names no argument)."""
    shapes = {name: np.shape(v) for name, v in named.items()}
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"mismatched lengths: {listed} do not go together") from None


def at_least(value: Any, name: str, minimum: int = 1) -> int:
    """An integer of at least ``minimum`` (a draw, resample or permutation count; numpy
    integers and integral floats accepted; text, booleans, NaN and infinity refused), or
    ValueError naming ``name``: "draws must be at least 1, got 0"."""
    refuse_text(value, name)
    if isinstance(value, bool) or (
        not isinstance(value, (int, float)) and isinstance(value, np.bool_)
    ):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if not math.isfinite(f) or f != math.floor(f):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if f < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return int(f)


def levels(values: Iterable[float], name: str = "levels") -> tuple[float, ...]:
    """A non-empty sequence of levels, each in (0, 1), or ValueError naming ``name``."""
    refuse_text(values, name)
    try:
        items = tuple(values)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of levels, got {values!r}") from None
    if not items:
        raise ValueError(f"{name} is empty")
    return tuple(probability(v, name) for v in items)


def draw_count(draws: Any, name: str = "draws") -> int:
    """A positive integer number of resamples, or ValueError naming ``name`` (a float
    with a fraction, nan, infinity, text, a boolean, zero or a negative count)."""
    try:
        value = count(draws, name)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {draws!r}")
    return value


def rng_seed(seed: Any) -> int | None:
    """None or a non-negative integer seed for ``numpy.random.default_rng``, or
    ValueError naming ``seed`` (numpy would raise a TypeError for 1.5). Integers pass
    unchanged (a float round trip would alter seeds above 2^53)."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    return count(seed, "seed")
