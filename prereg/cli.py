"""The ``prereg`` command line: wiring only; the work happens in the packages.

Each command group lives in ``prereg/commands/<group>.py`` and exposes
``register(app)``. Errors derived from :class:`prereg.core.errors.PreregError` map to
the exit codes of the CLI contract (2 bad input, 3 integrity, 4 refused; 5 the verdict gate of
``analyse --fail-unless``; 141 a closed standard output).

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
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer.core import TyperCommand, TyperOption

from prereg.commands._common import (
    PROCESS,
    WORKSPACE_HELP,
    FlagHelpGroup,
    RootOptions,
    use_flag_help,
)
from prereg.core.errors import PreregError
from prereg.core.output import (
    StdoutClosed,
    dumps,
    err_console,
    quiet_closed_output,
    safe_streams,
    stdout_guard,
    write_document,
)
from prereg.core.untrusted import display_text
from prereg.core.version import code_version

if TYPE_CHECKING:
    # the types typer's classes take (its bundled click, a private module: read by the
    # type checker only, so a typer that moves it never breaks the command line)
    from typer._click import Command, Context, Parameter
    from typer._click.shell_completion import CompletionItem

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
        "Compare two or more registrations' runs: each one's own result, and the paired change.",
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
    "corpus": (
        "corpus_cmds",
        "Corpus hygiene: near-duplicates, realism, brand names, canaries, tool-text guardrails.",
    ),
    "telemetry": (
        "telemetry_cmds",
        "Telemetry (evidence class T): import observed calls; compare them with synthetic runs.",
    ),
    "mcp": (
        "mcp_cmds",
        "Record MCP servers as snapshots and serve them from a replay server that refuses "
        "every tool call.",
    ),
    "study": (
        "study_cmds",
        "ToolBottleneckBench studies: scaffold, lint and compile task families into matched "
        "pressure variants.",
    ),
    "view": ("view_cmds", "Open Inspect AI's viewer on a registration's runs, one log per arm."),
    "experiment": (
        "experiment_cmds",
        "Write a selection experiment from an MCP snapshot and a prompt file.",
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


class _LazyCommands(MutableMapping[str, "Command"]):
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


#: The shells ``--show-completion SHELL`` and ``--install-completion SHELL`` name.
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
#: the root completion options (typer's), and where the shell they named is kept
COMPLETION_OPTIONS = ("--show-completion", "--install-completion")
SHELL_META = "prereg.completion_shell"


def _named_shell(ctx: Context, args: list[str]) -> list[str]:
    """The root's ``args`` without the shell a completion option names (kept in
    ``ctx.meta``).

    typer's completion options are flags that detect the shell from the parent
    processes: ``--show-completion zsh`` printed the script of the shell it ran from
    (bash), taking ``zsh`` for a command. Here ``--show-completion zsh`` and
    ``--show-completion=zsh`` name the shell; alone, the option still detects it. Only
    the root's own options are looked at (up to the command's name)."""
    out: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if name not in COMPLETION_OPTIONS:
            out.append(arg)
            if arg in ("-w", "--workspace") and rest:
                out.append(rest.pop(0))  # the folder, whatever it is called
            elif arg == "--" or not arg.startswith("-"):
                break  # the command: the rest is its own
            continue
        out.append(name)
        if not eq and rest and not rest[0].startswith("-"):
            value = rest.pop(0)
        elif not eq:
            continue
        if value.lower() not in SHELLS:
            raise typer.BadParameter(
                f"unknown shell {value!r} (use {', '.join(SHELLS)})", ctx=ctx, param_hint=name
            )
        ctx.meta[SHELL_META] = value.lower()
    return out + rest


def _with_named_shell(callback: Any) -> Any:
    """typer's completion callback, given the shell the option named (if it named one)."""

    def named(ctx: Context, param: Any, value: Any) -> Any:
        return callback(ctx, param, ctx.meta.get(SHELL_META) or value)

    named.prereg_named_shell = True  # type: ignore[attr-defined]
    return named


