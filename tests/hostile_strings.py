"""One corpus of hostile strings for every renderer (issue 40, item 6).

Untrusted text (task prompts, tool descriptions, host answers, free-text names and
descriptions, judge rationales, provider errors) reaches four outputs of a report: the
terminal, ``--json``, report.md and report.html. Each string here is one way text can
act instead of being read: terminal escape sequences (CSI, OSC 8 hyperlinks, OSC 52
clipboard, the window title, BEL), NUL and other C0/C1 controls, bidirectional
overrides and isolates that make text read differently from its bytes, line and
paragraph separators, zero-width characters, HTML that would run (``<script>``, an
event handler), Markdown that would link, embed or break a table (``[x](javascript:)``,
``![](beacon)``, ``|``, backticks), rich markup, and a very long string.
"""

from __future__ import annotations

import unicodedata

#: (name, string): each holds a visible marker ``H<n>`` so a test can see it arrived.
HOSTILE: list[tuple[str, str]] = [
    ("csi", "H01 \x1b[2J\x1b[31mred\x1b[0m \x9b1m"),
    ("osc8", "H02 \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"),
    ("osc52-title-bel", "H03 \x1b]52;c;ZXZpbA==\x07\x1b]0;owned\x07 bell\x07"),
    ("nul-c0-del", "H04 nul\x00 bs\x08 cr\rover vt\x0b ff\x0c del\x7f"),
    (
        "bidi",
        "H05 \u202eevil.exe\u202c \u2066iso\u2069 \u2067r\u2069 \u2068f\u2069 \u202a\u202b\u202d",
    ),
    ("separators", "H06 line\u2028sep para\u2029sep nel\x85end"),
    ("zero-width", "H07 z\u200bw\u200cj\u200dn\u2060b\ufeffom \U000e0041tag"),
    ("script", 'H08 <script>alert("x")</script><img src=x onerror="alert(1)"></td></table>'),
    ("markdown", "H09 [x](javascript:alert(1)) ![](https://evil.example/b.png) a|b `code` ``"),
    ("rich-markup", "H10 [bold red]markup[/bold red] [/] [link=https://evil.example]l[/link]"),
    ("entities", "H11 &amp; &lt;b&gt; &#x1b; &#8238;"),
    ("private-unassigned", "H12 \ue000 \U0010fffd \u0378 \U000effff"),
    ("long", "H13 " + "A\u202e" * 2000 + "B" * 20000),
    # C1 OSC and DCS ended by the C1 string terminator, a 7-bit DCS, and a cursor-position
    # query (a terminal answers it by typing into the input), as a judge's rationale may hold
    ("c1-osc-dcs-query", "H14 \x9d0;title\x9c \x90q\x9c \x1bP1$r\x1b\\ \x1b[6n why"),
]

#: Every hostile string in one (for a field that holds one value).
ALL = " ".join(text for _, text in HOSTILE)

#: Unicode categories no output may carry raw (the set prereg.core.untrusted escapes).
UNSAFE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def raw_unsafe(text: str, keep: str = "\n\t") -> set[str]:
    """The unsafe characters ``text`` holds raw (``keep``: line structure allowed)."""
    return {c for c in set(text) if c not in keep and unicodedata.category(c) in UNSAFE}
