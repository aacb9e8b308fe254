"""The score's interval method as a registration field (issue 17, item 5):
``invokerank: {interval: published | calibrated}``, absent from the digested document
unless set (every earlier digest unchanged), refused precisely when bad."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from prereg.reports.invokerank.section import ArmMeta, invokerank_report, invokerank_section
from prereg.reports.model import Report
from prereg.reports.observations import from_record
from prereg.reports.render.text import invokerank_tables, points_interval
from tests.conftest import tree_digest
from tests.invokerank.test_ir_weights import DIGEST_BEFORE, FILES, REGISTRATION


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES))


def test_a_registration_without_the_block_digests_as_before_the_field_existed() -> None:
    # DIGEST_BEFORE was computed by the code at commit def726a, before either
    # intent_weights or invokerank existed
    assert _digest(REGISTRATION) == DIGEST_BEFORE
    document = build_document(Registration.model_validate(REGISTRATION), FILES)
    assert "invokerank" not in document["registration"]
    assert Registration.model_validate(REGISTRATION).invokerank is None
    chosen = {**REGISTRATION, "invokerank": {"interval": "calibrated"}}
    assert _digest(chosen) != DIGEST_BEFORE  # the interval method decides a result
    # written out, the default is digested too (the registration chose to state it)
    assert _digest({**REGISTRATION, "invokerank": {}}) not in (DIGEST_BEFORE, _digest(chosen))
    reloaded = Registration.model_validate(
        build_document(Registration.model_validate(chosen), FILES)["registration"]
    )
    assert reloaded.invokerank is not None and reloaded.invokerank.interval == "calibrated"


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ("{interval: bootstrap}", "invokerank.interval"),
        ("{interval: published, draws: 10}", "invokerank.draws"),
        ("calibrated", "invokerank"),
    ],
)
def test_bad_interval_method_exits_2_naming_the_field(
    ws: Path, cli: Any, block: str, fragment: str
) -> None:
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    path = ws / "drafts" / "interval.yaml"
    path.write_text(text + f"invokerank: {block}\n")
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "interval.yaml" in result.stderr and fragment in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2
    assert tree_digest(ws / "registry") == before


def _runs(arm: str, hits: tuple[int, int, int]) -> list[Any]:
    """Three intents, 6 prompts x 2 runs each; ``hits[i]`` of the 12 runs selected."""
    out = []
    for intent, h in zip("abc", hits, strict=True):
        for t in range(12):
            sel = t < h
            out.append(
                from_record(
                    {
                        "arm": arm,
                        "task_id": f"{intent}-{t // 2}",
                        "intent": intent,
                        "repeat": t % 2,
                        "funnel": {"surfaced": sel or t % 3 == 0, "selected": sel},
                        "terminal_class": "focal" if sel else "searched_then_declined",
                    }
                )
            )
    return out


@pytest.mark.parametrize("method", ["published", "calibrated"])
def test_the_registered_method_gives_the_score_s_interval_and_the_ties(method: str) -> None:
    runs = _runs("x", (2, 6, 10)) + _runs("y", (5, 7, 9)) + _runs("z", (11, 12, 11))
    metas = [ArmMeta(a, "s") for a in ("x", "y", "z")]
    section = invokerank_section(runs, metas, seed=3, interval=method)  # type: ignore[arg-type]
    default = invokerank_section(runs, metas, seed=3)
    assert section is not None and default is not None
    assert section.interval_method == method and default.interval_method == "published"
    for arm, plain in zip(section.arms, default.arms, strict=True):
        # both methods are always computed and kept, each labelled by its method
        assert arm.published == plain.published == plain.intervals
        assert arm.calibrated == plain.calibrated
        assert "published path" in arm.published[0].method
        assert "bootstrap" in arm.calibrated[0].method
        chosen = arm.calibrated if method == "calibrated" else arm.published
        assert arm.intervals == chosen and arm.interval_method == method
        for intent in arm.intents:
            pick = intent.calibrated if method == "calibrated" else intent.published
            assert intent.intervals == pick
        assert arm.provenance is not None
        assert arm.provenance.parameters["interval"] == method
    # ties are read from the registered method's 90% roll-up intervals
    lows = [a.intervals[0].low for a in section.arms]
    highs = [a.intervals[0].high for a in section.arms]
    for i, a in enumerate(section.arms):
        expected = {
            b.arm
            for j, b in enumerate(section.arms)
            if i != j and lows[i] <= highs[j] and lows[j] <= highs[i]  # type: ignore[operator]
        }
        assert set(a.tied_with) == expected
    # the report's tables: the score's interval, the other method's beside it, labelled
    report = Report.model_construct(invokerank=section)
    title, header, rows = invokerank_tables(report)[0]
    other = "published" if method == "calibrated" else "calibrated"
    assert f"intervals: {method}, {other} beside" in title
    assert f"{other} 90%" in header
    assert rows[0][header.index("90% interval")] == points_interval(section.arms[0].intervals[0])
    beside = section.arms[0].published if other == "published" else section.arms[0].calibrated
    assert rows[0][header.index(f"{other} 90%")] == points_interval(beside[0])


def test_the_report_reads_the_registration_field() -> None:
    reg = Registration.model_validate(
        {
            **REGISTRATION,
            "arms": [{"id": "x", "surface": "baseline"}, {"id": "y", "surface": "semantic"}],
            "primary": {**REGISTRATION["primary"], "favours": "y"},
            "invokerank": {"interval": "calibrated"},
        }
    )
    section = invokerank_report(reg, _runs("x", (2, 6, 10)) + _runs("y", (5, 7, 9)))
    assert section is not None and section.interval_method == "calibrated"
    assert "invokerank.interval: calibrated" in section.note
    assert all(a.intervals == a.calibrated for a in section.arms)
