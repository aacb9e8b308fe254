"""Options and helpers shared by the command modules."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Annotated

import typer

from prereg.core.workspace import Workspace

JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document.")]


def workspace(ctx: typer.Context) -> Workspace:
    """The workspace chosen by the global ``--workspace`` option."""
    ws = ctx.find_root().obj
    if not isinstance(ws, Workspace):
        ws = Workspace.resolve(None)
    return ws


def bundled_sources() -> dict[str, Traversable]:
    """What ``init`` copies into a workspace: the bundled experiments (when packaged), drafts.

    Keys are workspace folders, for :func:`prereg.core.workspace.init_workspace`.
    """
    sources: dict[str, Traversable] = {}
    experiments = resources.files("prereg.experiments") / "bundled"
    if experiments.is_dir():
        sources["experiments"] = experiments
    sources["drafts"] = resources.files("prereg.registry") / "drafts"
    return sources
