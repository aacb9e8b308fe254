"""Options and helpers shared by the command modules."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer._click import Context, HelpFormatter, Parameter  # the types typer's classes take
from typer.core import TyperCommand, TyperGroup, TyperOption

from prereg.core.workspace import Workspace

try:  # typer's conversion internals (typer >= 0.29): without them, typer converts throughout
    from prereg.commands.plain_coercion import plain_coercion
except ImportError:  # pragma: no cover - a typer that moved its internals

    def plain_coercion(params: list[Parameter]) -> None:
        """Nothing to do: typer converts every value itself (slower start-up, same values)."""


if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document.")]


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
    options = ctx.find_root().obj
    return options.workspace if isinstance(options, RootOptions) else None


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


class FlagHelpCommand(TyperCommand):
    """A command whose help shows flags without a value placeholder, and whose values are
    converted without pydantic where they are plain (:mod:`.plain_coercion`)."""

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        with _flags_without_placeholder(self.get_params(ctx)):
            super().format_help(ctx, formatter)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        plain_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)


class FlagHelpGroup(TyperGroup):
    """A command group whose help shows flags without a value placeholder, and whose
    values are converted without pydantic where they are plain."""

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        with _flags_without_placeholder(self.get_params(ctx)):
            super().format_help(ctx, formatter)

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        plain_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)


def use_flag_help(app: typer.Typer) -> None:
    """Give every command of ``app`` (and of its sub-apps) :class:`FlagHelpCommand`."""
    for info in app.registered_commands:
        if info.cls is None or info.cls is TyperCommand:  # typer's default
            info.cls = FlagHelpCommand
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
