"""Resolution: a registration YAML plus the experiment files it references.

Everything that decides a result goes into the resolved document: the
validated registration (defaults filled in, so YAML formatting, key order and
comments do not matter) and the sha256 of every file the experiment references.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.yamlio import load_model
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.loader import folder_reader
from prereg.experiments.offers import ArmSpec, offers_for
from prereg.registry.digest import document_digest, file_digest
from prereg.registry.schema import Registration


@dataclass(frozen=True)
class Resolved:
    registration: Registration
    source_path: str
    source_bytes: bytes
    files: dict[str, bytes]  # experiment-relative path -> content
    n_prompts: int  # tasks in the registered split
    document: dict[str, Any] = field(repr=False)
    digest: str = ""


def build_document(
    registration: Registration, experiment_files: dict[str, bytes]
) -> dict[str, Any]:
    """The digested document: registration fields and the hash of every file."""
    return {
        "format": "prereg.registration/1",
        "registration": registration.model_dump(mode="json"),
        "experiment": {
            "name": registration.experiment,
            "files": {path: file_digest(data) for path, data in sorted(experiment_files.items())},
        },
    }


def _check_offers(registration: Registration, experiment: Experiment, shown: str) -> None:
    """Every arm's control must apply to the experiment (refused now, not at run)."""

    specs = [
        ArmSpec(arm.id, arm.surface, arm.control, registration.reference_of(arm.id), arm.decoy)
        for arm in registration.arms
    ]
    try:
        offers_for(specs, experiment, registration.design.seed)
    except BadInput as exc:
        raise BadInput(
            exc.message, file=shown, field=exc.field or "arms", details=exc.details
        ) from None


def resolve(path: Path, experiments_dir: Path, display: str | None = None) -> Resolved:
    """Validate a registration file and resolve its experiment; BadInput on any problem."""

    shown = display or str(path)
    try:
        source = Path(path).read_bytes()
    except FileNotFoundError:
        raise BadInput("registration file not found", file=shown) from None
    except IsADirectoryError:
        raise BadInput("expected a registration YAML file, got a directory", file=shown) from None
    registration = load_model(Registration, source, shown)

    folder = experiments_dir / registration.experiment
    if not (folder / "experiment.yaml").is_file():
        known = (
            sorted(p.name for p in experiments_dir.iterdir() if p.is_dir())
            if experiments_dir.is_dir()
            else []
        )
        raise BadInput(
            f"experiment '{registration.experiment}' not found (expected "
            f"{folder / 'experiment.yaml'}); known experiments: "
            f"{', '.join(known) or 'none'}",
            file=shown,
            field="experiment",
        )
    read = folder_reader(folder)
    experiment = load_experiment(read, registration.experiment)
    files = {rel: read(rel) for rel in experiment.files}

    for index, arm in enumerate(registration.arms):
        if arm.surface not in experiment.surface_ids:
            raise BadInput(
                f"surface '{arm.surface}' is not defined by experiment "
                f"'{registration.experiment}' (known: "
                f"{', '.join(sorted(experiment.surface_ids))})",
                file=shown,
                field=f"arms[{index}].surface",
            )
        if arm.decoy is not None and arm.decoy not in experiment.surface_ids:
            raise BadInput(
                f"decoy '{arm.decoy}' is not a surface of experiment "
                f"'{registration.experiment}' (known: "
                f"{', '.join(sorted(experiment.surface_ids))})",
                file=shown,
                field=f"arms[{index}].decoy",
            )
    live = registration.host.live
    if live is not None and live.surface not in experiment.surface_ids:
        raise BadInput(
            f"live surface '{live.surface}' is not a surface of experiment "
            f"'{registration.experiment}'",
            file=shown,
            field="host.live.surface",
        )
    _check_offers(registration, experiment, shown)
    if registration.split not in experiment.split_names:
        raise BadInput(
            f"experiment '{registration.experiment}' has no split '{registration.split}'",
            file=shown,
            field="split",
        )
    tasks = experiment.tasks_in_split(registration.split)
    if not tasks:
        raise BadInput(
            f"split '{registration.split}' of experiment "
            f"'{registration.experiment}' holds no tasks",
            file=shown,
            field="split",
        )

    document = build_document(registration, files)
    return Resolved(
        registration=registration,
        source_path=shown,
        source_bytes=source,
        files=files,
        n_prompts=len(tasks),
        document=document,
        digest=document_digest(document),
    )
