"""Plain command-line values converted without pydantic (start-up, issue 15).

Uses typer's conversion internals (``typer._coercion``, typer >= 0.29); :mod:`._common`
imports this module inside a ``try`` so that a typer which moves them costs start-up
time, never a working command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from typer._click import Context, Parameter
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer.core import _TyperParameter

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
