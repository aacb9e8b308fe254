"""Drafts and workspaces for the harness-rule tests (issue 13, item 6)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
PILOT = ROOT / "registry" / "drafts" / "music-library-pilot.yaml"


def draft(ws: Path, name: str, **over: Any) -> Path:
    """The bundled pilot as ``name`` (one repeat, small budgets), with ``over`` applied."""
    doc = yaml.safe_load(PILOT.read_text())
    doc.update(id=name, design={"repeats": 1, "rotations": 1, "seed": 7})
    doc.pop("multiplicity", None)
    doc.update(over)
    path = ws / "drafts" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def certified_copy(ws: Path, name: str = "music-certified") -> Path:
    """music-library copied into the workspace as ``name``, keeping only the tasks whose
    recorded path is certified (so every split is fully certified)."""
    src = ws / "experiments" / "music-library"
    dst = ws / "experiments" / name
    shutil.copytree(src, dst)
    entry = yaml.safe_load((dst / "experiment.yaml").read_text())
    entry["name"] = name
    (dst / "experiment.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    corpus = yaml.safe_load((dst / "corpus.yaml").read_text())
    corpus["tasks"] = [
        t for t in corpus["tasks"] if (t.get("solution") or {}).get("certified") is True
    ]
    (dst / "corpus.yaml").write_text(yaml.safe_dump(corpus, sort_keys=False))
    return dst
