"""``analyse``, ``compare``, ``demo``: the report commands (wiring only).

The work happens in :mod:`prereg.reports`; these functions parse options, call
it, write the files and print.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from prereg.commands._common import JsonOpt, bundled_sources, workspace
from prereg.commands.progress import RichProgress
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.core.workspace import Workspace, init_workspace
from prereg.registry.registry import Registry
from prereg.reports import render_terminal
from prereg.reports.analysis import Options, analyse
from prereg.reports.compare import compare, describe
from prereg.reports.model import Report
from prereg.reports.write import write_report
from prereg.runners.api import run_registration

#: ``prereg demo --example NAME``: the bundled drafts it can run (all on the local host).
DEMO_EXAMPLES = {
    "pilot": "music-library-pilot.yaml",  # two surfaces, one host
    "hosts": "music-library-hosts.yaml",  # one surface, two simulated hosts
    "factorial": "music-library-factorial.yaml",  # host profile x completion cap, contrasts
}
DEMO_DRAFT = DEMO_EXAMPLES["pilot"]
#: ``prereg demo --study NAME``: the bundled study drafts (issue 19; a simulated policy).
DEMO_STUDIES = {"toolbottleneck": "toolbottleneck-capacity.yaml"}


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused (then restored as it was) while one analysis
    runs. Loading a large store allocates millions of objects that all stay alive, so
    every collection walks them again and finds nothing: on 27,000 runs about a quarter
    of the command's CPU time. Reference counting still frees everything acyclic; the
    few cycles made meanwhile (figures, say) wait for the next collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _analyse(ws: Workspace, reg_id: str, options: Options) -> tuple[dict[str, Any], Report, Path]:
    with _no_cycle_collection():
        report = analyse(ws, reg_id, options)
        out = write_report(ws, report)
        data = report.to_json()
    data["report_dir"] = str(out)
    data["files"] = {name: str(out / name) for name in ("report.json", "report.md", "report.html")}
    return data, report, out


def register(app: typer.Typer) -> None:
    @app.command("analyse")
    def analyse_cmd(
        ctx: typer.Context,
        reg_id: Annotated[str, typer.Argument(metavar="ID", help="Registration id.")],
        allow_incomplete: Annotated[
            bool,
            typer.Option(
                "--allow-incomplete",
                help="Analyse an incomplete run set; the report is then "
                "exploratory and the verdict 'incomplete'.",
            ),
        ] = False,
        explore: Annotated[
            bool,
            typer.Option(
                "--explore",
                help="Label the whole report exploratory. The verdict field is "
                "computed exactly as without it; it is not a confirmatory claim.",
            ),
        ] = False,
        as_json: JsonOpt = False,
        store: StoreOpt = None,
    ) -> None:
        """The registered analysis and its mechanical verdict, written to reports/ID/.

        Refuses (exit 3) runs that carry another digest or mix evidence classes, and
        (exit 4) an incomplete run set unless --allow-incomplete. Writes report.json,
        report.md and report.html (with figures); an exploratory report of a
        confirmatory registration goes to reports/ID/exploratory/.
        """
        ws = workspace(ctx)
        flags = [
            f for f, on in (("--allow-incomplete", allow_incomplete), ("--explore", explore)) if on
        ]
        options = Options(
            allow_incomplete=allow_incomplete,
            explore=explore,
            command=" ".join(["prereg analyse", reg_id, *flags]),
            store=store,
        )
        data, report, out = _analyse(ws, reg_id, options)
        emit(
            data,
            as_json,
            lambda: render_terminal.render(report, console, ws.relative(out / "report.html")),
        )

    @app.command("compare")
    def compare_cmd(
        ctx: typer.Context,
        a: Annotated[str, typer.Argument(metavar="A", help="First registration id.")],
        b: Annotated[str, typer.Argument(metavar="B", help="Second registration id.")],
        as_json: JsonOpt = False,
    ) -> None:
        """Compare two registrations' runs: each one's own result, and the paired change.

        Refuses (exit 4, saying which) when the corpora, evidence classes, models or
        outcomes differ; (exit 3) when either's runs carry a foreign digest.
        """
        ws = workspace(ctx)
        result = compare(ws, a, b)

        def human() -> None:
            for line in describe(result):
                console.print(display(line))

        emit(result.to_json(), as_json, human)

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
        data, report, out = _analyse(
            ws, entry.id, Options(command=f"prereg demo (analyse {entry.id})")
        )
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
    return dict(summary.to_json())
