"""Tool surfaces at run time: tools as hosts see them, and executing a tool call.

A surface's tools are normalised at load time into a chain of operation steps
(a single-operation tool is a chain of one), so the harness handles a
one-tool-per-operation surface and a composite surface the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from prereg.experiments.models import ChainStep
from prereg.experiments.refs import RefError, resolve_source
from prereg.experiments.service import OperationError, ServiceStore

Role = Literal["focal", "competitor", "decoy"]


class ToolRefused(OperationError):
    """A call to a replay-only tool (a competitor or decoy): offered, never executed."""


@dataclass(frozen=True)
class Tool:
    """One offered tool. ``steps`` is empty for replay-only tools."""

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    steps: tuple[ChainStep, ...]
    surface: str

    @property
    def executable(self) -> bool:
        return bool(self.steps)

    @property
    def operations(self) -> tuple[str, ...]:
        """The operations this tool reaches for, in chain order (duplicates dropped)."""
        seen: list[str] = []
        for step in self.steps:
            if step.op not in seen:
                seen.append(step.op)
        return tuple(seen)

    def metadata(self) -> dict[str, Any]:
        """What a host is shown: name, title, description, input schema."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "input_schema": dict(self.input_schema)}


@dataclass(frozen=True)
class Surface:
    id: str
    file: str
    name: str
    title: str
    description: str
    replay_only: bool
    tools: tuple[Tool, ...]

    def tool(self, name: str) -> Tool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


def execute_tool(tool: Tool, args: Mapping[str, Any], store: ServiceStore) -> Any:
    """Run a tool's chain against the store; the result of the last step is returned.

    The chain is all-or-nothing: if a step fails, earlier steps are rolled back
    and OperationError is raised (a later step cannot see a half-done chain).
    """
    if not tool.executable:
        raise ToolRefused(f"'{tool.name}' belongs to an integration that is replayed, not "
                          "executed: the call was not run")
    results: list[Any] = []
    with store.transaction():
        for step in tool.steps:
            op_args: dict[str, Any] = {}
            for param, source in step.args.items():
                try:
                    present, value = resolve_source(source, args, results)
                except RefError as exc:
                    raise OperationError(f"step {len(results)} ({step.op}): {exc}") from None
                if present:
                    op_args[param] = value
            results.append(store.call(step.op, op_args))
    return results[-1]
