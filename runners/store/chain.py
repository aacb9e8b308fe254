"""The run records' hash chain: tamper evidence for what the analysis reads.

Every registration digest has its own chain. Record ``i`` (in the order the store
appended them) carries ``index = i``, ``prev`` (the previous record's hash; for the
first record, the registration digest itself, so a chain cannot be moved to another
registration) and ``hash``:

    hash = sha256(RFC 8785 canonical JSON of
                  {"format": FORMAT, "index": i, "prev": prev, "record": <record without chain>})

So editing any field of any record, deleting, inserting or reordering records changes
a hash the next record (or the registry's anchor) pins. The registry anchors a chain's
head (count and last hash) at the end of every ``prereg run`` and at analysis; a report
carries the head it analysed. What this does not stop is said in docs/integrity.md: an
attacker who can write the store and recompute every hash can forge the part of a chain
after its last anchor, and an attacker who can also rewrite the ledger can forge all of
it; published heads (a report, a commit, a timestamping service) are what is left then.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from prereg.registry.digest import canonical_json
from prereg.runners.record import ChainLink, RunRecord

FORMAT = "prereg.run-chain/1"
_FORMAT = FORMAT.encode("ascii")


def genesis(registration_digest: str) -> str:
    """The ``prev`` of a chain's first record: the registration digest."""
    return registration_digest


#: Record fields added after this chain format was fixed: hashed only when set, so a
#: record written before a field existed verifies unchanged (its JSON never had it).
ADDED_FIELDS = ("server", "obligations", "variant_digest")


def content(record: RunRecord) -> dict[str, Any]:
    """What a link's hash covers: the record as JSON, without its chain link."""
    return _without_unset_added(record.model_dump(mode="json", exclude={"chain"}))


def _without_unset_added(data: dict[str, Any]) -> dict[str, Any]:
    for name in ADDED_FIELDS:
        if name in data and data[name] is None:
            del data[name]
    return data


#: Integers RFC 8785 represents exactly (beyond them, the canonicaliser refuses).
_INT_LIMIT = 2**53 - 1


class _Unplain(Exception):
    """A value the C JSON encoder would not spell as RFC 8785 does."""


def _plain(value: Any, spelled: list[str] | None = None) -> Any:
    r"""``value`` as ``json.dumps`` (sorted keys, no spaces, no ASCII escaping) writes
    exactly as RFC 8785 does; raises _Unplain where that cannot be had cheaply.

    Kept: exact str, bool, None, lists and dicts of them with ASCII keys (code-point and
    UTF-16 orders agree), integers within +-(2**53 - 1), and finite floats whose ``repr``
    needs no rewriting (no exponent, no trailing ``.0``: the canonicaliser derives its
    spelling from ``repr`` and changes only those). A float with an integer value below
    2**53 becomes that integer (``2.0`` and ``-0.0`` are spelled ``2`` and ``0`` either
    way). With ``spelled`` (a list), a finite float the C encoder would spell otherwise
    (``9.8e-05``: a per-turn cost) becomes a placeholder string ``"\x00<n>\x00"`` and its
    RFC 8785 spelling is appended to ``spelled``; :func:`_encode_spelled` puts it back. Any
    string or key carrying U+0000 then raises, so a placeholder is the only JSON string
    that starts with it (see :func:`_encode_spelled`). Anything else (a subclass, a
    non-ASCII key, infinity) goes the canonicaliser's way, which also raises what it raises.
    """
    kind = type(value)
    if kind is str:
        if spelled is not None and "\x00" in value:
            raise _Unplain
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        if -_INT_LIMIT <= value <= _INT_LIMIT:
            return value
        raise _Unplain
    if kind is float:
        return _plain_float_value(value, spelled)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                raise _Unplain
            if spelled is not None and "\x00" in key:
                raise _Unplain
            out[key] = _plain(item, spelled)
        return out
    if kind is list:
        return [_plain(item, spelled) for item in value]
    raise _Unplain


def _plain_float_value(value: float, spelled: list[str] | None) -> Any:
    spelling = repr(value)
    if "n" in spelling:  # inf, nan: the canonicaliser refuses them
        raise _Unplain
    if "e" not in spelling:
        if not spelling.endswith(".0"):
            return value
        if abs(value) <= _INT_LIMIT:
            return int(value)
    if spelled is None:
        raise _Unplain
    spelled.append(canonical_json(value).decode("ascii"))
    return f"\x00{len(spelled) - 1}\x00"


