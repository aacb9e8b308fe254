"""The capture client: connect to a live MCP server with the ``mcp`` SDK and record it.

The SDK's ``Client`` drives the connection (handshake, transports, validation that
the server really speaks MCP), but what it hands back are its own models, which drop
fields they do not know and reorder keys. So the transport is wrapped in a tap that
keeps a deep copy of every raw JSON-RPC result as it arrives off the wire, before
the session touches it; the snapshot stores those raw objects.

The main recording uses the handshake era (``initialize``) on purpose: it is the era
every host and every server speaks, so a replay of it can be offered to any host. With
``CaptureOptions.revisions`` the capture also asks for every other revision the installed
SDK's client can request (each older handshake revision, and each 2026-07-28-era one
through ``server/discover``) and records the answers of each one the server accepts, so
the replay can negotiate what the live server negotiated. The SDK is imported lazily so
that loading or replaying a snapshot never pays for it.
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import anyio
from pydantic import ValidationError

from prereg.core.errors import BadInput, PreregError
from prereg.core.safeio import MIB, UnreadableFile, read_regular_file
from prereg.core.untrusted import display_text
from prereg.core.version import __version__
from prereg.experiments.mcp_snapshot import (
    LIST_CAPABILITY,
    LIST_ITEMS,
    TOOLS_LIST,
    CaptureInfo,
    ListRecording,
    RecordedError,
    RevisionRecording,
    ServedContent,
    Snapshot,
)

CLIENT_NAME = "prereg-snapshot"
PAGE_LIMIT = 1000

#: The script a stdio server's command runs under, to learn how the server ended
#: (the SDK shows neither its exit code nor its stderr): :mod:`.server_end`.
SERVER_END = Path(__file__).with_name("server_end.py")
#: Lines of the end of a dead server's stderr shown in the error (at most 2 KB).
TAIL_LINES = 20


class CaptureError(PreregError):
    """The live server could not be recorded (it failed, hung or spoke no valid MCP)."""

    exit_code = 1


@dataclass(frozen=True)
class StdioTarget:
    """A server launched as a subprocess and spoken to over its stdin/stdout."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to the SDK's minimal env
    cwd: str | None = None


@dataclass(frozen=True)
class HttpTarget:
    """A server reached over streamable HTTP."""

    url: str
    # Sent with every request (a bearer token, an API key): values stay in memory, only
    # the names are recorded (CaptureInfo.headers).
    headers: dict[str, str] = field(default_factory=dict, repr=False)


# Optional client capabilities a capture may declare (--client-capabilities); a server
# may list more (or other) tools to a client that declares them.
CLIENT_CAPABILITIES = ("sampling", "elicitation", "roots")


@dataclass(frozen=True)
class CaptureOptions:
    """How to capture: which capabilities to declare; whether to negotiate each revision.

    ``negotiate``: ask for each older handshake revision and list those answered exactly
    as the main recording (``protocol_versions``). ``revisions`` (with ``negotiate``):
    also record the answers of every revision accepted with other answers, and of each
    2026-07-28-era revision (``server.revisions``). Off by default so that re-taking a
    snapshot from before revisions were recorded gives its digest again.
    """

    capabilities: frozenset[str] = frozenset()
    negotiate: bool = True
    revisions: bool = False


Target = StdioTarget | HttpTarget


def capture_snapshot(
    target: Target,
    *,
    timeout: float = 60.0,
    errlog: TextIO | None = None,
    options: CaptureOptions | None = None,
) -> Snapshot:
    """Record ``target``'s identity, capabilities and complete listings (blocking).

    ``timeout`` bounds the whole capture, start-up and version negotiation included.
    Raises :class:`BadInput` when the command cannot be started or the server it starts
    exits before answering (:class:`ServerExited`, with its exit code and the end of its
    stderr), and :class:`CaptureError` for anything the server does wrong.
    """
    return anyio.run(_capture, target, timeout, errlog or sys.stderr, options or CaptureOptions())


async def capture_snapshot_async(
    target: Target,
    *,
    timeout: float = 60.0,
    errlog: TextIO | None = None,
    options: CaptureOptions | None = None,
) -> Snapshot:
    return await _capture(target, timeout, errlog or sys.stderr, options or CaptureOptions())


