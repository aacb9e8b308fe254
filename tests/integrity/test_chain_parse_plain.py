"""Verifying a stored link without walking the record (issue 15, item 1: analyse at scale).

``chain.parse_plain`` parses a stored body with number hooks and says whether the value
can go straight to the C encoder; the link hash it leads to must be the RFC 8785 hash
(the ``rfc8785`` package, through :func:`prereg.registry.digest.canonical_json`) of the
same JSON, byte for byte, for any text: random documents written every way JSON can
spell them (escaped or raw non-ASCII, exponents, big integers, NaN), and real records.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.registry.digest import canonical_json
from prereg.runners.store.sqlite import RunStore, chain
from tests.integrity.tamper_tools import db_path
from tests.integrity.test_chain_canonical import documents

# 300 examples a run in the suite (hypothesis keeps its failures in .hypothesis/ and
# replays them first); CANONICAL_EXAMPLES=2000 for a longer hunt
CANONICAL_EXAMPLES = int(os.environ.get("CANONICAL_EXAMPLES", "300"))


def _via_parse_plain(text: str) -> bytes | type[BaseException]:
    try:
        value, plain = chain.parse_plain(text)
        return chain._encode(value) if plain else chain.canonical_bytes(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc)


def _reference(text: str) -> bytes | type[BaseException]:
    try:
        return canonical_json(json.loads(text))
    except (TypeError, ValueError, RecursionError) as exc:
        return type(exc)


@settings(max_examples=CANONICAL_EXAMPLES, deadline=None)
@given(documents, st.booleans(), st.sampled_from([None, (",", ":"), (", ", ": ")]))
def test_parse_plain_then_encode_is_rfc8785_of_the_text(
    document: Any, ascii_only: bool, separators: tuple[str, str] | None
) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only, separators=separators)
    assert _via_parse_plain(text) == _reference(text)


SPELLINGS = [
    '{"a": 1e2, "b": 2.50, "c": -0.0, "d": 100000000000000000000}',
    '{"a": 9007199254740991, "b": -9007199254740992}',
    '{"a": 1E-7, "b": 0.000001, "c": 123456789012345678.0}',
    '{"\\u00e9": 1, "e": 2}',  # an escaped non-ASCII key: sorted as UTF-16 by RFC 8785
    '{"k": "\\ud83d\\ude00", "x": "\\u0007"}',
    '{"k": NaN}',
    '{"k": Infinity}',
    '{"z": {"b": [1.0, 2.5, true, null], "a": "x"}, "y": -3.0}',
]


def test_the_spellings_where_plain_and_canonical_could_part() -> None:
    for text in SPELLINGS:
        assert _via_parse_plain(text) == _reference(text), text


def _reference_link(body: str, index: int, prev: str) -> str:
    data = json.loads(body)
    data.pop("chain")
    for name in chain.ADDED_FIELDS:
        if name in data and data[name] is None:
            del data[name]
    document = {"format": chain.FORMAT, "index": index, "prev": prev, "record": data}
    return "sha256:" + hashlib.sha256(canonical_json(document)).hexdigest()


def test_stored_records_verify_and_an_edit_is_caught(small_template: Path) -> None:
    with RunStore(db_path(small_template)) as store:
        records = store.records()
    assert records
    for record in records:
        assert record.chain is not None
        body = record.model_dump_json()
        index, prev = record.chain.index, record.chain.prev
        recomputed, problems = chain.body_problems(body, index, prev)
        assert problems == [] and recomputed == record.chain.hash
        assert recomputed == _reference_link(body, index, prev)
        # the repeat spelled with an exponent: another spelling of the same number, so the
        # same hash; then a raw non-ASCII edit: the slow way, the reference hash, caught
        data = json.loads(body)
        text = json.dumps(data)
        spelled = text.replace(f'"repeat": {data["repeat"]},', f'"repeat": {data["repeat"]}e0,')
        assert spelled != text
        assert chain.body_problems(spelled, index, prev) == (record.chain.hash, [])
        data["task_id"] = "t\u00e2che"
        edited = json.dumps(data, ensure_ascii=False)
        recomputed, problems = chain.body_problems(edited, index, prev)
        assert recomputed == _reference_link(edited, index, prev)
        assert any("does not match its hash" in p for p in problems)


def _reference_canonical(data: bytes) -> bool:
    """Whether ``data`` is the RFC 8785 content of a record, by the rfc8785 package."""
    try:
        value = json.loads(data)
        if type(value) is not dict or "chain" in value:
            return False
        for name in chain.ADDED_FIELDS:
            if name in value and value[name] is None:
                del value[name]
        return bool(canonical_json(value) == data)
    except (TypeError, ValueError, RecursionError):
        return False


@settings(max_examples=CANONICAL_EXAMPLES, deadline=None)
@given(documents, st.sampled_from(["canonical", "ascii", "raw", "spaced"]))
def test_the_canonical_form_check_agrees_with_rfc8785(document: Any, spelling: str) -> None:
    # canonical texts (the stored format: the check must say yes, numbers such as
    # 0.000098 included, which Python spells 9.8e-05) and other spellings of the same
    # JSON (it must say no wherever the bytes differ from RFC 8785's)
    wrapped = {"record": document, "cost_usd": 9.8e-05}
    try:
        canonical = canonical_json(wrapped)
    except (TypeError, ValueError):
        return  # NaN or an integer RFC 8785 refuses: no canonical text to store
    data = {
        "canonical": canonical,
        "ascii": json.dumps(wrapped, sort_keys=True, separators=(",", ":")).encode(),
        "raw": json.dumps(wrapped, ensure_ascii=False, separators=(",", ":")).encode(),
        "spaced": json.dumps(wrapped, sort_keys=True).encode(),
    }[spelling]
    assert chain.is_canonical_content(data) == _reference_canonical(data)


def test_small_and_large_numbers_spelled_as_rfc8785_pass_and_others_do_not() -> None:
    good = canonical_json({"a": 9.8e-05, "b": [1e-7, 1e21, 1e300, -2.5e-06], "c": 0.5})
    assert b"0.000098" in good and b"1e-7" in good and b"1e+21" in good
    assert chain.is_canonical_content(good)
    for before, after in [(b"0.000098", b"9.8e-05"), (b"1e-7", b"1E-7"), (b"1e+21", b"1e21")]:
        respelled = good.replace(before, after)
        assert respelled != good and not chain.is_canonical_content(respelled)
        assert not _reference_canonical(respelled)
