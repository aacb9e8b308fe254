"""Options and helpers shared by the command modules."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click import Context, HelpFormatter, Parameter  # the types typer's classes take
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer.core import TyperCommand, TyperGroup, TyperOption, _TyperParameter

from prereg.core.workspace import Workspace

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document.")]


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


#: a decimal number and an integer as the command line gives them, in the forms where
#: Python's float() and int() return exactly what pydantic's lax parsing returns
_DECIMAL = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"-?(?:0|[1-9]\d{0,17})")


@dataclass(frozen=True)
class _PlainCoercion(RuntimeParam):
    """typer's conversion of one parameter's value, with pydantic only where it is needed.

    typer converts every value through a pydantic ``TypeAdapter`` built for the parameter
    on its first use, even an option not given (whose value is None): importing pydantic
    and building the adapters costs a command's start-up about 0.1 s (issue 15). Here
    a str for a ``str``, a float or a decimal number for a ``float``, and an int or an
    integer for an ``int`` are converted as pydantic would convert them (the same
    value); anything else (another type, a path, a list, text that is no plain number, a
    value out of its form) goes to typer's own conversion, built then, so its results
    and its error messages are unchanged.
    """

    descriptor: TypeDescriptor

    @cached_property
    def _typer(self) -> RuntimeParam:
        return build_runtime_param(self.descriptor)

    def _plain(self, value: Any) -> tuple[bool, Any]:
        kind, info = self.annotation, self.parameter_info
        if info.parser is not None or self.descriptor.is_choice or self.descriptor.is_path:
            return False, None
        if kind is str and type(value) is str:
            return True, value
        if info.min is not None or info.max is not None or info.clamp:
            return False, None
        plain = type(value) is str
        if kind is float and (type(value) is float or (plain and _DECIMAL.fullmatch(value))):
            return True, float(value)
        if kind is int and (type(value) is int or (plain and _INTEGER.fullmatch(value))):
            return True, int(value)
        return False, None

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        done, converted = self._plain(value)
        if done:
            return converted
        return self._typer._coerce_value(value, param=param, ctx=ctx)


def plain_coercion(params: list[Parameter]) -> None:
    """Give each typer parameter of ``params`` :class:`_PlainCoercion` (unless converted
    already), before the command line is parsed."""
    for param in params:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            d = param.type_descriptor
            param._runtime_param = _PlainCoercion(d.parameter_info, d.annotation, d)


class FlagHelpCommand(TyperCommand):
    """A command whose help shows flags without a value placeholder, and whose values are
    converted without pydantic where they are plain (:class:`_PlainCoercion`)."""

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
