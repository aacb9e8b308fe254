"""Does the failure record reveal the assigned pressure? (seed 001, 5.3 and appendix H)

**Packets.** Within each configuration (an arm's policy or host, menu mode and completion
cap: the stratum inside which cells are paired, never a feature), a packet is a task and a
repeat over the baseline cell and its three single-stress endpoint cells (the
configuration's largest menu; high workflow; linked encoding). Every configuration of the
study that holds the four cells is pooled. A packet whose baseline succeeds and in which
exactly one stressed cell fails is a *single-failure packet*: its label is the pressure of
the failed cell (V, W or D) and its features come from the failed record only. A packet
with an infrastructure failure in any of its cells is left out, and counted (the seed's
"2 with infrastructure failures"); one missing a cell is incomplete, and counted.

**Feature sets** (the seed's ten, Table 11; docs/toolbottleneck.md, readings D1-D8):
``constant`` (no feature: the training majority), ``flag``, ``obligation``, ``record``
(both), ``record+trace`` (the record and the trace shape), ``calls`` (binned 0, 1-2, 3-5,
6+), ``trace`` (the trace shape: binned calls and the recorded reason for an early stop,
the harness limit that stopped the episode or ``answered``), ``verdicts`` (the nine
obligation verdicts), ``termination`` (termination-aware label: the harness limit when
one fired, else the first unmet obligation) and ``menu-proxy`` (the binned prompt tokens
per request, which reveal the menu size: a reference point, not a diagnostic).

**Decoder.** Leave one intent out: a lookup table maps each exact feature tuple of the
training packets to its majority label (ties in the order V, W, D); a tuple not seen in
training gets the training prior (its majority label). Balanced accuracy averages the
recalls of the classes present (a constant guess scores 1/3 with all three); with one
pressure only nothing is decoded, since every decoder would score 100%.

**Intervals.** The held-out predictions are fixed and intents are resampled (every
configuration's packets of a drawn intent move together): 95% percentile intervals for
each feature set's balanced accuracy, and for the seed's five paired comparisons
(:data:`COMPARISONS`) 99% intervals, Bonferroni over five. The draws (10,000 by default)
are ``rng.integers(0, G, size=(draws, G))`` of ``numpy.random.default_rng(seed)``,
G intents in sorted order. Below :data:`~prereg.stats.bootstrap.FEW_CLUSTERS` intents no
interval is printed, and the reason is (docs/statistics.md); nor is a degenerate
interval or one that misses its estimate.

**Packets with several failures.** Every failed stressed row of a packet whose baseline
succeeds and two or three stressed cells fail is decoded by the table trained on the
single-failure packets of the other intents; its label is its cell's pressure. The rows
are correlated, so these figures are descriptive (no interval).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from prereg.experiments.toolbottleneck.verify import LIMITS, OBLIGATIONS
from prereg.reports.render.markdown import table
from prereg.reports.toolbottleneck.census import INFRASTRUCTURE
from prereg.stats.bootstrap import FEW_CLUSTERS

LABELS = ("V", "W", "D")
#: the seed's Bonferroni family: five exploratory comparisons at 99% (appendix H)
ALPHA = 0.05
ACCURACY_LEVEL = 0.95
DRAWS = 10_000


class DecodedRecord(Protocol):
    """What the decoder reads of an episode: a study record, or a registered study's run
    record with its arm's cell (:mod:`prereg.reports.toolbottleneck.registered`)."""

    @property
    def arm(self) -> str: ...
    @property
    def cell(self) -> Mapping[str, Any]: ...
    @property
    def menu_mode(self) -> str: ...
    @property
    def profile(self) -> str: ...
    @property
    def completion_cap(self) -> int: ...
    @property
    def task_id(self) -> str: ...
    @property
    def repeat(self) -> int: ...
    @property
    def intent(self) -> str: ...
    @property
    def success(self) -> bool: ...
    @property
    def first_unmet_obligation(self) -> str | None: ...
    @property
    def terminal_flag(self) -> str | None: ...
    @property
    def calls(self) -> int: ...
    @property
    def turns(self) -> int: ...
    @property
    def tokens_input(self) -> int | None: ...
    @property
    def verdicts(self) -> Mapping[str, bool | None] | None: ...


