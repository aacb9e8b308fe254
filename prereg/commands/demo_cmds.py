"""``demo``: a bundled draft registered, run on the local host and analysed (wiring only).

Apart from ``analyse`` so that ``analyse`` starts without the run machinery (the
orchestration, the drivers, the progress bars), which only ``demo`` needs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from prereg.commands._common import JsonOpt, bundled_sources
from prereg.commands.analyse_cmds import analyse_and_write
from prereg.commands.progress import RichProgress
from prereg.commands.registry_cmds import PILOT_DRAFT
from prereg.commands.run_cmds import summary_json
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.core.workspace import Workspace, init_workspace
from prereg.registry.registrations import Registry
from prereg.reports.analysis import Options
from prereg.reports.render import terminal as render_terminal
from prereg.runners.api import run_registration

#: ``prereg demo --example NAME``: the bundled drafts it can run (all on the local host).
DEMO_EXAMPLES = {
    "pilot": PILOT_DRAFT,  # two surfaces, one host (what init names first)
    "hosts": "music-library-hosts.yaml",  # one surface, two simulated hosts
    "factorial": "music-library-factorial.yaml",  # host profile x completion cap, contrasts
}
DEMO_DRAFT = DEMO_EXAMPLES["pilot"]
#: ``prereg demo --study NAME``: the bundled study drafts (issue 19; a simulated policy).
DEMO_STUDIES = {"toolbottleneck": "toolbottleneck-capacity.yaml"}


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        directory: Annotated[
            Path | None,
            typer.Option(
                "--dir",
                help="Workspace folder for the demo (default: $PREREG_DEMO_DIR, else "
                "./prereg-demo).",
                show_default=False,
            ),
        ] = None,
        example: Annotated[
            str,
            typer.Option(
                "--example",
                help="Which bundled draft: pilot (two surfaces), hosts (two simulated "
                "hosts on one surface) or factorial (profile x cap, with contrasts).",
            ),
        ] = "pilot",
        study: Annotated[
            str | None,
            typer.Option(
                "--study",
                help="A bundled study instead: toolbottleneck (the capacity factorial, "
                "eight contrasts, failure census, repairs against switches; simulated policy).",
                show_default=False,
            ),
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Init a workspace, register a bundled draft, run it on the local host, analyse it.

        Needs no network and no API key. Safe to re-run: registration is idempotent and
        completed runs are kept (resume).
        """
        if example not in DEMO_EXAMPLES:
            raise BadInput(
                f"no example '{example}' (examples: {', '.join(DEMO_EXAMPLES)})",
                field="--example",
            )
        if study is not None and study not in DEMO_STUDIES:
            raise BadInput(
                f"no study '{study}' (studies: {', '.join(DEMO_STUDIES)})", field="--study"
            )
        draft = DEMO_STUDIES[study] if study is not None else DEMO_EXAMPLES[example]
        root = directory or Path(os.environ.get("PREREG_DEMO_DIR") or "prereg-demo")
        started = time.monotonic()
        init_workspace(root, bundled_sources())
        ws = Workspace(root.resolve())
        entry = (
            Registry(ws.registry)
            .register(ws.drafts / draft, ws.experiments, display=f"drafts/{draft}")
            .entry
        )
        run_summary = _run_local(ws, entry.id, quiet=as_json)
        done = analyse_and_write(ws, entry.id, Options(command=f"prereg demo (analyse {entry.id})"))
        report, out, data = done.report, done.out, done.data
        data["demo"] = {
            "workspace": str(ws.root),
            "run": run_summary,
            "seconds": round(time.monotonic() - started, 2),
        }

        def human() -> None:
            render_terminal.render(report, console)
            console.print(display(f"report: {out / 'report.html'}", style="bold"))
            console.print(display(f"workspace: {ws.root} (try: prereg -w {ws.root} list)"))

        emit(data, as_json, human)


def _run_local(ws: Workspace, reg_id: str, quiet: bool) -> dict[str, Any]:
    """Run (or resume) every unit of the registration with the runners' orchestration."""
    progress = None if quiet else RichProgress(reg_id)
    summary = run_registration(ws, reg_id, concurrency=8, progress=progress)
    return summary_json(summary)
