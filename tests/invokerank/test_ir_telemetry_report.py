"""The S-vs-T comparison in the report (issue 41, item 5): the arms named in
``invokerank.telemetry`` get, in report.json, Markdown, HTML and the terminal, their tool
mix beside the named host's telemetry, the total variation distance and Spearman's rank
correlation (each withheld below the minimums with the reason), labelled as telemetry
(class T, never pooled), with the telemetry log's head the analysis read. S is recounted
from the exported records and the figures computed by hand here (numpy, scipy), not by the
code under test. Without the field: no block, the log not read; a digest unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from tests.invokerank.test_ir_weights import DIGEST_BEFORE, FILES, REGISTRATION

SOURCE = "drafts/podcast-selection-judged.yaml"
REG = "telemetry-report"
HOUR = "2026-10-05T14:00:00Z"
TOOLS = ["podshelf_search_podcasts", "podshelf_subscribe", "podshelf_mark_played"]
TELEMETRY = """invokerank:
  telemetry:
    descriptive: {host: sim, integration: focal}
    placeholder: {host: few, integration: focal}
"""


def _draft(ws: Path, reg_id: str, extra: str) -> Path:
    text = (ws / SOURCE).read_text()
    text = text.split("\njudge:\n")[0] + "\n"  # no judges: nothing to judge first
    text = text.replace("id: podcast-selection-judged", f"id: {reg_id}", 1) + extra
    # 12 repeats: enough first calls to the focal integration for S's figures (>= 30)
    text = text.replace("design: {repeats: 4,", "design: {repeats: 12,", 1)
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    return path


def _s_counts(records: list[dict[str, Any]], arm: str) -> dict[str, int]:
    """S by hand: the first tool call of each ok run of ``arm`` whose first external call
    went to the focal integration (terminal class focal)."""
    out: dict[str, int] = {}
    for rec in records:
        if rec["arm"] == arm and rec["status"] == "ok" and rec["terminal_class"] == "focal":
            first = next(e["tool"] for e in rec["trace"] if e["kind"] == "tool_call")
            out[first] = out.get(first, 0) + 1
    return out


def _figures(s: dict[str, int], t: dict[str, int], tools: list[str]) -> tuple[float, float]:
    union = list(dict.fromkeys([*tools, *sorted(s), *sorted(t)]))
    ps = np.array([s.get(k, 0) for k in union], float)
    pt = np.array([t.get(k, 0) for k in union], float)
    ps, pt = ps / ps.sum(), pt / pt.sum()
    tvd = 0.5 * float(np.abs(ps - pt).sum())
    rho = float(scipy.stats.spearmanr(ps, pt).statistic)
    return tvd, rho


def test_a_registration_without_telemetry_digests_as_before() -> None:
    assert document_digest(build_document(Registration.model_validate(REGISTRATION), FILES)) == (
        DIGEST_BEFORE
    )
    named = {
        **REGISTRATION,
        "invokerank": {"telemetry": {"semantic": {"host": "claude"}}},
    }
    document = build_document(Registration.model_validate(named), FILES)
    assert document["registration"]["invokerank"] == {
        "interval": "published",
        "telemetry": {"semantic": {"host": "claude", "integration": None}},
    }
    plain = {**REGISTRATION, "invokerank": {"interval": "published"}}
    assert (
        "telemetry"
        not in build_document(Registration.model_validate(plain), FILES)["registration"][
            "invokerank"
        ]
    )


def test_an_unknown_arm_is_exit_2_naming_the_field(ws: Path, cli: Any) -> None:
    path = _draft(ws, "bad-telemetry", "invokerank:\n  telemetry:\n    nope: {host: sim}\n")
    before = sorted(p.name for p in (ws / "registry").iterdir())
    result = cli("-w", ws, "register", path)
    assert result.code == 2
    assert "bad-telemetry.yaml" in result.stderr and "invokerank.telemetry" in result.stderr
    assert sorted(p.name for p in (ws / "registry").iterdir()) == before


def test_s_vs_t_end_to_end_in_every_rendering(ws: Path, cli: Any, tmp_path: Path) -> None:
    assert cli("-w", ws, "register", _draft(ws, REG, TELEMETRY)).code == 0
    assert cli("-w", ws, "run", REG).code == 0

    # before any telemetry: the block says so, one line per arm, and the log's empty head
    first = cli("-w", ws, "analyse", REG, "--json")
    assert first.code == 0, first.stderr
    block = first.json()["invokerank"]["telemetry"]
    assert block["comparisons"] == []
    assert len(block["absent"]) == 2 and "no telemetry for integration focal" in block["absent"][0]
    assert block["log"]["events"] == 0 and block["log"]["seq"] == 0

    # T: host sim 40 calls (search 20, subscribe 12, mark played 8), host few 6 calls
    rows = [{"tool": tool, "count": n} for tool, n in zip(TOOLS, (20, 12, 8), strict=True)]
    lines = [
        {"integration": "focal", "host": "sim", "outcome": "ok", "hour": HOUR, **r} for r in rows
    ] + [
        {"integration": "focal", "host": "few", "outcome": "ok", "hour": "2026-10-05T15:00:00Z",
         "tool": TOOLS[0], "count": 6}
    ]  # fmt: skip
    tele = tmp_path / "tele.jsonl"
    tele.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert cli("-w", ws, "telemetry", "import", tele).code == 0

    analysed = cli("-w", ws, "analyse", REG, "--json")
    assert analysed.code == 0, analysed.stderr
    block = analysed.json()["invokerank"]["telemetry"]
    assert "evidence class T" in block["note"] and "never pooled" in block["note"]
    # the head: one import of 46 calls, the newest line's hash computed here
    raw = (ws / "registry" / "telemetry.jsonl").read_bytes().splitlines()[-1]
    assert block["log"] == {
        "path": "registry/telemetry.jsonl",
        "events": 1,
        "calls": 46,
        "seq": 1,
        "hash": "sha256:" + hashlib.sha256(raw).hexdigest(),
    }
    assert block["absent"] == []

    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", REG, "--out", out).code == 0
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x.strip()]
    by_arm = {c["arm"]: c for c in block["comparisons"]}
    assert set(by_arm) == {"descriptive", "placeholder"}

    d = by_arm["descriptive"]
    s = _s_counts(records, "descriptive")
    assert sum(s.values()) >= 30, "the design must give S enough first calls for the figures"
    assert {t["tool"]: t["s_calls"] for t in d["tools"] if t["s_calls"]} == s
    assert {t["tool"]: t["t_calls"] for t in d["tools"] if t["t_calls"]} == {
        TOOLS[0]: 20,
        TOOLS[1]: 12,
        TOOLS[2]: 8,
    }
    assert (d["host"], d["integration"], d["t_calls"], d["t_basis"]) == (
        "sim",
        "focal",
        40,
        "all calls",
    )
    assert d["s_evidence_class"] == "local"
    union = [t["tool"] for t in d["tools"]]
    tvd, rho = _figures(s, {TOOLS[0]: 20, TOOLS[1]: 12, TOOLS[2]: 8}, union)
    assert d["total_variation"] == pytest.approx(tvd, abs=1e-12)
    assert d["total_variation_withheld"] is None
    assert d["spearman"] == pytest.approx(rho, abs=1e-12) and d["spearman_withheld"] is None

    # too few: host few has 6 calls, both figures withheld with the reason
    p = by_arm["placeholder"]
    assert p["t_calls"] == 6 and p["total_variation"] is None and p["spearman"] is None
    assert p["s_calls"] == sum(_s_counts(records, "placeholder").values())
    assert "too few telemetry (T) calls (6 < 30)" in p["total_variation_withheld"]
    assert "too few telemetry (T) calls (6 < 30)" in p["spearman_withheld"]

    folder = ws / "reports" / REG
    saved = json.loads((folder / "report.json").read_text())
    assert saved["invokerank"]["telemetry"] == block
    markdown = " ".join((folder / "report.md").read_text().split())
    html = " ".join((folder / "report.html").read_text().split())
    for text in (markdown, html):
        assert "S vs T" in text and "evidence class T" in text and "never pooled" in text
        assert f"{tvd:.3f}" in text
        assert "too few telemetry (T) calls (6 &lt; 30)" in text
        assert block["log"]["hash"] in text
    terminal = " ".join(cli("-w", ws, "analyse", REG).stdout.split())
    assert f"total variation distance {tvd:.3f}" in terminal
    assert "too few telemetry (T) calls (6 < 30)" in terminal
    assert "telemetry log read: registry/telemetry.jsonl: 1 import(s)" in terminal

    # a tampered log is exit 3, and the report written before stays as it was
    log = ws / "registry" / "telemetry.jsonl"
    written = (folder / "report.json").read_text()
    before = log.read_text()
    edited = before.replace('"count":20,', '"count":200,')
    assert edited != before
    log.write_text(edited)
    assert cli("-w", ws, "analyse", REG, "--json").code == 3
    assert (folder / "report.json").read_text() == written


def test_without_the_field_no_block_and_the_log_is_not_read(ws: Path, cli: Any) -> None:
    reg_id = "no-telemetry"
    assert cli("-w", ws, "register", _draft(ws, reg_id, "")).code == 0
    assert cli("-w", ws, "run", reg_id).code == 0
    # a tampered telemetry log would be exit 3 for a reader: this analysis never reads it
    (ws / "registry" / "telemetry.jsonl").write_text("not a chain\n")
    analysed = cli("-w", ws, "analyse", reg_id, "--json")
    assert analysed.code == 0, analysed.stderr
    assert analysed.json()["invokerank"]["telemetry"] is None
    markdown = (ws / "reports" / reg_id / "report.md").read_text()
    assert "S vs T" not in markdown
    assert "S vs T" not in cli("-w", ws, "analyse", reg_id).stdout