#: A placeholder of :func:`_plain` as the C encoder writes it (U+0000 is always escaped).
_PLACEHOLDER = re.compile(r'"\\u0000(\d+)\\u0000"')


def _encode_spelled(plain: Any, spelled: list[str]) -> bytes:
    r""":func:`_encode` with each placeholder replaced by its number's spelling.

    Unambiguous: in the encoder's output ``"\u0000`` occurs only where a JSON string
    *starts* with U+0000 (a ``"`` there is an opening delimiter: a closing one is followed
    by ``,:]}``, and an escaped ``\"`` followed by U+0000 needs a string holding U+0000),
    and with ``spelled`` no string but a placeholder holds U+0000.
    """
    text = _ENCODER.encode(plain)
    if spelled:
        text = _PLACEHOLDER.sub(lambda m: spelled[int(m.group(1))], text)
    return text.encode("utf-8")


def canonical_bytes(document: Any) -> bytes:
    """RFC 8785 canonical JSON of ``document``, byte for byte what
    :func:`prereg.registry.digest.canonical_json` gives (tests compare them on random
    documents), through the C JSON encoder where that is provably the same (see
    :func:`_plain`), which is several times faster on a run record."""
    spelled: list[str] = []
    try:
        return _encode_spelled(_plain(document, spelled), spelled)
    except (_Unplain, UnicodeEncodeError, RecursionError):  # a lone surrogate, deep nesting
        return canonical_json(document)


#: What ``json.dumps(..., ensure_ascii=False, sort_keys=True, separators=(",", ":"))``
#: builds on every call (the same settings, so the same text), built once.
_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _encode(plain: Any) -> bytes:
    return _ENCODER.encode(plain).encode("utf-8")


def _plain_int(text: str) -> int:
    value = int(text)
    if -_INT_LIMIT <= value <= _INT_LIMIT:
        return value
    raise _Unplain


def _plain_float(text: str) -> float | int:
    """A JSON number with a fraction or exponent, as :func:`_plain` keeps a float."""
    plain: float | int = _plain(float(text))
    return plain


def _unplain_constant(text: str) -> Any:
    raise _Unplain  # NaN, Infinity: the canonicaliser's way (it refuses them)


#: What ``json.loads(body, parse_int=..., ...)`` builds on every call, built once.
_HOOKED = json.JSONDecoder(
    parse_int=_plain_int, parse_float=_plain_float, parse_constant=_unplain_constant
)


def parse_plain(body: str) -> tuple[Any, bool]:
    """``json.loads(body)``, and whether the value is already what :func:`_plain` makes of
    it (then :func:`_encode` gives its canonical bytes with no walk over the value).

    It is when ``body`` is ASCII with no ``\\u`` escape (so every string, keys included,
    is ASCII: no UTF-16 ordering question, no lone surrogate) and every number passes the
    same test :func:`_plain` applies, here in the parser's hooks (numbers only) instead
    of a Python walk over every value. Otherwise the plain parse and False (the caller
    goes :func:`canonical_bytes`' way, as before).
    """
    if body.isascii() and "\\u" not in body:
        try:
            value = _HOOKED.decode(body)  # json.loads' decoding (ASCII: no BOM to refuse)
            return value, True
        except _Unplain:
            pass
    return json.loads(body), False


def link_hash(record_content: dict[str, Any], index: int, prev: str, *, plain: bool = False) -> str:
    """The link's hash; ``plain``: ``record_content`` came from :func:`parse_plain` as
    plain (only the link's own fields are then checked before encoding)."""
    document = {"format": FORMAT, "index": index, "prev": prev, "record": record_content}
    if plain:
        try:
            head = {"format": FORMAT, "index": _plain(index), "prev": _plain(prev)}
            encoded = _encode({**head, "record": record_content})
        except (_Unplain, UnicodeEncodeError, RecursionError):
            encoded = canonical_bytes(document)
    else:
        encoded = canonical_bytes(document)
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


#: A digest as every link's ``prev`` and ``hash`` spell it: nothing JSON would escape.
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}\Z")