Feature = Callable[[DecodedRecord], tuple[Hashable, ...]]


def calls_bin(calls: int) -> str:
    """The seed's bins: 0, 1 to 2, 3 to 5, 6 or more."""
    if calls == 0:
        return "0"
    if calls <= 2:
        return "1-2"
    if calls <= 5:
        return "3-5"
    return "6+"


def stop_reason(r: DecodedRecord) -> str:
    """The recorded reason for an early stop: the harness limit that stopped the episode
    (the flag, when it is a limit), else ``answered`` (it ended with an answer)."""
    flag = r.terminal_flag
    return flag if flag in LIMITS else "answered"


def trace_shape(r: DecodedRecord) -> tuple[str, str]:
    return (calls_bin(r.calls), stop_reason(r))


def termination_label(r: DecodedRecord) -> str | None:
    """The termination-aware label: the limit that fired, else the first unmet obligation."""
    flag = r.terminal_flag
    return flag if flag in LIMITS else r.first_unmet_obligation


def verdict_vector(r: DecodedRecord) -> tuple[bool | None, ...]:
    """The nine obligation verdicts in the check order (None: undefined or not recorded)."""
    verdicts = r.verdicts or {}
    return tuple(verdicts.get(o) for o in OBLIGATIONS)


def menu_proxy(r: DecodedRecord) -> str:
    """Prompt tokens per request, binned by powers of two ("2^k": from 2^k to 2^(k+1)):
    the prompt carries the menu's schemas, so it reveals the menu size."""
    if r.tokens_input is None:
        return "not measured"
    if r.turns <= 0:
        return "no request"
    per = r.tokens_input / r.turns
    return "0" if per < 1 else f"2^{math.floor(math.log2(per))}"


@dataclass(frozen=True)
class FeatureSet:
    name: str
    label: str  # the seed's name (Table 11)
    reads: str
    of: Feature


FEATURE_SETS: tuple[FeatureSet, ...] = (
    FeatureSet("constant", "Constant (majority)", "nothing", lambda r: ()),
    FeatureSet("flag", "Termination flag", "terminal flag", lambda r: (r.terminal_flag,)),
    FeatureSet(
        "obligation",
        "First unmet obligation",
        "first unmet obligation",
        lambda r: (r.first_unmet_obligation,),
    ),
    FeatureSet(
        "record",
        "Obligation + termination",
        "obligation, flag",
        lambda r: (r.first_unmet_obligation, r.terminal_flag),
    ),
    FeatureSet(
        "record+trace",
        "+ trace shape",
        "obligation, flag, binned calls, stop reason",
        lambda r: (r.first_unmet_obligation, r.terminal_flag, *trace_shape(r)),
    ),
    FeatureSet("calls", "Call count only", "binned calls", lambda r: (calls_bin(r.calls),)),
    FeatureSet("trace", "Trace shape only", "binned calls, stop reason", trace_shape),
    FeatureSet("verdicts", "Verdict vector", "the nine verdicts", verdict_vector),
    FeatureSet(
        "termination",
        "Corrected labels (termination-aware)",
        "limit that fired, else obligation",
        lambda r: (termination_label(r),),
    ),
    FeatureSet(
        "menu-proxy",
        "Menu-size proxy (treatment-revealing)",
        "prompt tokens per request (binned)",
        lambda r: (menu_proxy(r),),
    ),
)
FEATURES: Mapping[str, Feature] = {f.name: f.of for f in FEATURE_SETS}
#: the seed's five paired comparisons (a - b), appendix H
COMPARISONS: tuple[tuple[str, str], ...] = (
    ("record+trace", "calls"),
    ("record+trace", "obligation"),
    ("record+trace", "trace"),
    ("record+trace", "record"),
    ("record", "obligation"),
)


@dataclass(frozen=True)
class Packet:
    intent: str
    label: str
    failed: DecodedRecord
    configuration: str = ""


