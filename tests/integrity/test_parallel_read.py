"""Reading in parallel gives what reading in one process gives (prereg.core.forked).

A chain verified in ranges by forked children must name exactly the problems, and hand
on exactly the records, that one pass does, on the honest chain and on chains tampered
at and around the ranges' bounds; and ``analyse`` spread over processes must write the
same report and figures as in one. The fork thresholds are lowered so the pilot's 168
runs take the parallel paths; each run happens in a fresh single-threaded interpreter
(see tests/core/test_forked.py) that counts its forks.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

from tests.core.fork_script import run_script
from tests.integrity.tamper_tools import PILOT_ID

LOWERED = """
import prereg.reports.analysis as analysis
import prereg.runners.store.verify as verify_runs
analysis.FORK_FROM = 1
verify_runs.RANGE_LINKS = 20
verify_runs.PARALLEL_BYTES = 0
import prereg.reports.load as load
load.FORK_UNITS = 1
"""

CHAINS = """
from dataclasses import replace
import itertools
from msgspec.structs import asdict
from prereg.reports.observations import from_record, pinned_observation
from prereg.runners.store.sqlite import RunStore
ws = sys.argv[1]
with RunStore(os.path.join(ws, "runs")) as store:
    digest = [d for d in store.digests(registration_id=sys.argv[2])][0]
    rows = store.chain_rows(digest)
half = len(rows) // 2
def plain(obs):  # sets sorted: each interpreter orders a set of strings its own way
    return json.dumps(asdict(obs), sort_keys=True, default=sorted)
def body_edit(row):
    return replace(row, body=row.body.replace('"calls":', '"calls":1', 1))
variants = {
    "honest": rows,
    "edited at the bound": rows[:half] + [body_edit(rows[half])] + rows[half + 1:],
    "edited before the bound": rows[:half - 1] + [body_edit(rows[half - 1])] + rows[half:],
    "removed at the bound": rows[:half] + rows[half + 1:],
    "swapped across the bound": rows[:half - 1] + [rows[half], rows[half - 1]] + rows[half + 1:],
    "prev cut at the bound": rows[:half] + [replace(rows[half], prev_hash="sha256:" + "0" * 64)]
        + rows[half + 1:],
    "duplicate unit": rows + [replace(rows[3], chain_index=len(rows), seq=10**6)],
    "last edited": rows[:-1] + [body_edit(rows[-1])],
}
out = {}
modes = {  # (links pinned, how they are read): a pinned link read as the analysis reads it
    "": (0, None),
    " (pinned)": (len(rows), None),
    " (pinned, read)": (len(rows), pinned_observation),
}
for (name, chain), (mode, (pinned, read)) in itertools.product(variants.items(), modes.items()):
    problems, head, records = verify_runs._check_links(chain, digest, pinned, from_record, {}, read)
    out[name + mode] = {
        "problems": [[p.kind, p.entry, p.message] for p in problems],
        "head": head,
        "records": [None if r is None else [r[0], plain(r[1])] for r in records],
    }
print(json.dumps({"result": out, "forks": len(FORKS)}))
"""


def _run(script: str, jobs: int, *args: str | Path) -> Any:
    return run_script(LOWERED + textwrap.dedent(script), jobs, *args)


def test_chain_ranges_verify_as_one_pass(ran_template: Path) -> None:
    serial = _run(CHAINS, 1, ran_template, PILOT_ID)
    parallel = _run(CHAINS, 2, ran_template, PILOT_ID)
    assert serial["forks"] == 0 and parallel["forks"] >= len(serial["result"])
    assert parallel["result"] == serial["result"]
    honest = serial["result"]["honest"]
    assert honest["problems"] == [] and all(r is not None for r in honest["records"])
    for name, found in serial["result"].items():  # every tampering is caught
        assert (found["problems"] == []) == name.startswith("honest"), name
        if name.endswith("(pinned, read)"):  # the same problems and observations as
            assert found == serial["result"][name.replace(", read", "")], name  # validated


ANALYSE = """
from prereg.cli import main
try:
    main(["-w", sys.argv[1], "analyse", sys.argv[2], "--json"])
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
print(json.dumps({"forks": len(FORKS)}))
"""


def _report(ws: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    out = ws / "reports" / PILOT_ID
    report = json.loads((out / "report.json").read_text())
    when = report["provenance"].pop("analysed_at").encode()
    figures = {f.name: f.read_bytes() for f in sorted((out / "figures").iterdir())}
    for text in ("report.md", "report.html"):  # the same figures named, the same pictures
        figures[text] = (out / text).read_bytes().replace(when, b"(when)")
    return report, figures


def test_analyse_in_parallel_writes_the_same_report(ran_template: Path, tmp_path: Path) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    shutil.copytree(ran_template, one)
    shutil.copytree(ran_template, many)
    assert _run(ANALYSE, 1, one, PILOT_ID)["forks"] == 0
    assert (
        _run(ANALYSE, 2, many, PILOT_ID)["forks"] >= 3
    )  # chain ranges, store check, sections, figures
    report, figures = _report(many)
    assert (report, figures) == _report(one)
    assert report["invokerank"]["arms"] and figures  # the forked sections are there
    assert "terminal_breakdown" in report["figures"]  # the figure drawn in a child
    assert sorted(report["figures"]) == sorted(n[: -len(".png")] for n in figures if ".png" in n)


FIRST_USE = """
import sys
from prereg.cli import main
from prereg.reports import analysis
from prereg.reports.render import figures
analysis.import_ahead()
figures.prepare()
libraries = ("scipy", "numpy", "matplotlib")
before = {m for m in sys.modules if m.split(".")[0] in libraries}
try:
    main(["-w", sys.argv[1], "analyse", sys.argv[2], "--json"])
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
after = {m for m in sys.modules if m.split(".")[0] in libraries}
print(json.dumps({"later": sorted(after - before), "ahead": len(before)}))
"""


def test_the_libraries_imported_ahead_are_all_the_analysis_imports(
    ran_template: Path, tmp_path: Path
) -> None:
    """``analyse`` imports scipy and numpy's random generators ahead, while children
    verify the chain (:func:`prereg.reports.analysis.import_ahead`), so the sections'
    children inherit them, and matplotlib while they start on the sections
    (:func:`prereg.reports.render.figures.prepare`): after both an analysis imports no more."""
    ws = tmp_path / "ws"
    shutil.copytree(ran_template, ws)
    found = _run(FIRST_USE, 1, ws, PILOT_ID)
    assert found["later"] == [] and found["ahead"] > 100
