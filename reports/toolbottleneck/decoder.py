"""Does the failure record reveal the assigned pressure? (seed 001, 5.3 and appendix H)

Packets: a configuration (arm profile and menu mode), a task and a repeat, over the
baseline cell and its three single-stress endpoint cells (largest menu; high workflow;
linked encoding), in which the baseline succeeds and exactly one stressed cell fails.
The packet's label is the pressure of the failed cell (V, W or D); its features come
from the failed record only:

- ``obligation``: the first unmet obligation; ``flag``: the terminal flag; ``record``:
  both; ``calls``: the call count binned 0, 1-2, 3-5, 6 or more (the baseline decoder).

Leave-one-intent-out lookup decoder: in each fold one intent is held out, each exact
feature tuple of the training packets maps to its majority label (ties in the order V,
W, D) and a tuple not seen in training gets the training prior (the majority label).
Balanced accuracy averages the recalls of the classes present. Intervals resample
intents (the held-out predictions fixed), 95% for each feature set and, for the paired
gains over call counts, 1 - 0.05 / m with m the comparisons (Bonferroni), as the seed's
99% for five comparisons.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from prereg.reports.render.markdown import table

LABELS = ("V", "W", "D")


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


Feature = Callable[[DecodedRecord], tuple[Any, ...]]


def calls_bin(calls: int) -> str:
    if calls == 0:
        return "0"
    if calls <= 2:
        return "1-2"
    if calls <= 5:
        return "3-5"
    return "6+"


FEATURES: Mapping[str, Feature] = {
    "obligation": lambda r: (r.first_unmet_obligation,),
    "flag": lambda r: (r.terminal_flag,),
    "record": lambda r: (r.first_unmet_obligation, r.terminal_flag),
    "calls": lambda r: (calls_bin(r.calls),),
}


@dataclass(frozen=True)
class Packet:
    intent: str
    label: str
    failed: DecodedRecord


def capacity_cell(cell: Mapping[str, Any]) -> bool:
    """A capacity cell: neither Discovery (a catalog) nor the handoff frontier."""
    return "R" not in cell and "handoffs" not in cell


def _stressed_cells(base: Mapping[str, Any], menus: Sequence[int]) -> dict[str, dict[str, Any]]:
    return {
        "V": {**base, "V": max(menus)},
        "W": {**base, "W": "high"},
        "D": {**base, "D": "linked"},
    }


def packets(records: Sequence[DecodedRecord], baseline: str) -> list[Packet]:
    """The single-failure packets of the baseline arm's configuration (see the docstring)."""
    base = next(r for r in records if r.arm == baseline)
    same = [
        r
        for r in records
        if (r.menu_mode, r.profile, r.completion_cap)
        == (base.menu_mode, base.profile, base.completion_cap)
        and capacity_cell(r.cell)
    ]
    menus = sorted({r.cell["V"] for r in same})
    cells = {"base": dict(base.cell), **_stressed_cells(base.cell, menus)}
    arm_of: dict[str, str] = {}
    for r in same:
        for name, cell in cells.items():
            if r.cell == cell:
                arm_of.setdefault(name, r.arm)
    if len(arm_of) < 4:
        return []
    by_unit: dict[tuple[str, int], dict[str, DecodedRecord]] = defaultdict(dict)
    for r in same:
        for name, arm in arm_of.items():
            if r.arm == arm:
                by_unit[(r.task_id, r.repeat)][name] = r
    out = []
    for unit in sorted(by_unit):
        got = by_unit[unit]
        if len(got) < 4 or not got["base"].success:
            continue
        failed = [x for x in LABELS if not got[x].success]
        if len(failed) == 1:
            out.append(Packet(got["base"].intent, failed[0], got[failed[0]]))
    return out


def _majority(labels: Sequence[str]) -> str:
    counts = Counter(labels)
    return max(LABELS, key=lambda x: (counts.get(x, 0), -LABELS.index(x)))


