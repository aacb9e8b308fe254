"""``prereg telemetry import``, ``show`` and ``compare`` (wiring only; the format and the
log are prereg.runners.exchange.telemetry, the comparison
prereg.reports.invokerank.telemetry)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from prereg.commands._common import (
    FlagHelpGroup,
    JsonOpt,
    complete_registration_id,
    workspace,
)
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.registry.registrations import Registry
from prereg.registry.verify import verified_entry
from prereg.reports.invokerank.telemetry import compare, synthetic_counts, telemetry_counts
from prereg.reports.load import load_runs
from prereg.runners.exchange.telemetry import import_telemetry, stored_rows, summary

telemetry_app = typer.Typer(
    help="Telemetry (evidence class T): import observed calls; compare them with synthetic runs.",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)


@telemetry_app.command("import")
def import_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="A telemetry JSON Lines file.")],
    as_json: JsonOpt = False,
) -> None:
    """Import an integration's observed tool calls (JSON Lines: integration, host, tool,
    outcome, hour; optional duration_ms, count, intent, first) into the append-only
    registry/telemetry.jsonl. The whole file is checked first (exit 2 naming the line and
    field; nothing written); a file imported before is refused (docs/invokerank.md,
    "Telemetry and the S-vs-T comparison")."""
    ws = workspace(ctx)
    data = import_telemetry(ws.registry, file)
    emit(
        data,
        as_json,
        lambda: console.print(
            display(f"imported {data['calls']} call(s) in {data['rows']} row(s) from {file}")
        ),
    )


@telemetry_app.command("show")
def show_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Imported telemetry calls per integration and client host (the log verified first)."""
    data = summary(stored_rows(workspace(ctx).registry))

    def human() -> None:
        table = Table(title="telemetry (evidence class T)")
        for col in ("integration", "host", "calls"):
            table.add_column(col)
        for integration, hosts in data["calls"].items():
            for host, n in hosts.items():
                table.add_row(display(integration), display(host), str(n))
        console.print(table)

    emit(data, as_json, human)


@telemetry_app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    registration: Annotated[
        str,
        typer.Argument(
            help="Registration id (its runs are S).", autocompletion=complete_registration_id
        ),
    ],
    arm: Annotated[str, typer.Option("--arm", help="The arm whose runs are compared.")],
    host: Annotated[
        str, typer.Option("--host", help="The telemetry's client host the arm's host stands for.")
    ],
    integration: Annotated[
        str | None,
        typer.Option(
            "--integration", help="The telemetry's integration id (default: the arm's surface)."
        ),
    ] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The S-vs-T comparison (InvokeRank 7.9): the arm's tool mix of first calls to its
    integration beside the host's real calls to it, their total variation distance and
    rank correlation, each withheld with the reason when too few."""
    ws = workspace(ctx)
    registry = Registry(ws.registry)
    entry = verified_entry(registry, registration)
    arms = {a.id: a for a in entry.registration.arms}
    if arm not in arms:
        raise BadInput(f"unknown arm '{arm}' (arms: {', '.join(arms)})", field="--arm")
    name = integration or arms[arm].surface
    loaded = load_runs(ws, registry, entry, store=store)
    rows = stored_rows(ws.registry)
    t_counts, basis = telemetry_counts(rows, name, host)
    surface = loaded.surfaces.get(arm)
    result = compare(
        synthetic_counts(o for o in loaded.used if o.arm == arm),
        t_counts,
        integration=name,
        host=host,
        t_basis=basis,
        s_evidence_class=loaded.evidence_class,
        tools=[t.name for t in surface.tools] if surface is not None else [],
    )
    data: dict[str, Any] = {"registration": entry.id, "arm": arm, **result.to_json()}

    def human() -> None:
        table = Table(
            title=display(
                f"S vs T: {name} on {host} (S: {entry.id} arm {arm}, "
                f"{data['s_evidence_class']}; T: {basis})"
            )
        )
        for col in ("tool", "S calls", "S share", "T calls", "T share"):
            table.add_column(col, justify="left" if col == "tool" else "right")
        for t in result.tools:
            table.add_row(
                display(t.tool),
                str(t.s_calls),
                f"{t.s_share:.1%}",
                str(t.t_calls),
                f"{t.t_share:.1%}",
            )
        console.print(table)
        for label, value, why in (
            ("total variation distance", result.total_variation, result.total_variation_withheld),
            ("Spearman rank correlation", result.spearman, result.spearman_withheld),
        ):
            console.print(
                display(f"{label}: {value:.3f}" if value is not None else f"{label}: {why}")
            )

    emit(data, as_json, human)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.add_typer(telemetry_app, name="telemetry")
