"""``prereg run``, ``export``, ``import`` and ``split show`` (wiring only; see runners.api)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from prereg.commands._common import JsonOpt, workspace
from prereg.core.output import console, emit

split_app = typer.Typer(
    help="Splits of an experiment (dev / validation / test).", no_args_is_help=True
)


def run(
    ctx: typer.Context,
    registration_id: Annotated[str, typer.Argument(help="The registration to run.", metavar="ID")],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Units run at once (asyncio).")
    ] = 4,
    max_units: Annotated[
        int | None, typer.Option("--max-units", min=0, help="Run at most N missing units.")
    ] = None,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="Do not draw the progress bar.")
    ] = False,
    as_json: JsonOpt = False,
    # -- provider options (issue 7); handled in prereg.runners.providers.cli
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
        typer.Option("--prices", help="Price table file (YAML/JSON) overriding the packaged one."),
    ] = None,
) -> None:
    """Run a registration's units (resuming: units already recorded are skipped).

    Records go to runs/ (SQLite, append-only), each stamped with the registration's
    digest. Ctrl-C keeps every finished unit; run again to continue. Infrastructure
    failures are recorded as infra_error and retried on the next run.
    """
    from prereg.runners.api import run_registration
    from prereg.runners.progress import RichProgress

    ws = workspace(ctx)
    progress = None if (as_json or no_progress) else RichProgress(registration_id)
    extra: dict[str, object] = {}
    if dry_run or batch or prices is not None:  # provider options (issue 7)
        from prereg.runners.providers.cli import dry_run_report, provider_summary

        if dry_run:
            dry_run_report(
                ws,
                registration_id,
                batch=batch,
                max_units=max_units,
                prices=prices,
                as_json=as_json,
            )
            return
        summary, extra = provider_summary(
            ws,
            registration_id,
            batch=batch,
            prices=prices,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            as_json=as_json,
        )
    else:
        summary = run_registration(
            ws, registration_id, concurrency=concurrency, max_units=max_units, progress=progress
        )
    data = {**summary.to_json(), **extra}

    def human() -> None:
        table = Table(title=f"run {summary.registration_id}", show_header=False)
        table.add_column("", style="bold")
        table.add_column("", overflow="fold")
        rows = [
            ("digest", summary.registration_digest),
            ("driver", f"{summary.driver} (evidence class {summary.evidence_class})"),
            ("planned units", str(summary.planned)),
            ("skipped (already recorded)", str(summary.skipped_existing)),
            ("completed this run", f"{summary.completed} ({summary.successes} succeeded)"),
            ("infra failures (retried next run)", str(summary.failed)),
            ("remaining", str(summary.remaining)),
            ("spend (measured)", f"${summary.spend_usd:.4f}"),
            ("rate", f"{summary.units_per_s} units/s in {summary.elapsed_s:.2f}s"),
        ]
        if summary.duplicates:
            rows.append(("written meanwhile elsewhere", str(summary.duplicates)))
        if summary.stopped:
            rows.append(("stopped", summary.stopped))
        rows += [(key, str(value)) for key, value in extra.items()]  # provider options
        for key, value in rows:
            table.add_row(key, value)
        console.print(table)

    emit(data, as_json, human)


def export(
    ctx: typer.Context,
    registration_id: Annotated[str, typer.Argument(metavar="ID")],
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="jsonl or csv.")] = "jsonl",
    as_json: JsonOpt = False,
) -> None:
    """Export a registration's run records (one per line / row)."""
    from prereg.core.errors import BadInput
    from prereg.runners.api import export_registration

    if fmt not in ("jsonl", "csv"):
        raise BadInput(f"unknown format '{fmt}' (use jsonl or csv)", field="format")
    chosen: Literal["jsonl", "csv"] = "jsonl" if fmt == "jsonl" else "csv"
    result = export_registration(workspace(ctx), registration_id, chosen, out)
    emit(
        result,
        as_json,
        lambda: console.print(
            f"wrote {result['records']} record(s) of {registration_id} to {out} ({fmt})"
        ),
    )


def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A .jsonl or .csv export.")],
    as_json: JsonOpt = False,
) -> None:
    """Import run records; each must carry the digest of the registration it names."""
    from prereg.runners.api import import_file

    result = import_file(workspace(ctx), file)
    emit(
        result,
        as_json,
        lambda: console.print(
            f"imported {result['imported']} record(s) from {file}; skipped "
            f"{result['skipped_duplicates']} already stored"
        ),
    )


@split_app.command("show")
def split_show(
    ctx: typer.Context,
    experiment: Annotated[str, typer.Argument(help="Experiment folder name.")],
    as_json: JsonOpt = False,
) -> None:
    """Counts per split, intent and polarity (whole clusters go to one split)."""
    from prereg.runners.api import split_summary

    data = split_summary(workspace(ctx), experiment)

    def human() -> None:
        polarities = ("positive", "negative", "optional")
        table = Table(
            title=f"{data['experiment']}: {data['tasks']} tasks in {data['clusters']} clusters"
        )
        table.add_column("split")
        table.add_column("intent")
        for p in polarities:
            table.add_column(p, justify="right")
        table.add_column("tasks", justify="right")
        for split, info in data["splits"].items():
            for intent, counts in info["intents"].items():
                table.add_row(
                    split,
                    intent,
                    *(str(counts.get(p, 0)) for p in polarities),
                    str(sum(counts.values())),
                )
            table.add_row(
                f"[bold]{split}[/]",
                f"[bold]all ({info['clusters']} clusters)[/]",
                *(str(info["polarity"].get(p, 0)) for p in polarities),
                f"[bold]{info['tasks']}[/]",
                end_section=True,
            )
        console.print(table)

    emit(data, as_json, human)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("run")(run)
    app.command("export")(export)
    app.command("import")(import_)
    app.add_typer(split_app, name="split")