class LazyGroup(FlagHelpGroup):
    """The root group: lists commands from :data:`COMMANDS`, imports one only to run it.

    EPIPE on a closed standard output, while a command runs or help is printed, leaves
    as :class:`prereg.core.output.StdoutClosed`: click would take it for its own and
    exit 1, where :func:`main` exits 141 like every other command of a pipe."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = self.lazy = _LazyCommands()

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        with stdout_guard():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Context) -> Any:
        with stdout_guard():
            return super().invoke(ctx)

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The root's options, typer's completion options taking a shell's name."""
        params = super().get_params(ctx)
        for param in params:
            if not isinstance(param, TyperOption) or not set(param.opts) & set(COMPLETION_OPTIONS):
                continue
            if param.callback is None or getattr(param.callback, "prereg_named_shell", False):
                continue
            param.callback = _with_named_shell(param.callback)
            verb = "Install" if "--install-completion" in param.opts else "Show"
            param.help = (
                f"{verb} completion for the current shell, or for the shell named after it "
                f"({', '.join(SHELLS)})."
            )
        return params

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _named_shell(ctx, args))

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
        typer.Option("--workspace", "-w", help=WORKSPACE_HELP, show_default=False),
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


def usage_error_json(exc: Exception) -> dict[str, object]:
    """A usage error from the option parser as the document a PreregError gives under
    ``--json`` (:meth:`prereg.core.errors.PreregError.to_json`), exit code 2: ``field``
    names the option or argument when the parser says which."""
    field = getattr(exc, "option_name", None) or getattr(exc, "param_hint", None)
    param = getattr(exc, "param", None)
    if not isinstance(field, str) and param is not None:
        opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
        opts.sort(key=lambda o: not o.startswith("--"))  # the long name first
        # an argument: its metavar (ID), else its name
        field = opts[0] if opts else getattr(param, "display_name_raw", param.name)
    format_message = getattr(exc, "format_message", None)
    return {
        "error": "UsageError",
        "exit_code": 2,
        "message": format_message() if callable(format_message) else str(exc),
        "file": None,
        "field": field if isinstance(field, str) else None,
        "details": list(getattr(exc, "possibilities", None) or []),
    }


def run() -> None:
    """The ``prereg`` program (the console script and ``python -m prereg``): :func:`main`,
    then what is still alive is frozen (``gc.freeze``), so the collection the interpreter
    makes as it exits does not walk it: after an analysis of 27,000 runs that walk took
    half a second, to free memory the operating system takes back at exit anyway.

    The standard streams are made safe for it (:func:`prereg.core.output.safe_streams`:
    any encoding, whole writes), for every command at once."""
    PROCESS.program = True
    try:
        with safe_streams():
            main()
    finally:
        gc.freeze()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning PreregError into its exit code.

    A closed standard output (``prereg show ID | head -1``) ends every command the same
    way: quietly, no traceback, exit 141 (128 + SIGPIPE, as git's)."""
    as_json = "--json" in (argv if argv is not None else sys.argv[1:])
    try:
        with stdout_guard():
            code = _run_app(argv, as_json)
            sys.stdout.flush()  # a reader gone shows here, not at the interpreter's exit
    except StdoutClosed:
        code = quiet_closed_output()
    sys.exit(code)


def _error_document(data: dict[str, object]) -> None:
    """An error's JSON document on stdout; where stdout's reader is gone, none: the
    error still goes to stderr and exits with its own code, which says more than 141."""
    try:
        write_document(dumps(data))
    except StdoutClosed:
        quiet_closed_output()


def _run_app(argv: list[str] | None, as_json: bool) -> int:
    """The app's exit code; PreregError and usage errors reported (one JSON document on
    stdout under ``--json``, the message on stderr)."""
    try:
        code = app(args=argv, standalone_mode=False)
    except PreregError as exc:
        if as_json:
            _error_document(exc.to_json())
        err_console.print(
            f"error: {display_text(exc.render(), multiline=True)}",
            style="red",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err_console.print("aborted", style="red")
        return 130
    except KeyboardInterrupt:
        err_console.print("interrupted", style="red")
        return 130
    except Exception as exc:  # usage errors from click (typer may bundle its own copy)
        if _is_click_exception(exc):
            if as_json:
                _error_document(usage_error_json(exc))
            exc.show()  # type: ignore[attr-defined]
            return 2
        raise
    return code if isinstance(code, int) else 0
