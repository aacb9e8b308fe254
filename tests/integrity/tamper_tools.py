"""The attacker's tools for the run-store and export tamper tests (issue 12, items 2 and 4).

An attacker here can write ``runs/runs.sqlite`` with a plain sqlite3 connection (dropping
the triggers that keep it append-only) and holds :mod:`prereg.runners.store.chain`, so a forged
chain is internally consistent: only what pins it from outside (the registry's anchors,
the stored records an import is compared with, the registration's plan) can catch it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import shutil
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prereg.cli import main
from prereg.runners.exchange.rows import from_row, to_row
from prereg.runners.record import EXPORT_COLUMNS, RunRecord
from prereg.runners.store import chain

PILOT = "drafts/music-library-pilot.yaml"
PILOT_ID = "music-library-pilot"
OTHER_ID = "other-pilot"

#: The records table's columns in the oracle's view of the store (see logical_content).
CONTENT_COLUMNS = (
    "seq, record_id, registration_digest, registration_id, arm, task_id, repeat, status, "
    "success, cost_usd, chain_index, prev_hash, record_hash, body"
)


def prereg(*args: str | Path) -> tuple[int, str]:
    """``prereg ARGS`` in-process where no capsys is at hand (session fixtures)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue()


def make_workspace(
    root: Path, *, run: bool = True, max_units: int | None = None, other: bool = False
) -> Path:
    """A workspace with the pilot registered (and run, all of it or ``max_units``).

    ``other``: a second registration (the pilot under another id, so another digest)
    with 4 runs of its own, for records moved between chains.
    """
    assert prereg("init", root)[0] == 0
    assert prereg("-w", root, "register", root / PILOT)[0] == 0
    if run:
        limit = [] if max_units is None else ["--max-units", str(max_units)]
        assert prereg("-w", root, "run", PILOT_ID, "--json", *limit)[0] == 0
    if other:
        draft = root / "drafts" / "other.yaml"
        draft.write_text((root / PILOT).read_text().replace(f"id: {PILOT_ID}", f"id: {OTHER_ID}"))
        assert prereg("-w", root, "register", draft)[0] == 0
        assert prereg("-w", root, "run", OTHER_ID, "--json", "--max-units", "4")[0] == 0
    return root


def copy_workspace(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest, symlinks=True)
    return dest


def db_path(ws: Path) -> Path:
    return ws / "runs" / "runs.sqlite"


def digest_of(ws: Path, reg_id: str = PILOT_ID) -> str:
    frozen = json.loads((ws / "registry" / "frozen" / f"{reg_id}.json").read_bytes())
    return str(frozen["digest"])


def reader_records(ws: Path, reg_id: str) -> list[RunRecord]:
    """The records of ``reg_id`` as the store's own reader gives them, the reference for
    verified loading: those filed under the id in write order, then its digest's records
    filed under another id."""
    from prereg.runners.store.sqlite import RunStore  # the store under test, not the attacker's

    digest = digest_of(ws, reg_id)
    with RunStore(ws / "runs") as store:
        return store.records(registration_id=reg_id) + store.records(
            registration_digest=digest, not_registration_id=reg_id
        )


def move_records(ws: Path) -> None:
    """File a pilot record under the pilot's id with the other digest (read by id) and
    one with the pilot's digest under the other id (read by digest): ``moved-0000`` and
    ``moved-0001``, appended through the store (the chain stays sound)."""
    from prereg.runners.store.sqlite import RunStore  # as in reader_records

    pilot, other = digest_of(ws, PILOT_ID), digest_of(ws, OTHER_ID)
    with RunStore(ws / "runs") as store:
        template = store.records(registration_id=PILOT_ID)[0]
        for n, (reg_id, digest) in enumerate([(PILOT_ID, other), (OTHER_ID, pilot)]):
            store.append(
                template.model_copy(
                    update={
                        "record_id": f"moved-{n:04d}",
                        "registration_id": reg_id,
                        "registration_digest": digest,
                        "repeat": 90 + n,
                        "chain": None,
                    }
                )
            )


