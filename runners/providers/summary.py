"""What ``prereg run --batch / --prices`` run: the run summary and the report's extra fields.

The command renders; this module only runs. ``--dry-run`` is
:func:`prereg.runners.providers.runs.estimate_run` (a dict, nothing sent or written).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prereg.core.workspace import Workspace
from prereg.registry.pilot import PilotOptions
from prereg.runners.api import run_registration
from prereg.runners.orchestrate import Progress, RunSummary
from prereg.runners.providers.batch import BatchStatus
from prereg.runners.providers.runs import run_batched


def provider_run(
    ws: Workspace,
    registration_id: str,
    *,
    batch: bool,
    prices: Path | None,
    concurrency: int,
    max_units: int | None,
    progress: Progress | None,
    on_poll: Callable[[BatchStatus], None] | None = None,
    store: str | None = None,
    pilot: PilotOptions | None = None,
) -> tuple[RunSummary, dict[str, Any]]:
    """Run through the batch path (``--batch``, ``on_poll`` sees each poll of a batch) or
    with another price table (``--prices``); returns the run summary and extra fields
    for the report. ``store`` (``--store``) is the run store of a ``--prices`` run; the
    batch path keeps the workspace's (the command refuses ``--batch`` with another)."""
    if batch:
        summary, report = run_batched(
            ws,
            registration_id,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            on_poll=on_poll,
            prices=prices,
            pilot=pilot,
        )
        return summary, {"batch": report.to_json()}
    summary = run_registration(
        ws,
        registration_id,
        concurrency=concurrency,
        max_units=max_units,
        progress=progress,
        store=store,
        prices=prices,
        pilot=pilot,
    )
    return summary, {"prices": str(prices)}
