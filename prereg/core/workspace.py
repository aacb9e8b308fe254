"""The workspace folder layout (see DESIGN.md, "The workspace")."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SUBDIRS = ("experiments", "registry", "runs", "reports", "drafts")


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def resolve(cls, option: Path | None) -> Workspace:
        """``--workspace``, else ``PREREG_WORKSPACE``, else the current directory."""
        if option is not None:
            return cls(Path(option).resolve())
        env = os.environ.get("PREREG_WORKSPACE")
        return cls(Path(env).resolve() if env else Path.cwd().resolve())

    @property
    def experiments(self) -> Path:
        return self.root / "experiments"

    @property
    def registry(self) -> Path:
        return self.root / "registry"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def drafts(self) -> Path:
        return self.root / "drafts"

    def relative(self, path: Path) -> str:
        """A path relative to the workspace root, for output and records."""
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except ValueError:
            return str(path)
