"""Output helpers: exactly one JSON document under ``--json``, rich otherwise.

Untrusted text in human output is printed through :mod:`prereg.core.untrusted`
(``display``); JSON documents go through :func:`prereg.core.untrusted.json_safe`, so
even ``--json`` on a terminal carries no raw character that a terminal acts on.

Standard output is whatever the caller made it, and both of its failures are handled
here, once for every command:

- **an encoding that cannot hold the text** (``PYTHONIOENCODING=ascii``, a latin-1
  terminal): :func:`safe_streams` makes the streams write what they cannot encode as
  ``\\u`` escapes (four hex digits) instead of raising, and a JSON document goes out ASCII-only
  (:func:`ascii_json`: the same data, still valid JSON) wherever standard output is not
  UTF-8;
- **a reader that went away** (``prereg show ID | head -1``): the write fails with EPIPE,
  which :func:`stdout_guard` turns into :class:`StdoutClosed`; the CLI then exits
  :data:`CLOSED_STDOUT_EXIT` without a traceback, and nothing later (a summary saying
  what was written) is printed (:func:`emit` checks first).
"""

from __future__ import annotations

import codecs
import errno
import io
import json
import math
import os
import re
import select
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.highlighter import JSONHighlighter

from prereg.core.untrusted import json_safe

#: The exit code when standard output's reader is gone: 128 + SIGPIPE, what a shell
#: reports for git or any program that SIGPIPE ends (``prereg list | head -1``).
CLOSED_STDOUT_EXIT = 141

#: The codec error handler :func:`safe_streams` gives the standard streams.
ESCAPE_ERRORS = "prereg-json-escape"


class StdoutClosed(Exception):
    """Standard output's reader is gone (EPIPE): nothing more can be shown to it.

    Not an ``OSError``, so that click, which takes every EPIPE for this and exits 1,
    lets it through to the CLI's entry point."""


class SafeConsole(Console):
    """A rich console that reports a closed pipe as :class:`StdoutClosed`.

    rich's own answer to EPIPE (``Console.on_broken_pipe``) is ``SystemExit(1)``, after
    pointing standard output at the null device, whichever stream was closed; the CLI
    exits every command the same way on a closed pipe instead (141, quietly)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # what is still buffered is dropped, not written again
        raise StdoutClosed


console = SafeConsole()
err_console = SafeConsole(stderr=True)


def _u_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    """A codec error handler: what the stream cannot encode as ``\\u`` escapes (four hex digits),
    the form JSON reads back as the same character (a surrogate pair above U+FFFF), so a
    document keeps its data and text keeps every character visible."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(map(_u_escape, error.object[error.start : error.end])), error.end


codecs.register_error(ESCAPE_ERRORS, _escape_unencodable)

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def ascii_json(document: str) -> str:
    """A JSON document with every non-ASCII character written as a ``\\u`` escape
    (``ensure_ascii``'s form): valid JSON that parses to the same data, for a stream
    that is not UTF-8. (Outside strings JSON text is ASCII, so only strings change.)"""
    return _NON_ASCII.sub(lambda match: _u_escape(match.group(0)), document)


def _utf8(stream: object) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _whole_writes(stream: object) -> io.TextIOWrapper | None:
    """A line-buffered stream over a buffered writer for the file of ``stream``, when
    ``stream``'s binary layer is the raw file (``python -u``, ``PYTHONUNBUFFERED``);
    else None. (The file is not closed with it: it stays ``stream``'s.)"""
    raw = getattr(stream, "buffer", None)
    if not isinstance(stream, io.TextIOWrapper) or not isinstance(raw, io.RawIOBase):
        return None
    try:
        fd = raw.fileno()
    except (OSError, ValueError):
        return None
    stream.flush()
    return io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=True,
        write_through=True,
    )


@contextmanager
def safe_streams() -> Iterator[None]:
    """The ``prereg`` program's standard streams, safe for any text and any reader, for
    as long as the program runs (restored afterwards: a test may run it in-process).

    What a stream cannot encode is escaped (:data:`ESCAPE_ERRORS`) rather than raising
    ``UnicodeEncodeError``, unless the user chose another handler than the default
    (``PYTHONIOENCODING=ascii:replace`` stays). Under ``python -u`` /
    ``PYTHONUNBUFFERED`` standard output's binary layer is the raw file, whose
    ``write`` may write part of the bytes and return the count, which callers ignore: an
    export cut short by a closed pipe then reported every record written. Here it is
    buffered again (line-buffered, written through), so a write writes everything or
    raises."""
    changed: list[tuple[Any, str]] = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        errors = getattr(stream, "errors", None)
        if errors in ("strict", "surrogateescape"):
            try:
                stream.reconfigure(errors=ESCAPE_ERRORS)
            except (AttributeError, io.UnsupportedOperation, ValueError):
                continue
            changed.append((stream, errors))
    original = sys.stdout
    whole = _whole_writes(original)
    if whole is not None:
        sys.stdout = whole
    try:
        yield
    finally:
        if whole is not None:
            try:
                whole.flush()
            except (OSError, ValueError):  # a reader gone: nothing more reaches it
                pass
            sys.stdout = original
        for stream, errors in changed:
            try:
                stream.reconfigure(errors=errors)
            except (io.UnsupportedOperation, ValueError):
                pass


