"""The ToolBottleneckBench section of a registration's report (issue 19), as data.

A leaf module (pydantic only), so :mod:`prereg.reports.model` can carry it without
importing the analysis that fills it (:mod:`prereg.reports.toolbottleneck.registered`).
Every cell is a string already formatted; the renderers escape each one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StudyTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str | None = None


class StudyPoint(BaseModel):
    """One drawn point of a study figure: the same numbers as the table row it repeats.

    ``low``/``high``: its interval, both None when withheld (``reason`` says why);
    ``x``: a second coordinate (a scatter's), else None."""

    model_config = ConfigDict(extra="forbid")

    label: str
    value: float
    x: float | None = None
    low: float | None = None
    high: float | None = None
    reason: str | None = None


class StudyFigure(BaseModel):
    """The numbers one study figure draws (:mod:`prereg.reports.render.study_figures`);
    ``withheld``: why it is not drawn (the points are then empty)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    points: list[StudyPoint]
    #: the level of the points' intervals (None: no interval)
    level: float | None = None
    withheld: str | None = None


class StudyReport(BaseModel):
    """The study's tables; ``label`` says, first, that the policy is simulated."""

    model_config = ConfigDict(extra="forbid")

    label: str
    tables: list[StudyTable]
    #: the numbers the study's figures draw, by figure name (each repeats a table's rows)
    figures: list[StudyFigure] = []