async def _capture(
    target: Target, timeout: float, errlog: TextIO, options: CaptureOptions
) -> Snapshot:
    if isinstance(target, StdioTarget) and not target.command:
        raise BadInput("give the server's command after '--', or --url", field="command")
    unknown = sorted(options.capabilities - set(CLIENT_CAPABILITIES))
    if unknown:
        raise BadInput(
            f"unknown client capability {unknown[0]!r}; "
            f"choose from {', '.join(CLIENT_CAPABILITIES)}",
            field="--client-capabilities",
        )
    try:
        with anyio.fail_after(timeout):
            return await _record_negotiated(target, errlog, options)
    except TimeoutError:
        raise CaptureError(
            f"the server did not answer completely within {timeout:g} s", field=_where(target)
        ) from None
    except BaseExceptionGroup as group:  # anyio task groups wrap what the transports raise
        raise _translate(_first_leaf(group), target) from None
    except (PreregError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise _translate(exc, target) from None


async def _record_negotiated(target: Target, errlog: TextIO, options: CaptureOptions) -> Snapshot:
    """The SDK's own offer first (the newest handshake revision), then each other one.

    A live server answers a revision it supports with that revision. Those answered
    exactly as the main recording but for the version (the same initialize result
    otherwise, the same pages) are listed in ``protocol_versions``. One accepted with
    different answers is recorded under ``server.revisions`` with ``options.revisions``,
    else noted in the provenance and not replayed. With ``options.revisions`` each
    2026-07-28-era revision the SDK speaks is asked for too, through ``server/discover``.
    """
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS as HANDSHAKE  # lazy: mcp SDK
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS as MODERN  # lazy: mcp SDK

    main, declared = await _record(target, errlog, options.capabilities, offer=None)
    recorded = main.initialize["protocolVersion"]
    offers = [v for v in HANDSHAKE if v != recorded] if options.negotiate else []
    modern = list(MODERN) if options.negotiate and options.revisions else []
    answers: dict[str, ServedContent] = {}
    discovered: dict[str, RevisionRecording | None] = {}

    async def ask(offer: str) -> None:
        answers[offer], _ = await _record(target, errlog, options.capabilities, offer=offer)

    async def discover(version: str) -> None:
        discovered[version] = await _record_modern(target, errlog, options.capabilities, version)

    async with anyio.create_task_group() as group:  # one connection per revision, at once
        for offer in offers:
            group.start_soon(ask, offer)
        for version in modern:
            group.start_soon(discover, version)
    versions: list[str] = [recorded]
    differing: list[str] = []
    revisions: dict[str, RevisionRecording] = {}
    for offer in offers:
        if answers[offer].initialize.get("protocolVersion") != offer:
            continue  # the server does not speak it
        if _same_answers(main, answers[offer]):
            versions.append(offer)
        elif options.revisions:
            revisions[offer] = RevisionRecording(
                initialize=answers[offer].initialize, lists=answers[offer].lists
            )
        else:
            differing.append(offer)
    for version in modern:
        if (recording := discovered[version]) is not None:
            revisions[version] = recording
    # Not negotiated: which other revisions it speaks is unknown, as in older snapshots.
    known = _known_order(versions) if options.negotiate else None
    update: dict[str, Any] = {"protocol_versions": known}
    if revisions:
        update["revisions"] = {v: revisions[v] for v in _known_order(list(revisions))}
    try:
        served = ServedContent.model_validate({**main.model_dump(exclude_none=True), **update})
    except ValidationError as exc:
        raise CaptureError(
            "the server's answers cannot be recorded", details=[str(e["msg"]) for e in exc.errors()]
        ) from None
    capture = _provenance(target).model_copy(
        update={"client_capabilities": declared, "versions_differing": differing or None}
    )
    return Snapshot(server=served, capture=capture)


async def _record_modern(
    target: Target, errlog: TextIO, capabilities: frozenset[str], version: str
) -> RevisionRecording | None:
    """One session at a 2026-07-28-era ``version``: the raw ``server/discover`` result
    and every list, or None when the server does not speak ``version`` (it refuses the
    probe, answers without listing the revision, or is gone)."""
    from mcp import Client, Implementation, types  # lazy: the mcp SDK, only when capturing
    from mcp.shared.exceptions import MCPError  # lazy: the mcp SDK, only when capturing

    tape = _Tape()
    with _server_end(target) as end:
        transport = _TapTransport(_transport(target, errlog, end), tape)
        client_info = Implementation(name=CLIENT_NAME, version=__version__)
        try:
            async with Client(
                transport,
                mode=version,  # adopt the revision: no probe, the one below is ours
                cache=None,
                client_info=client_info,
                **_capability_callbacks(capabilities),
            ) as client:
                try:
                    await client.session.send_discover(version)
                except MCPError as exc:
                    if _connection_closed(exc):
                        raise
                    return None  # method not found, -32022: not a revision it speaks
                discover = tape.last_result("server/discover")
                supported = discover.get("supportedVersions")
                if not isinstance(supported, list) or version not in supported:
                    return None
                try:
                    client.session.adopt(types.DiscoverResult.model_validate(discover))
                except (ValidationError, RuntimeError) as exc:
                    raise CaptureError(
                        f"the server's server/discover answer at {version} is not valid MCP",
                        field="server/discover",
                        details=[str(exc)[:500]],
                    ) from None
                lists = await _lists(client, tape, discover.get("capabilities") or {})
        except Exception as exc:
            command = target.command if isinstance(target, StdioTarget) else []
            ended = _ended(end, command, exc, answered=bool(tape.results), offer=version)
            if ended is None:
                raise
            raise ended from None
    try:
        return RevisionRecording(discover=discover, lists=lists)
    except ValidationError as exc:
        raise CaptureError(
            f"the server's answers at {version} cannot be recorded",
            details=[str(e["msg"]) for e in exc.errors()],
        ) from None


def _known_order(versions: list[str]) -> list[str]:
    """Dates sort as revisions do for every handshake-era version."""
    return sorted(versions)


def _same_answers(a: ServedContent, b: ServedContent) -> bool:
    """Everything served equal but the protocol version the handshake settled on."""
    strip = {"protocolVersion"}
    init_a = {k: v for k, v in a.initialize.items() if k not in strip}
    init_b = {k: v for k, v in b.initialize.items() if k not in strip}
    return init_a == init_b and a.lists == b.lists


async def _record(
    target: Target, errlog: TextIO, capabilities: frozenset[str], offer: str | None
) -> tuple[ServedContent, dict[str, Any]]:
    """One session: the raw initialize result and every list, and the capabilities sent.

    ``offer`` replaces the protocol revision the SDK offers in ``initialize`` (it
    always offers its newest), to ask the server whether it speaks an older one.
    """
    tape = _Tape(offer=offer)
    with _server_end(target) as end:
        try:
            return await _session(target, errlog, capabilities, end, tape)
        except Exception as exc:
            command = target.command if isinstance(target, StdioTarget) else []
            ended = _ended(end, command, exc, answered=bool(tape.results), offer=offer)
            if ended is None:
                raise
            raise ended from None


async def _session(
    target: Target,
    errlog: TextIO,
    capabilities: frozenset[str],
    end: Path | None,
    tape: _Tape,
) -> tuple[ServedContent, dict[str, Any]]:
    """The session of :func:`_record`, its raw messages kept on ``tape``."""
    from mcp import Client, Implementation  # lazy: the mcp SDK, only when capturing

    transport = _TapTransport(_transport(target, errlog, end), tape)
    client_info = Implementation(name=CLIENT_NAME, version=__version__)
    async with Client(
        transport,
        mode="legacy",
        cache=None,
        client_info=client_info,
        **_capability_callbacks(capabilities),
    ) as client:
        initialize = tape.last_result("initialize")
        lists = await _lists(client, tape, initialize.get("capabilities") or {})
    try:
        served = ServedContent(initialize=initialize, lists=lists)
    except ValidationError as exc:
        raise CaptureError(
            "the server's answers cannot be recorded", details=[str(e["msg"]) for e in exc.errors()]
        ) from None
    return served, tape.client_capabilities


async def _lists(
    client: Any, tape: _Tape, server_capabilities: dict[str, Any]
) -> dict[str, ListRecording]:
    """Every list method the server advertises (tools/list always), raw pages or error."""
    from mcp.shared.exceptions import MCPError  # lazy: the mcp SDK, only when capturing

    lists: dict[str, ListRecording] = {}
    for method in LIST_ITEMS:
        if method != TOOLS_LIST and LIST_CAPABILITY[method] not in server_capabilities:
            continue
        try:
            lists[method] = ListRecording(pages=await _pages(client, method, tape))
        except MCPError as exc:
            if _connection_closed(exc):  # no answer at all: the server is gone
                raise
            if method == TOOLS_LIST:
                raise CaptureError(
                    f"tools/list failed: {exc.error.code} {exc.error.message}", field=TOOLS_LIST
                ) from None
            lists[method] = ListRecording(error=RecordedError(**tape.last_error(method)))
    return lists


def _capability_callbacks(capabilities: frozenset[str]) -> dict[str, Any]:
    """Callbacks whose presence makes the SDK declare each capability.

    A capture only lists, so each answers as a user who shares nothing would: sampling
    and elicitation are declined with an error, roots are an empty list.
    """
    from mcp import types  # lazy: the mcp SDK, only when capturing

    async def decline(*_: Any, **__: Any) -> Any:
        return types.ErrorData(code=-1, message="declined: prereg is only recording listings")

    async def no_roots(*_: Any, **__: Any) -> Any:
        return types.ListRootsResult(roots=[])

    chosen: dict[str, Any] = {}
    if "sampling" in capabilities:
        chosen["sampling_callback"] = decline
    if "elicitation" in capabilities:
        chosen["elicitation_callback"] = decline
    if "roots" in capabilities:
        chosen["list_roots_callback"] = no_roots
    return chosen


async def _pages(client: Any, method: str, tape: _Tape) -> list[dict[str, Any]]:
    """Follow ``nextCursor`` to the end, keeping each raw page; bounded and cycle-safe."""
    fetch = {
        "tools/list": client.list_tools,
        "prompts/list": client.list_prompts,
        "resources/list": client.list_resources,
        "resources/templates/list": client.list_resource_templates,
    }[method]
    pages: list[dict[str, Any]] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(PAGE_LIMIT):
        try:
            await fetch(cursor=cursor, cache_mode="bypass")
        except ValidationError as exc:
            raise CaptureError(
                f"{method} page {len(pages)} is not valid MCP",
                field=method,
                details=[str(e["msg"]) for e in exc.errors()[:5]],
            ) from None
        page = tape.last_result(method)
        pages.append(page)
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages
        if cursor in seen:
            raise CaptureError(f"{method} pagination loops (a cursor came back)", field=method)
        seen.add(cursor)
    raise CaptureError(f"{method} has more than {PAGE_LIMIT} pages", field=method)


def _transport(target: Target, errlog: TextIO, end: Path | None) -> Any:
    if isinstance(target, HttpTarget):
        return _http_transport(target)
    from mcp import StdioServerParameters  # lazy: the mcp SDK, only when capturing
    from mcp.client.stdio import stdio_client  # lazy: the mcp SDK, only when capturing

    command = list(target.command)
    if end is not None:  # run under server_end.py, which notes how the server ended
        command = [sys.executable, "-I", "-S", str(SERVER_END), str(end), "--", *command]
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=dict(target.env) or None,
        cwd=target.cwd,
    )
    return stdio_client(params, errlog=_with_fileno(errlog))


