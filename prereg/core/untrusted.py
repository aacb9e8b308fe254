"""Untrusted text shown without letting it act: on a terminal, in Markdown, in JSON.

Tool names, titles and descriptions, prompts, server metadata of a snapshot, the free
text of a registration and anything a provider returned are data (DESIGN.md, invariant
10). Printed or rendered raw they could act: a terminal obeys escape sequences (clear
the screen, recolour, rewrite earlier lines, OSC 8 hyperlinks, OSC 52 clipboard writes,
the window title), bidirectional overrides make text read differently from its bytes,
rich parses ``[bold]`` as markup (and raises on a stray ``[/bold]``), and a Markdown
viewer turns ``[x](javascript:...)`` into a link and ``![](https://host/beacon.png)``
into a request to that host. This module is the one place that decides how each output
neutralises such text:

- **which characters are unsafe** (:func:`unsafe`): every control character (C0 but for
  newline and tab where lines are kept, DEL, C1, hence every ESC, CSI and OSC
  sequence), every format character (bidi embeddings, overrides and isolates,
  zero-width characters, the BOM), line and paragraph separators, surrogates,
  private-use and unassigned code points. They are never dropped silently: each is
  shown as a visible escape, ``\\x1b``, ``\\u202e``, ``\\U000e0001``, so what the
  bytes say can still be read;
- **terminal**: :func:`display_text` (a safe ``str``) and :func:`display` (a
  ``rich.text.Text``, which rich never parses for markup or emoji codes). Every
  human output that prints an untrusted string prints it through one of the two;
- **Markdown**: :func:`markdown_text` (inline text, safe in a paragraph and in a table
  cell), :func:`markdown_block` (several lines, e.g. a block quote) and
  :func:`markdown_code` (a code span). Nothing in the result can become a link, an
  image, an autolink, an HTML tag or an entity reference: ``< > &`` are written as
  entities, the Markdown punctuation that builds links, emphasis, code and tables is
  backslash-escaped, and bare URLs (``scheme://...``, ``www....``) and e-mail
  addresses, which GitHub-flavoured renderers autolink, are put in code spans, where
  no renderer makes a link;
- **JSON** (:func:`json_safe`): the encoder escapes C0 itself; what it leaves raw under
  ``ensure_ascii=False`` (DEL, C1, bidi and other format characters) is written as
  ``\\u`` escapes (four hex digits), which decode to the same string, so ``--json``
  stays exact data.

- **HTML** (:func:`html_text`): what the terminal and Markdown escape (controls, bidi
  and other format characters, line separators: :func:`display_text`, line breaks
  kept), then ``html.escape``. Every text child and attribute value of
  :mod:`prereg.reports.render.html` goes through it, so the four outputs of a report
  (terminal, ``--json``, report.md, report.html) escape the same characters.
"""

from __future__ import annotations

import html
import re
import unicodedata

from rich.text import Text

#: Unicode categories shown escaped: controls, format characters (bidi, zero-width),
#: surrogates, private use, unassigned, line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

#: Markdown punctuation that is backslash-escaped in text (links and images need
#: ``[`` ``]``; emphasis ``*`` ``_``; strikethrough ``~``; code spans `````; table cells
#: ``|``; headings ``#``; the escape character itself). ``< > &`` become entities.
_MARKDOWN_PUNCTUATION = frozenset("\\`*_[]~|#")

#: What GitHub-flavoured Markdown autolinks without brackets (extended autolinks): a
#: URL with a scheme, a ``www.`` host, an e-mail address. (The look-behind keeps the
#: e-mail branch linear: it is tried only where a run of address characters starts.)
_AUTOLINK = re.compile(
    r"(?:[A-Za-z][A-Za-z0-9+.\-]{0,31}://|www\.)[^\s<>`|\[\]\\]*"
    r"|(?<![A-Za-z0-9.+\-_])[A-Za-z0-9.+\-_]+@[A-Za-z0-9\-_]+(?:\.[A-Za-z0-9\-_]+)+",
    re.IGNORECASE,
)
#: Punctuation GFM leaves out of the end of an autolink; left out of the code span too.
_TRAILING = ".,:;!?'\")*_~"

#: A line that a renderer would read as a list item, a quote, a setext underline or a
#: thematic break when it starts a line of a block.
_BLOCK_MARKER = re.compile(r"^(\s*)(?:([-+=>])|(\d{1,9})([.)]))")


