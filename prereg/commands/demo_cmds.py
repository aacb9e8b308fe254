"""``demo``: a bundled draft registered, run on the local host and analysed (wiring only).

Apart from ``analyse`` so that ``analyse`` starts without the run machinery (the
orchestration, the drivers, the progress bars), which only ``demo`` needs. A draft that
registers judges (``--example invokerank``) is also judged, and the gold labels its
experiment ships (keyed by unit, :data:`DEMO_GOLD`) are loaded as ``prereg judge ID
--gold FILE`` loads them, before the analysis. A study with companions
(:data:`DEMO_COMPANIONS`: ``--study toolbottleneck``) registers, runs and analyses each
companion draft after its own, each into its own report (``demo.companions`` in --json).
"""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from prereg.commands._common import JsonOpt, bundled_sources
from prereg.commands.analyse_cmds import Analysed, analyse_and_write
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
from prereg.runners.judging.judge_runs import gold_template, judge_registration, load_gold
from prereg.runners.store.choose import open_store, resolve_store

#: ``prereg demo --example NAME``: the bundled drafts it can run (all on the local host).
DEMO_EXAMPLES = {
    "pilot": PILOT_DRAFT,  # two surfaces, one host (what init names first)
    "hosts": "music-library-hosts.yaml",  # one surface, two simulated hosts
    "factorial": "music-library-factorial.yaml",  # host profile x completion cap, contrasts
    # the InvokeRank seed's design, small: two hosts, selection and execution, sessions,
    # judges per host and gold labels (docs/invokerank.md, "The seed-shaped draft")
    "invokerank": "podcast-invokerank.yaml",
}
#: Gold labels a bundled experiment ships for a demo draft's judges, keyed by unit
#: (``arm``, ``task_id``, ``repeat``): experiment folder and file in the workspace.
DEMO_GOLD = {"podcast-invokerank.yaml": ("podcast-invokerank", "gold/completion-gold.csv")}
DEMO_DRAFT = DEMO_EXAMPLES["pilot"]
#: ``prereg demo --study NAME``: the bundled study drafts (issue 19; a simulated policy).
DEMO_STUDIES = {
    "toolbottleneck": "toolbottleneck-capacity.yaml",
    # the structural holdout (Table 10, Figure 10): a separate draft, docs/toolbottleneck.md
    "toolbottleneck-holdout": "toolbottleneck-holdout.yaml",
    # the seed's separate experiments (issue 42): the completion-cap sweep and crossover
    # (appendix E.1; Figures 2b and 8), the workflow frontier (Figures 3b and 9) and
    # Discovery (availability by retriever, Figure 3c)
    "toolbottleneck-capsweep": "toolbottleneck-capsweep.yaml",
    "toolbottleneck-frontier": "toolbottleneck-frontier.yaml",
    "toolbottleneck-discovery": "toolbottleneck-discovery.yaml",
}
#: Studies whose demo also registers, runs and analyses companion drafts, each into its
#: own report (issue 42: the whole study's figures, seed Figures 2a-11, from one
#: command): the capacity factorial keeps its own draft and digest, and the seed's
#: separate experiments are reported beside it, in this order.
DEMO_COMPANIONS: dict[str, tuple[str, ...]] = {
    "toolbottleneck": (
        "toolbottleneck-holdout",
        "toolbottleneck-capsweep",
        "toolbottleneck-frontier",
        "toolbottleneck-discovery",
    )
}


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
                "hosts on one surface), factorial (profile x cap, with contrasts) or "
                "invokerank (the InvokeRank seed's design, small: two hosts, selection and "
                "execution on a live local server, replicate sessions, judges per host "
                "and gold labels; registered, run, judged and analysed).",
            ),
        ] = "pilot",
        study: Annotated[
            str | None,
            typer.Option(
                "--study",
                help="A bundled study instead: toolbottleneck (the capacity factorial, "
                "eight contrasts, failure census, repairs against switches; simulated policy; "
                "then the structural holdout, the completion-cap sweep, the workflow frontier "
                "and Discovery, each its own registration and report, so one command draws "
                "every figure of the seed) or one of those alone: toolbottleneck-holdout "
                "(Table 10, Figure 10), toolbottleneck-capsweep (Figures 2b and 8), "
                "toolbottleneck-frontier (Figures 3b and 9) or toolbottleneck-discovery "
                "(Figure 3c).",
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
        done, run_summary, judged = _demo_draft(ws, draft, quiet=as_json)
        report, out, data = done.report, done.out, done.data
        also = [
            _demo_draft(ws, DEMO_STUDIES[name], as_json)
            for name in DEMO_COMPANIONS.get(study or "", ())
        ]
        data["demo"] = {
            "workspace": str(ws.root),
            "run": run_summary,
            **({"judge": judged} if judged is not None else {}),
            # each companion's whole report document, with its run (--json carries all),
            # in DEMO_COMPANIONS's order
            **(
                {
                    "companions": [
                        {**a.data, "run": r, **({"judge": j} if j is not None else {})}
                        for a, r, j in also
                    ]
                }
                if also
                else {}
            ),
            "seconds": round(time.monotonic() - started, 2),
        }

        def human() -> None:
            render_terminal.render(report, console)
            for a, _, _ in also:
                render_terminal.render(a.report, console)
            for written in (out, *(a.out for a, _, _ in also)):
                console.print(display(f"report: {written / 'report.html'}", style="bold"))
            console.print(display(f"workspace: {ws.root} (try: prereg -w {ws.root} list)"))

        emit(data, as_json, human)


def _demo_draft(
    ws: Workspace, draft: str, quiet: bool
) -> tuple[Analysed, dict[str, Any], dict[str, Any] | None]:
    """Register a bundled draft, run it on the local host, judge it where it registers
    judges, analyse it and write its report: (the analysis, the run, the judging)."""
    entry = (
        Registry(ws.registry)
        .register(ws.drafts / draft, ws.experiments, display=f"drafts/{draft}")
        .entry
    )
    run_summary = _run_local(ws, entry.id, quiet=quiet)
    judged = _judge_local(ws, entry.id, draft) if entry.judges else None
    done = analyse_and_write(ws, entry.id, Options(command=f"prereg demo (analyse {entry.id})"))
    return done, run_summary, judged


def _run_local(ws: Workspace, reg_id: str, quiet: bool) -> dict[str, Any]:
    """Run (or resume) every unit of the registration with the runners' orchestration."""
    progress = None if quiet else RichProgress(reg_id)
    summary = run_registration(ws, reg_id, concurrency=8, progress=progress)
    return summary_json(summary)


def _judge_local(ws: Workspace, reg_id: str, draft: str) -> dict[str, Any]:
    """Judge the runs with the registered (local, offline) judges, then load the gold
    labels the draft's experiment ships, as ``prereg judge ID --gold FILE`` would."""
    summary = judge_registration(ws, reg_id).to_json()
    out: dict[str, Any] = {"judged": summary.get("judged"), "gold": None}
    if draft in DEMO_GOLD:
        folder, name = DEMO_GOLD[draft]
        gold = unit_gold_to_runs(ws, reg_id, ws.experiments / folder / name)
        out["gold"] = None if gold is None else load_gold(ws, reg_id, gold).to_json()
    return out


def unit_gold_to_runs(ws: Workspace, reg_id: str, key: Path) -> Path | None:
    """The gold file ``--gold`` loads (``run_id,label,annotator``), written beside the
    report from ``key``: labels keyed by unit (``arm,task_id,repeat,label,annotator``).
    Only runs of the registered gold draw (``--gold-template``) are labelled; a unit the
    key does not list stays unlabelled. None when no run of the draw has a label."""
    if not key.is_file():
        return None
    folder = ws.reports / reg_id
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / "gold-template.csv"
    gold_template(ws, reg_id, template, force=True)
    drawn = [row["run_id"] for row in csv.DictReader(io.StringIO(template.read_text()))]
    store = open_store(resolve_store(ws.runs))
    try:
        units = {
            r.record_id: (r.arm, r.task_id, str(r.repeat))
            for r in store.records(registration_id=reg_id)
        }
    finally:
        store.close()
    labels: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for row in csv.DictReader(io.StringIO(key.read_text())):
        unit = (row["arm"], row["task_id"], row["repeat"])
        labels.setdefault(unit, []).append((row["label"], row["annotator"]))
    lines = [
        f"{rid},{label},{annotator}\n"
        for rid in drawn
        if rid in units
        for label, annotator in labels.get(units[rid], [])
    ]
    if not lines:
        return None
    gold = folder / "gold-labels.csv"
    gold.write_text("run_id,label,annotator\n" + "".join(lines))
    return gold
