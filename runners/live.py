"""The registered live integration: its calls execute on its live MCP server.

InvokeRank's execution runs (seed, 5.5) serve the focal integration live while
every competitor stays on the replay server. A registration asks for this with
``host.live`` (a snapshot surface of the experiment and how to reach its
server); everything else about the run is unchanged: hosts are offered the
frozen snapshot's tools, and every other replay-only tool is refused.

Before any unit runs, :func:`open_live` snapshots the live server again with the
capture client and refuses the run (:class:`prereg.core.errors.IntegrityError`,
exit 3, nothing written) unless its digest equals the registered snapshot's:
the registration's digest covers the snapshot, so a server that changed since
would make the runs measure something that was not registered. One connection
(the ``mcp`` SDK's client) then serves every call of the run.

What comes back is data: the result's ``structuredContent`` when present, else
its content blocks; an ``isError`` result is an error the host is shown. The
store-based oracles never see the live server's state, so a run whose first
call executed live records Completed as null (see :mod:`prereg.runners.scoring`).
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import prereg.experiments
from prereg.core.errors import BadInput, IntegrityError
from prereg.core.version import __version__
from prereg.experiments import Experiment
from prereg.experiments.mcp_snapshot import Snapshot, snapshot_digest
from prereg.registry.units import LiveSpec, RunPlan
from prereg.runners.drivers.base import InfraError
from prereg.runners.mcp.capture import (
    CLIENT_CAPABILITIES,
    CaptureOptions,
    HttpTarget,
    StdioTarget,
    Target,
    capture_snapshot_async,
)


def check_live(plan: RunPlan, experiment: Experiment) -> None:
    """The live integration must be a snapshot surface some arm offers untransformed."""
    live = plan.live
    if live is None:
        return
    surface = experiment.surfaces.get(live.surface)
    if surface is None:
        raise BadInput(
            f"host.live names '{live.surface}', which is not a surface of the experiment",
            field="host.live.surface",
        )
    if surface.source != "snapshot":
        raise BadInput(
            f"host.live names '{live.surface}', which is a YAML surface: only an "
            "MCP snapshot surface has a live server (its calls are the only ones "
            "that do not run on the experiment's store)",
            field="host.live.surface",
        )


#: ``bundled:<path>`` in ``host.live.command``: a file of prereg's bundled experiments.
BUNDLED_PREFIX = "bundled:"


def live_command(command: tuple[str, ...] | list[str]) -> list[str]:
    """The live server's command as started: the program ``python`` is the interpreter
    running prereg (``sys.executable``, so the server sees the packages prereg sees, with
    no PATH lookup), and an argument ``bundled:<path>`` is that file of prereg's bundled
    experiments (``prereg.experiments`` / ``bundled`` / path), wherever prereg is
    installed and whatever the current directory. Everything else is passed as written
    (a relative path is read from the current directory). The registered command is
    unchanged; the live server is verified against the registered snapshot either way."""
    bundled = Path(prereg.experiments.__file__).parent / "bundled"
    out = [
        str(bundled / arg[len(BUNDLED_PREFIX) :]) if arg.startswith(BUNDLED_PREFIX) else arg
        for arg in command
    ]
    if out and out[0] == "python":
        out[0] = sys.executable
    return out


class LiveSession:
    """One open connection to the live server; :meth:`call` runs one tool call."""

    def __init__(self, spec: LiveSpec) -> None:
        self.spec = spec
        self.surface = spec.surface
        self._stack: AsyncExitStack | None = None
        self._client: Any = None

    def _target(self) -> Target:
        if self.spec.url is not None:
            return HttpTarget(self.spec.url)
        return StdioTarget(command=live_command(self.spec.command or ()))

    def _transport(self) -> Any:
        if self.spec.url is not None:
            from mcp.client.streamable_http import streamable_http_client  # lazy: mcp SDK

            return streamable_http_client(self.spec.url)
        from mcp import StdioServerParameters  # lazy: the mcp SDK, only for a live server
        from mcp.client.stdio import stdio_client  # lazy: the mcp SDK, only for a live server

        command = live_command(self.spec.command or ())
        return stdio_client(
            StdioServerParameters(command=command[0], args=command[1:]),
            errlog=sys.__stderr__ or sys.stderr,
        )

    async def verify(self, registered_digest: str | None, registered: Snapshot | None) -> str:
        """Snapshot the live server as the registered snapshot was taken (the same client
        capabilities; revisions negotiated only if they were) and compare the digests."""
        options = recapture_options(registered)
        live = capture_snapshot_async(self._target(), timeout=self.spec.timeout_s, options=options)
        digest = snapshot_digest(await live)
        if digest != registered_digest:
            raise IntegrityError(
                f"the live server of '{self.surface}' no longer serves the registered "
                f"snapshot (registered {registered_digest}, live {digest}); nothing was run",
                field="host.live",
            )
        return digest

    async def open(self) -> None:
        from mcp import Client, Implementation  # lazy: the mcp SDK, only for a live server

        stack = AsyncExitStack()
        client = Client(
            self._transport(),
            mode="legacy",
            cache=None,
            read_timeout_seconds=self.spec.timeout_s,
            client_info=Implementation(name="prereg-live", version=__version__),
        )
        self._client = await stack.enter_async_context(client)
        self._stack = stack

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[Any, bool, str, bool]:
        """(content, is_error, text the host is shown, empty) of one call on the live server.

        Empty (so not Executed): no structured content and no content block with text or
        data, or structured content that is empty or only wraps an empty value
        (``{"result": []}``, how SDK servers return a bare empty list).
        """
        if self._client is None:
            raise InfraError("the live integration is not connected")
        try:
            result = await self._client.call_tool(name, arguments)
        except Exception as exc:  # a transport or protocol failure is not the agent's
            raise InfraError(
                f"live call to '{name}' failed: {type(exc).__name__}: {exc}"[:500]
            ) from None
        blocks = [
            block.model_dump(mode="json", exclude_none=True, by_alias=True)
            for block in result.content
        ]
        content: Any = (
            result.structured_content if result.structured_content is not None else blocks
        )
        text = json.dumps(content, ensure_ascii=False, default=str)
        if result.is_error:
            return content, True, f"error: {text}", True
        return content, False, text, _empty(result.structured_content, blocks)

    async def close(self) -> None:
        if self._stack is not None:
            stack, self._stack, self._client = self._stack, None, None
            await stack.aclose()


def _blank(value: Any) -> bool:
    return value is None or value in ({}, [], "")


def _empty(structured: Any, blocks: list[dict[str, Any]]) -> bool:
    if structured is not None:
        if isinstance(structured, dict) and len(structured) == 1:
            return _blank(next(iter(structured.values())))
        return _blank(structured)
    return not any(
        b.get("type") != "text" or str(b.get("text", "")).strip() not in ("", "[]", "{}")
        for b in blocks
    )


def recapture_options(registered: Snapshot | None) -> CaptureOptions:
    """How to re-take ``registered``: what its client declared, and negotiation only
    when it recorded the revisions (snapshots from before negotiation did not)."""
    if registered is None:
        return CaptureOptions()
    declared = set(registered.capture.client_capabilities or {}) & set(CLIENT_CAPABILITIES)
    return CaptureOptions(
        capabilities=frozenset(declared),
        negotiate=registered.server.protocol_versions is not None,
        revisions=registered.server.revisions is not None,
    )


async def open_live(plan: RunPlan, experiment: Experiment) -> LiveSession | None:
    """The run's live session (verified against the registered snapshot), or None."""
    if plan.live is None:
        return None
    check_live(plan, experiment)
    session = LiveSession(plan.live)
    surface = experiment.surfaces[plan.live.surface]
    await session.verify(surface.snapshot_digest, surface.snapshot)
    await session.open()
    return session
