"""``view``: Inspect AI's viewer on a registration's runs (wiring only)."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated, Any

import typer

from prereg.commands._common import JsonOpt, complete_registration_id, workspace
from prereg.commands.store_opt import StoreOpt
from prereg.core.output import console, emit, err_console
from prereg.core.untrusted import display
from prereg.reports.inspect_export import cached_export
from prereg.reports.viewer.serve import free_port, serve, viewer_url


def register(app: typer.Typer) -> None:
    @app.command("view")
    def view_cmd(
        ctx: typer.Context,
        registration_id: Annotated[
            str,
            typer.Argument(
                metavar="ID", help="Registration id.", autocompletion=complete_registration_id
            ),
        ],
        port: Annotated[
            int,
            typer.Option(
                "--port",
                min=0,
                max=65535,
                help="Port on 127.0.0.1 (Inspect's default 7575); 0 picks a free one.",
            ),
        ] = 7575,
        no_open: Annotated[
            bool, typer.Option("--no-open", help="Do not open a browser; print the URL only.")
        ] = False,
        export_only: Annotated[
            bool,
            typer.Option(
                "--export-only",
                help="Write (or reuse) the cached logs and print where they are; no viewer.",
            ),
        ] = False,
        as_json: JsonOpt = False,
        store: StoreOpt = None,
    ) -> None:
        """Open Inspect AI's viewer on a registration's runs, one log per arm.

        The runs are verified, then exported as with export --format inspect (every
        sample's transcript: messages, tool calls and results, model and tool events) to
        the workspace's .cache/inspect-view/ID/KEY/, KEY following the run chain's head:
        reused while no run is added, safe to delete. The viewer is Inspect's own (python
        -m inspect_ai view), on 127.0.0.1, showing the content as untrusted plain text.
        --json prints one document (the cache folder, the logs, the URL) once the viewer
        answers; with --export-only it prints it and returns. Needs prereg-agents[inspect].
        """
        done = cached_export(workspace(ctx), registration_id, store)
        chosen = free_port() if port == 0 else port
        done["url"] = viewer_url(chosen)
        done["serving"] = not export_only
        if export_only:
            emit(done, as_json, lambda: _print_where(done))
            return

        def ready(url: str) -> None:
            emit(done, as_json, lambda: _print_where(done))
            if not as_json:
                err_console.print(f"Inspect's viewer at {url} (Ctrl-C stops it)", markup=False)
            if not no_open:
                webbrowser.open(url)

        serve(Path(done["out"]), chosen, ready)


def _print_where(done: dict[str, Any]) -> None:
    state = "reused" if done["reused"] else "written"
    logs = ", ".join(f"{log['arm']} ({log['samples']} samples)" for log in done["logs"])
    console.print(display(f"{done['registration_id']}: {logs}; logs {state} in {done['out']}"))
    if not done["serving"]:
        console.print(display(f"view them: prereg view {done['registration_id']}"))
