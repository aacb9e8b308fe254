"""Reading untrusted input files safely: the limits, regular files only, escaped messages.

Everything a user hands prereg (a registration, the files of an experiment, an MCP
snapshot) is read through here, so that hostile or careless input is a clean
:class:`~prereg.core.errors.BadInput` (exit 2) and never a hang, a traceback or an
exhausted machine (DESIGN.md, invariants 9 and 10):

- **The limits** live in this module, in one place: file sizes, YAML aliases, the size of
  a document once its aliases are expanded, nesting depth, and the integer range that
  canonical JSON (RFC 8785, the digest's encoding) can carry.
- **Regular files only**: a FIFO, a device (``/dev/zero``), a socket, a directory or a
  symlink loop is refused after an ``os.stat``, before anything is opened; the open
  itself is non-blocking, and the opened file is checked again (a path swapped for a
  FIFO between the two is still refused, never waited on). A file larger than its limit
  is refused from its size, and a file that grows while read is cut at the limit.
- **Escaped messages**: every echoed value (an unknown key, a bad value, a file name)
  may carry control characters; :func:`escaped` rewrites a ``BadInput`` so that none of
  them (C0, DEL, C1, the invisible Unicode format characters that reorder or hide
  text, unassigned code points) reaches a terminal raw. They are shown as ``\\x1b`` /
  ``\\u202e``, as ``repr`` does.
- **Strict JSON** (:func:`check_json`): duplicate keys, ``NaN``/``Infinity``, numbers
  that overflow to infinity, integers beyond the canonical-JSON range and excessive
  nesting are refused with the file, line, column and field.

This module is part of the kernel and imports nothing of the project but its errors.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput

# ---- the limits (every input limit of prereg, in one place) ---------------------------------

MIB = 1024 * 1024
#: A registration file (a YAML document of a few kilobytes in practice).
MAX_REGISTRATION_BYTES = 1 * MIB
#: One file of an experiment (experiment.yaml, service, corpus, surfaces, snapshots).
MAX_EXPERIMENT_FILE_BYTES = 16 * MIB
#: YAML aliases (``*name``) in one document.
MAX_YAML_ALIASES = 10_000
#: Nodes a document's aliases may add once expanded (the "billion laughs" bound): a
#: document's own nodes are bounded by its file size, the copies aliases make by this.
MAX_ALIAS_EXPANSION = 1_000_000
#: Nesting depth of a YAML or JSON document (the bundled experiments reach 9).
MAX_DEPTH = 64
#: Integers canonical JSON (RFC 8785) represents exactly: |n| <= 2**53 - 1.
MAX_SAFE_INTEGER = 2**53 - 1
#: An exchange file handed to ``import`` (JSONL, CSV, Parquet run records; an Inspect AI
#: log): 27,000 records with their traces are about 100 MiB as JSONL.
MAX_EXCHANGE_BYTES = 1024 * MIB
#: A file of verdicts or gold labels handed to ``judge --import`` / ``judge --gold``.
MAX_JUDGING_BYTES = 256 * MIB
#: An MCP snapshot handed to ``mcp serve`` or ``mcp show`` (as an experiment file).
MAX_SNAPSHOT_BYTES = MAX_EXPERIMENT_FILE_BYTES
#: A stored calibration (``reports/<id>/calibration.json``, a table of a few KiB).
MAX_CALIBRATION_BYTES = 16 * MIB


def size_text(n: int) -> str:
    """``1 MiB``, ``16 MiB``, ``2.1 MiB``, ``1.5 KiB``, ``12 bytes``."""
    for unit, name in ((MIB, "MiB"), (1024, "KiB")):
        if n >= unit:
            return f"{n // unit} {name}" if n % unit == 0 else f"{n / unit:.1f} {name}"
    return f"{n} bytes"


# ---- escaping -------------------------------------------------------------------------------

#: Unicode categories written as escapes in a message: controls (C0 with tab and newline,
#: since no message of prereg has either; DEL; C1, so every ESC, CSI and OSC sequence),
#: format characters (bidi embeddings, overrides and isolates, zero-width characters,
#: the BOM), surrogates, private use, unassigned, line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape_char(char: str) -> str:
    if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_control(text: str) -> str:
    """``text`` with every control, format or unassigned character written as an escape.

    ``\\x1b``, ``\\u202e``, ``\\U000e0001``, as ``repr`` writes them. Idempotent (an
    escape is printable), so a message may pass through it twice.
    """
    if text.isprintable():  # the common case; isprintable() is False for every unsafe one
        return text
    return "".join(map(_escape_char, text))


def escaped(exc: BadInput) -> BadInput:
    """``exc`` itself when it carries nothing to escape, else a copy with everything escaped."""
    parts = [exc.message, exc.file or "", exc.field or "", *exc.details]
    if all(p.isprintable() for p in parts):
        return exc
    return type(exc)(
        escape_control(exc.message),
        file=escape_control(exc.file) if exc.file is not None else None,
        field=escape_control(exc.field) if exc.field is not None else None,
        details=[escape_control(d) for d in exc.details],
    )


# ---- regular files only ---------------------------------------------------------------------


class UnreadableFile(Exception):
    """A path that exists but is not a regular file prereg may read (``reason`` says why)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_mode(mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    if not stat.S_ISREG(mode):
        raise UnreadableFile(f"is {_kind(mode)}, not a regular file")


def _too_large(size: int | None, limit: int, what: str) -> UnreadableFile:
    """Over the limit by its size, or (``size`` None) by growing while it was read."""
    if size is None:
        return UnreadableFile(f"grew over the {size_text(limit)} limit for {what} while read")
    return UnreadableFile(f"is {size_text(size)}, over the {size_text(limit)} limit for {what}")


def read_regular_file(path: str | Path, *, limit: int, what: str) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``limit``.

    Raises FileNotFoundError (nothing there), IsADirectoryError, or
    :class:`UnreadableFile` (a FIFO, device, socket, symlink loop, unreadable path,
    or a file over ``limit``; ``what`` names the limit in the reason, "a registration
    file"). Never blocks on a FIFO and never reads more than ``limit + 1`` bytes.
    """
    if "\x00" in str(path):
        raise UnreadableFile("is not a valid path (it contains a NUL character)")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableFile(_os_reason(exc)) from None
    _check_mode(info.st_mode)
    if info.st_size > limit:
        raise _too_large(info.st_size, limit, what)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableFile(_os_reason(exc)) from None
    try:
        _check_mode(os.fstat(fd).st_mode)  # the path may have been swapped since the stat
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(limit + 1 - total, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UnreadableFile(_os_reason(exc)) from None
    finally:
        os.close(fd)
    if total > limit:
        raise _too_large(None, limit, what)
    return b"".join(chunks)


def read_input(path: str | Path, *, limit: int, what: str) -> bytes:
    """:func:`read_regular_file`, every refusal as :class:`BadInput` (exit 2) naming the
    file: nothing there, a folder, a FIFO, a device, a socket, a file over ``limit``."""
    try:
        return read_regular_file(path, limit=limit, what=what)
    except FileNotFoundError:
        raise escaped(BadInput("file not found", file=str(path))) from None
    except IsADirectoryError:
        raise escaped(BadInput(f"is a folder, not {what}", file=str(path))) from None
    except UnreadableFile as exc:
        raise escaped(BadInput(exc.reason, file=str(path))) from None


def check_input(path: str | Path, *, limit: int, what: str) -> None:
    """Refuse (:class:`BadInput`, exit 2, naming the file) what :func:`read_input` would
    refuse, without reading it: for a file a library opens by its name (an Inspect AI
    log). The file is opened non-blocking and checked again through the open handle."""
    if "\x00" in str(path):
        raise escaped(BadInput("is not a valid path (it contains a NUL character)", file=str(path)))
    try:
        info = os.stat(path)
        _check_mode(info.st_mode)
        if info.st_size > limit:
            raise _too_large(info.st_size, limit, what)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0))
        try:
            _check_mode(os.fstat(fd).st_mode)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise escaped(BadInput("file not found", file=str(path))) from None
    except IsADirectoryError:
        raise escaped(BadInput(f"is a folder, not {what}", file=str(path))) from None
    except UnreadableFile as exc:
        raise escaped(BadInput(exc.reason, file=str(path))) from None
    except OSError as exc:
        raise escaped(BadInput(_os_reason(exc), file=str(path))) from None


def read_text_input(path: str | Path, *, limit: int, what: str) -> str:
    """:func:`read_input` decoded as UTF-8; text that is not UTF-8 is :class:`BadInput`
    (exit 2) naming the file."""
    data = read_input(path, limit=limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text ({exc})", file=str(path)) from None


def json_objects(text: str, path: str | Path) -> Iterator[tuple[int, dict[str, Any], str]]:
    """Each non-blank line of a JSON Lines text as (line number, object, line); a line
    that is not a JSON object is :class:`BadInput` naming ``path:line``. Lines split at
    ``\\n`` only (:func:`split_lines`)."""
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise BadInput(f"not a JSON object ({exc})", file=f"{path}:{number}") from None
        if not isinstance(fields, dict):
            raise BadInput("not a JSON object", file=f"{path}:{number}")
        yield number, fields, line


def split_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text: split at ``\\n`` only (a ``\\r`` before it is
    dropped), never at U+2028, U+2029, U+0085 or the other breaks ``str.splitlines``
    knows, which JSON carries raw inside a string."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symlink loop (too many levels of symbolic links)"
    if exc.errno == errno.EACCES:
        return "cannot be read (permission denied)"
    if exc.errno == errno.ENOTDIR:
        return "is not a path to a file (a part of it is not a folder)"
    if exc.errno == errno.ENAMETOOLONG:
        return "has a name too long for the file system"
    return f"cannot be read ({exc.strerror or type(exc).__name__})"


# ---- strict JSON ----------------------------------------------------------------------------


class _Bad:
    """A JSON number canonical JSON cannot carry (found while parsing, reported with a path)."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


class _Pairs(list[tuple[str, Any]]):
    """An object's members in order (duplicates kept, to be reported)."""


def _json_int(text: str) -> int | _Bad:
    digits = text.lstrip("-")
    if len(digits) > 16 or abs(int(text)) > MAX_SAFE_INTEGER:
        shown = text if len(text) <= 24 else text[:21] + "..."
        return _Bad(
            f"integer {shown} is outside the range canonical JSON represents exactly "
            f"(|n| <= 2**53 - 1 = {MAX_SAFE_INTEGER})"
        )
    return int(text)


def _json_float(text: str) -> float | _Bad:
    value = float(text)
    if not math.isfinite(value):
        return _Bad(f"number {text[:24]} overflows to infinity; JSON numbers must be finite")
    return value


def _json_constant(name: str) -> _Bad:
    return _Bad(f"{name} is not JSON (JSON numbers must be finite)")


def check_json(raw: bytes, filename: str) -> None:
    """Refuse what the digest's canonical JSON cannot carry, with file:line:col and field.

    Checks duplicate keys, ``NaN``/``Infinity``, numbers that overflow to infinity,
    integers beyond +-(2**53 - 1) and nesting deeper than :data:`MAX_DEPTH`. A document
    that is not JSON at all is left to the format's own parser (which names the problem).
    """
    try:
        text = raw.decode("utf-8")
        document = json.loads(
            text,
            object_pairs_hook=_Pairs,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except RecursionError:
        offset = _locate_depth(text)
        message = f"nested more than {MAX_DEPTH} levels deep"
        raise _json_error(text, filename, (), offset, message) from None
    except (ValueError, UnicodeDecodeError):
        return  # not JSON: the snapshot format reports it
    problem = _first_problem(document)
    if problem is not None:
        path, occurrence, message = problem
        offsets = list(_offsets(text, path)) if path else [0]
        offset = offsets[min(occurrence, len(offsets) - 1)] if offsets else 0
        raise _json_error(text, filename, path, offset, message)


def _first_problem(document: Any) -> tuple[tuple[int | str, ...], int, str] | None:
    """(path, which occurrence of the path, message) of the first problem, depth-first."""
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Bad):
            return path, 0, value.message
        if len(path) > MAX_DEPTH:
            return path, 0, f"nested more than {MAX_DEPTH} levels deep"
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, _ in value:
                if key in seen:
                    return (*path, key), 1, f"duplicate key {key!r} (a key appears once)"
                seen.add(key)
            stack.extend((v, (*path, k)) for k, v in reversed(value))
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(value))))
    return None


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)


