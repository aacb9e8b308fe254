"""The content format of a stored run record, and its check without a parse (issue 15).

The store writes a record as the RFC 8785 bytes of its content (what the link hash
covers) with the chain link appended as the object's last member, so a link's hash is
sha256 over stored bytes (:func:`chain.content_link`) instead of a parse and an encode.
These properties hold it to independent references, over records with random trace
arguments, results, texts and floats:

- the stored content bytes are what the ``rfc8785`` package makes of the record's
  content, the body still parses (json, pydantic) to the record the earlier body
  (``model_dump_json``) gives, and its link
  hash is the reference hash of the body as the format defines it (JSON parsed,
  chain and unset added fields dropped, RFC 8785, sha256);
- for any byte edit of a stored body (and for a forger who recomputes the hash over the
  edited bytes), the check with the row's hash gives exactly the verdict and recomputed
  hash of the parsing path that does not use it (the pre-format path), and a body that
  passes hashes, by the reference, to what its row states.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from prereg.registry.digest import canonical_json
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore, chain
from tests.integrity.test_chain_canonical import documents

EXAMPLES = int(os.environ.get("LOAD_FAST_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a record shrinks slowly
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def real_records(small_template: Path) -> list[RunRecord]:
    with RunStore(small_template / "runs") as store:
        records = store.records()
    assert records
    return records


def _reference_content(record: RunRecord) -> dict[str, Any]:
    """The record's content as JSON, without its chain and unset added fields (from the
    record's own JSON text, not from :func:`chain.content`)."""
    data: dict[str, Any] = json.loads(record.model_dump_json())
    data.pop("chain", None)
    for name in ("server", "obligations", "variant_digest"):
        if data.get(name, 0) is None:
            del data[name]
    return data