@dataclass(frozen=True)
class Population:
    """The decoder's packets: ``single`` the single-failure packets, ``several`` one row per
    failed stressed cell of the packets with several failures."""

    single: tuple[Packet, ...] = ()
    several: tuple[Packet, ...] = ()
    several_packets: int = 0
    infrastructure: int = 0  # packets left out: a cell failed on infrastructure
    incomplete: int = 0  # packets left out: a cell has no scored episode
    configurations: tuple[str, ...] = ()  # those that hold the four cells


def capacity_cell(cell: Mapping[str, Any]) -> bool:
    """A capacity cell: neither Discovery (a catalog) nor the handoff frontier."""
    return "R" not in cell and "handoffs" not in cell


def configuration(r: DecodedRecord) -> str:
    """The stratum: policy or host, menu mode and completion cap (reading 29)."""
    return f"{r.profile} / {r.menu_mode} / cap {r.completion_cap}"


def _stressed_cells(base: Mapping[str, Any], menus: Sequence[int]) -> dict[str, dict[str, Any]]:
    return {
        "V": {**base, "V": max(menus)},
        "W": {**base, "W": "high"},
        "D": {**base, "D": "linked"},
    }


def _arms_of(same: Sequence[DecodedRecord], base_cell: Mapping[str, Any]) -> dict[str, str]:
    """The configuration's arm at the baseline cell and at each stressed endpoint cell
    (the first arm seen at a cell); fewer than four distinct arms: no packets."""
    menus = sorted({r.cell["V"] for r in same if isinstance(r.cell.get("V"), int)})
    if not menus:
        return {}
    cells = {"base": dict(base_cell), **_stressed_cells(base_cell, menus)}
    arm_of: dict[str, str] = {}
    for r in same:
        for name, cell in cells.items():
            if dict(r.cell) == cell:
                arm_of.setdefault(name, r.arm)
    return arm_of if len(set(arm_of.values())) == 4 else {}


@dataclass
class _Tally:
    single: list[Packet] = field(default_factory=list)
    several: list[Packet] = field(default_factory=list)
    several_packets: int = 0
    infrastructure: int = 0
    incomplete: int = 0

    def add(self, config: str, got: Mapping[str, DecodedRecord]) -> None:
        """One unit's four cells (or fewer: incomplete)."""
        if len(got) < 4:
            self.incomplete += 1
        elif any(x.first_unmet_obligation == INFRASTRUCTURE for x in got.values()):
            self.infrastructure += 1
        elif got["base"].success:
            failed = [x for x in LABELS if not got[x].success]
            intent = got["base"].intent
            if len(failed) == 1:
                self.single.append(Packet(intent, failed[0], got[failed[0]], config))
            elif len(failed) > 1:
                self.several_packets += 1
                self.several += [Packet(intent, x, got[x], config) for x in failed]


def packets(records: Sequence[DecodedRecord], baseline: str) -> Population:
    """Every configuration's packets, pooled (see the module docstring). The baseline cell
    is the ``baseline`` arm's cell; each configuration pairs its own arms at it."""
    base = next((r for r in records if r.arm == baseline), None)
    if base is None:
        return Population()
    strata: dict[str, list[DecodedRecord]] = defaultdict(list)
    for r in records:
        if capacity_cell(r.cell):
            strata[configuration(r)].append(r)
    tally = _Tally()
    pooled = []
    for config in sorted(strata):
        arm_of = _arms_of(strata[config], base.cell)
        if not arm_of:
            continue
        pooled.append(config)
        name_of = {arm: name for name, arm in arm_of.items()}
        by_unit: dict[tuple[str, int], dict[str, DecodedRecord]] = defaultdict(dict)
        for r in strata[config]:
            if r.arm in name_of:
                by_unit[(r.task_id, r.repeat)].setdefault(name_of[r.arm], r)
        for unit in sorted(by_unit):
            tally.add(config, by_unit[unit])
    return Population(
        tuple(tally.single),
        tuple(tally.several),
        tally.several_packets,
        tally.infrastructure,
        tally.incomplete,
        tuple(pooled),
    )


def _majority(counts: Mapping[str, int]) -> str:
    return max(LABELS, key=lambda x: (counts.get(x, 0), -LABELS.index(x)))


