"""The run chain's fast canonical JSON is RFC 8785 byte for byte (or refuses alike).

``chain.canonical_bytes`` goes through the C JSON encoder where it spells a document as
the canonicaliser does; a difference of one byte would make every stored link fail to
verify (or, worse, two encoders agree on a forged record). So: random documents, the
floats and keys where the two spellings part, and every record of a real run.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.registry.digest import canonical_json
from prereg.runners.store.sqlite import RunStore, chain
from tests.integrity.tamper_tools import db_path

# 300 examples a run in the suite (hypothesis keeps its failures in .hypothesis/ and
# replays them first); CANONICAL_EXAMPLES=2000 for a longer hunt
CANONICAL_EXAMPLES = int(os.environ.get("CANONICAL_EXAMPLES", "300"))

SPECIAL_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -2.0,
    0.5,
    1e-7,
    1e-6,
    1.5e-5,
    0.0001,
    1e15,
    1e16,
    123456789012345.6,
    2.0**53,
    2.0**53 + 2,
    1e20,
    1.2345678901234567e20,
    1e21,
    1e300,
    5e-324,
    math.inf,
    -math.inf,
    math.nan,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(SPECIAL_FLOATS),
    st.text(),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x20)),
)
keys = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["a", "b", "\U0001f600", "\ufb01", "\ue000", "Z", ""]),
)
documents = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=30,
)


def _outcome(fn: Any, document: Any) -> bytes | type[BaseException]:
    try:
        result: bytes = fn(document)
        return result
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc)


@settings(max_examples=CANONICAL_EXAMPLES, deadline=None)
@given(documents)
def test_canonical_bytes_is_rfc8785(document: Any) -> None:
    assert _outcome(chain.canonical_bytes, document) == _outcome(canonical_json, document)


@pytest.mark.parametrize("value", SPECIAL_FLOATS, ids=repr)
def test_the_floats_where_the_spellings_part(value: float) -> None:
    document = {"x": value, "y": [value, -value]}
    assert _outcome(chain.canonical_bytes, document) == _outcome(canonical_json, document)


def test_keys_sorted_as_utf16_not_as_code_points() -> None:
    document = {"\U0001f600": 1, "\ufb01": 2, "a": 3}  # code points and UTF-16 disagree
    assert chain.canonical_bytes(document) == canonical_json(document)


def test_subclasses_and_lone_surrogates_go_the_canonicalisers_way() -> None:
    class Text(str):
        pass

    assert chain.canonical_bytes({"k": Text("v")}) == canonical_json({"k": Text("v")})
    with pytest.raises(ValueError):
        chain.canonical_bytes({"k": "\ud800"})


def test_every_record_of_a_run_hashes_as_before(small_template: Path) -> None:
    with RunStore(db_path(small_template)) as store:
        records = store.records()
    assert records
    for record in records:
        assert record.chain is not None
        document = {
            "format": chain.FORMAT,
            "index": record.chain.index,
            "prev": record.chain.prev,
            "record": chain.content(record),
        }
        assert chain.canonical_bytes(document) == canonical_json(document)
        assert chain.link_hash(chain.content(record), record.chain.index, record.chain.prev) == (
            record.chain.hash
        )


def test_a_field_added_later_leaves_older_records_hashing_as_before(ws: Path, cli) -> None:
    """``server`` came after chain format 1: a record without it (every record written
    before it existed, and every record of a driver that names no server) hashes over
    exactly the JSON it had; a record that sets it hashes over it."""
    assert cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml").code == 0
    assert cli("-w", ws, "run", "music-library-pilot", "--no-progress").code == 0
    record = RunStore(ws / "runs").records(registration_id="music-library-pilot")[0]
    assert record.chain is not None and record.server is None
    # the JSON before the added fields existed (server, and the study fields of issue 19)
    older = record.model_dump(mode="json", exclude={"chain", *chain.ADDED_FIELDS})
    assert chain.link_hash(older, record.chain.index, record.chain.prev) == record.chain.hash
    prev = "sha256:" + "0" * 64
    named = record.model_copy(update={"server": "127.0.0.1:8000"})
    assert chain.link(named, 3, prev).chain != chain.link(record, 3, prev).chain
    for stored in (chain.link(named, 3, prev), chain.link(record, 3, prev)):
        body = stored.model_dump_json()  # as the store writes it: "server" null or set
        assert chain.body_problems(body, 3, prev)[1] == []
    assert '"server":"127.0.0.1:8000"' in chain.link(named, 3, prev).model_dump_json()


# strings that look like the fast path's number placeholders, or like their encoding
LOOKALIKES = ["\x000\x00", "\x00", '"\x00', "\\u0000", '"\\u00000\\u0000"', "a\x00", "\x001"]


@settings(max_examples=CANONICAL_EXAMPLES, deadline=None)
@given(
    st.recursive(
        st.one_of(st.sampled_from(SPECIAL_FLOATS[:-3]), st.sampled_from(LOOKALIKES)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.one_of(keys, st.sampled_from(LOOKALIKES)), inner, max_size=4),
        ),
        max_leaves=20,
    )
)
def test_placeholder_lookalikes_never_take_a_numbers_place(document: Any) -> None:
    """Floats spelled by the canonicaliser (``1e-07``, ``1e+21``) ride the C encoder as
    placeholders; strings and keys shaped like one must still come out as themselves."""
    assert _outcome(chain.canonical_bytes, document) == _outcome(canonical_json, document)


def test_a_priced_records_small_costs_stay_on_the_fast_path(monkeypatch) -> None:
    """A provider record's per-turn costs (``9.8e-05``) once sent the whole record to the
    pure-Python canonicaliser: now only the numbers go there, and the bytes are RFC 8785."""
    document = {"trace": [{"cost_usd": 9.8e-05}, {"cost_usd": 3.2e-07}], "ok": "caf\u00e9"}
    expected = canonical_json(document)
    seen: list[Any] = []
    real = chain.canonical_json

    def counting(value: Any) -> bytes:
        seen.append(value)
        return real(value)

    monkeypatch.setattr(chain, "canonical_json", counting)
    assert chain.canonical_bytes(document) == expected
    assert seen == [9.8e-05, 3.2e-07]  # the numbers alone, never the document
