"""The workspace folder layout (see DESIGN.md, "The workspace") and its initialisation."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput

SUBDIRS = ("experiments", "registry", "runs", "reports", "drafts")

#: What marks a folder as a workspace: the two folders that hold its evidence (every
#: workspace ``prereg init`` made has them; a source checkout of prereg has no runs/).
MARKERS = ("registry/", "runs/")


def is_workspace(folder: Path) -> bool:
    """True when ``folder`` holds a workspace's ``registry/`` and ``runs/`` folders."""
    try:
        return all((folder / marker.rstrip("/")).is_dir() for marker in MARKERS)
    except OSError:  # unreadable, a symlink loop
        return False


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

    @classmethod
    def discover(cls, option: Path | None, start: Path | None = None) -> Workspace:
        """The workspace a command works in; BadInput (exit 2) when there is none.

        ``--workspace`` (else ``PREREG_WORKSPACE``) names the folder exactly: it must
        exist and be a workspace (:func:`is_workspace`). Without either, the nearest
        folder holding a workspace from ``start`` (the current directory) upward is
        used, as git finds its repository.
        """
        env = os.environ.get("PREREG_WORKSPACE")
        named, source = (option, "--workspace") if option is not None else (env, "PREREG_WORKSPACE")
        if named:
            root = Path(named).expanduser().resolve()
            if not root.exists():
                raise BadInput(f"the workspace folder {root} does not exist", field=source)
            if not is_workspace(root):
                raise BadInput(
                    f"{root} is not a prereg workspace (no {' and '.join(MARKERS)} "
                    f"folders); create one with `prereg init {root}`",
                    field=source,
                )
            return cls(root)
        here = (start or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if is_workspace(folder):
                return cls(folder)
        raise BadInput(
            f"not inside a prereg workspace (no folder from {here} upward holds "
            f"{' and '.join(MARKERS)}): pass -w FOLDER, or create one with `prereg init`",
            field="--workspace",
        )

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
        except (ValueError, RuntimeError, OSError):  # outside, or a symlink loop
            return str(path)


def _copy_tree(
    source: Traversable, target: Path, written: list[str], skipped: list[str], ws: Workspace
) -> None:
    for item in source.iterdir():
        if item.name.startswith((".", "__")):
            continue
        dest = target / item.name
        if item.is_dir():
            _copy_tree(item, dest, written, skipped, ws)
        elif dest.exists():
            skipped.append(ws.relative(dest))
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(item.read_bytes())
            written.append(ws.relative(dest))


def init_workspace(root: Path, sources: Mapping[str, Traversable]) -> dict[str, Any]:
    """Create the workspace folders and copy each source folder into its subfolder.

    ``sources`` maps a subfolder of :data:`SUBDIRS` (e.g. ``experiments``, ``drafts``)
    to the folder whose files are copied into it, in the mapping's order; the caller
    locates them (the bundled experiments and drafts), so the kernel knows no package.
    Existing files are never overwritten (a re-run only adds what is missing). Returns
    the ``prereg init --json`` document.
    """
    ws = Workspace(root.resolve())
    if ws.root.exists() and not ws.root.is_dir():
        raise BadInput("exists and is not a directory", file=str(root))
    unknown = sorted(set(sources) - set(SUBDIRS))
    if unknown:
        raise ValueError(f"not workspace folders: {', '.join(unknown)}")
    written: list[str] = []
    skipped: list[str] = []
    for sub in SUBDIRS:
        (ws.root / sub).mkdir(parents=True, exist_ok=True)
    for sub, source in sources.items():
        _copy_tree(source, ws.root / sub, written, skipped, ws)
    # an experiment is a folder with its experiment.yaml (study folders hold families)
    experiments = sorted(
        p.name for p in ws.experiments.iterdir() if (p / "experiment.yaml").is_file()
    )
    drafts = sorted(p.name for p in ws.drafts.glob("*.yaml"))
    return {
        "workspace": str(ws.root),
        "experiments": experiments,
        "drafts": drafts,
        "written": written,
        "skipped_existing": skipped,
    }
