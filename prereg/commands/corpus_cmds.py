"""``prereg corpus lint`` (wiring only; the rules are prereg.experiments.corpus_lint)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.text import Text

from prereg.commands._common import FlagHelpGroup, JsonOpt, complete_experiment, workspace
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.corpus_lint import lint
from prereg.experiments.loader import folder_reader

corpus_app = typer.Typer(
    help="Corpus hygiene: near-duplicates, realism, brand names, canaries, tool-text guardrails.",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)


@corpus_app.command("lint")
def lint_cmd(
    ctx: typer.Context,
    experiment: Annotated[
        str, typer.Argument(help="Experiment folder name.", autocompletion=complete_experiment)
    ],
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when there is any finding.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Lint an experiment's corpus and tool text; findings are listed (exit 0, or 1 with
    --strict).

    Near-duplicate prompts within and across splits and intents (threshold
    ``corpus_lint.near_duplicate`` in experiment.yaml, default 0.55), prompts that refer
    to context the harness never supplies, declared brand names and canary strings, and
    the description guardrail on every surface's server and tool text
    (docs/experiments.md, "Corpus lint"). A confirmatory ``register`` refuses an
    experiment with findings its registration does not waive.
    """
    loaded = _experiment(workspace(ctx), experiment)
    result = lint(loaded)
    data = result.to_json()

    def human() -> None:
        for f in result.findings:
            console.print(
                Text.assemble(
                    ("finding", "yellow"),
                    " ",
                    display(f.rule, "bold"),
                    display(f" {f.where()}"),
                    display(f" ({f.field})" if f.field else ""),
                    display(f": {f.message}: "),
                    display(repr(f.matched)),
                )
            )
        for family, why in result.skipped.items():
            console.print(display(f"skipped {family}: {why}", "dim"))
        summary = ", ".join(f"{rule} {n}" for rule, n in data["counts"].items())
        console.print(
            display(
                f"{result.experiment}: {len(result.findings)} finding(s)"
                + (f" ({summary})" if summary else "")
            )
        )

    emit(data, as_json, human)
    if strict and result.findings:
        raise typer.Exit(1)


def _experiment(ws: Workspace, name: str) -> Experiment:
    """The experiment in the workspace folder ``experiments/<name>`` (the editable files)."""
    folder = ws.experiments / name
    if not os.path.lexists(folder / "experiment.yaml"):  # the loader says what else is wrong
        known = (
            sorted(p.name for p in ws.experiments.iterdir() if p.is_dir())
            if ws.experiments.is_dir()
            else []
        )
        raise BadInput(
            f"experiment '{name}' not found (expected {folder / 'experiment.yaml'}); "
            f"known: {', '.join(known) or 'none'}",
            field="experiment",
        )
    return load_experiment(folder_reader(folder), name)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(corpus_app, name="corpus")