@contextmanager
def _server_end(target: Target) -> Iterator[Path | None]:
    """The file where :mod:`.server_end` notes how a stdio server ended (removed after)."""
    if not isinstance(target, StdioTarget):
        yield None
        return
    folder = tempfile.mkdtemp(prefix="prereg-mcp-")
    try:
        yield Path(folder) / "end.json"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@asynccontextmanager
async def _http_transport(target: HttpTarget) -> AsyncIterator[Any]:
    """Streamable HTTP through the SDK's transport: its own default client, or, where the
    user gave headers, an HTTP client of the SDK's HTTP library carrying them (the
    transport's documented way to set headers). That client has no timeouts of its own:
    the capture's deadline (``timeout``) bounds every request, as it bounds the whole
    capture, so no SDK default is copied here."""
    from mcp.client.streamable_http import streamable_http_client  # lazy: mcp SDK

    if not target.headers:
        async with streamable_http_client(target.url) as streams:
            yield streams
        return
    import httpx2  # lazy: the mcp SDK's HTTP client, loaded with it

    async with httpx2.AsyncClient(headers=dict(target.headers), timeout=None) as http:
        async with streamable_http_client(target.url, http_client=http) as streams:
            yield streams


def _with_fileno(errlog: TextIO) -> TextIO:
    """The subprocess needs a real file for its stderr; captured streams have none."""
    try:
        errlog.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or errlog
    return errlog