def _tokens(text: str) -> Iterator[tuple[int, str]]:
    for match in _TOKEN.finditer(text):
        yield match.start(), match.group()


def _offsets(text: str, target: tuple[int | str, ...]) -> Iterator[int]:
    """Offsets of the values at ``target`` (of the key, for an object member)."""
    stack: list[list[Any]] = []  # per open container: [kind, path, index or key, expecting key]
    path: tuple[int | str, ...] = ()
    pending_key: tuple[int, str] | None = None
    for offset, token in _tokens(text):
        if stack and stack[-1][0] == "[" and token not in "],":
            if stack[-1][3]:
                path = (*stack[-1][1], stack[-1][2])
                if path == target:
                    yield offset
                stack[-1][3] = False
        if token in "{[":
            stack.append([token, path, 0, True])
            continue
        if token in "}]":
            if stack:
                stack.pop()
            continue
        if not stack:
            continue
        top = stack[-1]
        if token == ",":
            top[3] = True
            if top[0] == "[":
                top[2] += 1
        elif top[0] == "{" and top[3] and token.startswith('"'):
            pending_key = (offset, _json_key(token))
        elif top[0] == "{" and token == ":" and pending_key is not None:
            top[3] = False
            path = (*top[1], pending_key[1])
            if path == target:
                yield pending_key[0]
            pending_key = None


def _json_key(token: str) -> str:
    try:
        key = json.loads(token)
    except ValueError:
        return token
    return key if isinstance(key, str) else token


def _locate_depth(text: str) -> int:
    """The first offset where nesting exceeds :data:`MAX_DEPTH`."""
    depth = 0
    for offset, token in _tokens(text):
        if token in "{[":
            depth += 1
            if depth > MAX_DEPTH:
                return offset
        elif token in "}]":
            depth -= 1
    return 0


def _json_error(
    text: str, filename: str, path: tuple[int | str, ...], offset: int, message: str
) -> BadInput:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    field = _format_path(path)
    return escaped(BadInput(message, file=f"{filename}:{line}:{column}", field=field))


def _format_path(path: tuple[int | str, ...]) -> str:
    out = ""
    for part in path[:6] if len(path) > 12 else path:  # a depth refusal: shortened
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    if len(path) > 12:
        out += f"...({len(path) - 6} more levels)"
    return out or "(document)"
