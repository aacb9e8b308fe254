"""The S-vs-T figure (issue 41, item 5; seed 7.9): per arm named in
``invokerank.telemetry``, each tool's share of the arm's synthetic first calls (S) beside
its share of the host's real calls (T), with the total variation distance and Spearman's
rank correlation in the title; in report.json's figure list, report.md, report.html and
the terminal; withheld with the block's reason (no file) below 30 calls a side.

The plotted shares are read back from the drawn bars and recomputed here independently:
S from the exported run records, T from the telemetry log's own lines, both with numpy,
the figures in the title with numpy and scipy."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import scipy.stats
import yaml
from rich.console import Console

from prereg.reports.invokerank.telemetry import MIN_CALLS, compare
from prereg.reports.model import Report
from prereg.reports.render import invokerank_figures as figs
from prereg.reports.render import terminal
from prereg.reports.render.figures import FIGURES, _canvas, _png
from tests.invokerank.test_ir_telemetry_report import HOUR, TELEMETRY, TOOLS, _draft, _s_counts

REG = "telemetry-figure"
#: the surface of the arm "descriptive" (the draft's ``surface: focal``)
SURFACE = "experiments/podcast-selection/surfaces/focal.yaml"


def _log_counts(log: Path, integration: str, host: str) -> dict[str, int]:
    """T by hand from the telemetry log's lines (every import event's rows)."""
    out: dict[str, int] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        for row in event.get("rows", []) if event.get("event") == "telemetry-import" else []:
            if row["integration"] == integration and row["host"] == host:
                out[row["tool"]] = out.get(row["tool"], 0) + row.get("count", 1)
    return out


def _bars(fig: Any) -> dict[str, tuple[float, float]]:
    """tool -> (S bar's width, T bar's width), as drawn (S bars first, then T bars)."""
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    widths = [float(p.get_width()) for p in ax.patches]
    n = len(labels)
    assert len(widths) == 2 * n
    return {label: (widths[i], widths[n + i]) for i, label in enumerate(labels)}


def test_the_figure_is_drawn_from_the_records_and_the_log(
    ws: Path, cli: Any, tmp_path: Path
) -> None:
    assert cli("-w", ws, "register", _draft(ws, REG, TELEMETRY)).code == 0
    assert cli("-w", ws, "run", REG).code == 0
    # T: host sim 40 first calls of its sessions (and 9 later calls, not compared), host
    # few 6 calls: too few for a figure
    lines = [
        {"integration": "focal", "host": "sim", "outcome": "ok", "hour": HOUR, "tool": tool,
         "count": n, "first": True}
        for tool, n in zip(TOOLS, (9, 25, 6), strict=True)
    ] + [
        {"integration": "focal", "host": "sim", "outcome": "ok", "hour": HOUR,
         "tool": TOOLS[0], "count": 9, "first": False},
        {"integration": "focal", "host": "few", "outcome": "error", "hour": HOUR,
         "tool": TOOLS[1], "count": 6},
    ]  # fmt: skip
    tele = tmp_path / "tele.jsonl"
    tele.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert cli("-w", ws, "telemetry", "import", tele).code == 0
    analysed = cli("-w", ws, "analyse", REG, "--json")
    assert analysed.code == 0, analysed.stderr
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", REG, "--out", out).code == 0
    records = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x.strip()]

    # S and T recounted independently; the first-call marks select T's 40 first calls
    s = _s_counts(records, "descriptive")
    t = _log_counts(ws / "registry" / "telemetry.jsonl", "focal", "sim")
    t[TOOLS[0]] -= 9  # the unmarked later calls of the log: T compares first calls only
    assert sum(s.values()) >= MIN_CALLS and sum(t.values()) == 40
    # the union: the arm's surface's tools (listed even when uncalled) and every tool called
    surface = yaml.safe_load((ws / SURFACE).read_text(encoding="utf-8"))
    union = sorted({tool["name"] for tool in surface["tools"]} | set(s) | set(t))
    assert set(TOOLS) < set(union)
    ps = np.array([s.get(k, 0) for k in union], float)
    pt = np.array([t.get(k, 0) for k in union], float)
    ps, pt = ps / ps.sum(), pt / pt.sum()
    tvd = 0.5 * float(np.abs(ps - pt).sum())
    rho = float(scipy.stats.spearmanr(ps, pt).statistic)

    folder = ws / "reports" / REG
    saved = json.loads((folder / "report.json").read_text())
    report = Report.model_validate(saved)
    drawn = [n for n in saved["figures"] if n.startswith("ir_s_vs_t_")]
    assert drawn == ["ir_s_vs_t_1"]  # descriptive; placeholder (6 T calls) withheld
    assert (folder / "figures" / "ir_s_vs_t_1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (folder / "figures" / "ir_s_vs_t_2.png").exists()

    fig = figs.ir_svst_figure(0)(report, _canvas)
    assert fig is not None
    bars = _bars(fig)
    assert sorted(bars) == union
    for k, share_s, share_t in zip(union, ps, pt, strict=True):
        assert bars[k] == pytest.approx((share_s, share_t), abs=1e-12)
    title = " ".join(fig.axes[0].get_title().split())
    assert "arm descriptive (focal on sim)" in title
    assert f"total variation distance {tvd:.3f}" in title and f"Spearman {rho:.3f}" in title
    legend = [x.get_text() for x in fig.axes[0].get_legend().get_texts()]
    assert legend == [
        f"S: {int(sum(s.values()))} first calls of the arm's runs",
        "T: 40 first calls (telemetry)",
    ]
    assert figs.ir_svst_figure(1)(report, _canvas) is None

    # the withheld arm: its reason, printed; the drawn one named with its file
    n_s = sum(_s_counts(records, "placeholder").values())
    few = [f"too few synthetic (S) calls ({n_s} < 30)"] if n_s < MIN_CALLS else []
    why = "; ".join([*few, "too few telemetry (T) calls (6 < 30)"])
    assert ("S vs T figure, arm placeholder", why) in figs.withheld(report)
    markdown = (folder / "report.md").read_text()
    assert "(figures/ir_s_vs_t_1.png)" in markdown and "ir_s_vs_t_2" not in markdown
    html = " ".join((folder / "report.html").read_text().split())
    assert 'data-figure="ir_s_vs_t_1"' in html and 'data-figure="ir_s_vs_t_2"' not in html
    for text in (" ".join(markdown.split()), html):
        assert "S vs T figure, arm placeholder" in text
        assert why.replace("<", "&lt;") in text
    buffer = io.StringIO()
    terminal.render(report, Console(file=buffer, width=200, color_system=None))
    shown = " ".join(buffer.getvalue().split())
    assert "S vs T figure, arm descriptive: figures/ir_s_vs_t_1.png" in shown
    assert f"S vs T figure, arm placeholder not drawn: {why}" in shown


def _fragment(*comparisons: Any, absent: tuple[str, ...] = ()) -> Any:
    """A report fragment holding only an S-vs-T block (what the figure reads)."""
    block = SimpleNamespace(comparisons=list(comparisons), absent=list(absent))
    return SimpleNamespace(invokerank=SimpleNamespace(telemetry=block))


def _comparison(arm: str, s: dict[str, int], t: dict[str, int]) -> Any:
    result = compare(s, t, integration="focal", host="h", t_basis="all calls", s_evidence_class="x")
    return SimpleNamespace(arm=arm, **{**vars(result), "tools": list(result.tools)})


def test_a_tiny_design_withholds_the_figure_with_its_reason() -> None:
    # 1 repeat of 5 prompts: S has 5 first calls, below the minimum; T has 40
    tiny = _comparison("tiny", {"a": 3, "b": 2}, {"a": 20, "b": 12, "c": 8})
    report = _fragment(tiny, absent=("arm gone: no telemetry for integration focal",))
    assert figs.ir_svst_figure(0)(report, _canvas) is None
    assert figs.svst_rows(report, 0) == [] and figs.svst_caption(report, 0) is None
    assert figs.svst_withheld(report) == [
        ("S vs T figure, arm tiny", "too few synthetic (S) calls (5 < 30)"),
        ("S vs T figure", "arm gone: no telemetry for integration focal"),
    ]


def test_at_the_minimum_the_figure_is_drawn_and_a_lone_rank_reason_is_in_the_title() -> None:
    # exactly 30 calls a side over two tools: the distance is computed, the rank
    # correlation withheld (two tools); shares by hand: S 2/3 1/3, T 1/2 1/2
    edge = _comparison("edge", {"a": 20, "b": 10}, {"a": 15, "b": 15})
    report = _fragment(edge)
    assert figs.svst_rows(report, 0) == [("a", 2 / 3, 0.5), ("b", 1 / 3, 0.5)]
    fig = figs.ir_svst_figure(0)(report, _canvas)
    assert fig is not None
    assert _bars(fig) == {"a": pytest.approx((2 / 3, 0.5)), "b": pytest.approx((1 / 3, 0.5))}
    title = " ".join(fig.axes[0].get_title().split())
    assert "total variation distance 0.167" in title  # (|2/3 - 1/2| + |1/3 - 1/2|) / 2
    assert "Spearman withheld (too few tools for a rank correlation (2 < 3))" in title
    assert figs.svst_withheld(report) == []


def test_arms_past_the_slots_are_listed_not_drawn() -> None:
    mix = ({"a": 20, "b": 10, "c": 5}, {"a": 10, "b": 20, "c": 5})
    many = [_comparison(f"arm{i}", *mix) for i in range(figs.SVST_SLOTS + 1)]
    report = _fragment(*many)
    assert all(figs.svst_rows(report, i) for i in range(figs.SVST_SLOTS))
    assert figs.svst_rows(report, figs.SVST_SLOTS) == []
    (name, why), *_ = figs.svst_withheld(report)
    assert name == f"S vs T figure, arm arm{figs.SVST_SLOTS}" and "tables hold every arm" in why
    assert [n for n in FIGURES if n.startswith("ir_s_vs_t_")] == [
        f"ir_s_vs_t_{i + 1}" for i in range(figs.SVST_SLOTS)
    ]


def test_telemetry_text_is_drawn_as_text_never_as_mathtext() -> None:
    # a tool and a host with dollar signs (an invalid mathtext expression): drawn literally
    tools = {"get$\\frac{$": 20, "b": 10, "c": 5}
    hostile = _comparison("arm", tools, {"get$\\frac{$": 5, "b": 20, "c": 10})
    hostile.host = "$\\undefined$"
    report = _fragment(hostile)
    fig = figs.ir_svst_figure(0)(report, _canvas)
    assert fig is not None
    assert _png(fig)[:8] == b"\x89PNG\r\n\x1a\n"  # drawn: no mathtext parse error
    assert "get$\\frac{$" in _bars(fig)
    assert "$\\undefined$" in fig.axes[0].get_title()
