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


class ExamplePanel(BaseModel):
    """One compiled variant of Figure 5's family (:mod:`prereg.reports.toolbottleneck.example`):
    what the compiler gave at one level of one pressure (every field from the variant)."""

    model_config = ConfigDict(extra="forbid")

    pressure: str  # V, W or D
    level: str  # the menu size, workflow level or encoding
    variant: str
    digest: str
    #: the menu's tool names, in menu order; ``gold``: the reference program's tools
    menu: list[str]
    gold: list[str]
    certified_minimum: int
    #: the reference program's calls, ``function(arg=value)``, in order
    program: list[str]
    #: the returned record (the observation of ``FamilyExample.record_call``) as this
    #: variant's encoding renders it: its encoding blocks as canonical JSON (RFC 8785)
    record: str


class FamilyExample(BaseModel):
    """Figure 5 (seed appendix A, "Example task family"): one family compiled under the
    V, W and D pressures; ``withheld``: why there is none (the panels are then empty)."""

    model_config = ConfigDict(extra="forbid")

    family: str
    seed: int
    decision: str
    #: which call's returned record the D panels show (1-based: the first read)
    record_call: int
    panels: list[ExamplePanel]
    withheld: str | None = None


class StudyReport(BaseModel):
    """The study's tables; ``label`` says, first, that the policy is simulated."""

    model_config = ConfigDict(extra="forbid")

    label: str
    tables: list[StudyTable]
    #: the numbers the study's figures draw, by figure name (each repeats a table's rows)
    figures: list[StudyFigure] = []
    #: Figure 5: one family compiled under V, W and D (None: not computed for this report)
    example: FamilyExample | None = None
