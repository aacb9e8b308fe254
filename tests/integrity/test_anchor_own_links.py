"""The anchor at the end of ``prereg run`` checks the links the run wrote by their hashes
(issue 15: :class:`prereg.runners.store.interface.WrittenLinks`).

A link this process appended, whose row still holds the hash and columns written and
whose body still hashes to that hash, is not validated again; anything else about the
row falls to the full check. The property that matters: trusting one's own links never
hides a problem the full check finds, whatever was changed in the stored row.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from prereg.runners.record import RunRecord
from prereg.runners.store import verify as vr
from prereg.runners.store.interface import ChainRow, WrittenLinks
from prereg.runners.store.sqlite import RunStore, chain
from tests.integrity.tamper_tools import PILOT_ID, digest_of, reader_records


@pytest.fixture(scope="module")
def written(
    ran_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[ChainRow], WrittenLinks, str]:
    """The pilot's records appended afresh to a new store, the links this "run" wrote."""
    digest = digest_of(ran_template)
    records = [r for r in reader_records(ran_template, PILOT_ID) if r.registration_digest == digest]
    own = WrittenLinks()
    with RunStore(tmp_path_factory.mktemp("own") / "runs") as store:
        for record in records:
            own.add(store.append(record.model_copy(update={"chain": None})))
        rows = store.chain_rows(digest)
    assert len(rows) == len(records) > 100
    return rows, own, digest


def _check(rows: list[ChainRow], digest: str, own: WrittenLinks | None) -> tuple[list[str], str]:
    problems, head, _ = vr.check_chain_records(
        rows, digest, vr._dropped, own=None if own is None else own.of(digest)
    )
    return [f"{p.kind}: {p.entry}: {p.message}" for p in problems], head


def test_own_links_check_by_hash_without_validating(
    written: tuple[list[ChainRow], WrittenLinks, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows, own, digest = written
    full_problems, full_head = _check(rows, digest, None)
    assert full_problems == []
    validated: list[str] = []
    validate = RunRecord.model_validate_json

    def counting(data: str | bytes, *args: object, **kw: object) -> RunRecord:
        validated.append("x")
        return validate(data, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(RunRecord, "model_validate_json", counting)
    problems, head = _check(rows, digest, own)
    assert (problems, head) == ([], full_head)
    assert validated == []  # no own record was parsed into a model again
    _check(rows, digest, None)
    assert len(validated) == len(rows)  # the full check validates each one


def _body_edited(row: ChainRow) -> ChainRow:
    data = json.loads(row.body)
    data["task_id"] = data["task_id"] + "-edited"
    return dataclasses.replace(row, body=json.dumps(data))


def _body_edited_and_rehashed(row: ChainRow) -> ChainRow:
    """The body edited and its hash recomputed over the new content (the next link's
    'prev' then no longer matches)."""
    record = RunRecord.model_validate_json(_body_edited(row).body)
    linked, body = chain.linked_body(
        record.model_copy(update={"chain": None}), row.chain_index, row.prev_hash
    )
    assert linked.chain is not None
    return dataclasses.replace(row, body=body, record_hash=linked.chain.hash)


TAMPERS: dict[str, Callable[[ChainRow], ChainRow]] = {
    "body edited, hash column kept": _body_edited,
    "body edited and rehashed": _body_edited_and_rehashed,
    "status column flipped": lambda r: dataclasses.replace(
        r, status="infra_error" if r.status == "ok" else "ok"
    ),
    "success column flipped": lambda r: dataclasses.replace(
        r, success=None if r.success is None else 1 - r.success
    ),
    "cost column changed": lambda r: dataclasses.replace(r, cost_usd=12.5),
    "cost column of another type": lambda r: dataclasses.replace(r, cost_usd="12.5"),  # type: ignore[arg-type]
    "hash column changed": lambda r: dataclasses.replace(r, record_hash="sha256:" + "0" * 64),
    "prev column changed": lambda r: dataclasses.replace(r, prev_hash="sha256:" + "1" * 64),
    "body not JSON": lambda r: dataclasses.replace(r, body=r.body[:-1]),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
@pytest.mark.parametrize("where", [0, 57, -1])
def test_own_links_never_hide_a_problem_the_full_check_finds(
    written: tuple[list[ChainRow], WrittenLinks, str], tamper: str, where: int
) -> None:
    rows, own, digest = written
    changed = list(rows)
    changed[where] = TAMPERS[tamper](rows[where])
    full = _check(changed, digest, None)
    assert full[0], f"{tamper}: the full check must find it"
    assert _check(changed, digest, own) == full


def test_removed_and_reordered_links_are_found_as_before(
    written: tuple[list[ChainRow], WrittenLinks, str],
) -> None:
    rows, own, digest = written
    for changed in (rows[:10] + rows[11:], rows[:10] + [rows[11], rows[10]] + rows[12:]):
        full = _check(changed, digest, None)
        assert full[0]
        assert _check(changed, digest, own) == full


def test_own_links_only_with_a_reader_that_keeps_nothing(
    written: tuple[list[ChainRow], WrittenLinks, str],
) -> None:
    rows, own, digest = written
    with pytest.raises(ValueError):
        vr.check_chain_records(rows, digest, vr._as_is, own=own.of(digest))
