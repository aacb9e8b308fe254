"""Options and helpers shared by the command modules."""

from __future__ import annotations

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
