"""``prereg judge``: the registered judges' verdicts (wiring only; see runners.judging)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from prereg.commands._common import JsonOpt, complete_registration_id, workspace
from prereg.commands.progress import JudgeProgress
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.runners.judging.exchange import export_verdicts, import_verdicts
from prereg.runners.judging.judge_runs import (
    add_post_hoc_judge,
    estimate,
    judge_registration,
    load_gold,
)
from prereg.runners.judging.judge_runs import gold_template as make_template
from prereg.runners.store.choose import resolve_store


def judge(
    ctx: typer.Context,
    registration_id: Annotated[
        str,
        typer.Argument(
            help="The registration to judge.", metavar="ID", autocompletion=complete_registration_id
        ),
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Verdicts asked at once.")
    ] = 4,
    max_verdicts: Annotated[
        int | None, typer.Option("--max-verdicts", min=0, help="Ask at most N verdicts.")
    ] = None,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="Do not draw the progress bar.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the verdicts still needed per judge and an upper bound on spend; "
            "send and write nothing.",
        ),
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="Price table file (YAML/JSON) overriding the packaged one."),
    ] = None,
    gold: Annotated[
        Path | None,
        typer.Option(
            "--gold",
            help="Load gold labels (CSV or JSONL: run_id, label, annotator) into the "
            "append-only gold table instead of judging; a label once stored never changes.",
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            help="Write the registration's verdicts and gold labels, chain links included, "
            "to this JSONL file (prereg export writes it beside the runs as "
            "FILE.verdicts.jsonl); nothing is judged.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace --export or --gold-template if it exists.")
    ] = False,
    import_file: Annotated[
        Path | None,
        typer.Option(
            "--import",
            help="Import verdicts and gold labels exported with --export (chains verified, "
            "the runs imported first); nothing is judged.",
        ),
    ] = None,
    gold_template: Annotated[
        Path | None,
        typer.Option(
            "--gold-template",
            help="Write a CSV of the runs in the registered gold draw (judge.gold_sample), "
            "label and annotator empty, for people to fill in and load with --gold.",
        ),
    ] = None,
    add_judge: Annotated[
        Path | None,
        typer.Option(
            "--add-judge",
            help="Add a judge after registration (a post-hoc rubric revision): FILE is one "
            "judge entry as under 'judge:', its rubric read relative to FILE. Needs "
            "--reason. Its verdicts are then asked about the same runs (nothing is re-run) "
            "and reported as post hoc: exploratory, never the verdict. Nothing is judged.",
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Why the judge is added (with --add-judge)."),
    ] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Judge every run of a registration that needs a verdict of its registered judges.

    Verdicts are their own append-only records (runs/verdicts.sqlite), one per run and
    judge (configuration and rubric); run again to resume: judged runs are skipped. An
    answer that does not parse is recorded as unparseable, never guessed. The spend cap is
    the registration's budgets.spend_usd, shared with its runs. With --gold FILE, people's
    labels of the runs are checked row by row (exit 2 naming file, line and field, nothing
    written) and appended to the hash-chained gold table; nothing is judged. --export
    and --import carry verdicts and gold labels between workspaces, chains verified.
    """
    ws = workspace(ctx)
    if add_judge is not None:
        line = add_post_hoc_judge(ws, registration_id, add_judge, reason or "")
        data = {
            "registration_id": registration_id,
            "judge": line["judge"].get("id") or line["judge"].get("outcome"),
            "judge_digest": line["judge_digest"],
            "rubric_digest": line["rubric"],
            "reason": line["reason"],
            "ledger_seq": line["seq"],
            "post_hoc": True,
        }
        emit(data, as_json, lambda: _print_table(f"judge added to {registration_id}", _items(data)))
        return
    if reason is not None:
        raise BadInput("--reason goes with --add-judge", field="reason")
    location = resolve_store(ws.runs, store)
    chosen = None if prices is None else str(prices)
    if gold_template is not None:
        data = make_template(ws, registration_id, gold_template, location, force=force)
        emit(data, as_json, lambda: _print_table(f"gold draw {registration_id}", _items(data)))
        return
    if export is not None:
        data = export_verdicts(ws, registration_id, export, force=force)
        emit(data, as_json, lambda: _print_table(f"export {registration_id}", _items(data)))
        return
    if import_file is not None:
        data = import_verdicts(ws, registration_id, import_file, location)
        emit(data, as_json, lambda: _print_table(f"import {registration_id}", _items(data)))
        return
    if gold is not None:
        loaded = load_gold(ws, registration_id, gold, location)
        rows = [
            ("file", f"{loaded.file} ({loaded.file_digest[:19]}...)"),
            ("labels added", str(loaded.added)),
            ("already stored (same label)", str(loaded.already_stored)),
            ("annotators", ", ".join(loaded.annotators)),
            *[(f"labelled runs: {k}", str(v)) for k, v in loaded.runs.items()],
        ]
        emit(loaded.to_json(), as_json, lambda: _print_table(f"gold {registration_id}", rows))
        return
    if dry_run:
        data = estimate(ws, registration_id, chosen, location)
        emit(data, as_json, lambda: _print_table(f"dry run {registration_id}", _dry_rows(data)))
        return
    progress = None if (as_json or no_progress) else JudgeProgress(f"judge {registration_id}")
    summary = judge_registration(
        ws,
        registration_id,
        concurrency=concurrency,
        max_verdicts=max_verdicts,
        progress=progress,
        prices=chosen,
        runs_store=location,
    )
    data = summary.to_json()
    rows = [
        ("digest", summary.registration_digest),
        *[
            (
                f"judge {key}",
                f"{c['judged']} judged ({c['unparseable']} unparseable) of {c['needed']} needed",
            )
            for key, c in summary.judges.items()
        ],
        ("infra failures (asked again next time)", str(summary.failed)),
        ("remaining", str(summary.remaining)),
        ("spend (measured, verdicts)", f"${summary.spend_usd:.4f}"),
    ]
    if summary.stopped:
        rows.append(("stopped", summary.stopped))
    emit(data, as_json, lambda: _print_table(f"judge {summary.registration_id}", rows))


def _items(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(key, str(value)) for key, value in data.items()]


def _dry_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("verdicts needed", str(data["verdicts_needed"]))]
    for key, row in data["judges"].items():
        bound = row["spend_bound_usd"]
        shown = "unknown (no price)" if bound is None else f"${bound:.4f}"
        rows.append(
            (
                f"judge {key}",
                f"{row['driver']} {row['model']}: {row['requests']} request(s), at most {shown}",
            )
        )
    cap = data["spend_cap_usd"]
    rows.append(("spend cap (registered)", "none" if cap is None else f"${cap:.4f}"))
    return rows


def _print_table(title: str, rows: list[tuple[str, str]]) -> None:
    table = Table(title=display(title), show_header=False)
    table.add_column("", style="bold")
    table.add_column("", overflow="fold")
    for key, value in rows:
        table.add_row(display(key), display(value))
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command("judge")(judge)
