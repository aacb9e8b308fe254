"""Figure 10 (the structural holdout's calls by issuer), read back from its matplotlib
bars and recomputed with numpy from the exported records; registered in FIGURES as
``tb_holdout``; not drawn without holdout rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from prereg.experiments.toolbottleneck.study import load_study
from prereg.reports.model import Report
from prereg.reports.render import figures
from prereg.reports.render import study_figures as tb
from prereg.reports.toolbottleneck.holdout import Holdout, analyse_holdout, holdout_figure
from prereg.reports.toolbottleneck.model import StudyReport
from prereg.runners.toolbottleneck.study import StudyRecord, run_study
from tests.toolbottleneck.test_tb_holdout import COMBOS, _study


def _report(result: Holdout) -> Report:
    fig = holdout_figure(result)
    study = StudyReport(label="simulated", tables=[], figures=[] if fig is None else [fig])
    return Report.model_construct(toolbottleneck=study)


def test_figure_10_draws_the_calls_by_issuer_of_table_10(tmp_path: Path) -> None:
    path = _study(tmp_path, held=3)
    run = run_study(load_study(path), str(path))
    exported = [json.loads(r.model_dump_json()) for r in run.records]
    result = analyse_holdout([StudyRecord.model_validate(r) for r in exported])
    report = _report(result)
    fig = tb.tb_holdout_figure(report, figures._canvas)
    assert fig is not None
    ax = fig.axes[0]
    bars = ax.patches
    rows = [(o, d, c) for c in (2, 30) for o, d in COMBOS]
    assert len(bars) == 2 * len(rows)
    model_bars, ctrl_bars = bars[: len(rows)], bars[len(rows) :]
    for i, (o, d, c) in enumerate(rows):
        rs = [
            r
            for r in exported
            if r.get("orchestration") == o
            and r.get("delivery") == d
            and r.get("certified_minimum") == c
        ]
        model = float(np.mean([r["model_calls"] for r in rs]))
        ctrl = float(np.mean([r["controller_calls"] for r in rs]))
        assert model_bars[i].get_width() == pytest.approx(model)
        assert ctrl_bars[i].get_width() == pytest.approx(ctrl)
        assert ctrl_bars[i].get_x() == pytest.approx(model)  # stacked after the model's
        vts = 100 * float(np.mean([r["success"] for r in rs]))
        label = ax.get_yticklabels()[i].get_text()
        assert label.replace("\n", " ") == f"{o}/{d}, {c} calls (VTS {vts:.1f}%)"
    assert figures.FIGURES["tb_holdout"][0](report) is not None  # the PNG


def test_no_holdout_rows_no_figure() -> None:
    empty = Holdout([], 0, {}, "no holdout arms", None)
    assert holdout_figure(empty) is None
    assert tb.tb_holdout_figure(_report(empty), figures._canvas) is None
    assert figures.FIGURES["tb_holdout"][0](_report(empty)) is None
