"""The exploratory block reads as tables in Markdown and HTML, never as raw JSON."""

from __future__ import annotations

from pathlib import Path

from prereg.reports.render.text import exploratory_tables


def test_exploratory_block_is_tabulated(ws: Path, cli) -> None:
    draft = ws / "drafts" / "podcast-selection-controls.yaml"
    assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "run", "podcast-selection-controls", "--no-progress").code == 0
    report = cli("-w", ws, "analyse", "podcast-selection-controls", "--json").json()
    folder = ws / "reports" / "podcast-selection-controls"
    html = (folder / "report.html").read_text()
    md = (folder / "report.md").read_text()
    for text in (html, md):
        assert "Funnel over positive tasks" in text and "Loss shares by stage" in text
        assert '"positive_runs"' not in text and "conditional_rate" not in text
    # the reference arm's selected stage, as counted in report.json, is in the table
    selected = report["exploratory"]["funnel"]["reference"]["stages"]["selected"]
    assert f"({selected['reached']}/{selected['of']})" in md


def test_exploratory_tables_tolerate_unmeasured_arms() -> None:
    tables = exploratory_tables(
        {
            "funnel": {
                "a": {
                    "positive_runs": 2,
                    "stages": {"surfaced": {"rate": None}},
                    "loss_shares": None,
                },
                "b": None,
            },
            "negatives": {"a": None},
            "selection_rate": {},
            "terminal": {"a": None},
        }
    )
    funnel = next(rows for title, _, rows in tables if title.startswith("Funnel"))
    assert funnel[0][:3] == ["a", "2", "not measured"]
