"""Choosing the run store: the workspace's SQLite file, or a PostgreSQL database.

``--store`` on the commands that read or write runs, else the ``PREREG_STORE``
environment variable, else the workspace's ``runs/`` folder (SQLite). A store is named by
a ``postgresql://`` (or ``postgres://``) URL or by a path to an SQLite store (a folder,
or its ``runs.sqlite`` file); any other URL scheme is refused (exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeGuard

from prereg.core.errors import BadInput
from prereg.runners.store.interface import RecordStore
from prereg.runners.store.postgres import PgRunStore, is_postgres_url
from prereg.runners.store.sqlite import RunStore

#: A run store's location: an SQLite path, or a PostgreSQL URL.
StoreLocation = Path | str

#: The environment variable naming the run store when ``--store`` is not given.
ENV = "PREREG_STORE"


def resolve_store(runs: Path, option: str | None = None) -> StoreLocation:
    """``option`` (``--store``), else ``$PREREG_STORE``, else ``runs`` (the workspace's)."""
    for source, value in (("--store", option), (ENV, os.environ.get(ENV))):
        if value is None or not value.strip():
            continue
        value = value.strip()
        if is_postgres_url(value):
            return value
        if "://" in value:
            scheme = value.split("://", 1)[0]
            raise BadInput(
                f"unsupported run store URL scheme '{scheme}://' (use postgresql://... or a "
                "path to an SQLite store)",
                field=source,
            )
        return Path(value).expanduser()
    return runs


def is_postgres(location: StoreLocation) -> TypeGuard[str]:
    return is_postgres_url(location)


def open_store(location: StoreLocation) -> RecordStore:
    """The store at ``location`` (nothing is connected or created until it is used)."""
    if isinstance(location, str) and is_postgres_url(location):
        return PgRunStore(location)
    return RunStore(location)


def ready_to_write(url: str) -> None:
    """Reach the PostgreSQL store at ``url`` and create (or check) its schema, before any
    unit runs: StoreUnavailable (exit 1) when it cannot be reached, IntegrityError (exit
    3) when its schema was changed."""
    with PgRunStore(url) as store:
        store.ensure_schema()
