"""``--store``: the run store of the commands that read or write runs (wiring only)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from prereg.core.errors import BadInput
from prereg.runners.stores import ENV, is_postgres, resolve_store

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="The run store: postgresql://user@host/db (shared by workers on any "
        "machines) or a path to an SQLite store. Default: $PREREG_STORE, else the "
        "workspace's runs/ (SQLite).",
        show_default=False,
    ),
]


def refuse_with_provider_options(store: str | None) -> None:
    """--dry-run, --batch and --prices read and write the workspace's SQLite store only:
    refused (exit 2) with a PostgreSQL store rather than silently using another store."""
    if is_postgres(resolve_store(Path("runs"), store)):
        source = "--store" if store else ENV
        raise BadInput(
            "--dry-run, --batch and --prices use the workspace's SQLite run store; they "
            "cannot run against a PostgreSQL store yet",
            field=source,
        )