@contextlib.contextmanager
def attacker(ws: Path, *drop: str) -> Iterator[sqlite3.Connection]:
    """A raw connection to the store in one transaction, after ``DROP TRIGGER/INDEX ...``."""
    conn = sqlite3.connect(db_path(ws), isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for statement in drop:
            conn.execute(f"DROP {statement}")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


def stored(conn: sqlite3.Connection, digest: str) -> list[tuple[int, RunRecord]]:
    """(seq, record) of ``digest``'s chain in chain order."""
    rows = conn.execute(
        "SELECT seq, body FROM records WHERE registration_digest = ? ORDER BY chain_index",
        (digest,),
    ).fetchall()
    return [(int(seq), RunRecord.model_validate_json(body)) for seq, body in rows]


def columns(record: RunRecord) -> dict[str, Any]:
    """The indexed columns a row keeps beside its body, as the store writes them."""
    assert record.chain is not None
    return {
        "record_id": record.record_id,
        "registration_digest": record.registration_digest,
        "registration_id": record.registration_id,
        "arm": record.arm,
        "task_id": record.task_id,
        "repeat": record.repeat,
        "status": record.status,
        "success": None if record.success is None else int(record.success),
        "cost_usd": record.cost_usd,
        "chain_index": record.chain.index,
        "prev_hash": record.chain.prev,
        "record_hash": record.chain.hash,
        "body": record.model_dump_json(),
    }


def rewrite(conn: sqlite3.Connection, seq: int, record: RunRecord) -> None:
    """Store ``record`` in row ``seq``, body and columns alike (the UPDATE trigger dropped)."""
    values = columns(record)
    assignments = ", ".join(f"{name} = ?" for name in values)
    conn.execute(f"UPDATE records SET {assignments} WHERE seq = ?", (*values.values(), seq))


def insert(conn: sqlite3.Connection, record: RunRecord) -> None:
    values = columns(record)
    names = ", ".join([*values, "written_at"])
    marks = ", ".join("?" * (len(values) + 1))
    conn.execute(
        f"INSERT INTO records ({names}) VALUES ({marks})",
        (*values.values(), "2026-01-01T00:00:00+00:00"),
    )


def forge_store(conn: sqlite3.Connection, digest: str) -> str:
    """Recompute every link of ``digest``'s chain in the order stored; returns the head.

    What an attacker who recomputes every hash does after editing, removing or moving
    records: the chain is consistent again, only the registry's anchor still disagrees.
    """
    prev = chain.genesis(digest)
    rows = stored(conn, digest)
    # out of the way first: one link per chain position is a unique index
    conn.execute(
        "UPDATE records SET chain_index = chain_index + 1000000 WHERE registration_digest = ?",
        (digest,),
    )
    for i, (seq, record) in enumerate(rows):
        linked = chain.link(record, i, prev)
        rewrite(conn, seq, linked)
        assert linked.chain is not None
        prev = linked.chain.hash
    return prev


def forge_records(records: Sequence[RunRecord], digest: str) -> list[RunRecord]:
    """``records`` relinked as a whole chain from the genesis (a forged export)."""
    out: list[RunRecord] = []
    prev = chain.genesis(digest)
    for i, record in enumerate(records):
        linked = chain.link(record, i, prev)
        assert linked.chain is not None
        prev = linked.chain.hash
        out.append(linked)
    return out


def flip_outcome(record: RunRecord) -> RunRecord:
    """``record`` with its verdict reversed, still a valid record (the stealthy edit)."""
    if record.success:
        change: dict[str, Any] = {
            "success": False,
            "terminal_flag": "wrong_conclusion",
            "first_unmet_obligation": "answer",
        }
    else:
        change = {"success": True, "terminal_flag": None, "first_unmet_obligation": None}
    return edited(record, **change)


def edited(record: RunRecord, **change: Any) -> RunRecord:
    """``record`` with fields changed and validated again; its chain link is kept (stale)."""
    return RunRecord.model_validate({**record.model_dump(mode="json"), **change})


def read_jsonl(path: Path) -> list[RunRecord]:
    return [RunRecord.model_validate_json(line) for line in path.read_text().splitlines()]


def write_jsonl(path: Path, records: Sequence[RunRecord]) -> Path:
    path.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return path


def read_csv(path: Path) -> list[RunRecord]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [RunRecord.model_validate(from_row(row)) for row in csv.DictReader(fh)]


def write_csv(path: Path, records: Sequence[RunRecord]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(EXPORT_COLUMNS))
        writer.writeheader()
        for record in records:
            writer.writerow(to_row(record))
    return path


def logical_content(db: Path) -> str:
    """What the store holds, as SQLite reads it: a digest of the records table's schema
    objects and of its rows, every value with its SQLite type (text as raw bytes).

    ``written_at`` (the store's own write time, not part of a record and not covered by
    the chain) is left out. A file SQLite cannot read is ``"unreadable"``. The file is
    opened immutable, so reading it writes nothing (no -wal or -shm).
    """
    typed = ", ".join(f"{c}, typeof({c})" for c in CONTENT_COLUMNS.split(", "))
    try:
        conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        conn.text_factory = bytes
        try:
            schema = conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
                " WHERE tbl_name = 'records' ORDER BY type, name"
            ).fetchall()
            rows = conn.execute(f"SELECT {typed} FROM records ORDER BY seq").fetchall()
        finally:
            conn.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError):  # an error naming undecodable bytes
        return "unreadable"
    return hashlib.sha256(repr((schema, rows)).encode()).hexdigest()


def records_pages(db: Path) -> tuple[int, list[int], list[tuple[int, int]]]:
    """(page size, the records table's b-tree pages, root first, and its leaves' cell areas).

    Read from the file itself (the SQLite file format): every byte of a leaf's cell area
    belongs to a record (the store is append-only, so there are no freeblocks).
    """
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'records'"
        ).fetchone()
    finally:
        conn.close()
    data = db.read_bytes()
    size = struct.unpack(">H", data[16:18])[0]
    size = 65536 if size == 1 else size
    reserved = data[20]
    pages: list[int] = []
    leaves: list[tuple[int, int]] = []
    todo = [int(root)]
    while todo:
        page = todo.pop(0)
        pages.append(page)
        start = (page - 1) * size
        header = start + (100 if page == 1 else 0)
        cells = struct.unpack(">H", data[header + 3 : header + 5])[0]
        if data[header] == 0x05:  # interior table page: left children, then the right-most
            pointers = header + 12
            for i in range(cells):
                at = pointers + 2 * i
                cell = start + struct.unpack(">H", data[at : at + 2])[0]
                todo.append(struct.unpack(">I", data[cell : cell + 4])[0])
            todo.append(struct.unpack(">I", data[header + 8 : header + 12])[0])
        elif data[header] == 0x0D:  # leaf table page: cells run to the page's end
            content = struct.unpack(">H", data[header + 5 : header + 7])[0] or 65536
            leaves.append((start + content, start + size - reserved))
    return size, pages, leaves
