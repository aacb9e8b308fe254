"""The bundled judged podcast-selection study, offline with the local judges."""

from __future__ import annotations

import json
from pathlib import Path

DRAFT = "podcast-selection-judged"


def test_bundled_study_shows_judged_completed_and_split(cli, ws: Path) -> None:
    assert cli("-w", ws, "register", ws / "drafts" / f"{DRAFT}.yaml").code == 0
    assert cli("-w", ws, "run", DRAFT, "--no-progress").code == 0
    before = cli("-w", ws, "analyse", DRAFT, "--json").json()
    unjudged = [a["resolution"]["unjudged"] for a in before["invokerank"]["arms"]]
    assert sum(unjudged) > 0  # no-tool runs exist and are unjudged before the judge ran
    for arm in before["invokerank"]["arms"]:
        split = arm["resolution"]
        if split["unjudged"]:
            # kept in the denominator, counted first; the rates that would drop them unknown
            assert split["degenerate"] and split["host_self_serve"] is None
            assert split["counts"]["native_self_service"] == 0
            assert split["note"].startswith(f"{split['unjudged']} positive run(s)")
    assert all(r["unjudged"] == r["needed"] for r in before["judged"]["rates"])
    judged = cli("-w", ws, "judge", DRAFT, "--json")
    assert judged.code == 0, judged.stderr
    assert judged.json()["remaining"] == 0 and judged.json()["unparseable"] == 0
    text = cli("-w", ws, "analyse", DRAFT)
    assert text.code == 0 and "uncalibrated judge" in text.stdout
    report = json.loads((ws / "reports" / DRAFT / "report.json").read_text())
    rates = {(r["arm"], r["judge"]): r for r in report["judged"]["rates"]}
    completion = rates[("descriptive", "completion")]
    assert completion["judged"] == completion["needed"] > 0
    assert completion["rate"] is not None and completion["label"].startswith("uncalibrated")
    # local runs carry an oracle's Completed: the judge is checked against it, run by run
    check = completion["oracle_agreement"]
    assert check["runs"] == completion["judged"] and 0 <= check["agree"] <= check["runs"]
    assert "against the oracle" in text.stdout
    # the split's native class rests on the native judge: said, with its label
    md = (ws / "reports" / DRAFT / "report.md").read_text()
    assert (
        "native self\\-service class rests on" in md or "native self-service class rests on" in md
    )
    native = sum(rates[(a, "native")]["judged"] for a in ("descriptive", "placeholder"))
    fills = sum(
        rates[(a, "native")]["provenance"]["parameters"]["fills_native_class"]
        for a in ("descriptive", "placeholder")
    )
    assert fills == native
    # local runs' Completed was decided by an oracle: the judge fills none of it
    assert completion["provenance"]["parameters"]["fills_invokerank_completed"] == 0
    for arm in report["invokerank"]["arms"]:
        split = arm["resolution"]
        assert split["unjudged"] == 0 and split["host_self_serve"] is not None
    assert all(r["corrected"] is None for r in rates.values())  # no gold set, no correction
    assert sum(rates[(a, "native")]["judged"] for a in ("descriptive", "placeholder")) == sum(
        unjudged
    )
