"""Cost of verify-on-read: what ``run``, ``analyse``, ``export`` and ``import`` check first.

Times, in one process, median of ``--repeats`` after a warm-up:

- registration verification (``verify_entry``: the ledger chain, the frozen copy against
  its line and digest, the referenced objects, every claim and anchor mirror) and the
  whole registry (``verify``), for the bundled pilot;
- run-chain verification for chains of 100, 1,000 and 10,000 records: the stored links
  checked as ``verify`` and every reader do (``check_chain``), and the whole read path of
  ``analyse`` (``verified_records``: store schema and integrity check, the chain, the
  registry's anchors, then the records parsed), per record;
- where a record's time goes: JSON parsing, canonical JSON and sha256 of the link (by
  the rfc8785 package, and by ``chain.canonical_bytes``, which the chain uses), and
  pydantic validation of the record.

The chains are the pilot's first real record (anchored by the registry) followed by
copies of it under other record ids and repeats, so ``verified_records`` finds nothing
wrong and does all its work. No assertions: figures only.

    python bench/verify_cost.py [--sizes 100,1000,10000] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prereg.cli import main as cli_main
from prereg.registry.digest import canonical_json
from prereg.registry.registrations import Registry
from prereg.registry.verify import verify, verify_entry
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore, chain
from prereg.runners.store.verify import check_chain, verified_records

PILOT_ID = "music-library-pilot"


def _cli(*args: str | Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli_main([str(a) for a in args])
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise RuntimeError(f"prereg {' '.join(map(str, args))}: exit {exc.code}") from None


def _median(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _workspace(root: Path) -> Path:
    """The pilot registered and one unit run (one record, anchored by the registry)."""
    _cli("init", root)
    _cli("-w", root, "register", root / "drafts" / f"{PILOT_ID}.yaml")
    _cli("-w", root, "run", PILOT_ID, "--max-units", "1", "--json")
    return root


def _grow_chain(ws: Path, size: int) -> str:
    """Extend the pilot's one-record chain to ``size`` records; returns the digest."""
    with RunStore(ws / "runs") as store:
        (first,) = store.records()
        assert first.chain is not None
        prev, linked = first.chain.hash, []
        body = first.model_dump(mode="json", exclude={"chain"})
        for i in range(1, size):
            copy = RunRecord.model_validate(
                {**body, "record_id": f"bench-{i:08d}", "repeat": 1000 + i}
            )
            link = chain.link(copy, i, prev)
            assert link.chain is not None
            prev = link.chain.hash
            linked.append(link)
        with store._tx() as conn:  # one transaction: setup, not what is measured
            for record in linked:
                store._insert(conn, record)
    return first.registration_digest


def registration_figures(ws: Path, repeats: int) -> dict[str, float]:
    registry = Registry(ws / "registry")
    return {
        "verify_entry_ms": 1000 * _median(lambda: verify_entry(registry, PILOT_ID), repeats),
        "verify_registry_ms": 1000 * _median(lambda: verify(registry, ws / "experiments"), repeats),
    }


def chain_figures(base: Path, template: Path, size: int, repeats: int) -> dict[str, Any]:
    ws = base / f"chain-{size}"
    shutil.copytree(template, ws, symlinks=True)
    digest = _grow_chain(ws, size)
    registry = Registry(ws / "registry")
    entry = registry.get(PILOT_ID)
    with RunStore(ws / "runs") as store:
        rows = store.chain_rows(digest)
        problems, _ = check_chain(rows, digest)
        assert not problems, problems[:3]
        read_rows = _median(lambda: store.chain_rows(digest), repeats)
        check = _median(lambda: check_chain(rows, digest), repeats)
        bodies = [row.body for row in rows]
        parsed = [json.loads(b) for b in bodies]
        for data in parsed:
            data.pop("chain")
        loads = _median(lambda: [json.loads(b) for b in bodies], repeats)
        documents = [{"format": chain.FORMAT, "index": 0, "prev": "", "record": d} for d in parsed]
        canon = _median(lambda: [hashlib.sha256(canonical_json(d)) for d in documents], repeats)
        fast = _median(
            lambda: [hashlib.sha256(chain.canonical_bytes(d)) for d in documents], repeats
        )
        validate = _median(lambda: [RunRecord.model_validate_json(b) for b in bodies], repeats)
    records, _heads = verified_records(ws / "runs", registry, entry)
    assert len(records) == size
    read_path = _median(lambda: verified_records(ws / "runs", registry, entry), repeats)
    per = 1000.0 / size
    return {
        "records": size,
        "verified_records_s": round(read_path, 4),
        "verified_records_ms_per_record": round(read_path * per, 4),
        "check_chain_ms_per_record": round(check * per, 4),
        "read_rows_ms_per_record": round(read_rows * per, 4),
        "json_loads_ms_per_record": round(loads * per, 4),
        "rfc8785_sha256_ms_per_record": round(canon * per, 4),
        "fast_canonical_sha256_ms_per_record": round(fast * per, 4),
        "pydantic_validate_ms_per_record": round(validate * per, 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="prereg-bench-") as tmp:
        base = Path(tmp)
        template = _workspace(base / "template")
        out: dict[str, Any] = {
            "python": sys.version.split()[0],
            "registration": registration_figures(template, args.repeats),
            "chains": [chain_figures(base, template, n, args.repeats) for n in sizes],
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    reg = out["registration"]
    print(f"python {out['python']}, median of {args.repeats} after a warm-up")
    print(f"registration check (verify_entry), the pilot: {reg['verify_entry_ms']:.2f} ms")
    print(f"whole registry (verify, registry part):      {reg['verify_registry_ms']:.2f} ms")
    print()
    head = (
        f"{'records':>8} {'read path':>10} {'per rec':>8} | per record, ms: {'chain':>6} "
        f"{'rows':>6} {'json':>6} {'rfc8785':>8} {'fast':>6} {'pydantic':>8}"
    )
    print(head)
    for c in out["chains"]:
        print(
            f"{c['records']:>8} {c['verified_records_s']:>9.3f}s "
            f"{c['verified_records_ms_per_record']:>7.3f}ms | {'':>15}"
            f"{c['check_chain_ms_per_record']:>6.3f} {c['read_rows_ms_per_record']:>6.3f} "
            f"{c['json_loads_ms_per_record']:>6.3f} "
            f"{c['rfc8785_sha256_ms_per_record']:>8.3f} "
            f"{c['fast_canonical_sha256_ms_per_record']:>6.3f} "
            f"{c['pydantic_validate_ms_per_record']:>8.3f}"
        )
    print()
    print("read path: verified_records (what analyse/export/run do before using records);")
    print("chain: check_chain over rows already read (what verify does per record);")
    print("rfc8785 / fast: a link's canonical JSON and sha256, by the rfc8785 package and by")
    print("chain.canonical_bytes (the C encoder where it spells the same bytes; link_hash's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
