"""The editable experiment of a workspace, as the command modules load it.

Apart from :mod:`prereg.commands._common` because that module is imported at start-up
(``prereg --help`` must not import the experiment models and with them pydantic:
tests/cli/test_startup_imports.py).
"""

from __future__ import annotations

import os

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.loader import folder_reader


def workspace_experiment(ws: Workspace, name: str) -> Experiment:
    """The experiment in the workspace folder ``experiments/<name>`` (the editable files);
    exit 2 naming the expected file and the known experiments when there is none."""
    folder = ws.experiments / name
    if not os.path.lexists(folder / "experiment.yaml"):  # the loader says what else is wrong
        known = (
            sorted(p.name for p in ws.experiments.iterdir() if p.is_dir())
            if ws.experiments.is_dir()
            else []
        )
        raise BadInput(
            f"experiment '{name}' not found (expected {folder / 'experiment.yaml'}); "
            f"known: {', '.join(known) or 'none'}",
            field="experiment",
        )
    return load_experiment(folder_reader(folder), name)
