"""The ``prereg`` command line: wiring only; the work happens in the packages.

Each command group lives in ``prereg/commands/<group>.py`` and exposes
``register(app)``. Errors derived from :class:`prereg.core.errors.PreregError` map to
the exit codes of the CLI contract (2 bad input, 3 integrity, 4 refused).

The root group is lazy: :data:`COMMANDS` names each command's module and its one-line
summary, so ``prereg --help`` lists every command without importing any command module
(and with them numpy, scipy, pydantic models, the provider SDKs), and ``prereg plan``
imports only what planning needs. A command's module is imported when it is run or asked
for its own help, and registered into an app of its own exactly as the root app would.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.main
from typer._click import Command, Context  # the types typer's classes take
from typer._click.shell_completion import CompletionItem
from typer.core import TyperCommand

from prereg.commands._common import PROCESS, FlagHelpGroup, RootOptions, use_flag_help
from prereg.core.errors import PreregError
from prereg.core.output import dumps, err_console
from prereg.core.untrusted import display_text
from prereg.core.version import code_version

#: Every command, in the order ``prereg --help`` lists them: the module of
#: ``prereg.commands`` whose ``register(app)`` adds it, and its summary (the first
#: paragraph of its own help; tests/cli/test_lazy_cli.py checks they agree).
COMMANDS: dict[str, tuple[str, str]] = {
    "init": (
        "registry_cmds",
        "Create a workspace: experiments/, registry/, runs/, reports/, drafts/.",
    ),
    "register": (
        "registry_cmds",
        "Freeze a registration under its digest in the append-only registry.",
    ),
    "verify": (
        "registry_cmds",
        "Recompute every digest, object hash, the ledger chain and every run chain; "
        "exit 3 on any problem.",
    ),
    "list": ("registry_cmds", "List registrations in ledger order."),
    "show": (
        "registry_cmds",
        "Show one registration: digest, time, supersession, frozen document.",
    ),
    "run": (
        "run_cmds",
        "Run a registration's units (resuming: units already recorded are skipped).",
    ),
    "export": (
        "run_cmds",
        "Export a registration's run records (one per line / row), hash-chain links included.",
    ),
    "import": (
        "run_cmds",
        "Import run records: whole, intact chains of units the registration plans.",
    ),
    "analyse": (
        "analyse_cmds",
        "The registered analysis and its mechanical verdict, written to reports/ID/.",
    ),
    "compare": (
        "analyse_cmds",
        "Compare two registrations' runs: each one's own result, and the paired change.",
    ),
    "demo": (
        "demo_cmds",
        "Init a workspace, register a bundled draft, run it on the local host, analyse it.",
    ),
    "plan": (
        "plan_cmds",
        "Plan a paired comparison: the minimum detectable effect (MDE) or the prompts needed.",
    ),
    "calibrate": (
        "calibrate_cmds",
        "Simulate a registration's own analysis: type I error, power and coverage.",
    ),
    "judge": (
        "judge_cmds",
        "Judge every run of a registration that needs a verdict of its registered judges.",
    ),
    "split": ("run_cmds", "Splits of an experiment (dev / validation / test)."),
    "mcp": (
        "mcp_cmds",
        "Record MCP servers as snapshots and serve them from a replay server that refuses "
        "every tool call.",
    ),
    "study": (
        "study_cmds",
        "ToolBottleneckBench studies: compile task families into matched pressure variants.",
    ),
}
#: where the modules named in :data:`COMMANDS` live (all in the cli layer)
COMMAND_PACKAGE = "prereg.commands"


def _new_app(**settings: Any) -> typer.Typer:
    """An app with the settings every command is built under (root and per module)."""
    return typer.Typer(pretty_exceptions_enable=False, rich_markup_mode="rich", **settings)


@cache
def module_commands(module: str) -> dict[str, Command]:
    """The click commands ``prereg.commands.<module>`` registers, built once.

    The module registers into an app of its own with the root's settings, and every
    command gets the flag-help fix (:func:`prereg.commands._common.use_flag_help`), so a
    command behaves exactly as it would registered on the root app.
    """
    sub = _new_app()
    importlib.import_module(f"{COMMAND_PACKAGE}.{module}").register(sub)
    use_flag_help(sub)
    return dict(typer.main.get_group(sub).commands)


class _LazyCommands(MutableMapping[str, Command]):
    """The root's commands: names from :data:`COMMANDS`, each loaded on first access."""

    def __init__(self) -> None:
        self.summaries_only = False  # while the root help lists commands

    def __getitem__(self, name: str) -> Command:
        module, summary = COMMANDS[name]
        if self.summaries_only:
            return _summary_command(name, summary)
        return module_commands(module)[name]

    def __setitem__(self, name: str, command: Command) -> None:
        raise TypeError(f"the root's commands come from COMMANDS, not add_command ({name})")

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"the root's commands come from COMMANDS ({name})")

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


@cache
def _summary_command(name: str, summary: str) -> Command:
    """A stand-in that only names a command and carries its summary, for listings."""
    return TyperCommand(name=name, help=summary)


class LazyGroup(FlagHelpGroup):
    """The root group: lists commands from :data:`COMMANDS`, imports one only to run it."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = self.lazy = _LazyCommands()

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    @contextmanager
    def _summaries_only(self) -> Iterator[None]:
        self.lazy.summaries_only = True
        try:
            yield
        finally:
            self.lazy.summaries_only = False

    def format_help(self, ctx: Context, formatter: Any) -> None:
        with self._summaries_only():
            super().format_help(ctx, formatter)

    def shell_complete(self, ctx: Context, incomplete: str) -> list[CompletionItem]:
        with self._summaries_only():
            return super().shell_complete(ctx, incomplete)


app = _new_app(
    name="prereg",
    help="Pre-registered experiments for tool-using LLM agents: register, run, analyse.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, ...)
    cls=LazyGroup,
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


def _is_click_exception(exc: BaseException) -> bool:
    """True for click's ClickException, whichever copy of click raised it."""
    return any(
        cls.__name__ == "ClickException" and "click" in cls.__module__ for cls in type(exc).__mro__
    )


def run() -> None:
    """The ``prereg`` program (the console script and ``python -m prereg``): :func:`main`,
    then what is still alive is frozen (``gc.freeze``), so the collection the interpreter
    makes as it exits does not walk it: after an analysis of 27,000 runs that walk took
    half a second, to free memory the operating system takes back at exit anyway."""
    PROCESS.program = True
    try:
        main()
    finally:
        gc.freeze()


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
