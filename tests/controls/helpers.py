"""Helpers for the control tests: the bundled selection experiment, plans, records."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prereg.experiments import Experiment, load_experiment
from prereg.experiments.loader import folder_reader
from prereg.registry.schema import Registration
from prereg.registry.units import Budgets, RunPlan, plan_from_registration

ROOT = Path(__file__).resolve().parents[2]
PODCAST = ROOT / "experiments" / "bundled" / "podcast-selection"
SERVERS = Path(__file__).resolve().parent / "servers"
#: the podcatch server the bundled podcast-invokerank experiment ships (its snapshot is
#: bundled with podcast-selection): one copy, started by the live tests and by the draft
PODCATCH_SERVER = (
    ROOT / "experiments" / "bundled" / "podcast-invokerank" / "servers" / "podcatch.py"
)
DIGEST = "sha256:" + "c" * 64


def podcast() -> Experiment:
    return load_experiment(folder_reader(PODCAST), "podcast-selection")


def copy_podcast(dest: Path, edit: Callable[[str], str] | None = None) -> Path:
    """A copy of the bundled experiment folder, ``experiment.yaml`` passed through ``edit``."""
    folder = dest / "podcast-selection"
    shutil.copytree(PODCAST, folder)
    if edit is not None:
        entry = folder / "experiment.yaml"
        entry.write_text(edit(entry.read_text()))
    return folder


REG_BASE: dict[str, Any] = {
    "id": "ctl",
    "title": "controls",
    "hypothesis": "h",
    "falsification": "f",
    "experiment": "podcast-selection",
    "kind": "exploratory",
    "split": "dev",
    "host": {"driver": "local"},
    "outcome": "selected",
    "primary": {"test": "paired_bootstrap", "compare": ["reference", "placebo"]},
}
ARMS: list[dict[str, Any]] = [
    {"id": "reference", "surface": "focal"},
    {"id": "placebo", "surface": "focal", "control": "placebo"},
    {"id": "blinded", "surface": "focal", "control": "blinded"},
    {"id": "decoy", "surface": "focal", "control": "decoy", "decoy": "tidewatch"},
    {"id": "clone", "surface": "focal", "control": "clone_swap"},
]


def registration(arms: list[dict[str, Any]] | None = None, **over: Any) -> Registration:
    doc = {**REG_BASE, "arms": arms if arms is not None else ARMS, **over}
    return Registration.model_validate(doc)


def plan(reg: Registration | None = None, **over: Any) -> RunPlan:
    from dataclasses import replace

    base = plan_from_registration(reg or registration(), DIGEST)
    return replace(base, budgets=Budgets(1024, 32000, 8, 10), **over)


def record(**over: Any) -> dict[str, Any]:
    """A run record as a mapping (what the analysis reads), ok and successful by default."""
    now = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    base: dict[str, Any] = dict(
        record_id=uuid.uuid4().hex,
        registration_id="ctl",
        registration_digest=DIGEST,
        experiment="podcast-selection",
        arm="reference",
        surface="focal",
        task_id="t1",
        intent="i",
        cluster="c",
        split="dev",
        polarity="positive",
        repeat=0,
        rotation=0,
        driver="local",
        evidence_class="local",
        started_at=now,
        finished_at=now,
        success=True,
        status="ok",
        funnel={"surfaced": True, "selected": True},
        terminal_class="focal",
        offer=None,
    )
    base.update(over)
    return base


def single(surface: str, **over: Any) -> Registration:
    """A registration whose arm 'arm' is on ``surface`` (plus a second plain arm 'other')."""
    return registration(
        [{"id": "arm", "surface": surface}, {"id": "other", "surface": "focal"}],
        primary={"test": "mcnemar_exact"},
        **over,
    )
