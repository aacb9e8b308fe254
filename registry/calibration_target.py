"""What ``prereg calibrate`` calibrates: a registered id or a draft registration file.

A registered id is read from the registry after verification (exit 3 when its entry fails
it) with its frozen experiment; a draft is validated and resolved exactly as ``register``
would (exit 2 naming the file and field on any problem) and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prereg.core.workspace import Workspace
from prereg.experiments import load_experiment
from prereg.registry.calibration import SplitTasks
from prereg.registry.registrations import Registry
from prereg.registry.resolve import resolve
from prereg.registry.schema import Registration
from prereg.registry.verify import verified_entry


@dataclass(frozen=True)
class Target:
    registration: Registration
    split: SplitTasks
    source: str  # "registered" or "draft"
    shown: str  # the id, or the file as given
    digest: str


def _draft_path(ws: Workspace, target: str) -> Path | None:
    """The draft file ``target`` names (relative to the current folder, else the
    workspace), or None when it names no file and does not look like one."""
    path = Path(target)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, ws.root / path]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    if path.suffix in (".yaml", ".yml") or "/" in target or "\\" in target:
        return candidates[0]  # resolve() refuses it, naming the file
    return None


def load_target(ws: Workspace, target: str) -> Target:
    """The registration ``target`` names and the tasks of its split (see the module doc)."""
    path = _draft_path(ws, target)
    if path is None:
        registry = Registry(ws.registry)
        registry.get(target)  # exit 2 naming the known ids when there is none
        entry = verified_entry(registry, target)
        experiment = registry.load_experiment(entry)
        tasks = experiment.tasks_in_split(entry.registration.split)
        return Target(entry.registration, SplitTasks.of(tasks), "registered", target, entry.digest)
    resolved = resolve(path, ws.experiments, display=target)
    files = resolved.files

    def read(relative: str) -> bytes:
        if relative not in files:
            raise FileNotFoundError(relative)
        return files[relative]

    reg = resolved.registration
    experiment = load_experiment(read, reg.experiment)
    tasks = experiment.tasks_in_split(reg.split)
    return Target(reg, SplitTasks.of(tasks), "draft", target, resolved.digest)
