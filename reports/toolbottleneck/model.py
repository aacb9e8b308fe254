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


class StudyReport(BaseModel):
    """The study's tables; ``label`` says, first, that the policy is simulated."""

    model_config = ConfigDict(extra="forbid")

    label: str
    tables: list[StudyTable]