def _provenance(target: Target) -> CaptureInfo:
    common: dict[str, Any] = {
        "taken_at": datetime.now(UTC).replace(microsecond=0),
        "client": {"name": CLIENT_NAME, "version": __version__},
        "sdk": f"mcp {version('mcp')}",
    }
    if isinstance(target, HttpTarget):
        return CaptureInfo(
            transport="streamable-http",
            url=_strip_credentials(target.url),
            headers=sorted(target.headers) or None,
            **common,
        )
    return CaptureInfo(transport="stdio", command=list(target.command), **common)


def _strip_credentials(url: str) -> str:
    """Never record ``user:password@`` or a query string (tokens travel there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


# ----------------------------------------------------------------------------------------
# the tap


class _Tape:
    """Raw results and errors by request id, with the method each request carried."""

    def __init__(self, offer: str | None = None) -> None:
        self.methods: dict[Any, str] = {}
        self.results: list[tuple[str, dict[str, Any]]] = []
        self.errors: list[tuple[str, dict[str, Any]]] = []
        self.offer = offer
        self.client_capabilities: dict[str, Any] = {}

    def sent(self, message: Any) -> None:
        """Note the request's method; on ``initialize``, apply the offer and note the
        capabilities the client declares (the params dict is the one sent)."""
        method = getattr(message, "method", None)
        if method is not None and hasattr(message, "id"):
            self.methods[message.id] = method
        params = getattr(message, "params", None)
        if method == "initialize" and isinstance(params, dict):
            if self.offer is not None:
                params["protocolVersion"] = self.offer
            self.client_capabilities = copy.deepcopy(params.get("capabilities") or {})

    def received(self, message: Any) -> None:
        method = self.methods.get(getattr(message, "id", None))
        if method is None:
            return
        if hasattr(message, "result"):
            self.results.append((method, copy.deepcopy(message.result)))
        elif hasattr(message, "error"):
            self.errors.append((method, message.error.model_dump(exclude_none=True)))

    def last_result(self, method: str) -> dict[str, Any]:
        for name, result in reversed(self.results):
            if name == method:
                return copy.deepcopy(result)
        raise CaptureError(f"no raw {method} result was seen on the wire", field=method)

    def last_error(self, method: str) -> dict[str, Any]:
        for name, error in reversed(self.errors):
            if name == method:
                return dict(error)
        return {"code": 0, "message": "unknown error"}


class _TapRead:
    """A read stream that hands every message on unchanged after noting raw results."""

    def __init__(self, inner: Any, tape: _Tape) -> None:
        self._inner = inner
        self._tape = tape

    async def receive(self) -> Any:
        item = await self._inner.receive()
        message = getattr(item, "message", None)
        if message is not None:
            self._tape.received(message)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _TapRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _TapRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # e.g. ``last_context`` on context streams
        return getattr(self._inner, name)


class _TapWrite:
    """A write stream that notes each outgoing request's id and method."""

    def __init__(self, inner: Any, tape: _Tape) -> None:
        self._inner = inner
        self._tape = tape

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if message is not None:
            self._tape.sent(message)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TapWrite:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TapTransport:
    """Wraps an SDK transport (an async context manager yielding read and write streams)."""

    def __init__(self, inner: Any, tape: _Tape) -> None:
        self._inner = inner
        self._tape = tape

    async def __aenter__(self) -> tuple[_TapRead, _TapWrite]:
        read, write = await self._inner.__aenter__()
        return _TapRead(read, self._tape), _TapWrite(write, self._tape)

    async def __aexit__(self, *exc: Any) -> bool | None:
        suppress: bool | None = await self._inner.__aexit__(*exc)
        return suppress


