"""Options and helpers shared by the command modules."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.utils import get_params_from_function

from prereg.core.errors import BadInput
from prereg.core.output import StdoutClosed
from prereg.core.untrusted import display_text
from prereg.core.workspace import Workspace

try:  # typer's conversion internals (typer >= 0.29): without them, typer converts throughout
    from prereg.commands.plain_coercion import plain_coercion
except ImportError:  # pragma: no cover - a typer that moved its internals

    def plain_coercion(params: list[Parameter]) -> None:
        """Nothing to do: typer converts every value itself (slower start-up, same values)."""


if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    # the types typer's classes take (its bundled click, a private module: read by the
    # type checker only, so a typer that moves it never breaks a command)
    from typer._click import Context, HelpFormatter, Parameter

JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document.")]

#: ``-w/--workspace``, before the command (the root's option) or after it (each
#: command that works in a workspace: :class:`WorkspaceCommand`).
WORKSPACE_HELP = (
    "Workspace folder (default: $PREREG_WORKSPACE, else the nearest folder holding a "
    "workspace from the current one upward, as git finds a repository)."
)
#: where a command's own ``-w`` is kept (``ctx.meta`` is shared by the whole context chain)
WORKSPACE_META = "prereg.workspace"


@dataclass
class Process:
    """Whether this process is the ``prereg`` program (:func:`prereg.cli.run`), which exits
    when its command returns; False where the CLI runs in another program's process (a
    test, a notebook), which lives on."""

    program: bool = False


PROCESS = Process()


@dataclass(frozen=True)
class RootOptions:
    """What the root callback parsed: ``-w/--workspace`` as given (None: not given)."""

    workspace: Path | None = None


def _root_option(ctx: typer.Context) -> Path | None:
    """``-w`` as given: after the command, else before it (None: not given)."""
    given = ctx.meta.get(WORKSPACE_META)
    if given is not None:
        return Path(given)
    root = ctx.find_root()
    if isinstance(root.obj, RootOptions):
        return root.obj.workspace
    parsed = root.params.get("workspace")  # completing: the root's callback has not run
    return Path(parsed) if parsed is not None else None


def workspace(ctx: typer.Context) -> Workspace:
    """The workspace of a command that needs one (exit 2 when there is none).

    ``-w`` (else ``PREREG_WORKSPACE``) names it exactly; otherwise it is found upward
    from the current folder (:meth:`prereg.core.workspace.Workspace.discover`).
    """
    return Workspace.discover(_root_option(ctx))


def target_root(ctx: typer.Context) -> Path:
    """The folder ``init`` creates: ``-w``, else ``PREREG_WORKSPACE``, else the current one."""
    return Workspace.resolve(_root_option(ctx)).root


@contextmanager
def _flags_without_placeholder(params: list[Parameter]) -> Iterator[None]:
    """While help is drawn, on/off flags show no ``<bool>`` value placeholder.

    typer's rich help prints an option's metavar, else its type (``<bool>`` for a flag,
    which takes no value); an empty metavar prints nothing. Restored afterwards, so
    parsing and error messages see the options unchanged.
    """
    flags = [p for p in params if isinstance(p, TyperOption) and p.is_flag and p.metavar is None]
    for flag in flags:
        flag.metavar = ""
    try:
        yield
    finally:
        for flag in flags:
            flag.metavar = None


@contextmanager
def _help_to_closed_pipe() -> Iterator[None]:
    """typer prints help through a rich console of its own, which answers EPIPE
    (``prereg --help | head -1``) with ``SystemExit(1)`` (``Console.on_broken_pipe``,
    the only way out of drawing help): taken for :class:`StdoutClosed`, so help ends as
    every command does on a closed pipe."""
    try:
        yield
    except SystemExit as exc:
        if exc.code == 1:
            raise StdoutClosed from None
        raise


def option_as_value(params: list[Parameter], args: list[str]) -> tuple[str, str] | None:
    """The first value-taking option of ``args`` whose value is another option, as
    (option, value): ``run ID --prices --json`` would take ``--json`` as the price file
    and print a table. A value is taken for an option when it starts with ``--`` (but
    ``--`` itself) or is one of the command's own option names (``-c``); ``-`` stays a
    value (standard input or output), and ``./--json`` names a file so named."""
    names = {name for p in params for name in (*p.opts, *p.secondary_opts)}
    valued = {
        name
        for p in params
        if isinstance(p, TyperOption) and not p.is_flag and not p.count
        for name in p.opts
    }
    for i, arg in enumerate(args):
        if arg == "--":  # what follows is arguments only
            return None
        option, equals, attached = arg.partition("=")
        if option not in valued:
            continue
        value = attached if equals else (args[i + 1] if i + 1 < len(args) else "")
        if value != "--" and (value.startswith("--") or (value in names and value != "-")):
            return option, value
    return None


#: lines whose break before and after is kept: list items, indented lines, click's \b
KEEP_BREAK = (" ", "\t", "- ", "* ", "\b")


def reflow_help(text: str) -> str:
    """A command's help with each paragraph's source line breaks joined, so the terminal
    wraps it at its own width (typer's rich mode keeps every newline of a docstring, which
    at 80 columns breaks a 90-column source line into a long and a one-word line). A list
    item (``-``, ``*``) or an indented line keeps its breaks, before and after."""
    lines = text.split("\n")
    out: list[str] = []
    for line in lines:
        joins = (
            out
            and out[-1].strip()
            and line.strip()
            and not line.startswith(KEEP_BREAK)
            and not out[-1].startswith(KEEP_BREAK)
        )
        if joins:
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


class FlagHelpCommand(TyperCommand):
    """A command whose help shows flags without a value placeholder, whose values are
    converted without pydantic where they are plain (:mod:`.plain_coercion`), and whose
    value-taking options never swallow another option (:func:`option_as_value`)."""

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        if self.help:
            self.help = reflow_help(self.help)
        with _help_to_closed_pipe(), _flags_without_placeholder(self.get_params(ctx)):
            super().format_help(ctx, formatter)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        params = self.get_params(ctx)
        plain_coercion(params)
        swallowed = option_as_value(params, args)
        if swallowed is not None:
            option, value = swallowed
            raise typer.BadParameter(
                f"expects a value, not the option {value!r} (write ./{value} for a file so named)",
                ctx=ctx,
                param_hint=f"'{option}'",
            )
        return super().parse_args(ctx, args)


def _remember_workspace(ctx: typer.Context, value: Path | None) -> Path | None:
    if value is not None:
        ctx.meta[WORKSPACE_META] = value
    return value


@cache
def workspace_option() -> Parameter:
    """``-w/--workspace`` for after a command's name: the root's option, same meaning.

    Built by typer from a declaration (so it parses, converts and shows in help as
    any typer option does); its value goes to ``ctx.meta``, not to the command."""
    probe = typer.Typer(add_completion=False)

    @probe.command()
    def probe_command(
        workspace: Annotated[
            Path | None,
            typer.Option(
                "--workspace",
                "-w",
                help=WORKSPACE_HELP,
                show_default=False,
                expose_value=False,
                callback=_remember_workspace,
            ),
        ] = None,
    ) -> None:
        """Never run: only its option is taken."""

    params: list[Parameter] = typer.main.get_command(probe).params
    return params[0]


class WorkspaceCommand(FlagHelpCommand):
    """A command that works in a workspace: takes ``-w/--workspace`` after its name too
    (``prereg list -w ws``), as the root takes it before."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = {name for p in self.params for name in getattr(p, "opts", ())}
        if not names & {"-w", "--workspace"}:
            self.params.append(workspace_option())


