"""Which code is running: the package version from git and a digest of the installed sources.

The package version comes from git tags and commits (setuptools-scm, fixed when the
package is installed). An editable install keeps that version across later commits and
uncommitted edits, so the version alone cannot say which analysis code produced a report.
The source digest can: it is a sha256 over every file of the installed ``prereg`` package
(code and package data, symlinked subpackages followed, caches skipped), so one changed
byte gives another digest. :func:`code_version` joins the two; ledger lines and reports
carry it.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

#: The installed ``prereg`` package folder (its subpackages may be symlinks to the root).
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
#: The distribution's name on PyPI (pyproject.toml ``[project] name``). The import package
#: and the command stay ``prereg``; the PyPI name ``prereg`` is an unrelated project (issue 37).
DISTRIBUTION = "prereg-agents"
_SKIPPED_DIRS = frozenset({"__pycache__"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


@cache
def package_version() -> str:
    """The installed distribution's version (from git via setuptools-scm at install time)."""
    from importlib import metadata  # lazy: ~50 ms (the metadata scan), only --version needs it

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # running from a source tree never installed
        return "0+unknown"


def _source_files(root: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        for name in files:
            if name.endswith(_SKIPPED_SUFFIXES):
                continue
            path = Path(folder) / name
            found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


@cache
def source_digest(root: Path = PACKAGE_ROOT) -> str:
    """sha256 over (relative path, content) of every file of the package, in path order."""
    digest = hashlib.sha256()
    for rel, path in _source_files(root):
        data = path.read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


@cache
def code_version() -> str:
    """``<package version> (src <first 12 hex digits of the source digest>)``."""
    return f"{package_version()} (src {source_digest()[:12]})"


if TYPE_CHECKING:
    __version__: str
else:

    def __getattr__(name: str) -> str:
        """``__version__`` on first use: reading the installed metadata costs every command
        about 50 ms at start-up, and only ``--version``, ledger lines and reports need it."""
        if name == "__version__":
            return package_version()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