# ----------------------------------------------------------------------------------------
# errors


class _TailShown(PreregError):
    """An error whose details are the end of the server's stderr, shown as lines."""

    def render(self) -> str:
        head = PreregError(self.message, file=self.file, field=self.field).render()
        return "\n".join([head, *(f"  | {line}" for line in self.details)])


class ServerExited(_TailShown, BadInput):
    """A stdio server that ended before answering ``initialize``: its command does not
    start a working server (bad input, exit 2)."""


class ServerDied(_TailShown, CaptureError):
    """A stdio server that ended in the middle of the capture (exit 1, as any capture
    error)."""


def _ended(
    end: Path | None, command: list[str], exc: BaseException, *, answered: bool, offer: str | None
) -> PreregError | None:
    """The error saying how a stdio server ended, when it ended on its own: it could not
    be started, or it exited and the session saw its connection close. None otherwise
    (``exc`` says more: the server is then stopped by the client, not of itself).

    Exit 2 only when the first connection got no answer at all (the command starts no
    working server); a server that answered once and died later failed the capture."""
    if end is None or not end.is_file():
        return None
    try:
        status = json.loads(read_regular_file(end, limit=MIB, what="a server's end status"))
    except (OSError, ValueError, UnreadableFile):
        return None
    if "cannot_start" in status:  # as when the SDK itself cannot start the command
        return BadInput(
            f"cannot start {command[0]!r}: {display_text(status['cannot_start'], 200)}",
            field="command",
        )
    if not _connection_closed(exc) or not isinstance(status.get("returncode"), int):
        return None
    code: int = status["returncode"]
    how = f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}"
    when = "during the capture" if answered else "before answering initialize"
    if offer is not None and not answered:
        when += f" (offered revision {offer})"
    lines = str(status.get("stderr") or "").splitlines()
    if status.get("stderr_cut") and lines:
        lines = lines[1:]  # the first line kept is only the end of one
    lines = [display_text(line) for line in lines[-TAIL_LINES:]]
    count = f"{len(lines)} line" + ("s" if len(lines) > 1 else "")
    said = f"; the end of its stderr ({count}):" if lines else "; its stderr was empty"
    error = ServerDied if answered or offer is not None else ServerExited
    return error(f"the server {how} {when}{said}", field="command", details=lines)


