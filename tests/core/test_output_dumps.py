"""``dumps`` writes exactly the document the standard library's indenting encoder writes.

The reference is the earlier implementation, kept here: encode (hooks applied), parse back,
clean every non-finite float to null, indent with ``json.dumps(indent=2)``, escape unsafe
characters. ``dumps`` takes a faster way for most data; the bytes must not change.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.core.output import _default, dumps
from prereg.core.untrusted import json_safe


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return obj


def reference(data: Any) -> str:
    cleaned = _clean(json.loads(json.dumps(data, default=_default)))
    return json_safe(json.dumps(cleaned, indent=2, ensure_ascii=False))


_TEXT = st.text(
    st.characters(blacklist_categories=()) | st.sampled_from(['"', "\\", "\n", "\x7f", "\u2028"]),
    max_size=8,
)
_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _TEXT
)
_DATA = st.recursive(
    _LEAF,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_TEXT, inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_DATA)
def test_dumps_writes_the_reference_document(data: Any) -> None:
    assert dumps(data) == reference(data)


def test_hooked_values_and_non_finite_floats() -> None:
    data = {
        "when": datetime(2026, 12, 3, tzinfo=UTC),
        "path": Path("/tmp/x"),
        "set": frozenset({1}),
        "rates": [0.5, float("nan"), float("inf"), -float("inf"), 1e-05, 1e16, -0.0],
        "empty": [[], {}, [{}]],
        "text": 'a "b" \\ \n \x01 \x9b \u202e é 😀 \ud800',
    }
    assert dumps(data) == reference(data)
    assert dumps({"finite": [1.5, 2]}) == reference({"finite": [1.5, 2]})
