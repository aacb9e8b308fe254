"""The optional extras' message: a format whose library is not installed is bad usage.

The Parquet and Inspect AI formats import their libraries only when used (the base
install stays small); a missing one exits 2 naming the extra that brings it, before
anything is read or written.
"""

from __future__ import annotations

from prereg.core.errors import BadInput


def missing_extra(extra: str, what: str, exc: ImportError) -> BadInput:
    """Exit 2 naming the optional extra to install (the format's library is missing)."""
    return BadInput(
        f"{what} needs the optional extra prereg-agents[{extra}] ({exc.name or exc} is not "
        f"installed); install it with: pip install 'prereg-agents[{extra}]'",
        field="--format",
    )
