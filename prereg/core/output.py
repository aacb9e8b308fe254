"""Output helpers: exactly one JSON document under ``--json``, rich otherwise."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import date, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

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
    return json.dumps(
        _clean(json.loads(json.dumps(data, default=_default))), indent=2, ensure_ascii=False
    )


def emit(data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """Print ``data`` as one JSON document, or call ``human`` to render it."""
    if as_json:
        sys.stdout.write(dumps(data) + "\n")
        sys.stdout.flush()
    elif human is not None:
        human()
    else:
        console.print_json(dumps(data))
