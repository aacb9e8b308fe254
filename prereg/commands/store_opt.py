"""``--store``: the run store of the commands that read or write runs (wiring only).

Imports nothing of the run stores: ``plan`` takes the option, and a plan from options
must start without them.
"""

from __future__ import annotations

from typing import Annotated

import typer

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
