"""Writing files whole or not at all.

Every file prereg writes (frozen copies, ledger mirrors, reports, exports) goes through
:func:`write_atomic`: a temporary file beside the target, then a rename, so a reader
never sees half a file; when the machine refuses the write (disk full, read-only
folder), the temporary file is removed and :class:`WriteFailure` (exit 1) says why.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from prereg.core.errors import WriteFailure

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