def loio_predictions(items: Sequence[Packet], feature: Feature) -> list[str]:
    """Leave-one-intent-out predictions, in the order of ``items``."""
    predicted: list[str] = []
    for p in items:
        train = [q for q in items if q.intent != p.intent]
        if not train:
            predicted.append(LABELS[0])
            continue
        table_: dict[tuple[Any, ...], list[str]] = defaultdict(list)
        for q in train:
            table_[feature(q.failed)].append(q.label)
        key = feature(p.failed)
        predicted.append(
            _majority(table_[key]) if key in table_ else _majority([q.label for q in train])
        )
    return predicted


def balanced_accuracy(labels: Sequence[str], predicted: Sequence[str]) -> float:
    recalls = []
    for c in LABELS:
        members = [i for i, y in enumerate(labels) if y == c]
        if members:
            recalls.append(sum(predicted[i] == c for i in members) / len(members))
    return float(np.mean(recalls)) if recalls else float("nan")


@dataclass(frozen=True)
class DecoderResult:
    packets: int
    classes: dict[str, int]  # packets per label
    accuracy: dict[str, tuple[float, float, float]]  # feature set -> (value, low, high)
    gains: dict[str, tuple[float, float, float]]  # over call counts, Bonferroni level
    level: float


def decode_pressure(
    items: Sequence[Packet], *, draws: int = 2000, seed: int = 0
) -> DecoderResult | None:
    """Balanced accuracy of each feature set and its gain over call counts; None without
    packets from at least two intents."""
    intents = sorted({p.intent for p in items})
    if len(intents) < 2:
        return None
    labels = [p.label for p in items]
    preds = {name: loio_predictions(items, f) for name, f in FEATURES.items()}
    groups = [[i for i, p in enumerate(items) if p.intent == g] for g in intents]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(groups), size=(draws, len(groups)))
    boot: dict[str, list[float]] = {name: [] for name in FEATURES}
    for row in picks:
        idx = [i for g in row for i in groups[g]]
        ys = [labels[i] for i in idx]
        for name in FEATURES:
            boot[name].append(balanced_accuracy(ys, [preds[name][i] for i in idx]))
    point = {name: balanced_accuracy(labels, preds[name]) for name in FEATURES}
    others = [n for n in FEATURES if n != "calls"]
    level = 1 - 0.05 / len(others)

    def interval(values: Sequence[float], conf: float) -> tuple[float, float]:
        arr = np.asarray(values, dtype=float)
        arr = arr[np.isfinite(arr)]
        low, high = np.quantile(arr, [(1 - conf) / 2, (1 + conf) / 2])
        return float(low), float(high)

    accuracy = {n: (point[n], *interval(boot[n], 0.95)) for n in FEATURES}
    gains = {
        n: (
            point[n] - point["calls"],
            *interval(list(np.subtract(boot[n], boot["calls"])), level),
        )
        for n in others
    }
    classes = {c: labels.count(c) for c in LABELS}
    return DecoderResult(len(items), classes, accuracy, gains, level)


def decoder_table(result: DecoderResult) -> tuple[str, list[str], list[list[str]], str]:
    """(title, header, rows, note) of the decoder's result."""

    def pct(v: tuple[float, float, float]) -> str:
        return f"{100 * v[0]:.1f}% [{100 * v[1]:.1f}, {100 * v[2]:.1f}]"

    def pp(v: tuple[float, float, float]) -> str:
        return f"{100 * v[0]:+.1f} pp [{100 * v[1]:+.1f}, {100 * v[2]:+.1f}]"

    title = (
        f"Does the failure record reveal the pressure? ({result.packets} single-failure "
        "packets, leave one intent out)"
    )
    note = (
        "Packets per assigned pressure: "
        + ", ".join(f"{c} {n}" for c, n in result.classes.items())
        + " (balanced accuracy averages the recalls of the pressures present)."
    )
    header = ["features", "balanced accuracy (95%)", f"gain over call counts ({result.level:.1%})"]
    rows = [
        [n, pct(v), pp(result.gains[n]) if n in result.gains else "-"]
        for n, v in result.accuracy.items()
    ]
    return title, header, rows, note


def decoder_markdown(result: DecoderResult | None) -> list[str]:
    if result is None:
        return []
    title, header, rows, note = decoder_table(result)
    return [f"## {title}", "", note, "", *table(header, rows), ""]
