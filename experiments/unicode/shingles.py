"""Near-duplicates by character shingles: a prompt edited by a few characters is the same
request to a reader, whatever its exact fingerprint says.

A text's shingles are the distinct runs of :data:`SHINGLE` characters of its reader's
form (:func:`.fold.fold`, padded with one space at each end, so a text shorter than a
shingle still has one). Two texts are near-duplicates when the Jaccard similarity of
their shingle sets (shared shingles over all shingles) is at least :data:`THRESHOLD`.

The threshold was chosen from measurements (``python -m
prereg.experiments.unicode.shingles`` prints them; docs/experiments.md, "Fingerprints",
keeps the table). The most similar distinct prompts of the bundled corpora
(music-library and podcast-selection, 79 prompts, paraphrases within a cluster
included) reach 0.52; one character replaced or removed leaves a bundled prompt at 0.58
or more (0.65 or more in 99 of 100 random edits); one word replaced or removed leaves
it at 0.59 or more in 95 of 100 edits (0.34 at worst, a five-word prompt). 0.55 lies
above every distinct pair and below nearly every small edit. A ToolBottleneckBench
study's prompts differ by design only in generated ids (0.92) and are not probed.

:class:`ShingleIndex` finds every indexed text at or above the threshold without
comparing all pairs: the prefix filter (Chaudhuri, Ganti and Kaushik 2006; Bayardo,
Ma and Srikant 2007). Shingles are ordered rarest first over the indexed texts; two sets
with Jaccard >= t share at least one shingle among the first ``|A| - ceil(t |A|) + 1``
of each, so only the prefixes are indexed and probed, and each candidate found is then
compared exactly. The cost is linear in the texts' lengths and in the candidates, which
are few because the prefixes hold the rare shingles.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from prereg.experiments.unicode.fold import fold

#: Characters per shingle.
SHINGLE = 5
#: Jaccard similarity at or above which two prompts are near-duplicates.
THRESHOLD = 0.55


def shingles(text: str, *, folded: bool = False) -> frozenset[str]:
    """The distinct :data:`SHINGLE`-character runs of ``text``'s reader's form."""
    form = f" {text if folded else fold(text)} "
    if len(form) <= SHINGLE:
        return frozenset({form})
    return frozenset({form[i : i + SHINGLE] for i in range(len(form) - SHINGLE + 1)})


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b| (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def _prefix_length(size: int, threshold: float) -> int:
    return size - math.ceil(threshold * size - 1e-9) + 1


@dataclass(frozen=True)
class Match:
    """An indexed text (by its key) near a probed one, with their similarity."""

    key: Hashable
    similarity: float


class ShingleIndex:
    """The shingle sets of some texts (the claimed test prompts), probed for near-duplicates."""

    def __init__(self, texts: Iterable[tuple[Hashable, str]], threshold: float = THRESHOLD):
        self.threshold = threshold
        self._sets: dict[Hashable, frozenset[str]] = {k: shingles(t) for k, t in texts}
        counts: Counter[str] = Counter()
        for s in self._sets.values():
            counts.update(s)
        self._count = counts
        self._vocabulary = frozenset(counts)
        self._postings: dict[str, list[Hashable]] = defaultdict(list)
        for key, s in self._sets.items():
            for shingle in self._prefix(s):
                self._postings[shingle].append(key)

    def __len__(self) -> int:
        return len(self._sets)

    def _prefix(self, s: frozenset[str]) -> list[str]:
        # rarest first; a shingle no indexed text holds counts 0 (it can match nothing)
        ordered = sorted(s, key=lambda g: (self._count.get(g, 0), g))
        return ordered[: _prefix_length(len(s), self.threshold)]

    def matches(self, text: str) -> list[Match]:
        """The indexed texts at or above the threshold, most similar first."""
        if not self._sets:
            return []
        probe = shingles(text)
        # the shingles no indexed text holds come first in the order (count 0) and match
        # nothing: when they fill the prefix, nothing can be near (the usual case)
        known = self._vocabulary & probe
        room = _prefix_length(len(probe), self.threshold) - (len(probe) - len(known))
        if room <= 0:
            return []
        candidates: set[Hashable] = set()
        for shingle in sorted(known, key=lambda g: (self._count[g], g))[:room]:
            candidates.update(self._postings.get(shingle, ()))
        found = [Match(key, jaccard(probe, self._sets[key])) for key in candidates]
        found = [m for m in found if m.similarity >= self.threshold]
        return sorted(found, key=lambda m: (-m.similarity, str(m.key)))


def _measure() -> None:  # pragma: no cover - the measurement behind THRESHOLD
    """Print the most similar distinct bundled prompts and one-word edits' similarity."""
    from pathlib import Path  # lazy: only the measurement run as a script needs it

    import yaml  # lazy: only the measurement run as a script reads the corpora

    bundled = Path(__file__).resolve().parent.parent / "bundled"
    prompts: list[str] = []
    for corpus in sorted(bundled.glob("*/corpus.yaml")):
        prompts += [t["prompt"] for t in yaml.safe_load(corpus.read_text())["tasks"]]
    distinct = sorted({fold(p): p for p in prompts}.values())
    sets = [shingles(p) for p in distinct]
    pairs = sorted(
        (
            (jaccard(sets[i], sets[j]), distinct[i], distinct[j])
            for i in range(len(sets))
            for j in range(i + 1, len(sets))
        ),
        reverse=True,
    )
    print(f"{len(distinct)} distinct bundled prompts; most similar pairs:")
    for sim, a, b in pairs[:5]:
        print(f"  {sim:.3f}  {a!r} ~ {b!r}")
    edits = []
    for p in distinct:
        words = p.split()
        if len(words) < 5:
            continue
        for k in range(len(words)):
            changed = " ".join(words[:k] + ["zzzz"] + words[k + 1 :])
            dropped = " ".join(words[:k] + words[k + 1 :])
            edits += [
                jaccard(shingles(p), shingles(changed)),
                jaccard(shingles(p), shingles(dropped)),
            ]
    print(
        f"one word changed or removed ({len(edits)} edits): min {min(edits):.3f}, "
        f"5th percentile {sorted(edits)[len(edits) // 20]:.3f}"
    )


if __name__ == "__main__":  # pragma: no cover
    _measure()
