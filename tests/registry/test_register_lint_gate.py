"""The corpus-lint gate at ``register`` (issue 41, item 5): a confirmatory registration of
an experiment with unwaived findings is refused (exit 4, nothing written); waivers with a
reason let it through and appear in report.json and report.md; an exploratory
registration is never gated, its findings are warnings."""

from __future__ import annotations

import html
import json
from pathlib import Path

import yaml

from tests.conftest import tree_digest
from tests.corpus_planting import plant

CONFIRM = "drafts/music-library-confirmatory.yaml"
PILOT = "drafts/music-library-pilot.yaml"
WAIVERS = [
    {"rule": "near-duplicate", "reason": "planted pair, kept to test the gate"},
    {"rule": "realism", "reason": "planted realism prompts"},
    {"rule": "brand", "reason": "planted brand prompts"},
    {"rule": "canary", "reason": "planted canaries"},
    {"rule": "guardrail", "tool": "semantic", "reason": "planted guardrail text"},
]


def _draft(ws: Path, source: str, reg_id: str, waive: list[dict] | None = None) -> Path:
    doc = yaml.safe_load((ws / source).read_text())
    doc.update(id=reg_id, experiment="planted")
    if waive is not None:
        doc["corpus_lint"] = {"waive": waive}
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_confirmatory_with_findings_is_refused(ws: Path, cli) -> None:
    plant(ws / "experiments")
    before = tree_digest(ws / "registry")
    out = cli("-w", ws, "register", _draft(ws, CONFIRM, "gate-refused"), "--json")
    assert out.code == 4, out.stderr
    err = out.json()
    assert err["field"] == "corpus_lint" and err["file"].endswith("gate-refused.yaml")
    assert any("realism.screenshot" in d and "p04" in d for d in err["details"])
    assert tree_digest(ws / "registry") == before  # nothing written
    # one finding left unwaived is still refused
    partial = _draft(ws, CONFIRM, "gate-partial", WAIVERS[:-1])
    out = cli("-w", ws, "register", partial, "--json")
    assert out.code == 4
    assert all(d.startswith("guardrail.") for d in out.json()["details"])


def test_waivers_let_it_through_and_appear_in_the_report(ws: Path, cli) -> None:
    plant(ws / "experiments")
    path = _draft(ws, CONFIRM, "gate-waived", WAIVERS)
    out = cli("-w", ws, "register", path, "--json")
    assert out.code == 0, out.stderr
    lint = out.json()["corpus_lint"]
    assert lint["open"] == [] and lint["unused_waivers"] == []
    assert {f["waiver"]["reason"] for f in lint["waived"]} == {w["reason"] for w in WAIVERS}
    assert cli("-w", ws, "run", "gate-waived").code == 0
    assert cli("-w", ws, "analyse", "gate-waived").code == 0
    report = ws / "reports" / "gate-waived"
    doc = json.loads((report / "report.json").read_text())
    assert doc["registration_document"]["corpus_lint"]["waive"][0]["reason"] == WAIVERS[0]["reason"]
    md = (report / "report.md").read_text()
    for w in WAIVERS:
        assert w["reason"] in md
    assert "corpus lint waived: guardrail (semantic)" in md
    page = (report / "report.html").read_text()
    for w in WAIVERS:
        assert html.escape(w["reason"]) in page
    assert "corpus lint waived: guardrail (semantic)" in page


def test_exploratory_is_not_gated_and_warns(ws: Path, cli) -> None:
    plant(ws / "experiments")
    path = _draft(ws, PILOT, "gate-pilot")
    out = cli("-w", ws, "register", path, "--json")
    assert out.code == 0, out.stderr
    rules = {f["rule"] for f in out.json()["corpus_lint"]["open"]}
    assert {"brand", "canary", "guardrail.injection"} <= rules
    # the near-duplicate pairs (most of the lint's cost on a large corpus) are left to
    # `prereg corpus lint` and the confirmatory gate
    assert "near-duplicate" not in rules
    text = cli("-w", ws, "register", _draft(ws, PILOT, "gate-pilot-2"))
    assert text.code == 0
    assert "warning" in text.stdout and "corpus lint realism.attachment" in text.stdout


def test_absent_waivers_leave_the_digest_unchanged(ws: Path, cli) -> None:
    """A registration without ``corpus_lint`` digests as before the field existed."""
    from prereg.registry.schema import Registration

    doc = yaml.safe_load((ws / CONFIRM).read_text())
    assert "corpus_lint" not in Registration.model_validate(doc).model_dump(mode="json")
    doc["corpus_lint"] = {"waive": WAIVERS[:1]}
    dumped = Registration.model_validate(doc).model_dump(mode="json")
    assert dumped["corpus_lint"]["waive"][0]["rule"] == "near-duplicate"
