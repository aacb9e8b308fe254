"""``mcp snapshot``, ``mcp serve``, ``mcp show``: MCP snapshots and the replay server."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from prereg.commands._common import FlagHelpGroup, JsonOpt
from prereg.core.errors import BadInput
from prereg.core.files import refuse_evidence_folder
from prereg.core.output import console, emit, err_console
from prereg.core.untrusted import display, display_text
from prereg.experiments.machine_text import Machine, snapshot_machine_text
from prereg.experiments.mcp_snapshot import LIST_ITEMS, Snapshot, snapshot_digest
from prereg.runners.mcp.capture import (
    CLIENT_CAPABILITIES,
    CaptureOptions,
    HttpTarget,
    StdioTarget,
    Target,
    capture_snapshot,
)
from prereg.runners.mcp.replay import ReplayServer, read_snapshot_file
from prereg.runners.mcp.serve_http import base_url, bind, endpoints, serve_http
from prereg.runners.mcp.serve_stdio import serve_stdio

app = typer.Typer(
    name="mcp",
    help="Record MCP servers as snapshots and serve them from a replay server that "
    "refuses every tool call.",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)

SNAPSHOT_HELP = """Record a live MCP server's identity and complete tool list into a snapshot.

Give the server either as a command after '--' (run locally, spoken to over stdio) or
with --url (streamable HTTP). The snapshot records, verbatim as JSON, the server's
initialize result (name, version, title, description, instructions, capabilities,
protocol version) and every page of tools/list (and of prompts/resources lists when
advertised). It uses the initialize handshake (protocol revisions up to 2025-11-25),
which every host speaks, and asks for every other revision the installed mcp SDK's
client can request too: each older handshake revision, and each newer one reached
through server/discover (2026-07-28). Each revision the server accepts is recorded
(those answered identically once, the others with their own answers), and the replay
negotiates among them as the live server would. A warning names tool text that looks
machine-dependent (a time zone, host or user name, an absolute path): it would change
the digest on another machine.
The digest (sha256 over RFC 8785 canonical JSON) covers what
the server serves, not when or how it was taken (capture time, command line and the
bytes of opaque pagination cursors are left out): two snapshots of an unchanged server
share a digest.

Examples:

  prereg mcp snapshot --out time.json -- mcp-server-time --local-timezone UTC
  prereg mcp snapshot --out remote.json --url http://127.0.0.1:8000/mcp --json
  prereg mcp snapshot --out auth.json --url https://example.org/mcp \\
      --header Authorization=MCP_AUTH_HEADER --client-capabilities roots
"""

SERVE_HELP = """Serve snapshots from a replay server that refuses every tool call.

