"""Figures are drawn once and cropped to what ``savefig(bbox_inches="tight")`` would save
(:func:`prereg.reports.render.figures._png`): the same picture as matplotlib's own tight save,
the reference here, and that save itself when a label reaches past the drawn room."""

from __future__ import annotations

import io

import numpy as np
import pytest

from prereg.reports.render import figures

pytest.importorskip("matplotlib")


def _tight(fig: object) -> bytes:
    """matplotlib's tight save of the figure, with the figures' font floor applied first
    (``_png`` raises text below ``MIN_FONT_PT`` before it draws)."""
    figures._floor_fonts(fig)  # type: ignore[arg-type]
    buf = io.BytesIO()
    fig.savefig(  # type: ignore[attr-defined]
        buf, format="png", dpi=figures._DPI, bbox_inches="tight", metadata=figures._METADATA
    )
    return buf.getvalue()


def _pixels(png: bytes) -> np.ndarray:
    from matplotlib.image import imread

    return np.asarray(imread(io.BytesIO(png), format="png"))


def _drawing(labels: list[str]) -> object:
    fig, ax = figures._canvas(6.0, 0.6 + 0.5 * len(labels), labels)
    for i in range(len(labels)):
        ax.errorbar([0.1 * i], [i], xerr=[[0.05], [0.1]], fmt="D", color="#7a2e0e")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("a rate per run (95% interval)")
    ax.legend(["an arm"], frameon=False, fontsize=7, loc="lower right")
    return fig


def _no_second_drawing(*args: object, **kwargs: object) -> None:
    raise AssertionError("drawn twice: the tight save instead of the crop")


def test_the_cropped_drawing_is_the_tight_save() -> None:
    labels = ["baseline", "semantic: a longer arm label", "x"]
    fig = _drawing(labels)
    fig.savefig = _no_second_drawing  # type: ignore[attr-defined]
    ours = _pixels(figures._png(fig))  # type: ignore[arg-type]
    theirs = _pixels(_tight(_drawing(labels)))
    # the crop may fall a pixel apart from matplotlib's rounding, nothing more
    assert abs(ours.shape[0] - theirs.shape[0]) <= 1 and abs(ours.shape[1] - theirs.shape[1]) <= 1
    h, w = min(ours.shape[0], theirs.shape[0]), min(ours.shape[1], theirs.shape[1])
    best = min(
        float(np.abs(ours[dy : dy + h - 1, dx : dx + w - 1] - theirs[: h - 1, : w - 1]).mean())
        for dy in (0, 1)
        for dx in (0, 1)
    )
    assert best < 0.01  # the same picture (mean channel difference, 0..1 scale)
    blank = float(np.abs(ours[:h, :w] - 1.0).mean())
    assert blank > 0.01  # a drawing, not an empty canvas (the check above could not pass it)


def test_a_label_past_the_room_falls_back_to_the_tight_save() -> None:
    labels = ["W" * 80, "short"]  # wider than CHAR_IN per character leaves room for
    assert figures._png(_drawing(labels)) == _tight(_drawing(labels))  # type: ignore[arg-type]
