"""What ``prereg run --dry-run / --batch / --prices`` call (the command stays wiring).

Kept next to the provider code rather than in the command module so that the
run command's owner and this feature each have one place to change; the
command delegates here only when one of these options is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from prereg.core.output import console, emit
from prereg.runners.providers.batch import BatchStatus


def dry_run_report(
    ws: Any,
    registration_id: str,
    *,
    batch: bool,
    max_units: int | None,
    prices: Path | None,
    as_json: bool,
) -> None:
    """Print units, expected requests and the spend bound; send and write nothing."""
    from prereg.runners.providers.runs import estimate_run

    data = estimate_run(ws, registration_id, batch=batch, max_units=max_units, prices=prices)

    def human() -> None:
        table = Table(
            title=f"dry run {data['registration_id']} (nothing sent, nothing written)",
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
            ("spent so far", f"${data['spent_usd']:.4f}"),
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
            table.add_row(key, value)
        console.print(table)

    emit(data, as_json, human)


def provider_summary(
    ws: Any,
    registration_id: str,
    *,
    batch: bool,
    prices: Path | None,
    concurrency: int,
    max_units: int | None,
    progress: Any,
    as_json: bool,
) -> tuple[Any, dict[str, Any]]:
    """Run through the batch path (``--batch``) or with another price table (``--prices``);
    returns the run summary and extra fields for the report."""
    from prereg.runners.api import prepare, run_registration
    from prereg.runners.providers.factory import create_run_driver
    from prereg.runners.providers.runs import run_batched

    if batch:
        status_console = Console(stderr=True)

        def on_poll(status: BatchStatus) -> None:
            if not as_json:
                status_console.print(
                    f"batch {status.batch_id}: {status.status} ({status.done}/{status.total} done)"
                )

        summary, report = run_batched(
            ws,
            registration_id,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            on_poll=on_poll,
            prices=prices,
        )
        return summary, {"batch": report.to_json()}
    _, entry, plan, _ = prepare(ws, registration_id)
    driver = create_run_driver(plan, entry.registration, ws, prices=prices)
    summary = run_registration(
        ws,
        registration_id,
        concurrency=concurrency,
        max_units=max_units,
        progress=progress,
        driver=driver,
    )
    return summary, {"prices": str(prices)}