def predict(
    train: Sequence[Packet],
    query: Sequence[DecodedRecord],
    query_intents: Sequence[str],
    f: Feature,
) -> list[str]:
    """Each query row's label from the lookup table of the training packets of the other
    intents (the majority label of its tuple, else the training prior)."""
    total: dict[Hashable, Counter[str]] = defaultdict(Counter)
    own: dict[tuple[str, Hashable], Counter[str]] = defaultdict(Counter)
    prior: Counter[str] = Counter()
    own_prior: dict[str, Counter[str]] = defaultdict(Counter)
    for p in train:
        key = f(p.failed)
        total[key][p.label] += 1
        own[(p.intent, key)][p.label] += 1
        prior[p.label] += 1
        own_prior[p.intent][p.label] += 1
    out = []
    for r, intent in zip(query, query_intents, strict=True):
        key = f(r)
        counts = total[key] - own[(intent, key)] if key in total else Counter()
        if not counts:
            counts = prior - own_prior[intent]
        out.append(_majority(counts) if counts else LABELS[0])
    return out


def loio_predictions(items: Sequence[Packet], feature: Feature) -> list[str]:
    """Leave-one-intent-out predictions, in the order of ``items``."""
    return predict(items, [p.failed for p in items], [p.intent for p in items], feature)


def balanced_accuracy(labels: Sequence[str], predicted: Sequence[str]) -> float:
    recalls = []
    for c in LABELS:
        members = [i for i, y in enumerate(labels) if y == c]
        if members:
            recalls.append(sum(predicted[i] == c for i in members) / len(members))
    return float(np.mean(recalls)) if recalls else float("nan")


@dataclass(frozen=True)
class Bounds:
    """A printed interval, or its reason (null bounds) where it is withheld."""

    low: float | None
    high: float | None
    reason: str | None = None


@dataclass(frozen=True)
class FeatureResult:
    name: str
    label: str
    reads: str
    accuracy: float
    interval: Bounds
    recalls: dict[str, float | None]
    recovered: tuple[int, int]  # returned-state (D) packets decoded as D, of all D packets
    several: float | None = None  # balanced accuracy on the several-failure rows
    several_recovered: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    gain: float
    interval: Bounds


