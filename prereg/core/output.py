"""Output helpers: exactly one JSON document under ``--json``, rich otherwise.

Untrusted text in human output is printed through :mod:`prereg.core.untrusted`
(``display``); JSON documents go through :func:`prereg.core.untrusted.json_safe`, so
even ``--json`` on a terminal carries no raw character that a terminal acts on.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.highlighter import JSONHighlighter

from prereg.core.untrusted import json_safe

console = Console()
err_console = Console(stderr=True)


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
    ``document``: ``dumps(data)``, where the caller made it already."""
    if as_json:
        sys.stdout.write((dumps(data) if document is None else document) + "\n")
        sys.stdout.flush()
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