def _spelled(value: Any) -> bytes:
    """``canonical_bytes(value)``, spelled directly for a link's own fields (a digest, an
    index below 2**53): the same bytes, without the encoder's machinery per record."""
    if type(value) is str and _DIGEST.match(value):
        return b'"' + value.encode("ascii") + b'"'
    if type(value) is int and 0 <= value <= _INT_LIMIT:
        return str(value).encode("ascii")
    return canonical_bytes(value)


def _head(index: int, prev: str) -> bytes:
    """The canonical JSON of a link's document up to its record: ``{"format":...,
    "index":...,"prev":...,"record":`` (the keys sort in this order, ``record`` last)."""
    return _spelled_head(_spelled(index), _spelled(prev))


def _spelled_head(index: bytes, prev: bytes) -> bytes:
    """:func:`_head` of a link's index and prev as :func:`_spelled` spells them."""
    return b'{"format":"' + _FORMAT + b'","index":' + index + b',"prev":' + prev + b',"record":'


def _suffix(index: int, prev: str, stated: str) -> bytes:
    """How a stored body in the content format ends: its chain link, the last member."""
    return _spelled_suffix(_spelled(index), _spelled(prev), _spelled(stated))


def _spelled_suffix(index: bytes, prev: bytes, stated: bytes) -> bytes:
    """:func:`_suffix` of a link's index, prev and hash as :func:`_spelled` spells them."""
    return b',"chain":{"hash":' + stated + b',"index":' + index + b',"prev":' + prev + b"}}"


def stored_body(record: RunRecord) -> str:
    """The body the store writes for a linked ``record``: the canonical bytes of
    :func:`content`, with the chain link appended as the object's last member.

    Still a JSON object that is the whole record (any reader parses it as before, an
    older prereg verifies it by parsing and canonicalising), and the link's hash is
    sha256 of the bytes before the link, so reading needs no parse and no re-encoding
    (:func:`content_link`). Falls back to ``model_dump_json`` (the earlier body, which
    verifies by the parsing path) where the bytes would not check out as that.
    """
    chained = record.chain
    assert chained is not None
    suffix = _suffix(chained.index, chained.prev, chained.hash)
    body = (canonical_bytes(content(record))[:-1] + suffix).decode("utf-8")
    # checked in full: a float of 2**53 or more with an integer value is spelled as an
    # integer, which parses back as one that RFC 8785 refuses (the parse is the check)
    if content_link(body, chained.index, chained.prev, chained.hash, trusted=False) == chained.hash:
        return body
    return record.model_dump_json()


def linked_body(record: RunRecord, index: int, prev: str) -> tuple[RunRecord, str]:
    """``record`` linked at ``index`` after ``prev`` (:func:`link`) and the body the store
    writes for it (:func:`stored_body`): the same record and bytes, from one dump and one
    canonical encoding of its content instead of two of each and a parse (the write path
    of every unit).

    The parse-back check :func:`stored_body` makes is needed only where the canonical
    bytes would not read back canonical: a number the canonicaliser spelled as an integer
    beyond 2**53 (a float of that size), or bytes the canonicaliser made itself (outside
    :func:`_plain`'s proof). Elsewhere the bytes are RFC 8785 by construction.
    """
    data = content(record)
    spelled: list[str] = []
    try:
        encoded = _encode_spelled(_plain(data, spelled), spelled)
    except (_Unplain, UnicodeEncodeError, RecursionError):
        linked = link(record, index, prev)
        return linked, stored_body(linked)
    digest = "sha256:" + hashlib.sha256(_head(index, prev) + encoded + b"}").hexdigest()
    linked = record.model_copy(update={"chain": ChainLink(index=index, prev=prev, hash=digest)})
    if not all("." in s or "e" in s for s in spelled):  # an integer spelling past 2**53
        return linked, stored_body(linked)
    return linked, (encoded[:-1] + _suffix(index, prev, digest)).decode("utf-8")


