"""Word-level text helpers shared by the service's search and the local host.

Tool metadata and prompts are untrusted data: they are only ever split into
lowercase words here, never evaluated or formatted into anything executable.
"""

from __future__ import annotations

import re

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

#: Function words that carry no topic; dropped before matching.
STOPWORDS = frozenset(
    """
a about above after again all also am an and any are as at be been before being below
between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself
just let lets me more most my myself no nor not now of off on once only or other our ours
ourselves out over own please same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself
yourselves i'd i'm i've it's don't that's what's there's can't won't
""".split()
)


def words(text: str) -> list[str]:
    """Lowercase words of ``text``; identifiers split at ``_``, ``-`` and camelCase."""
    text = _CAMEL.sub(r"\1 \2", text)
    return _WORD.findall(text.replace("_", " ").replace("-", " ").lower())


def content_words(text: str) -> list[str]:
    """Words of ``text`` without stopwords, in order (duplicates kept)."""
    return [w for w in words(text) if w not in STOPWORDS]


def normalise(text: str) -> str:
    """Lowercase with runs of whitespace collapsed (for containment checks)."""
    return " ".join(text.lower().split())
