"""Content-addressed object store: the frozen bytes of every referenced file.

Runs read experiment files from here, never from the editable workspace, so a
later edit of a workspace file cannot change what a registration runs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from prereg.core.errors import IntegrityError
from prereg.core.safeio import MAX_EXPERIMENT_FILE_BYTES, UnreadableFile, read_regular_file
from prereg.registry.digest import PREFIX, sha256_hex


class ObjectStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, digest: str) -> Path:
        hexdigest = digest.removeprefix(PREFIX)
        return self.root / hexdigest[:2] / hexdigest[2:]

    def put(self, data: bytes) -> str:
        """Store ``data`` (idempotent); returns its digest ``sha256:<hex>``."""
        digest = PREFIX + sha256_hex(data)
        target = self.path(digest)
        if target.exists():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.chmod(tmp, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.replace(tmp, target)
        return digest

    def get(self, digest: str) -> bytes:
        """The stored bytes; FileNotFoundError if the object is missing, IntegrityError
        (exit 3) when something else stands in its place (a folder, a FIFO, a device, a
        file over the size an experiment file may have): never blocks, never reads more."""
        path = self.path(digest)
        try:
            return read_regular_file(path, limit=MAX_EXPERIMENT_FILE_BYTES, what="an object")
        except IsADirectoryError:
            reason = "is a folder"
        except UnreadableFile as exc:
            reason = exc.reason
        raise IntegrityError(f"the stored object {digest} {reason}", file=str(path))

    def exists(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def all(self) -> Iterator[tuple[str, Path]]:
        if not self.root.is_dir():
            return
        for sub in sorted(self.root.iterdir()):
            if sub.is_dir():
                for file in sorted(sub.iterdir()):
                    if ".tmp" not in file.name:
                        yield PREFIX + sub.name + file.name, file