def unsafe(char: str) -> bool:
    """Whether ``char`` may not reach a terminal or a rendered document as itself."""
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def display_text(value: object, limit: int | None = None, *, multiline: bool = False) -> str:
    """``value`` as text that cannot act on a terminal or a renderer.

    Unsafe characters (:func:`unsafe`) are shown as escapes (``\\x1b``). Newlines and
    tabs become spaces, unless ``multiline``, which keeps them (a carriage return is
    shown escaped either way: alone it would move the cursor back over the line).
    ``limit`` cuts the result to that many characters, ending in an ellipsis.
    """
    text = "" if value is None else str(value)
    if multiline:
        text = text.replace("\r\n", "\n")
    out: list[str] = []
    for char in text:
        if char in "\n\t":
            out.append(char if multiline else " ")
        elif unsafe(char):
            out.append(_escaped(char))
        else:
            out.append(char)
    shown = "".join(out)
    if limit is not None and len(shown) > limit:
        return shown[: max(limit - 1, 0)] + "…"
    return shown


def display(
    value: object, style: str = "", limit: int | None = None, *, multiline: bool = False
) -> Text:
    """``value`` as a ``rich.text.Text`` (never parsed for markup), made safe by
    :func:`display_text`."""
    return Text(display_text(value, limit, multiline=multiline), style=style)


def _markdown_plain(text: str) -> str:
    escaped = "".join("\\" + c if c in _MARKDOWN_PUNCTUATION else c for c in text)
    return html.escape(escaped, quote=False)


def _markdown_line(text: str) -> str:
    """One safe line: autolinkable runs in code spans, the rest escaped as text."""
    out: list[str] = []
    position = 0
    for match in _AUTOLINK.finditer(text):
        token = match.group(0).rstrip(_TRAILING)
        if not token:
            continue
        start, end = match.start(), match.start() + len(token)
        out.append(_markdown_plain(text[position:start]))
        out.append(_code_span(token))
        position = end
    out.append(_markdown_plain(text[position:]))
    return "".join(out)


def markdown_text(value: object) -> str:
    """``value`` as inline Markdown text: one line, shown literally by any renderer.

    Safe in a paragraph, after a list marker, in bold, and in a table cell (``|`` is
    escaped). A value that starts a line of its own should use :func:`markdown_block`.
    """
    return _markdown_line(display_text(value))


def markdown_block(value: object) -> list[str]:
    """``value`` as lines of Markdown text, each shown literally (line breaks kept).

    A line that a renderer would read as a list item, a block quote or a setext
    underline has that marker escaped.
    """
    lines = display_text(value, multiline=True).replace("\t", " ").split("\n")
    out = []
    for line in lines:
        safe = _markdown_line(line)
        marker = _BLOCK_MARKER.match(safe)
        if marker is not None:
            if marker.group(2) is not None:
                cut = marker.start(2)
            else:
                cut = marker.start(4)
            safe = safe[:cut] + "\\" + safe[cut:]
        out.append(safe)
    return out


def _code_span(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_code(value: object) -> str:
    """``value`` as an inline code span: literal in every renderer (no link, no HTML).

    For use outside table cells: GFM splits a table row at every ``|``, even in a code
    span (inside a table, use :func:`markdown_text`).
    """
    text = display_text(value)
    return _code_span(text) if text else "` `"


def html_text(value: object) -> str:
    """``value`` as HTML text or an attribute value: unsafe characters (:func:`unsafe`)
    shown as escapes (``\\x1b``, ``\\u202e``; newlines and tabs kept) by
    :func:`display_text`, then ``< > & " '`` written as entities by ``html.escape``.
    The one escaping path of every HTML output."""
    return html.escape(display_text(value, multiline=True), quote=True)


#: Candidates for :func:`json_safe`: C0 controls are escaped by the encoder itself, and the
#: structural whitespace of the document (newlines, indentation) must stay as it is.
_NON_ASCII = re.compile(r"[^\x00-\x7e]")


def json_safe(document: str) -> str:
    """``document`` (JSON text) with every unsafe character (:func:`unsafe`) that
    :func:`json.dumps` leaves raw under ``ensure_ascii=False`` (DEL, C1, bidi and other
    format characters, line separators, lone surrogates) written as a ``\\u`` escape
    (four hex digits): the same data, decoded, and nothing a terminal acts on."""
    return _NON_ASCII.sub(_json_escape, document)


def _json_escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if not unsafe(char):
        return char
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