def _link_parts(body: str, index: int, prev: str, stated: str) -> tuple[bytes, int, bytes] | None:
    """A body in the content format as (its bytes, where its chain link starts, the head
    of the link's document): the record's content bytes are ``data[:end] + b"}"``, the
    link's document ``head + content + b"}"``; None: another body. Each of the link's
    fields is spelled once (the head and the suffix both hold the index and prev)."""
    if type(index) is not int or type(prev) is not str or type(stated) is not str:
        return None
    try:
        data = body.encode("utf-8")
        spelled_index, spelled_prev = _spelled(index), _spelled(prev)
        suffix = _spelled_suffix(spelled_index, spelled_prev, _spelled(stated))
    except (UnicodeEncodeError, TypeError, ValueError):
        return None
    end = len(data) - len(suffix)
    if end <= 1 or not data.endswith(suffix):
        return None
    return data, end, _spelled_head(spelled_index, spelled_prev)


def _parse_spelled(body: str) -> tuple[Any, list[str]] | None:
    r"""``body`` parsed as :func:`parse_plain` does, except that a number whose spelling
    the C encoder would change (``0.000098``, which Python spells ``9.8e-05``) is kept
    when ``body`` spells it exactly as RFC 8785 does: it becomes a placeholder
    ``"\x00<n>\x00"`` and its spelling goes to the returned list, which
    :func:`_encode_spelled` puts back. None where :func:`parse_plain` would not call the
    value plain for another reason, or such a number is spelled otherwise (the caller
    then takes the canonicaliser's way).

    The placeholders are unambiguous for the reason :func:`_encode_spelled` needs: an
    ASCII body with no ``\u`` escape holds no string with U+0000 (JSON has no other way
    to write it). Run records carry such numbers (a per-turn cost), so checking their
    stored bytes no longer walks every record through the canonicaliser."""
    if not body.isascii() or "\\u" in body:
        return None
    spelled: list[str] = []

    def number(text: str) -> Any:
        value = float(text)
        spelling = repr(value)
        if "n" in spelling:
            raise _Unplain
        if "e" not in spelling:
            if not spelling.endswith(".0"):
                return value
            if abs(value) <= _INT_LIMIT:
                return int(value)
        if canonical_json(value).decode("ascii") != text:
            raise _Unplain
        spelled.append(text)
        return f"\x00{len(spelled) - 1}\x00"

    decoder = json.JSONDecoder(
        parse_int=_plain_int, parse_float=number, parse_constant=_unplain_constant
    )
    try:
        return decoder.decode(body), spelled
    except _Unplain:
        return None


def is_canonical_content(data: bytes) -> bool:
    """Whether ``data`` is exactly what :func:`content` of some record canonicalises to:
    the RFC 8785 bytes of a JSON object without a chain link and without an unset added
    field (so hashing these bytes is hashing the record's canonical content)."""
    try:
        text = data.decode("utf-8")
        parsed = _parse_spelled(text)
        if parsed is not None:
            value, spelled = parsed
            if type(value) is not dict or "chain" in value:
                return False
            return _encode_spelled(_without_unset_added(value), spelled) == data
        value, plain = parse_plain(text)
        if type(value) is not dict or "chain" in value:
            return False
        value = _without_unset_added(value)
        encoded = _encode(value) if plain else canonical_bytes(value)
    except (ValueError, TypeError, RecursionError):  # JSONDecodeError, Unicode errors included
        return False
    return encoded == data


def content_link(body: str, index: int, prev: str, stated: str, *, trusted: bool) -> str | None:
    """``stated`` when ``body`` is in the content format (:func:`stored_body`) as link
    ``index`` after ``prev`` and its content hashes to ``stated``; None otherwise (then
    :func:`body_problems` takes the parsing path, which names what is wrong).

    The hash is taken over the stored bytes, so it equals the RFC 8785 hash only when
    those bytes are canonical: that is checked here (a parse and an encode) unless
    ``trusted``, which a caller may pass only for a link the registry's anchor pins,
    whose bytes a full check accepted when the anchor was written (the same bytes,
    since its hash is the anchored chain's); the caller must refuse a chain off its
    anchors.
    """
    parts = _link_parts(body, index, prev, stated)
    if parts is None:
        return None
    data, end, head = parts
    # hashed in place: head, then the content up to its closing brace, then that brace
    # and the document's (no copy of a 4 KB body into one buffer, as a concatenation makes)
    digest = hashlib.sha256(head)
    digest.update(memoryview(data)[:end])
    digest.update(b"}}")
    recomputed = "sha256:" + digest.hexdigest()
    if recomputed != stated or not (trusted or is_canonical_content(data[:end] + b"}")):
        return None
    return recomputed


