"""Tool surfaces at run time: tools as hosts see them, and executing a tool call.

A surface's tools are normalised at load time into a chain of operation steps
(a single-operation tool is a chain of one), so the harness handles a
one-tool-per-operation surface and a composite surface the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from prereg.experiments.mcp_snapshot import Snapshot
from prereg.experiments.models import ChainStep
from prereg.experiments.refs import RefError, resolve_source
from prereg.experiments.service import OperationError, ServiceStore

Role = Literal["focal", "competitor", "decoy"]


class ToolRefused(OperationError):
    """A call to a replay-only tool (a competitor, a decoy, a snapshot): never executed."""


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
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


@dataclass(frozen=True)
class Surface:
    """An integration as offered: its server text and tools.

    ``source`` says where it came from: a YAML surface file, or an MCP snapshot
    (``snapshot`` holds the validated snapshot, ``snapshot_digest`` its digest; a
    snapshot surface is always replay-only). ``transform`` names a registered
    control's transformation of the experiment's surface (None: as frozen).
    """

    id: str
    file: str
    name: str
    title: str
    description: str
    replay_only: bool
    tools: tuple[Tool, ...]
    source: Literal["yaml", "snapshot"] = "yaml"
    snapshot: Snapshot | None = None
    snapshot_digest: str | None = None
    transform: str | None = None

    def tool(self, name: str) -> Tool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None

    def content(self) -> dict[str, Any]:
        """What the surface offers and does, as plain data (the input of its digest)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "replay_only": self.replay_only,
            "source": self.source,
            "snapshot": self.snapshot_digest,
            "tools": [
                {**tool.metadata(), "steps": [step.model_dump(mode="json") for step in tool.steps]}
                for tool in self.tools
            ],
        }

    @property
    def digest(self) -> str:
        """``sha256:`` over the canonical JSON of :meth:`content`.

        The hash of the surface a host is offered, after any control's
        transformation: two arms with equal digests offer the same integration.
        (A surface's id, file and role are bookkeeping and left out.)
        """
        cached = self.__dict__.get("_digest")
        if cached is None:
            text = json.dumps(
                self.content(),
                sort_keys=True,
                ensure_ascii=False,
                separators=(",", ":"),
                default=str,
            )
            cached = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
            object.__setattr__(self, "_digest", cached)
        return str(cached)


def execute_tool(tool: Tool, args: Mapping[str, Any], store: ServiceStore) -> Any:
    """Run a tool's chain against the store; the result of the last step is returned.

    The chain is all-or-nothing: if a step fails, earlier steps are rolled back
    and OperationError is raised (a later step cannot see a half-done chain).
    """
    if not tool.executable:
        raise ToolRefused(
            f"'{tool.name}' belongs to an integration that is replayed, not "
            "executed: the call was not run"
        )
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
