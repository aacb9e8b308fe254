"""Showing untrusted tool metadata on a terminal without letting it act.

Server names, tool names and descriptions come from third parties. Printed raw they
could carry terminal escape sequences (move the cursor, rewrite earlier lines, set
the window title), bidirectional overrides that make text read differently from its
bytes, or rich markup. :func:`display_text` makes every such character visible as an
escape; callers wrap the result in ``rich.text.Text`` so markup is never parsed.
JSON output needs none of this: the JSON encoder escapes control characters itself.
"""

from __future__ import annotations

import unicodedata

# Characters that reorder or hide text: bidi embeddings, overrides and isolates.
_BIDI = {
    0x202A,
    0x202B,
    0x202C,
    0x202D,
    0x202E,
    0x2066,
    0x2067,
    0x2068,
    0x2069,
    0x200E,
    0x200F,
    0x061C,
}


def display_text(value: object, limit: int = 240) -> str:
    """``value`` as one printable line: control, format and bidi characters escaped."""
    text = "" if value is None else str(value)
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char in "\n\t":
            out.append(" ")
        elif code in _BIDI or unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            out.append(f"\\u{code:04x}" if code > 0xFF else f"\\x{code:02x}")
        else:
            out.append(char)
    shown = "".join(out)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