def link(record: RunRecord, index: int, prev: str) -> RunRecord:
    """``record`` with its chain link at ``index`` after ``prev``."""
    chained = ChainLink(index=index, prev=prev, hash=link_hash(content(record), index, prev))
    return record.model_copy(update={"chain": chained})


def body_problems(
    body: str, index: int, prev: str, stated: str | None = None, *, trusted: bool = False
) -> tuple[str | None, list[str]]:
    """Check one stored body (JSON text) as link ``index`` after ``prev``.

    Returns (its hash as recomputed, or None when unreadable; problems). Works on the
    raw JSON so a record edited into an invalid one is reported, not raised. ``stated``
    (the row's hash column) lets a body in the content format be checked without
    parsing it (:func:`content_link`, ``trusted`` as there); any other body, or one that
    does not check out that way, is parsed, canonicalised and reported as before.
    """
    if not isinstance(body, str):  # a damaged file can hold a number or bytes here
        return None, [f"link {index}: the stored record is not text"]
    if isinstance(stated, str):
        fast = content_link(body, index, prev, stated, trusted=trusted)
        if fast is not None:
            return fast, []
    try:
        data, plain = parse_plain(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None, [f"link {index}: the stored record is not valid JSON"]
    if not isinstance(data, dict):
        return None, [f"link {index}: the stored record is not a JSON object"]
    stated = data.pop("chain", None)
    problems: list[str] = []
    if not isinstance(stated, dict):
        return None, [f"link {index}: the record carries no chain link"]
    try:
        recomputed = link_hash(_without_unset_added(data), index, prev, plain=plain)
    except (TypeError, ValueError, RecursionError) as exc:  # what canonical JSON cannot hold
        return None, [f"link {index}: the record cannot be canonicalised ({exc})"]
    if stated.get("index") != index:
        problems.append(f"link {index}: the record says index {stated.get('index')}")
    if stated.get("prev") != prev:
        problems.append(
            f"link {index}: its 'prev' does not match the hash of the record before it "
            "(a record was removed, inserted or reordered)"
        )
    if stated.get("hash") != recomputed:
        problems.append(
            f"link {index}: the record's content does not match its hash (it was edited)"
        )
    return recomputed, problems


def check_records(records: Sequence[RunRecord], registration_digest: str) -> list[str]:
    """Problems of a whole chain given as records (an export), in index order from 0."""
    problems: list[str] = []
    prev = genesis(registration_digest)
    for expected, record in enumerate(records):
        if record.chain is None:
            problems.append(f"record {record.record_id} carries no chain link")
            return problems
        if record.registration_digest != registration_digest:
            problems.append(f"record {record.record_id} is of another registration digest")
        if record.chain.index != expected:
            problems.append(
                f"record {record.record_id} is link {record.chain.index}, expected {expected}"
                " (a record was removed, inserted or reordered)"
            )
        if record.chain.prev != prev:
            problems.append(
                f"record {record.record_id}: its 'prev' does not match the record before it"
            )
        try:
            recomputed = link_hash(content(record), record.chain.index, record.chain.prev)
        except (TypeError, ValueError, RecursionError) as exc:  # e.g. a number read as inf
            problems.append(f"record {record.record_id} cannot be canonicalised ({exc})")
            return problems
        if record.chain.hash != recomputed:
            problems.append(
                f"record {record.record_id}: its content does not match its hash (edited)"
            )
        prev = record.chain.hash
    return problems


def head_of(records: Sequence[RunRecord], registration_digest: str) -> dict[str, Any]:
    """``{"count", "head"}`` of a chain given in index order (head: the last hash)."""
    if not records or records[-1].chain is None:
        return {"count": 0, "head": genesis(registration_digest)}
    return {"count": len(records), "head": records[-1].chain.hash}


__all__ = [
    "FORMAT",
    "ChainLink",
    "body_problems",
    "canonical_bytes",
    "check_records",
    "content",
    "content_link",
    "genesis",
    "head_of",
    "is_canonical_content",
    "link",
    "link_hash",
    "parse_plain",
    "stored_body",
]