def _takes_context(callback: Callable[..., Any] | None) -> bool:
    """Whether a command's function takes the context: the commands that work in a
    workspace do (:func:`workspace` needs it); ``demo`` and the ``mcp`` commands, which
    work in none, do not."""
    if callback is None:
        return False
    return any(
        isinstance(p.annotation, type) and issubclass(p.annotation, typer.Context)
        for p in get_params_from_function(callback).values()
    )


class FlagHelpGroup(TyperGroup):
    """A command group whose help shows flags without a value placeholder, and whose
    values are converted without pydantic where they are plain."""

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        if self.help:
            self.help = reflow_help(self.help)
        with _help_to_closed_pipe(), _flags_without_placeholder(self.get_params(ctx)):
            super().format_help(ctx, formatter)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        plain_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)


def use_flag_help(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) :class:`FlagHelpCommand`, or
    :class:`WorkspaceCommand` where it works in a workspace (takes the context)."""
    for info in app.registered_commands:
        if info.cls is None or info.cls is TyperCommand:  # typer's default
            info.cls = WorkspaceCommand if _takes_context(info.callback) else FlagHelpCommand
    for group in app.registered_groups:
        if group.typer_instance is not None:
            use_flag_help(group.typer_instance)


def bundled_sources() -> dict[str, Traversable]:
    """What ``init`` copies into a workspace: the bundled experiments (when packaged), drafts.

    Keys are workspace folders, for :func:`prereg.core.workspace.init_workspace`.
    """
    from importlib import resources  # lazy: only init copies them; the other commands start without

    sources: dict[str, Traversable] = {}
    experiments = resources.files("prereg.experiments") / "bundled"
    if experiments.is_dir():
        sources["experiments"] = experiments
    sources["drafts"] = resources.files("prereg.registry") / "drafts"
    return sources


# ---- shell completion: values read from the workspace, cheaply -----------------------


def _completion_workspace(ctx: typer.Context) -> Workspace | None:
    try:
        return Workspace.discover(_root_option(ctx))
    except BadInput:  # none: nothing to offer
        return None


def _plain(value: object) -> bool:
    """A value a shell may be offered as it is: one word, nothing a terminal acts on."""
    return (
        isinstance(value, str)
        and bool(value)
        and display_text(value) == value
        and not any(char.isspace() for char in value)
    )


def complete_registration_id(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Registration ids of the workspace, in ledger order, each with its kind,
    experiment and split: read from ``registry/ledger.jsonl`` line by line (no registry,
    no pydantic: a completion answers while the user waits)."""
    ws = _completion_workspace(ctx)
    if ws is None:
        return []
    try:
        lines = (ws.registry / "ledger.jsonl").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    found: dict[str, str] = {}
    for line in lines:
        if '"registration"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("event") != "registration":
            continue
        reg_id = event.get("id")
        if not isinstance(reg_id, str) or not _plain(reg_id):
            continue
        about = f"{event.get('kind')}, {event.get('experiment')}, split {event.get('split')}"
        found[reg_id] = display_text(about)
    return [(reg_id, about) for reg_id, about in found.items() if reg_id.startswith(incomplete)]


def complete_experiment(ctx: typer.Context, incomplete: str) -> list[str]:
    """Experiment folders of the workspace (``experiments/<name>/experiment.yaml``)."""
    ws = _completion_workspace(ctx)
    if ws is None:
        return []
    try:
        names = sorted(
            p.name for p in ws.experiments.iterdir() if (p / "experiment.yaml").is_file()
        )
    except OSError:
        return []
    return [name for name in names if _plain(name) and name.startswith(incomplete)]


def completes(*values: str) -> Callable[[str], list[str]]:
    """A completer offering ``values`` (an option's accepted words, ``--format``)."""

    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete
