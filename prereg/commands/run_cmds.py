"""``prereg run``, ``export``, ``import`` and ``split show`` (wiring only; see runners.api)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from prereg.commands._common import (
    PROCESS,
    FlagHelpGroup,
    JsonOpt,
    complete_experiment,
    complete_registration_id,
    completes,
    workspace,
)
from prereg.commands._experiment import workspace_experiment
from prereg.commands.progress import RichProgress
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput
from prereg.core.output import console, emit, err_console
from prereg.core.untrusted import display
from prereg.experiments.split_counts import describe_splits, task_rows
from prereg.registry.pilot import PilotOptions
from prereg.registry.sessions import SessionProgress
from prereg.reports.inspect_export import export_inspect
from prereg.runners.api import run_registration, session_status
from prereg.runners.exchange.export import export_parquet, export_registration, is_stdout
from prereg.runners.exchange.importing import import_file
from prereg.runners.exchange.inspect_log import import_inspect
from prereg.runners.judging.exchange import export_with_verdicts, import_with_verdicts
from prereg.runners.orchestrate import RunSummary
from prereg.runners.providers.batch import BatchStatus
from prereg.runners.providers.credentials import redact, redact_obj
from prereg.runners.providers.prices import load_prices, spend_measured
from prereg.runners.providers.runs import estimate_run
from prereg.runners.providers.summary import provider_run
from prereg.runners.store.choose import ENV, is_postgres, resolve_store
from prereg.runners.workers import run_workers

split_app = typer.Typer(
    help="Splits of an experiment (dev / validation / test).",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)


def run(
    ctx: typer.Context,
    registration_id: Annotated[
        str,
        typer.Argument(
            help="The registration to run.", metavar="ID", autocompletion=complete_registration_id
        ),
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Units run at once (asyncio).")
    ] = 4,
    max_units: Annotated[
        int | None, typer.Option("--max-units", min=0, help="Run at most N missing units.")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Pilot: only the first N tasks of the split (as `split show --tasks` lists "
            "them, after --task and --intent), every arm and repeat. Exploratory only.",
        ),
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", help="Pilot: only this task (repeatable). Exploratory only."),
    ] = None,
    arm: Annotated[
        list[str] | None,
        typer.Option("--arm", help="Pilot: only this arm (repeatable). Exploratory only."),
    ] = None,
    intent: Annotated[
        list[str] | None,
        typer.Option(
            "--intent", help="Pilot: only this intent's tasks (repeatable). Exploratory only."
        ),
    ] = None,
    session: Annotated[
        int | None,
        typer.Option(
            "--session",
            metavar="K",
            help="Only replicate session K's units (1-based; design.sessions), so sessions "
            "can run on different days; the other sessions are untouched. Refused on the "
            "locked split (its confirmatory run is one claim, run whole).",
            show_default=False,
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache/--no-cache",
            help="Pilot: answer a request from the workspace's response cache when this "
            "unit sent it before (provider hosts; records labelled evidence class "
            "'cached', never pooled with fresh runs). Exploratory only.",
        ),
    ] = False,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="Do not draw the progress bar.")
    ] = False,
    as_json: JsonOpt = False,
    # -- provider options (issue 7); run by prereg.runners.providers (runs, summary)
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print units, expected requests and an upper bound on spend from "
            "the budgets and the price table; send and write nothing.",
        ),
    ] = False,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Single-turn runs through the provider's batch API (anthropic, "
            "openai); a pending batch is resumed, never resubmitted.",
        ),
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="Price table file (YAML/JSON) overriding the packaged one; read and "
            "checked whatever the host (a missing file is exit 2).",
        ),
    ] = None,
    store: StoreOpt = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="Worker processes sharing the units (and --concurrency, the total) to "
            "use more than one core; see docs/scaling.md.",
        ),
    ] = 1,
) -> None:
    """Run a registration's units (resuming: units already recorded are skipped).

    Records go to runs/ (SQLite, append-only), or to --store postgresql://... shared by
    any number of workers on any machines (each unit claimed by one), each stamped with
    the registration's digest. Ctrl-C keeps every finished unit; run again to continue.
    Infrastructure failures are recorded as infra_error and retried on the next run.

    With replicate sessions (design.sessions), --session K runs session K alone (a later
    day's session, say) and the summary lists every session's progress.
    """
    ws = workspace(ctx)
    pilot = PilotOptions(
        tasks=tuple(task or ()),
        arms=tuple(arm or ()),
        intents=tuple(intent or ()),
        limit=limit,
        cache=cache,
        session=session,
    )
    if cache and batch:
        raise BadInput(
            "--cache answers synchronous requests; a --batch run sends its requests in one "
            "provider batch: use one or the other",
            field="cache",
        )
    progress = None if (as_json or no_progress) else RichProgress(registration_id)
    extra: dict[str, Any] = {"pilot": pilot.describe()} if pilot.is_pilot else {}
    if workers > 1 and not dry_run:
        refuse_workers_with(batch=batch, prices=prices)
    if prices is not None:  # checked for every host: the local one would never read it
        load_prices(prices)
    if dry_run or batch or prices is not None:  # provider options (issue 7)
        if batch and not dry_run:
            refuse_batch_with_shared_store(store)
        if dry_run:
            data = estimate_run(
                ws,
                registration_id,
                batch=batch,
                max_units=max_units,
                prices=prices,
                store=store,
                pilot=pilot,
            )
            data.update(extra)
            data.update(session_fields(session, []))
            emit(data, as_json, lambda: _print_dry_run(data))
            return
        summary, provider_extra = provider_run(
            ws,
            registration_id,
            batch=batch,
            prices=prices,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            on_poll=_batch_poll_printer(as_json) if batch else None,
            store=store,
            pilot=pilot,
        )
        extra.update(provider_extra)
    elif workers == 1:
        summary = run_registration(
            ws,
            registration_id,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            store=store,
            exits_after=PROCESS.program,
            pilot=pilot,
        )
    else:
        summary = run_workers(
            ws,
            registration_id,
            workers=workers,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            store=store,
            exits_after=PROCESS.program,
            pilot=pilot,
        )
    extra = redact_obj(extra)  # batch ids and the like come from the provider
    sessions = session_status(ws, registration_id, store=store)
    data = {**summary_json(summary), **extra, **session_fields(session, sessions)}

    def human() -> None:
        table = Table(title=display(f"run {summary.registration_id}"), show_header=False)
        table.add_column("", style="bold")
        table.add_column("", overflow="fold")
        rows = [
            ("digest", summary.registration_digest),
            ("driver", f"{summary.driver} (evidence class {summary.evidence_class})"),
            (
                "planned units",
                str(summary.planned)
                + (" (a pilot's selection; exploratory)" if pilot.selects else "")
                + (f" (session {session} of {len(sessions)})" if session is not None else ""),
            ),
            ("skipped (already recorded)", str(summary.skipped_existing)),
            ("completed this run", f"{summary.completed} ({summary.successes} succeeded)"),
            ("infra failures (retried next run)", str(summary.failed)),
            ("remaining", str(summary.remaining)),
            spend_row(summary),
            ("rate", f"{summary.units_per_s} units/s in {summary.elapsed_s:.2f}s"),
        ]
        if summary.workers > 1:
            rows.append(("worker processes", str(summary.workers)))
        if summary.duplicates:
            rows.append(("written meanwhile elsewhere", str(summary.duplicates)))
        if summary.stopped:
            rows.append(("stopped", summary.stopped))
        rows += [(key, str(value)) for key, value in extra.items()]  # provider options
        rows += [("replicate sessions", s.text()) for s in sessions]
        for key, value in rows:
            table.add_row(display(key), display(value))
        console.print(table)

    emit(data, as_json, human)


def session_fields(session: int | None, sessions: list[SessionProgress]) -> dict[str, Any]:
    """``run --json``'s session keys: the session run (``--session K``), and every
    replicate session's progress whatever this run selected (none without sessions)."""
    out: dict[str, Any] = {} if session is None else {"session": session}
    if sessions:
        out["sessions"] = [s.to_json() for s in sessions]
    return out


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """``run --json``'s document: spend is null where the hosts price nothing (the
    local and replay hosts; their records' cost is null), never a measured $0."""
    data = summary.to_json()
    data["spend_measured"] = spend_measured(summary.driver.split("+"))
    if not data["spend_measured"]:
        data["spend_usd"] = None
    return data


def spend_row(summary: RunSummary) -> tuple[str, str]:
    """The summary's spend line: the measured dollars, or "not measured"."""
    if spend_measured(summary.driver.split("+")):
        return ("spend (measured)", f"${summary.spend_usd:.4f}")
    return ("spend", f"not measured (the {summary.driver} host prices nothing)")


def export(
    ctx: typer.Context,
    registration_id: Annotated[
        str, typer.Argument(metavar="ID", autocompletion=complete_registration_id)
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="File to write; - writes to standard output.",
        ),
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            autocompletion=completes("jsonl", "csv", "parquet", "inspect"),
            help="jsonl, csv, parquet (prereg-agents[parquet]) or inspect "
            "(prereg-agents[inspect]: one Inspect AI log per arm in the folder --out).",
        ),
    ] = "jsonl",
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Export a registration's run records (one per line / row), hash-chain links included.

    Refuses (exit 2) a target inside the workspace's registry/ or runs/, a folder, and an
    existing file unless --force. --out - writes the records to standard output (the
    summary line goes to stderr; --json is refused there, stdout holding the records).
    A registration's verdicts and gold labels, if it has any, go to OUT.verdicts.jsonl
    beside the file (chains verified first); the run file is the same either way.
    """
    if fmt not in ("jsonl", "csv", "parquet", "inspect"):
        raise BadInput(
            f"unknown format '{fmt}' (use jsonl, csv, parquet or inspect)", field="--format"
        )
    if fmt == "inspect":
        done = export_inspect(workspace(ctx), registration_id, out, force=force, store=store)
        emit(done, as_json, lambda: console.print(display(_inspect_line(done))))
        return
    chosen: Literal["jsonl", "csv"] = "jsonl" if fmt == "jsonl" else "csv"
    to_stdout = is_stdout(out)
    if to_stdout and as_json:
        raise BadInput(
            "--json cannot go with --out -: standard output carries the records", field="--json"
        )
    ws = workspace(ctx)

    def write() -> dict[str, Any]:
        if fmt == "parquet":
            return export_parquet(ws, registration_id, out, force=force, store=store)
        return export_registration(ws, registration_id, chosen, out, force=force, store=store)

    # the registration's verdicts and gold labels, if any, go to OUT.verdicts.jsonl
    result = export_with_verdicts(ws, registration_id, out, write, force=force)
    where = "standard output" if to_stdout else str(out)
    text = f"wrote {result['records']} record(s) of {registration_id} to {where} ({fmt})"
    if "verdicts_out" in result:
        text += (
            f"; {result['verdicts']} verdict(s) and {result['gold']} gold label(s) to "
            f"{result['verdicts_out']}"
        )
    line = display(text)
    note = display(result.get("verdicts_note", ""))
    emit(result, as_json, lambda: (err_console if to_stdout else console).print(line))
    if note and not as_json:
        err_console.print(note)


def _inspect_line(done: dict[str, Any]) -> str:
    logs = ", ".join(f"{log['arm']}: {log['samples']} sample(s)" for log in done["logs"])
    return f"wrote {len(done['logs'])} Inspect log(s) to {done['out']} ({logs})"


def import_(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="A .jsonl, .csv or .parquet export, or an Inspect AI log.")
    ],
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="prereg (an export of prereg's) or inspect (an Inspect AI .eval or .json "
            "log; needs prereg-agents[inspect] and --registration).",
        ),
    ] = "prereg",
    registration_id: Annotated[
        str | None,
        typer.Option(
            "--registration",
            metavar="ID",
            help="With --from inspect: the registration (host driver inspect) whose planned "
            "units the log's samples are.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Import run records: whole, intact chains of units the registration plans.

    Each record must carry the digest of a registration of this workspace; each
    registration's records must form an intact hash chain; a record already stored must
    be the same record (an edited export is refused, exit 3, nothing written). A
    FILE.verdicts.jsonl beside it (written by export) is checked before any run is
    written and its verdicts and gold labels imported after the runs.

    --from inspect maps an Inspect AI log's samples (id: task id, epoch: repeat + 1) onto
    the units of --registration; a log whose arm, model, tasks or epochs do not match is
    refused (exit 3, nothing written). Its runs carry evidence class inspect.
    """
    if source not in ("prereg", "inspect"):
        raise BadInput(f"unknown source '{source}' (use prereg or inspect)", field="--from")
    if source == "inspect":
        if registration_id is None:
            raise BadInput("--from inspect needs --registration ID", field="--registration")
        result = import_inspect(workspace(ctx), file, registration_id, store=store)
    else:
        if registration_id is not None:
            raise BadInput(
                "--registration goes with --from inspect (an export names its registration)",
                field="--registration",
            )
        ws = workspace(ctx)
        # FILE.verdicts.jsonl beside an export: checked before the runs, imported after
        result = import_with_verdicts(
            ws,
            file,
            lambda: import_file(ws, file, store=store),
            resolve_store(ws.runs, store),
        )
    text = (
        f"imported {result['imported']} record(s) from {file}; "
        f"{result['already_stored']} identical record(s) were already stored"
    )
    if "verdicts_file" in result:
        text += (
            f"; {result['verdicts_imported']} verdict(s) and {result['gold_imported']} gold "
            f"label(s) from {result['verdicts_file']}"
        )
    emit(result, as_json, lambda: console.print(display(text)))


@split_app.command("show")
def split_show(
    ctx: typer.Context,
    experiment: Annotated[
        str, typer.Argument(help="Experiment folder name.", autocompletion=complete_experiment)
    ],
    tasks: Annotated[
        bool,
        typer.Option(
            "--tasks",
            help="Also list every task: id, split, intent, cluster, polarity (no prompt).",
        ),
    ] = False,
    only: Annotated[
        str | None,
        typer.Option("--split", help="With --tasks: only this split's tasks.", metavar="NAME"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Counts per split, intent and polarity (whole clusters go to one split)."""
    loaded = workspace_experiment(workspace(ctx), experiment)
    data = describe_splits(loaded)
    if only is not None and not tasks:
        raise BadInput("--split NAME lists one split's tasks: use it with --tasks", field="--split")
    if tasks:
        try:
            data["task_list"] = task_rows(loaded, only)
        except ValueError as exc:
            raise BadInput(str(exc), field="--split") from None

    def human() -> None:
        polarities = ("positive", "negative", "optional")
        table = Table(
            title=display(
                f"{data['experiment']}: {data['tasks']} tasks in {data['clusters']} clusters"
            )
        )
        table.add_column("split")
        table.add_column("intent")
        for p in polarities:
            table.add_column(p, justify="right")
        table.add_column("tasks", justify="right")
        for split, info in data["splits"].items():
            for intent, counts in info["intents"].items():
                table.add_row(
                    display(split),
                    display(intent),
                    *(str(counts.get(p, 0)) for p in polarities),
                    str(sum(counts.values())),
                )
            table.add_row(
                display(split, "bold"),
                display(f"all ({info['clusters']} clusters)", "bold"),
                *(str(info["polarity"].get(p, 0)) for p in polarities),
                display(info["tasks"], "bold"),
                end_section=True,
            )
        console.print(table)
        if "task_list" in data:
            listing = Table(title=display(f"{len(data['task_list'])} tasks"))
            for column in ("id", "split", "intent", "cluster", "polarity"):
                listing.add_column(column, no_wrap=column == "id")
            for row in data["task_list"]:
                listing.add_row(*(display(row[c]) for c in row))
            console.print(listing)

    emit(data, as_json, human)


def _print_dry_run(data: dict[str, Any]) -> None:
    """The ``--dry-run`` report (:func:`prereg.runners.providers.runs.estimate_run`)."""
    table = Table(
        title=display(f"dry run {data['registration_id']} (nothing sent, nothing written)"),
        show_header=False,
    )
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")
    requests = data["requests"]
    bound = data["spend_upper_bound_usd"]
    rows = [
        ("driver", f"{data['driver']} {data['model'] or ''}".strip()),
        ("path", "batch" if data["batch"] else "synchronous"),
        (
            "units",
            f"{data['units_to_run']} to run ({data['units_recorded']} of "
            f"{data['units_planned']} already recorded)",
        ),
        ("requests", f"{requests['min']} to {requests['max']}"),
        ("spend upper bound", "unknown" if bound is None else f"${bound:.4f}"),
        (
            "spend cap (registered)",
            "none" if data["spend_cap_usd"] is None else f"${data['spend_cap_usd']:.4f}",
        ),
        (
            "spent so far",
            f"${data['spent_usd']:.4f}"
            if spend_measured(str(data["driver"]).split("+"))
            else f"not measured (the {data['driver']} host prices nothing)",
        ),
    ]
    if data["price_table"]:
        table_info = data["price_table"]
        rows.append(
            (
                "price table",
                f"{table_info['version']} ({table_info['date']}, {table_info['origin']})",
            )
        )
    rows += [("assumes", a) for a in data["assumptions"]]
    rows += [("note", n) for n in data["notes"]]
    for key, value in rows:
        table.add_row(display(key), display(value))
    console.print(table)
    if len(data["arms"]) > 1:
        console.print(_dry_run_arms(data["arms"]))


def _dry_run_arms(arms: dict[str, Any]) -> Table:
    """Units, requests and spend bound per arm (issue 13, item 3): arms may run on
    different hosts and budgets, so the totals alone hide where the spend goes."""
    table = Table(title="per arm")
    for column in ("arm", "host", "units", "requests", "spend bound"):
        table.add_column(column, overflow="fold")
    for arm, a in arms.items():
        requests = a["requests"]
        bound = a["spend_upper_bound_usd"]
        table.add_row(
            display(arm),
            display(f"{a['driver']} {a['model'] or ''}".strip()),
            str(a["units_to_run"]),
            f"{requests['min']} to {'unbounded' if requests['max'] is None else requests['max']}",
            "unknown" if bound is None else f"${bound:.4f}",
        )
    return table


def _batch_poll_printer(as_json: bool) -> Callable[[BatchStatus], None]:
    """Each poll of a batch as a line on stderr (nothing under ``--json``)."""
    status_console = Console(stderr=True)

    def on_poll(status: BatchStatus) -> None:
        if not as_json:
            line = f"batch {status.batch_id}: {status.status} ({status.done}/{status.total} done)"
            status_console.print(display(redact(line)))

    return on_poll


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("run")(run)
    app.command("export")(export)
    app.command("import")(import_)
    app.add_typer(split_app, name="split")


def refuse_workers_with(*, batch: bool, prices: Path | None) -> None:
    """``--workers`` runs the registered hosts' synchronous path in every worker: a batch
    is one submission, and a price table file is read by the drivers of one process."""
    if batch:
        raise BadInput(
            "--workers does not apply to --batch: a batch is submitted once and polled; run "
            "it without --workers",
            field="workers",
        )
    if prices is not None:
        raise BadInput(
            "--workers does not take --prices: set PREREG_PRICES to the price table file "
            "instead (every worker reads it)",
            field="workers",
        )


def refuse_batch_with_shared_store(store: str | None) -> None:
    """``--batch`` with a PostgreSQL store: refused (exit 2) before anything is sent.

    A submitted batch is remembered in the workspace (``runs/``, so a pending one is
    resumed and never paid twice); workers on other machines sharing the PostgreSQL store
    would not see it and would submit the same units again. A store shared by several
    machines claims each unit for one worker instead (plain ``run``)."""
    if is_postgres(resolve_store(Path("runs"), store)):
        raise BadInput(
            "--batch remembers its submitted batches in this workspace's runs/ folder, "
            "which workers on other machines sharing a PostgreSQL store cannot see (each "
            "would pay for the same units): run batches against the workspace's SQLite "
            "store, or run without --batch (units are then claimed by one worker each)",
            field="--store" if store else ENV,
        )
