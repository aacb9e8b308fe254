"""The reader's form of a text: what two prompts share when a reader cannot tell them apart.

:func:`fold` applies, until nothing changes (at most :data:`MAX_ROUNDS` rounds):

1. remove the invisible characters (:func:`invisible`: every code point of general
   category Cf, such as U+200B ZERO WIDTH SPACE, U+200D, U+2060, U+FEFF, U+00AD and the
   bidi controls, and the other default-ignorable code points that are not Cf: U+034F,
   U+115F, U+1160, U+17B4, U+17B5, U+180B-U+180F, U+3164, U+FE00-U+FE0F, U+FFA0 and
   U+E0100-U+E01EF);
2. the TR39 skeleton (Unicode Technical Standard #39, section 4): NFD, each character
   replaced by its prototype from ``confusables.txt``, NFD again; the Cyrillic ``а`` and
   the Latin ``a`` share a skeleton;
3. NFKC (full-width forms, ligatures, super- and subscripts, compatibility spaces);
4. case folding (:meth:`str.casefold`), then the skeleton again (case folding can make
   a character the skeleton maps), then :data:`CASE_MERGES`: letters that TR39 and case
   folding send apart are merged (the capital ``I`` is a confusable of ``l`` while its
   lower case is ``i``, so ``Island`` and ``island`` would otherwise differ; ``i`` and
   ``l`` fold to one letter);
5. runs of white space collapsed to one space, none at either end.

Each step makes more texts equal, never fewer; the loop makes :func:`fold` idempotent.
The data is ``confusables.txt`` of Unicode 17.0.0 (:data:`CONFUSABLES_SOURCE`), shipped
as package data beside this module and read once, on first use. No maintained PyPI
library computes the TR39 skeleton: ``confusable_homoglyphs`` keeps the confusable pairs
without their direction (no prototype), ``confusables`` enumerates variants, so the
skeleton is built here from the standard's own file.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import unicodedata
from importlib import resources

#: Where the confusables data comes from (the file beside this module, unchanged but
#: for a byte-order mark) and its sha256, checked when it is read.
CONFUSABLES_SOURCE = "https://www.unicode.org/Public/security/17.0.0/confusables.txt"
CONFUSABLES_VERSION = "17.0.0"
CONFUSABLES_SHA256 = "ec88ecebcf89f63f813d460842b0cf8322744b40a0b2c06f88a2cea48c0351ea"

#: Rounds of the fold before it gives up looking for a fixed point (two suffice for
#: every text measured; the property test checks idempotence).
MAX_ROUNDS = 6

#: Default-ignorable code points that are not of category Cf (DerivedCoreProperties.txt,
#: Default_Ignorable_Code_Point, less Cf and unassigned code points).
_IGNORABLE_NOT_CF = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


@functools.cache
def invisible() -> frozenset[str]:
    """The characters :func:`fold` removes and ``register`` refuses in a prompt unless the
    experiment declares them (``format_characters`` in experiment.yaml); built on first
    use (a walk over every code point, a few tenths of a second)."""
    chars = {chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
    for low, high in _IGNORABLE_NOT_CF:
        chars.update(chr(c) for c in range(low, high + 1))
    return frozenset(chars)


@functools.cache
def _drop() -> dict[int, None]:
    return {ord(c): None for c in invisible()}


def describe(char: str) -> str:
    """``U+200B ZERO WIDTH SPACE``: how messages name a character."""
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}"


def invisible_in(text: str) -> list[str]:
    """The invisible characters of ``text``, each once, in order of appearance."""
    hidden = invisible()
    if text.isascii():
        return []
    return list(dict.fromkeys(c for c in text if c in hidden))


def _read_confusables() -> dict[str, str]:
    data = resources.files(__package__).joinpath("confusables.txt").read_bytes()
    if hashlib.sha256(data).hexdigest() != CONFUSABLES_SHA256:  # pragma: no cover
        raise RuntimeError("experiments/unicode/confusables.txt is not the shipped file")
    mapping: dict[str, str] = {}
    for line in data.decode("utf-8").splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2:
            continue
        source = "".join(chr(int(h, 16)) for h in fields[0].split())
        mapping[source] = "".join(chr(int(h, 16)) for h in fields[1].split())
    return mapping


@functools.cache
def _tables() -> tuple[dict[int, str], dict[int, str]]:
    """(the TR39 prototype table, the case merges), for :meth:`str.translate`."""
    prototypes = {ord(s): t for s, t in _read_confusables().items() if len(s) == 1}

    def base(text: str) -> str:
        for _ in range(MAX_ROUNDS):
            before = text
            text = _skeleton(text, prototypes)
            text = unicodedata.normalize("NFKC", text).casefold()
            text = _skeleton(text, prototypes)
            if text == before:
                break
        return text

    # the ASCII capitals whose fold and their lower case's differ: only I, a confusable
    # of l whose lower case is i; the two folded letters are merged into one (the
    # look-alikes of I, such as the Cyrillic capital I, fold the same way)
    merges: dict[int, str] = {}
    for char in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        a, b = base(char), base(char.lower())
        if a != b and len(a) == len(b) == 1:
            merges[ord(max(a, b))] = min(a, b)
    return prototypes, merges


def _skeleton(text: str, prototypes: dict[int, str]) -> str:
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", text).translate(prototypes))


def skeleton(text: str) -> str:
    """The TR39 skeleton of ``text`` (NFD, prototypes, NFD), case and all kept."""
    return _skeleton(text, _tables()[0])


@functools.cache
def _ascii() -> dict[int, str]:
    """The fold of each ASCII character: an ASCII text folds character by character."""
    return {c: _fold(chr(c)) if not chr(c).isspace() else chr(c) for c in range(128)}


def fold(text: str) -> str:
    """The reader's form of ``text`` (see the module docstring); idempotent."""
    if text.isascii():
        return " ".join(text.translate(_ascii()).split())
    return _fold(text)


def _fold(text: str) -> str:
    prototypes, merges = _tables()
    drop = _drop()
    for _ in range(MAX_ROUNDS):
        before = text
        text = text.translate(drop)
        text = _skeleton(text, prototypes)
        text = unicodedata.normalize("NFKC", text).casefold()
        text = _skeleton(text, prototypes).translate(merges)
        text = " ".join(text.split())
        if text == before:
            break
    return text


#: Exposed for the docs and tests: the case merges the fold applies (letter -> letter).
def case_merges() -> dict[str, str]:
    return {chr(k): v for k, v in _tables()[1].items()}