@dataclass(frozen=True)
class DecoderResult:
    population: Population
    classes: dict[str, int]
    intents: int
    draws: int
    features: tuple[FeatureResult, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    level: float = 1 - ALPHA / len(COMPARISONS)
    reason: str | None = None  # why nothing was decoded
    several_classes: dict[str, int] = field(default_factory=dict)

    @property
    def packets(self) -> int:
        return len(self.population.single)

    @property
    def accuracy(self) -> dict[str, FeatureResult]:
        return {f.name: f for f in self.features}


def _counts(
    labels: Sequence[str], predicted: Sequence[str], groups: np.ndarray, g: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per intent and class: packets (n) and correct predictions (k), shape (g, 3)."""
    y = np.array([LABELS.index(x) for x in labels], dtype=np.intp)
    ok = np.array([a == b for a, b in zip(labels, predicted, strict=True)], dtype=float)
    n = np.zeros((g, len(LABELS)))
    k = np.zeros((g, len(LABELS)))
    np.add.at(n, (groups, y), 1.0)
    np.add.at(k, (groups, y), ok)
    return n, k


def _balanced(weights: np.ndarray, n: np.ndarray, ks: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each feature set's balanced accuracy under intent weights (rows: draws): one matrix
    product for the packets per class and one for every feature set's correct counts."""
    big_n = weights @ n
    big_k = weights @ np.concatenate(ks, axis=1)
    present = big_n > 0
    classes = present.sum(axis=1)
    out = []
    for i in range(len(ks)):
        part = big_k[:, i * n.shape[1] : (i + 1) * n.shape[1]]
        recall = np.divide(part, big_n, out=np.zeros_like(part), where=present)
        out.append(recall.sum(axis=1) / classes)
    return out


def _bounds(est: float, draws: np.ndarray | None, level: float, reason: str | None) -> Bounds:
    if draws is None:
        return Bounds(None, None, reason)
    low, high = (float(x) for x in np.quantile(draws, [(1 - level) / 2, (1 + level) / 2]))
    if high - low < 1e-12:
        return Bounds(None, None, f"degenerate: every resample gives {100 * low:.1f}")
    if not low - 1e-12 <= est <= high + 1e-12:
        return Bounds(
            None, None, "no interval: the percentile interval does not contain the estimate"
        )
    return Bounds(low, high)


def _recalls(labels: Sequence[str], predicted: Sequence[str]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for c in LABELS:
        members = [i for i, y in enumerate(labels) if y == c]
        out[c] = sum(predicted[i] == c for i in members) / len(members) if members else None
    return out


def _recovered(labels: Sequence[str], predicted: Sequence[str]) -> tuple[int, int]:
    members = [i for i, y in enumerate(labels) if y == "D"]
    return sum(predicted[i] == "D" for i in members), len(members)


def decode_pressure(
    population: Population, *, draws: int = DRAWS, seed: int = 0
) -> DecoderResult | None:
    """Balanced accuracy of the ten feature sets, the five paired gains and the
    several-failure rows; None when the study holds no packet of four cells."""
    items = population.single
    classes = {c: sum(p.label == c for p in items) for c in LABELS}
    several_classes = {c: sum(p.label == c for p in population.several) for c in LABELS}
    intents = sorted({p.intent for p in items})
    g = len(intents)
    level = 1 - ALPHA / len(COMPARISONS)
    if not population.configurations:
        return None
    if g < 2:
        return DecoderResult(
            population,
            classes,
            g,
            draws,
            reason=(
                f"too few intents ({g} < 2) with a single-failure packet: leave one intent "
                "out has no training fold"
            ),
            several_classes=several_classes,
        )
    present = [c for c in LABELS if classes[c]]
    if len(present) < 2:
        return DecoderResult(
            population,
            classes,
            g,
            draws,
            reason=(
                f"only one pressure ({', '.join(present)}) has single-failure packets: every "
                "decoder's balanced accuracy would be 100%, which tells the decoders apart "
                "from nothing"
            ),
            several_classes=several_classes,
        )
    labels = [p.label for p in items]
    preds = {f.name: loio_predictions(items, f.of) for f in FEATURE_SETS}
    groups = np.array([intents.index(p.intent) for p in items], dtype=np.intp)
    boot: dict[str, np.ndarray] | None = None
    reason = None
    if g < FEW_CLUSTERS:
        reason = f"too few intents ({g} < {FEW_CLUSTERS}): no interval"
    else:
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, g, size=(draws, g))
        flat = (np.arange(draws)[:, None] * g + picks).ravel()
        weights = np.bincount(flat, minlength=draws * g).reshape(draws, g).astype(float)
        counts = [_counts(labels, preds[f.name], groups, g) for f in FEATURE_SETS]
        values = _balanced(weights, counts[0][0], [k for _, k in counts])
        boot = {f.name: v for f, v in zip(FEATURE_SETS, values, strict=True)}
    point = {f.name: balanced_accuracy(labels, preds[f.name]) for f in FEATURE_SETS}
    several_labels = [p.label for p in population.several]
    several_preds = {
        f.name: predict(
            items,
            [p.failed for p in population.several],
            [p.intent for p in population.several],
            f.of,
        )
        for f in FEATURE_SETS
    }
    features = tuple(
        FeatureResult(
            f.name,
            f.label,
            f.reads,
            point[f.name],
            _bounds(point[f.name], None if boot is None else boot[f.name], ACCURACY_LEVEL, reason),
            _recalls(labels, preds[f.name]),
            _recovered(labels, preds[f.name]),
            balanced_accuracy(several_labels, several_preds[f.name]) if several_labels else None,
            _recovered(several_labels, several_preds[f.name]),
        )
        for f in FEATURE_SETS
    )
    comparisons = tuple(
        Comparison(
            a,
            b,
            point[a] - point[b],
            _bounds(
                point[a] - point[b], None if boot is None else boot[a] - boot[b], level, reason
            ),
        )
        for a, b in COMPARISONS
    )
    return DecoderResult(
        population,
        classes,
        g,
        draws,
        features,
        comparisons,
        level,
        several_classes=several_classes,
    )


# --- rendering --------------------------------------------------------------------------

TITLE = "Does the failure record reveal the pressure?"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _with_interval(est: float, b: Bounds, unit: str) -> str:
    if unit == "%":
        text = f"{100 * est:.1f}%"
        if b.low is not None and b.high is not None:
            return f"{text} [{100 * b.low:.1f}, {100 * b.high:.1f}]"
    else:
        text = f"{100 * est:+.1f} pp"
        if b.low is not None and b.high is not None:
            return f"{text} [{100 * b.low:+.1f}, {100 * b.high:+.1f}]"
    return f"{text} ({b.reason})"


def decoder_tables(result: DecoderResult) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, rows, note) of the decoder's tables: the ten feature sets and the
    five paired comparisons."""
    pop = result.population
    configs = len(pop.configurations)
    title = (
        f"{TITLE} ({result.packets} single-failure packets from {configs} "
        f"configuration{'s' if configs != 1 else ''}, leave one intent out)"
    )
    left = (
        f"Left out: {pop.several_packets} packet(s) with several failures (decoded apart, "
        f"last column), {pop.infrastructure} with an infrastructure failure, "
        f"{pop.incomplete} incomplete (a cell has no scored episode)."
    )
    pooled = "Configurations pooled (each pairs its own cells): " + (
        "; ".join(pop.configurations) + "."
    )
    per_class = (
        "Packets per assigned pressure: "
        + ", ".join(f"{c} {n}" for c, n in result.classes.items())
        + " (balanced accuracy averages the recalls of the pressures present)."
    )
    if result.reason is not None:
        return [(title, [], [], f"{per_class} {left} {pooled} Not decoded: {result.reason}.")]
    d_total = result.classes["D"]
    several_rows = len(pop.several)
    header = [
        "feature set",
        "reads",
        "balanced accuracy (95%)",
        "recall V",
        "recall W",
        "recall D",
        "returned state recovered",
        f"several-failure rows ({several_rows}, descriptive)",
    ]
    rows = []
    for f in result.features:
        several = (
            "-"
            if f.several is None
            else f"{100 * f.several:.1f}% (D {f.several_recovered[0]}/{f.several_recovered[1]})"
        )
        rows.append(
            [
                f.name,
                f.reads,
                _with_interval(f.accuracy, f.interval, "%"),
                *(_pct(f.recalls[c]) for c in LABELS),
                f"{f.recovered[0]}/{d_total}",
                several,
            ]
        )
    resampled = (
        f"Intervals resample the {result.intents} intents with the held-out predictions "
        f"fixed ({result.draws:,} draws). "
        if result.intents >= FEW_CLUSTERS
        else f"Below {FEW_CLUSTERS} intents (here {result.intents}) no interval is printed "
        "and nothing is resampled. "
    )
    how = (
        resampled
        + "menu-proxy reads the treatment: a reference point, not a diagnostic. Several-failure "
        "rows: each failed stressed row of a packet whose baseline succeeds and two or three "
        "stressed cells fail, decoded by the table of the other intents' single-failure "
        "packets; the rows are correlated, so no interval."
    )
    note = f"{per_class} {left} {pooled} {how}"
    k = len(result.comparisons)
    comp_title = (
        f"Decoder comparisons: paired gains in balanced accuracy ({result.level:.0%} intervals, "
        f"Bonferroni over {k} comparisons)"
    )
    comp_rows = [
        [f"{c.a} - {c.b}", _with_interval(c.gain, c.interval, "pp")] for c in result.comparisons
    ]
    comp_note = (
        f"The seed's {k} exploratory comparisons (appendix H): each interval at 1 - 0.05/{k}, "
        f"{result.draws:,} intent-cluster draws shared by every feature set, out-of-fold "
        "predictions held fixed."
    )
    return [
        (title, header, rows, note),
        (comp_title, ["comparison", f"gain ({result.level:.0%})"], comp_rows, comp_note),
    ]


def decoder_markdown(result: DecoderResult | None) -> list[str]:
    if result is None:
        return []
    lines: list[str] = []
    for title, header, rows, note in decoder_tables(result):
        lines += [f"## {title}", "", note, ""]
        if header:
            lines += [*table(header, rows), ""]
    return lines
