"""Registrations with judges for the judging tests (podcast-selection, offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from prereg.registry.registrations import Entry
from prereg.registry.schema import Registration

RUBRIC = "judge-rubric.md"


def registration(
    reg_id: str = "judged",
    *,
    host: dict[str, Any] | None = None,
    judge: Any = None,
    repeats: int = 1,
) -> dict[str, Any]:
    """A small podcast-selection registration on the local host (or ``host``)."""
    doc: dict[str, Any] = {
        "id": reg_id,
        "title": "judged podcast selection",
        "hypothesis": "the focal integration completes tasks",
        "falsification": "it does not",
        "experiment": "podcast-selection",
        "kind": "exploratory",
        "split": "dev",
        "arms": [{"id": "a", "surface": "focal"}, {"id": "b", "surface": "focal-neutral"}],
        "host": host or {"driver": "local"},
        "budgets": {"completion_cap": 1024, "episode_tokens": 32000, "call_limit": 8},
        "design": {"repeats": repeats, "seed": 3},
        "outcome": "selected",
        "primary": {"test": "mcnemar_exact", "compare": ["b", "a"], "alpha": 0.05},
    }
    if judge is not None:
        doc["judge"] = judge
    return doc


def local_judges() -> list[dict[str, Any]]:
    return [
        {"outcome": "completed", "driver": "local", "rubric": RUBRIC, "rubric_version": "v1"},
        {
            "outcome": "native_self_service",
            "driver": "local",
            "rubric": RUBRIC,
            "rubric_version": "v1",
        },
    ]


def write(ws: Path, doc: dict[str, Any], name: str | None = None) -> Path:
    path = ws / "drafts" / f"{name or doc['id']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def entry_of(
    reg: Registration, files: dict[str, str], addenda: list[dict[str, Any]] | None = None
) -> Entry:
    """A registry entry of ``reg`` whose rubric files have the digests ``files`` (and
    judges added after it, ``addenda``: their ledger lines), for the report's functions."""
    return Entry(
        id=reg.id,
        digest="sha256:" + "1" * 64,
        registration=reg,
        frozen_path=Path("frozen.json"),
        registered_at="",
        seq=0,
        files=files,
        source_path="",
        source_object="",
        addenda=addenda or [],
    )