def _connection_closed(exc: BaseException) -> bool:
    """Whether the session failed because the server's end of the connection closed."""
    from mcp.shared.exceptions import MCPError  # lazy: the mcp SDK, only when capturing
    from mcp_types import CONNECTION_CLOSED  # lazy: the mcp SDK, only when capturing

    leaf = _first_leaf(exc) if isinstance(exc, BaseExceptionGroup) else exc
    if isinstance(leaf, MCPError):
        return leaf.error.code == CONNECTION_CLOSED
    return isinstance(leaf, (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError))


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    return leaf


def _translate(exc: BaseException, target: Target) -> PreregError:
    if isinstance(exc, PreregError):
        return exc
    where = _where(target)
    if isinstance(target, StdioTarget) and isinstance(exc, (FileNotFoundError, PermissionError)):
        return BadInput(
            f"cannot start {target.command[0]!r}: {exc.strerror or exc}", field="command"
        )
    from mcp.shared.exceptions import MCPError  # lazy: the mcp SDK, only when capturing

    if _connection_closed(exc):  # how a stdio server ended is said by _ended
        return CaptureError("the connection closed before the server answered", field=where)
    if isinstance(exc, MCPError):
        return CaptureError(
            f"the server answered with an error: {exc.error.code} {exc.error.message}", field=where
        )
    if isinstance(exc, ValidationError):
        return CaptureError(
            "the server's answer is not valid MCP",
            field=where,
            details=[str(e["msg"]) for e in exc.errors()[:5]],
        )
    return CaptureError(f"{type(exc).__name__}: {exc}", field=where)


def _where(target: Target) -> str:
    return "url" if isinstance(target, HttpTarget) else "command"
