"""Shared by the CLI tests: the installed ``prereg`` script and a subprocess runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PILOT = "drafts/music-library-pilot.yaml"
PILOT_ID = "music-library-pilot"


def prereg(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``prereg ARGS`` in a child process, stdout and stderr piped (neither a terminal)."""
    full = {**os.environ, **(env or {})}
    full.pop("FORCE_COLOR", None)
    full.pop("FORCE_TERMINAL", None)
    return subprocess.run(
        [sys.executable, "-m", "prereg", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=full,
        cwd=cwd,
    )


def script() -> Path:
    """The console script (completion is keyed to its name, ``prereg``)."""
    return Path(sys.executable).with_name("prereg")