Each snapshot is served exactly as recorded (identity, capabilities, tools/list pages).
Every tools/call is answered with an isError result (marked in _meta "prereg/replay")
and nothing is executed; a name the snapshot does not list gets JSON-RPC -32602.
The replay negotiates every protocol revision the snapshot recorded (up to the newest
the installed mcp SDK knows) and answers each with that revision's recorded
capabilities, identity and lists: initialize for handshake revisions, server/discover
for 2026-07-28-era ones. A client asking for a revision the snapshot lacks gets the
closest recorded one: over initialize, the newest recorded revision older than the one
asked for (none older, or an unknown revision: the snapshot's main one); over
server/discover, error -32022 naming the recorded ones. A snapshot without a
server/discover revision answers it "method not found", on which current SDK clients
fall back to the handshake.

stdio (the default) serves one snapshot on stdin/stdout: a host starts one process per
server. --http serves a pool on one port: snapshot i (0-based, in the order given) at
/servers/<i>/mcp, with /mcp as an alias when there is one snapshot, and GET /servers
listing them. --port 0 picks a free port; the URLs are printed at start (as one JSON
document with --json).
"""


def register(root: typer.Typer) -> None:
    """Add the ``mcp`` group to the app."""
    root.add_typer(app, name="mcp")


@app.command("snapshot", help=SNAPSHOT_HELP)
def snapshot_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Snapshot file to write.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="The server's command and arguments, after '--'.",
            metavar="COMMAND",
            show_default=False,
        ),
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="Streamable HTTP endpoint.")] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="Pass this environment variable to a stdio server (repeatable); "
            "only a minimal environment is passed otherwise.",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds for the whole capture.")
    ] = 60.0,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            metavar="NAME=ENV_VAR",
            help="With --url: send header NAME with the value of environment variable "
            "ENV_VAR (repeatable; for a token). Only the name is recorded, never the value.",
        ),
    ] = None,
    client_capabilities: Annotated[
        str,
        typer.Option(
            "--client-capabilities",
            metavar="LIST",
            help="Client capabilities to declare, comma-separated, of sampling, "
            "elicitation, roots (some servers list more tools to such clients). "
            "Recorded in the snapshot's capture block.",
        ),
    ] = "",
    negotiate: Annotated[
        bool,
        typer.Option(
            "--negotiate/--no-negotiate",
            help="Also ask the server for every other protocol revision the installed SDK "
            "can request and record the answers of each it accepts, so the replay can "
            "negotiate them (one connection each).",
        ),
    ] = True,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    target = _target(command, url, env or [], header or [])
    refuse_evidence_folder(out, what="a snapshot")
    if out.exists() and not force:
        raise BadInput(
            "exists; snapshots are evidence, pass --force to overwrite",
            file=str(out),
            field="--out",
        )
    if not out.parent.is_dir():
        raise BadInput("the folder does not exist", file=str(out), field="--out")

    options = CaptureOptions(
        capabilities=_capabilities(client_capabilities), negotiate=negotiate, revisions=negotiate
    )
    snap = capture_snapshot(target, timeout=timeout, errlog=sys.stderr, options=options)
    _write_atomically(out, snap.to_json_bytes())
    data = _summary(snap, str(out))
    warnings = snapshot_machine_text(snap, Machine.current())
    data["warnings"] = [w.to_json() for w in warnings]
    emit(data, as_json, lambda: _show_human(snap, data))
    for warning in warnings:
        err_console.print(
            f"warning: {display_text(warning.message(), 400)}; the digest will differ on "
            "another machine unless the server is pinned (e.g. --local-timezone UTC)",
            style="yellow",
            highlight=False,
            markup=False,
        )


def _target(
    command: list[str] | None, url: str | None, env: list[str], header: list[str]
) -> Target:
    """The server to capture, from the mutually exclusive command and --url."""
    if url and command:
        raise BadInput("give either a command after '--' or --url, not both", field="--url")
    if header and not url:
        raise BadInput("--header goes with --url (a stdio server takes --env)", field="--header")
    if url:
        if not url.startswith(("http://", "https://")):
            raise BadInput("expected an http:// or https:// URL", field="--url")
        return HttpTarget(url, headers=_headers(header))
    if command:
        return StdioTarget(list(command), env=_pass_env(env))
    raise BadInput("give the server's command after '--', or --url", field="command")


def _headers(specs: list[str]) -> dict[str, str]:
    """NAME=ENV_VAR pairs to header values read from the environment (never echoed)."""
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, variable = spec.partition("=")
        if not sep or not name.strip() or not variable.strip():
            raise BadInput(
                f"expected NAME=ENV_VAR, got {display_text(spec, 80)!r}", field="--header"
            )
        if variable not in os.environ:
            raise BadInput(
                f"environment variable {variable!r} (for header {name!r}) is not set",
                field="--header",
            )
        headers[name.strip()] = os.environ[variable]
    return headers


def _capabilities(spec: str) -> frozenset[str]:
    chosen = frozenset(p.strip() for p in spec.split(",") if p.strip())
    unknown = sorted(chosen - set(CLIENT_CAPABILITIES))
    if unknown:
        raise BadInput(
            f"unknown client capability {unknown[0]!r}; choose from "
            f"{', '.join(CLIENT_CAPABILITIES)}",
            field="--client-capabilities",
        )
    return chosen


@app.command("serve", help=SERVE_HELP)
def serve_cmd(
    snapshots: Annotated[
        list[Path], typer.Argument(help="Snapshot files.", metavar="SNAPSHOT", show_default=False)
    ],
    http: Annotated[bool, typer.Option("--http", help="Serve over streamable HTTP.")] = False,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (with --http).")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="Port (with --http); 0 picks a free one."),
    ] = 0,
    as_json: JsonOpt = False,
) -> None:
    servers = [ReplayServer(read_snapshot_file(path)) for path in snapshots]
    if not http:
        if len(servers) != 1:
            raise BadInput(
                f"stdio serves one snapshot, got {len(servers)}: start one process "
                "per server, or serve the pool with --http",
                field="SNAPSHOT",
            )
        if as_json:
            raise BadInput(
                "--json needs --http: over stdio, stdout is the protocol channel", field="--json"
            )
        serve_stdio(servers[0])
        return

    try:
        sock = bind(host, port)
    except OSError as exc:
        raise BadInput(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="--port"
        ) from None
    base = base_url(sock)
    data = {
        "base_url": base,
        "transport": "streamable-http",
        "servers": [e.describe(base) for e in endpoints(servers)],
    }
    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(
            f"warning: listening on {host}, beyond this machine",
            style="yellow",
            markup=False,
            highlight=False,
        )
    emit(data, as_json, lambda: _serve_human(data, servers))
    serve_http(servers, sock, host)


@app.command("show")
def show_cmd(
    snapshot: Annotated[Path, typer.Argument(help="Snapshot file.", show_default=False)],
    as_json: JsonOpt = False,
) -> None:
    """Show a snapshot's identity, digest and tools (metadata escaped, never interpreted)."""
    snap = read_snapshot_file(snapshot)
    data = _summary(snap, str(snapshot))
    data["capabilities"] = snap.capabilities()
    data["tools"] = snap.tools()
    emit(data, as_json, lambda: _show_human(snap, data))


# ----------------------------------------------------------------------------------------


def _pass_env(names: list[str]) -> dict[str, str]:
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise BadInput(f"not set in this environment: {', '.join(missing)}", field="--env")
    return {n: os.environ[n] for n in names}


def _write_atomically(path: Path, data: bytes) -> None:
    """Write beside the target and rename, so a kill never leaves half a snapshot."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _summary(snap: Snapshot, file: str) -> dict[str, Any]:
    lists: dict[str, Any] = {}
    for method, recording in snap.server.lists.items():
        if recording.error is not None:
            lists[method] = {"error": recording.error.model_dump(exclude_none=True)}
        else:
            lists[method] = {"items": len(snap.items(method)), "pages": len(recording.pages or [])}
    return {
        "file": file,
        "digest": snapshot_digest(snap),
        "server": snap.identity(),
        "protocol_versions": snap.protocol_versions(),
        "revisions": snap.revisions(),
        "tool_names": snap.tool_names(),
        "lists": lists,
        "capture": snap.capture.model_dump(mode="json", exclude_none=True),
    }


def _show_human(snap: Snapshot, data: dict[str, Any]) -> None:
    ident = snap.identity()
    head = Text()
    head.append(display_text(ident["name"], 240), style="bold")
    head.append(
        f" {display_text(ident['version'], 240)}  protocol "
        f"{display_text(snap.protocol_version, 240)}"
    )
    console.print(head)
    for label in ("title", "description", "instructions"):
        if ident[label]:
            console.print(Text(f"{label}: ").append_text(display(ident[label], limit=400)))
    console.print(Text(f"digest {data['digest']}"))
    revisions = ", ".join(display_text(v, 40) for v in data["revisions"])
    console.print(Text(f"revisions replayed: {revisions}"))
    table = Table("tool", "title", "description", title=display(data["file"]))
    for tool in snap.tools():
        table.add_row(
            display(tool.get("name"), limit=80),
            display(tool.get("title"), limit=60),
            display(tool.get("description"), limit=160),
        )
    console.print(table)
    for method in LIST_ITEMS:
        entry = data["lists"].get(method)
        if entry and method != "tools/list":
            shown = "error" if "error" in entry else f"{entry['items']} item(s)"
            console.print(Text(f"{method}: {shown}"))


def _serve_human(data: dict[str, Any], servers: list[Any]) -> None:
    for row in data["servers"]:
        line = display(f"[{row['index']}] {row['url']}  ")
        line.append(display_text(row["name"], 60), style="bold")
        line.append(f"  {row['tools']} tool(s)  {row['digest']}")
        console.print(line, soft_wrap=True)
    console.print("serving; every tools/call is refused. Ctrl-C stops.", highlight=False)