def _reference_link(body: str, index: int, prev: str) -> str | None:
    """The link hash the format defines for ``body`` (None: no JSON object with a chain)."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or "chain" not in data:
            return None
        data.pop("chain")
        for name in chain.ADDED_FIELDS:
            if name in data and data[name] is None:
                del data[name]
        document = {"format": chain.FORMAT, "index": index, "prev": prev, "record": data}
        return "sha256:" + hashlib.sha256(canonical_json(document)).hexdigest()
    except (TypeError, ValueError, RecursionError):
        return None


texts = st.text(max_size=40)
floats = st.floats(min_value=0, allow_nan=False, allow_infinity=False)


@st.composite
def varied(draw: Any, base: RunRecord) -> RunRecord:
    """``base`` with random trace arguments, results, texts, latencies and an error."""
    data = base.model_dump(mode="json")
    for event in data["trace"]:
        event["arguments"] = draw(documents)
        event["result"] = draw(documents)
        event["text"] = draw(st.none() | texts)
        if data["evidence_class"] != "replay":
            event["latency_ms"] = draw(st.none() | floats)
    if data["evidence_class"] != "replay":
        data["latency_ms"] = draw(st.none() | floats)
    data["model_returned"] = draw(st.none() | texts)
    data["server"] = draw(st.none() | texts)
    try:
        return RunRecord.model_validate(data)
    except ValidationError:
        assume(False)
        raise


def _linked(draw: Any, records: list[RunRecord]) -> RunRecord:
    base = draw(st.sampled_from(records))
    record = draw(varied(base))
    index = draw(st.integers(0, 2**40))
    prev = draw(st.sampled_from([DIGEST, base.registration_digest]))
    try:
        return chain.link(record.model_copy(update={"chain": None}), index, prev)
    except (TypeError, ValueError):  # a lone surrogate: no link, no record stored
        assume(False)
        raise


@SETTINGS
@given(data=st.data())
def test_the_stored_body_is_the_canonical_content_then_the_link(
    real_records: list[RunRecord], data: Any
) -> None:
    linked = _linked(data.draw, real_records)
    link = linked.chain
    assert link is not None
    body = chain.stored_body(linked)
    tail = (
        f',"chain":{{"hash":"{link.hash}","index":{link.index},"prev":"{link.prev}"}}}}'
    ).encode()
    candidate = canonical_json(_reference_content(linked))[:-1] + tail
    if _reference_link(candidate.decode(), link.index, link.prev) == link.hash:
        assert body.encode("utf-8") == candidate
        assert (
            chain.content_link(body, link.index, link.prev, link.hash, trusted=False) == link.hash
        )
    else:  # e.g. a float of 2**53 or more, spelled as an integer RFC 8785 then refuses
        assert body == linked.model_dump_json()
    # read back, it is the record the earlier body gives (NaN in an untyped value, say,
    # is null in both)
    earlier = RunRecord.model_validate_json(linked.model_dump_json())
    assert RunRecord.model_validate_json(body) == earlier
    assert RunRecord.model_validate(json.loads(body)) == earlier
    assert _reference_link(body, link.index, link.prev) == link.hash
    fast = chain.body_problems(body, link.index, link.prev, link.hash)
    assert fast == (link.hash, []) == chain.body_problems(body, link.index, link.prev)


def _edited(draw: Any, body: str) -> str:
    out = bytearray(body.encode("utf-8"))
    for _ in range(draw(st.integers(1, 3), label="edits")):
        position = draw(st.integers(0, len(out) - 1), label="position")
        if draw(st.booleans(), label="flip"):
            out[position] ^= draw(st.integers(1, 255), label="xor")
        else:
            out[position] = draw(st.integers(0, 255), label="byte")
    try:
        return bytes(out).decode("utf-8")
    except UnicodeDecodeError:  # SQLite hands such text over as an error, not a body
        assume(False)
        raise


def _forged(body: str, index: int, prev: str) -> tuple[str, str]:
    """``body`` with its link rewritten to the hash of its content bytes as they now are
    (an attacker recomputing the hash over the edited bytes), and that hash."""
    cut = body.rfind(',"chain":')
    content = body[:cut].encode("utf-8") + b"}"
    head = f'{{"format":"{chain.FORMAT}","index":{index},"prev":"{prev}","record":'.encode()
    stated = "sha256:" + hashlib.sha256(head + content + b"}").hexdigest()
    tail = f',"chain":{{"hash":"{stated}","index":{index},"prev":"{prev}"}}}}'
    return body[:cut] + tail, stated


@SETTINGS
@given(data=st.data())
def test_any_edit_gets_the_verdict_of_the_parsing_path(
    real_records: list[RunRecord], data: Any
) -> None:
    linked = _linked(data.draw, real_records)
    link = linked.chain
    assert link is not None
    body = _edited(data.draw, chain.stored_body(linked))
    cases = [(body, link.hash)]
    if ',"chain":' in body:
        cases.append(_forged(body, link.index, link.prev))
    for text, stated in cases:
        fast = chain.body_problems(text, link.index, link.prev, stated)
        slow = chain.body_problems(text, link.index, link.prev)
        assert fast == slow, text
        if fast[0] is not None:
            assert fast[0] == _reference_link(text, link.index, link.prev)
        if fast[0] == stated and not fast[1]:
            # accepted: by the reference, the edit left the content the row states
            assert _reference_link(text, link.index, link.prev) == stated


def test_a_space_or_a_respelled_number_is_no_longer_the_content_format(
    real_records: list[RunRecord],
) -> None:
    """Bytes that parse to the same content but are not its canonical spelling are not
    hashed as they stand: the parsing path decides (and finds the content unchanged)."""
    linked = real_records[0]
    link = linked.chain
    assert link is not None
    body = chain.stored_body(linked)
    for respelled in (body.replace('"calls":', '"calls": ', 1), body.replace(",", ", ", 1)):
        assert respelled != body
        assert (
            chain.content_link(respelled, link.index, link.prev, link.hash, trusted=False) is None
        )
        assert chain.body_problems(respelled, link.index, link.prev, link.hash) == (link.hash, [])
        forged, stated = _forged(respelled, link.index, link.prev)
        assert chain.content_link(forged, link.index, link.prev, stated, trusted=False) is None
        assert chain.content_link(forged, link.index, link.prev, stated, trusted=True) == stated
        verdict = chain.body_problems(forged, link.index, link.prev, stated)
        assert verdict[0] == link.hash and verdict[1], verdict  # the stated hash is refused


def test_a_pre_format_body_takes_the_parsing_path(real_records: list[RunRecord]) -> None:
    for record in real_records:
        link = record.chain
        assert link is not None
        body = record.model_dump_json()
        assert chain.content_link(body, link.index, link.prev, link.hash, trusted=True) is None
        assert chain.body_problems(body, link.index, link.prev, link.hash) == (link.hash, [])


@SETTINGS
@given(data=st.data())
def test_the_write_paths_one_encoding_gives_the_same_link_and_body(
    real_records: list[RunRecord], data: Any
) -> None:
    """``linked_body`` (what the stores write, one dump and one encoding) gives exactly the
    link and the body of ``link`` then ``stored_body`` (two of each and a parse), big
    integral floats (spelled as integers RFC 8785 then refuses) and odd texts included."""
    linked = _linked(data.draw, real_records)
    link = linked.chain
    assert link is not None
    big = data.draw(st.sampled_from([None, 2.0**53 + 2, 2.0**60, 1e21, 9.8e-05]))
    unlinked = linked.model_copy(update={"chain": None})
    if big is not None:
        unlinked = unlinked.model_copy(update={"latency_ms": big})
        linked = chain.link(unlinked, link.index, link.prev)
    got, body = chain.linked_body(unlinked, link.index, link.prev)
    assert got == linked and got.chain == linked.chain
    assert body == chain.stored_body(linked)
