"""Reading one file of an experiment folder, with errors naming the file, the line and
column, and the field.

Every other module of the loader reads through here: ``_read`` turns a reader's refusals
(missing, a directory, unreadable, over the size limit) into a :class:`BadInput` pointing
at the reference that named the file, ``_load`` parses and validates a YAML file into its
pydantic model, and :class:`Doc` places later cross-file errors at a node of it.
:func:`folder_reader` is the reader over a workspace folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from prereg.core.errors import BadInput
from prereg.core.safeio import (
    MAX_EXPERIMENT_FILE_BYTES,
    UnreadableFile,
    read_regular_file,
    size_text,
)
from prereg.core.yamlio import Located, format_loc, load_yaml, parse_yaml, validate

Reader = Callable[[str], bytes]
#: Where a problem is in a file: the keys and indices down to the node.
Loc = tuple[int | str, ...]
M = TypeVar("M", bound=BaseModel)
ENTRY = "experiment.yaml"


class Doc:
    """A parsed file, for errors that point at a node of it.

    The fast C parser reads the data; node positions (the slower pure-Python
    composer of :mod:`prereg.core.yamlio`) are computed only when an error needs them.
    """

    def __init__(self, path: str, raw: bytes) -> None:
        self.path = path
        self.raw = raw
        self._located: Located | None = None

    @property
    def located(self) -> Located:
        if self._located is None:
            self._located = parse_yaml(self.raw, self.path)
        return self._located

    def where(self, loc: Sequence[int | str]) -> str:
        pos = self.located.line_of(loc)
        return f"{self.path}:{pos[0]}:{pos[1]}" if pos else self.path

    def fail(self, loc: Sequence[int | str], message: str) -> BadInput:
        return BadInput(message, file=self.where(loc), field=format_loc(loc))


def _check_relpath(doc: Doc, loc: Sequence[int | str], rel: str) -> None:
    pure = PurePosixPath(rel)
    if "\\" in rel or pure.is_absolute() or ".." in pure.parts or rel.startswith("~"):
        raise doc.fail(
            loc,
            f"'{rel}' must be a relative path inside the experiment folder "
            "(no '..', no absolute path)",
        )


def _read(read: Reader, rel: str, site: tuple[Doc, Sequence[int | str]] | None) -> bytes:
    try:
        data = read(rel)
    except FileNotFoundError:
        if site is None:
            raise BadInput(
                f"'{rel}' not found: an experiment folder needs an {ENTRY}", file=rel
            ) from None
        doc, loc = site
        raise doc.fail(loc, f"referenced file '{rel}' not found") from None
    except IsADirectoryError:
        if site is None:
            raise BadInput("expected a file, got a directory", file=rel) from None
        doc, loc = site
        raise doc.fail(loc, f"referenced path '{rel}' is a directory, not a file") from None
    except UnreadableFile as exc:
        if site is None:
            raise BadInput(exc.reason, file=rel) from None
        doc, loc = site
        raise doc.fail(loc, f"referenced path '{rel}' {exc.reason}") from None
    if len(data) > MAX_EXPERIMENT_FILE_BYTES:  # a reader other than folder_reader's
        reason = (
            f"is {size_text(len(data))}, over the {size_text(MAX_EXPERIMENT_FILE_BYTES)} "
            "limit for an experiment file"
        )
        if site is None:
            raise BadInput(reason, file=rel)
        raise site[0].fail(site[1], f"referenced file '{rel}' {reason}")
    return data


def _load(
    read: Reader, rel: str, model: type[M], site: tuple[Doc, Sequence[int | str]] | None
) -> tuple[M, Doc]:
    if site is not None:
        _check_relpath(site[0], site[1], rel)
    raw = _read(read, rel, site)
    data = load_yaml(raw, rel)  # libyaml, guarded (prereg.core.yamlio)
    if data is None:
        raise BadInput("the file is empty; expected a YAML mapping", file=rel)
    if not isinstance(data, dict):
        raise BadInput(
            f"expected a YAML mapping at the top level, got {type(data).__name__}", file=rel
        )
    doc = Doc(rel, raw)
    try:
        return model.model_validate(data), doc
    except ValidationError:
        located = doc.located
        return validate(model, located.data, located), doc


def folder_reader(folder: Path) -> Reader:
    """A reader over an experiment folder that refuses paths leaving it.

    Regular files only, at most :data:`~prereg.core.safeio.MAX_EXPERIMENT_FILE_BYTES`
    each: a FIFO, a device, a socket or a symlink loop raises
    :class:`~prereg.core.safeio.UnreadableFile` (never a hang); a directory
    IsADirectoryError; nothing there FileNotFoundError.
    """
    root = Path(os.path.realpath(folder))

    def read(relative: str) -> bytes:
        pure = PurePosixPath(relative)
        if pure.is_absolute() or ".." in pure.parts or "\\" in relative:
            raise BadInput(f"'{relative}' must stay inside the experiment folder", file=relative)
        if "\x00" in relative:
            raise UnreadableFile("is not a valid path (it contains a NUL character)")
        # realpath, not Path.resolve: a symlink loop is reported by the read, not raised here
        target = Path(os.path.realpath(root / pure))
        if not target.is_relative_to(root):
            raise BadInput(f"'{relative}' leaves the experiment folder", file=relative)
        return read_regular_file(target, limit=MAX_EXPERIMENT_FILE_BYTES, what="an experiment file")

    return read
