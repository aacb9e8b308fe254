"""``experiment new``: a selection experiment from an MCP snapshot and a prompt file (wiring
only; the writing is :mod:`prereg.experiments.scaffold`'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from prereg.commands._common import FlagHelpGroup, JsonOpt, workspace
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.experiments.scaffold import new_experiment

app = typer.Typer(
    help="Write a selection experiment from an MCP snapshot and a prompt file.",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)

NEW_HELP = """Write a selection experiment from an MCP snapshot and a CSV of prompts.

Writes experiments/NAME/ (the snapshot as the surface 'original', a copy as 'edited' for
you to edit, a corpus of one task per CSV row, a placeholder service, clusters split by
seeded fractions) and drafts/NAME.yaml, an exploratory registration comparing the two
surfaces on selection, on the local host: offline, the snapshot replayed, every tool call
refused. The CSV's columns: prompt, intent, polarity (positive, negative or optional),
and optionally cluster (paraphrases share one; a row without one is a cluster of its
own) and expected_tool (a tool of the snapshot). A bad row exits 2 naming the file, line
and column; nothing is written then.

Example:

  prereg mcp snapshot --out time.json -- mcp-server-time --local-timezone UTC
  prereg experiment new time-selection --from-snapshot time.json --prompts prompts.csv
  prereg register drafts/time-selection.yaml && prereg run time-selection
"""


def register(root: typer.Typer) -> None:
    """Add the ``experiment`` group to the app."""
    root.add_typer(app, name="experiment")


@app.command("new", help=NEW_HELP)
def new_cmd(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The experiment's (and its draft's) name.")
    ],
    snapshot: Annotated[
        Path,
        typer.Option(
            "--from-snapshot",
            metavar="SNAPSHOT.json",
            help="An MCP snapshot (prereg mcp snapshot) of the server.",
        ),
    ],
    prompts: Annotated[
        Path,
        typer.Option(
            "--prompts",
            metavar="PROMPTS.csv",
            help="Columns prompt, intent, polarity; optional cluster, expected_tool.",
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    done = new_experiment(workspace(ctx), name, snapshot, prompts)
    emit(done, as_json, lambda: _print_new(done))


def _print_new(done: dict[str, Any]) -> None:
    splits = ", ".join(f"{split} {n}" for split, n in done["tasks_per_split"].items())
    console.print(
        display(
            f"experiment {done['experiment']}: server {done['server']} "
            f"({len(done['tools'])} tool(s)), surfaces original and edited, "
            f"{done['tasks']} task(s) ({splits})"
        )
    )
    console.print(display(f"  wrote {done['folder']} and {done['draft']}"))
    for step in done["next"]:
        console.print(display(f"  next: {step}"))
