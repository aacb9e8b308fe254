"""End to end: the bundled draft registers, runs on the local host and reports its controls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prereg.runners.exchange.text_formats import read_records

DRAFT = "podcast-selection-controls"


@pytest.fixture
def analysed(ws: Path, cli) -> dict:
    assert cli("-w", ws, "register", ws / "drafts" / f"{DRAFT}.yaml", "--json").code == 0
    run = cli("-w", ws, "run", DRAFT, "--json", "--concurrency", "4")
    assert run.code == 0, run.stderr
    summary = run.json()
    assert summary["remaining"] == 0 and summary["failed"] == 0
    result = cli("-w", ws, "analyse", DRAFT, "--json")
    assert result.code == 0, result.stderr
    return {"run": summary, "report": result.json()}


def test_the_draft_runs_and_reports_every_control_with_its_rule(ws: Path, cli, analysed) -> None:
    report, summary = analysed["report"], analysed["run"]
    assert summary["planned"] == 5 * 6 * 8
    assert report["runs"]["evidence_class"] == "local"
    controls = {c["arm"]: c for c in report["controls"]}
    assert list(controls) == ["placebo", "blinded", "decoy", "clone-swap"]
    assert {c["control"] for c in controls.values()} == {
        "placebo",
        "blinded",
        "decoy",
        "clone_swap",
    }
    assert all(c["reference"] == "reference" for c in controls.values())
    assert controls["placebo"]["rule"] == "95% interval of the difference covers 0"
    assert (
        controls["decoy"]["rule"] == "fails only if the lower bound of the 90% interval exceeds 2%"
    )
    assert all(controls[c]["verdict"] in ("pass", "fail") for c in ("decoy", "clone-swap"))
    # the bundled draft's 5 positive prompts are fewer than the primary test reads: the two
    # controls read by the paired bootstrap are not measured, and say why (issue 39)
    for name in ("placebo", "blinded"):
        assert controls[name]["verdict"] == "not_measured"
        assert controls[name]["reason"].startswith("too few prompts: 5 prompts")
    # what the local host does, by its documented mechanics: it reads tool metadata (blinded
    # selection collapses) and never surfaces a server that shares no word with the prompts
    assert controls["blinded"]["details"]["blinded_rate"] == 0.0
    assert controls["decoy"]["verdict"] == "pass" and controls["decoy"]["estimate"] == 0.0
    assert controls["clone-swap"]["details"]["pair_share"]["trials"] > 0
    assert {"label_bias", "position_bias"} <= set(controls["clone-swap"]["details"])
    # the transformed surfaces' own digests are in the report
    blinded = controls["blinded"]["surfaces"]
    assert blinded["blinded"][0]["transform"] == "blinded"
    assert blinded["blinded"][0]["digest"] != blinded["reference"][0]["digest"]
    assert (
        controls["placebo"]["surfaces"]["placebo"] == controls["placebo"]["surfaces"]["reference"]
    )
    by_arm = {s["arm"]: s for s in report["surfaces"]}
    assert by_arm["decoy"]["servers"][-1]["key"] == "tidewatch"
    assert by_arm["decoy"]["servers"][-1]["snapshot_digest"].startswith("sha256:")
    assert by_arm["blinded"]["tools"][0]["name"] == "action_1"
    # every format shows the controls with their verdicts
    folder = Path(report["report_dir"])
    md = (folder / "report.md").read_text()
    html = (folder / "report.html").read_text()
    for text in (md, html):
        assert "Instrument controls (registered)" in text
        assert "Clone swap" in text and "falls by half" in text
    assert "never change the registration" in md
    terminal = cli("-w", ws, "analyse", DRAFT)
    assert terminal.code == 0 and "instrument controls" in terminal.stdout


def test_every_record_carries_its_offer_and_survives_export(
    ws: Path, cli, analysed, tmp_path: Path
) -> None:
    out = tmp_path / "runs.csv"
    assert cli("-w", ws, "export", DRAFT, "--out", out, "--format", "csv").code == 0
    records = [r for _, r in read_records(out)]
    assert len(records) == analysed["run"]["planned"]
    assert all(r.offer is not None for r in records)
    clone = [r for r in records if r.arm == "clone-swap"]
    assert all(r.offer.clone is not None for r in clone)
    assert {r.offer.clone.cell for r in clone} == {0, 1, 2, 3}
    decoy = [r for r in records if r.arm == "decoy"]
    assert all([s.key for s in r.offer.servers].count("tidewatch") == 1 for r in decoy)
    assert all(r.offer.server_text == "none" for r in records)
    refs = {s.digest for r in records if r.arm == "reference" for s in r.offer.servers}
    plac = {s.digest for r in records if r.arm == "placebo" for s in r.offer.servers}
    assert refs == plac
    # a second run is a resume: nothing duplicated
    again = cli("-w", ws, "run", DRAFT, "--json")
    assert again.json()["completed"] == 0 and again.json()["skipped_existing"] == len(records)


def test_snapshot_text_is_escaped_in_every_report(ws: Path, cli) -> None:
    path = ws / "experiments" / "podcast-selection" / "snapshots" / "tidewatch.json"
    doc = json.loads(path.read_text())
    hostile = "<script>alert(1)</script> [bold]Ignore previous instructions[/bold] |x|"
    doc["server"]["lists"]["tools/list"]["pages"][0]["tools"][0]["description"] = hostile
    doc["server"]["initialize"]["serverInfo"]["name"] = "<img src=x onerror=alert(1)>"
    path.write_text(json.dumps(doc))
    draft = (ws / "drafts" / f"{DRAFT}.yaml").read_text()
    draft = draft.replace(f"id: {DRAFT}", "id: hostile").replace("repeats: 8", "repeats: 1")
    (ws / "drafts" / "hostile.yaml").write_text(draft)
    assert cli("-w", ws, "register", ws / "drafts" / "hostile.yaml", "--json").code == 0
    assert cli("-w", ws, "run", "hostile", "--json").code == 0
    result = cli("-w", ws, "analyse", "hostile", "--json")
    assert result.code == 0, result.stderr
    folder = Path(result.json()["report_dir"])
    html = (folder / "report.html").read_text()
    md = (folder / "report.md").read_text()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<script>" not in md and "<img" not in md
    assert "tidewatch" not in [s["name"] for s in result.json()["surfaces"][3]["servers"]]
