"""The ``prereg`` command line: wiring only; the work happens in the packages.

Each command group lives in ``prereg/commands/<group>.py`` and exposes
``register(app)``. Errors derived from :class:`prereg.core.errors.PreregError` map to
the exit codes of the CLI contract (2 bad input, 3 integrity, 4 refused).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from prereg.commands import (
    analyse_cmds,
    calibrate_cmds,
    judge_cmds,
    mcp_cmds,
    plan_cmds,
    registry_cmds,
    run_cmds,
    study_cmds,
)
from prereg.commands._common import FlagHelpGroup, RootOptions, use_flag_help
from prereg.core.errors import PreregError
from prereg.core.output import dumps, err_console
from prereg.core.untrusted import display_text
from prereg.core.version import code_version

app = typer.Typer(
    name="prereg",
    help="Pre-registered experiments for tool-using LLM agents: register, run, analyse.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, ...)
    cls=FlagHelpGroup,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"prereg {code_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="Workspace folder (default: $PREREG_WORKSPACE, else the nearest folder "
            "holding a workspace from the current one upward, as git finds a repository).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    ctx.obj = RootOptions(workspace)  # resolved by each command that needs a workspace


for _module in (
    registry_cmds,
    run_cmds,
    analyse_cmds,
    plan_cmds,
    calibrate_cmds,
    mcp_cmds,
    study_cmds,
    judge_cmds,
):
    _module.register(app)
use_flag_help(app)


def _is_click_exception(exc: BaseException) -> bool:
    """True for click's ClickException, whichever copy of click raised it."""
    return any(
        cls.__name__ == "ClickException" and "click" in cls.__module__ for cls in type(exc).__mro__
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning PreregError into its exit code."""
    as_json = "--json" in (argv if argv is not None else sys.argv[1:])
    try:
        code = app(args=argv, standalone_mode=False)
    except PreregError as exc:
        if as_json:
            sys.stdout.write(dumps(exc.to_json()) + "\n")
        err_console.print(
            f"error: {display_text(exc.render(), multiline=True)}",
            style="red",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted", style="red")
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted", style="red")
        sys.exit(130)
    except Exception as exc:  # usage errors from click (typer may bundle its own copy)
        if _is_click_exception(exc):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(2)
        raise
    sys.exit(code if isinstance(code, int) else 0)
