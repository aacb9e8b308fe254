"""Writing files whole or not at all.

Every file prereg writes (frozen copies, ledger mirrors, reports, exports) goes through
:func:`write_atomic`: a temporary file beside the target, then a rename, so a reader
never sees half a file; when the machine refuses the write (disk full, read-only
folder), the temporary file is removed and :class:`WriteFailure` (exit 1) says why.

Every ``--out`` a user names (export, ``judge --export`` and ``--gold-template``,
``mcp snapshot``, ``study compile``, ``study run``) is checked by
:func:`refuse_evidence_folder` first: nothing a command writes on request lands in a
workspace's ``registry/`` or ``runs/``, where it could overwrite or mix with evidence.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from prereg.core.errors import BadInput, IntegrityError, WriteFailure
from prereg.core.workspace import is_workspace

READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


def write_atomic(path: Path, data: bytes, *, readonly: bool = False, what: str = "") -> None:
    """Write ``data`` to ``path`` whole (temporary file, then rename), or not at all."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        if readonly:
            os.chmod(tmp, READ_ONLY)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        label = what or path.name
        raise WriteFailure(f"cannot write {label}: {exc.strerror or exc}", file=str(path)) from None


#: The folders of a workspace that hold evidence: no ``--out`` may point into them.
EVIDENCE_FOLDERS = ("registry", "runs")


def refuse_evidence_folder(out: Path | str, *, field: str = "--out", what: str = "output") -> None:
    """BadInput (exit 2) when ``out`` is, or is inside, the ``registry/`` or ``runs/``
    folder of a workspace (any workspace, not only the current one), symlinks resolved:
    ``--out`` never writes among the evidence. ``-`` (standard output) passes."""
    if str(out) == "-":
        return
    target = Path(out).resolve()
    for folder in (target, *target.parents):
        if folder.name in EVIDENCE_FOLDERS and is_workspace(folder.parent):
            raise BadInput(
                f"refusing to write {what} inside the workspace's {folder.name}/ "
                f"({target}): write it elsewhere",
                field=field,
            )


def refuse_linked_folders(root: Path, *parts: str) -> None:
    """IntegrityError (exit 3) when a folder on the way from ``root`` to
    ``root/parts...`` (each that exists) is a symbolic link: reports are written only
    into the workspace's own ``reports/`` folder, never through a link that could lead
    into ``registry/`` or ``runs/``. The file names a report writes are replaced by
    rename, which replaces a link itself, so only the folders need checking."""
    folder = Path(root)
    for part in parts:
        folder = folder / part
        if folder.is_symlink():
            raise IntegrityError(
                f"is a symbolic link (to {os.readlink(folder)}): reports are written only "
                "into the workspace's own reports/ folder; replace the link with a folder",
                file=str(folder),
            )