def _reader_gone(stream: object) -> bool:
    """True when ``stream`` is a pipe or socket whose reading end is closed (poll says
    POLLERR or POLLHUP); False for a file, a terminal, or where poll is not to be had."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no fd (captured), no poll (Windows)
        return False


def output_closed() -> bool:
    """True when the reader of standard output (or of standard error) is gone."""
    return _reader_gone(sys.stdout) or _reader_gone(sys.stderr)


@contextmanager
def stdout_guard() -> Iterator[None]:
    """Turn EPIPE from a closed standard output (or error) into :class:`StdoutClosed`.

    Another broken pipe (a child process's, say) is left as it is."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE and output_closed():
            raise StdoutClosed from None
        raise


def ensure_reader() -> None:
    """Raise :class:`StdoutClosed` when standard output's reader is gone already, so
    that no summary claims output that nobody read (``export --out - | head -1``)."""
    if _reader_gone(sys.stdout):
        raise StdoutClosed


def quiet_closed_output() -> int:
    """After :class:`StdoutClosed`: point the closed streams at the null device, so
    that the interpreter's last flush of what is still buffered fails no more (no
    "Exception ignored ... BrokenPipeError"), and return :data:`CLOSED_STDOUT_EXIT`."""
    for stream in (sys.stdout, sys.stderr):
        if not _reader_gone(stream):
            continue
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (AttributeError, OSError, ValueError):
            pass
    return CLOSED_STDOUT_EXIT


def write_document(document: str) -> None:
    """One JSON document (text :func:`dumps` made) on standard output, ASCII-only where
    standard output is not UTF-8 (:func:`ascii_json`)."""
    ensure_reader()
    with stdout_guard():
        sys.stdout.write((document if _utf8(sys.stdout) else ascii_json(document)) + "\n")
        sys.stdout.flush()


def _default(obj: Any) -> Any:
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean(obj: Any) -> Any:
    """Replace non-finite floats with null (JSON has no NaN/inf)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def dumps(data: Any) -> str:
    """``data`` as a JSON document, indented by two spaces: non-finite floats null, unsafe
    characters escaped.

    Encoded by the C encoder and indented by msgspec's formatter (which copies every
    token as written): the text the standard library's indenting encoder writes, which
    is pure Python, in a third of the time (a 2 MB report: 0.045 s against 0.13-0.16 s,
    twice per ``analyse``). Data with a non-finite float, or text msgspec cannot take (a
    lone surrogate), go the standard library's way, each float cleaned first. (A dict
    whose keys collide once written as strings, ``{1: .., "1": ..}``, keeps both here and
    the last there; no document prereg writes has one.)"""
    import msgspec  # lazy: 10-40 ms that `prereg --help` and most commands need not pay

    try:
        text = json.dumps(data, default=_default, ensure_ascii=False, allow_nan=False)
        return json_safe(msgspec.json.format(text, indent=2))
    except (ValueError, UnicodeEncodeError):  # a non-finite float; a lone surrogate
        cleaned = _clean(json.loads(json.dumps(data, default=_default)))
        return json_safe(json.dumps(cleaned, indent=2, ensure_ascii=False))


def print_json(data: Any, target: Console | None = None) -> None:
    """``data`` as highlighted JSON for a person: the document :func:`dumps` makes.

    Not ``Console.print_json``, which parses the text again and writes it back with
    raw C1 and format characters (``ensure_ascii=False``) that a terminal acts on.
    """
    text = JSONHighlighter()(dumps(data))
    text.no_wrap = True
    text.overflow = None
    (target or console).print(text, soft_wrap=True)


def emit(
    data: Any,
    as_json: bool,
    human: Callable[[], None] | None = None,
    *,
    document: str | None = None,
) -> None:
    """Print ``data`` as one JSON document, or call ``human`` to render it;
    ``document``: ``dumps(data)``, where the caller made it already.

    Nothing is printed once standard output's reader is gone (:class:`StdoutClosed`):
    ``human`` may be a summary on stderr of what went to stdout."""
    ensure_reader()
    if as_json:
        write_document(dumps(data) if document is None else document)
    elif human is not None:
        human()
    else:
        print_json(data)


def short_digests(digests: Iterable[str], minimum: int = 12) -> dict[str, str]:
    """Each digest abbreviated as git abbreviates commits: ``sha256:`` and the shortest
    prefix of its hex that no other digest of ``digests`` shares, at least ``minimum``
    hex characters. Maps each full digest to its abbreviation (for people; ``--json``
    keeps the full digests)."""
    full = sorted(set(digests))
    out: dict[str, str] = {}
    for i, digest in enumerate(full):
        algo, sep, hexpart = digest.rpartition(":")
        length = minimum
        for neighbour in (full[i - 1] if i else None, full[i + 1] if i + 1 < len(full) else None):
            if neighbour is None:
                continue
            other = neighbour.rpartition(":")[2]
            common = next(
                (k for k, (a, b) in enumerate(zip(hexpart, other, strict=False)) if a != b),
                min(len(hexpart), len(other)),
            )
            length = max(length, common + 1)
        out[digest] = f"{algo}{sep}{hexpart[:length]}"
    return out
