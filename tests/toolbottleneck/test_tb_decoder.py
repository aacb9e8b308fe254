"""The failure-record decoder (seed appendix H) on hand-made records, against hand counts
and against plain re-implementations written here (loops over packets and intents, a
resampling loop that expands each draw into its packets)."""

from __future__ import annotations

import inspect
import math
from collections import Counter
from typing import Any, cast

import numpy as np
import pytest

from prereg.experiments.toolbottleneck.verify import OBLIGATIONS
from prereg.reports.invariants import _study_table, _Walk
from prereg.reports.toolbottleneck.decoder import (
    COMPARISONS,
    FEATURE_SETS,
    FEATURES,
    LABELS,
    Packet,
    Population,
    balanced_accuracy,
    calls_bin,
    decode_pressure,
    decoder_markdown,
    decoder_tables,
    loio_predictions,
    packets,
)
from prereg.reports.toolbottleneck.model import StudyTable
from prereg.runners.toolbottleneck.study import StudyRecord


def _rec(
    arm: str,
    cell: dict[str, object],
    success: bool,
    *,
    task: str = "f@0",
    intent: str = "i1",
    obligation: str | None = None,
    calls: int = 2,
    cap: int = 1024,
    flag: str | None = None,
    repeat: int = 0,
    profile: str = "sim-steady",
    turns: int | None = None,
    tokens_input: int = 10,
    verdicts: dict[str, bool | None] | None = None,
) -> StudyRecord:
    return StudyRecord(
        study="s",
        study_digest="sha256:" + "0" * 64,
        arm=arm,
        cell=cell,
        menu_mode="routed",
        profile=profile,
        completion_cap=cap,
        task_id=task,
        family=task.split("@")[0],
        intent=intent,
        seed=0,
        repeat=repeat,
        variant="v",
        variant_digest="sha256:" + "0" * 64,
        success=success,
        first_unmet_obligation=None if success else (obligation or "conclusion"),
        terminal_flag=None if success else (flag or "wrong_conclusion"),
        verdicts=verdicts or {},
        calls=calls,
        turns=calls + 1 if turns is None else turns,
        call_limit=5,
        turn_limit=7,
        tokens_input=tokens_input,
        tokens_output=1,
    )


CELLS = {
    "base": {"V": 8, "W": "low", "D": "raw"},
    "v": {"V": 128, "W": "low", "D": "raw"},
    "w": {"V": 8, "W": "high", "D": "raw"},
    "d": {"V": 8, "W": "low", "D": "linked"},
}
SEED_ORDER = [
    "constant",
    "flag",
    "obligation",
    "record",
    "record+trace",
    "calls",
    "trace",
    "verdicts",
    "termination",
    "menu-proxy",
]


def _unit(
    task: str, outcomes: dict[str, bool], *, profile: str = "sim-steady", intent: str = "i1"
) -> list[StudyRecord]:
    return [
        _rec(f"{arm}-{profile}", CELLS[arm], ok, task=task, profile=profile, intent=intent)
        for arm, ok in outcomes.items()
    ]


# --- the population ------------------------------------------------------------------


def test_packets_keep_units_whose_baseline_succeeds_and_one_stressed_cell_fails() -> None:
    records = (
        _unit("a@0", {"base": True, "v": False, "w": True, "d": True})  # a V packet
        + _unit("b@0", {"base": True, "v": True, "w": True, "d": False})  # a D packet
        + _unit("c@0", {"base": True, "v": False, "w": False, "d": True})  # two fail
        + _unit("e@0", {"base": False, "v": False, "w": True, "d": True})  # baseline fails
        + _unit("g@0", {"base": True, "v": True, "w": True, "d": True})  # nothing fails
    )
    got = packets(records, "base-sim-steady")
    assert [(p.failed.task_id, p.label) for p in got.single] == [("a@0", "V"), ("b@0", "D")]
    # the packet with two failures gives one row per failed stressed cell
    assert [(p.failed.task_id, p.label) for p in got.several] == [("c@0", "V"), ("c@0", "W")]
    assert got.several_packets == 1


def test_every_configuration_is_pooled_and_pairs_its_own_cells() -> None:
    """Two policies, both with the four cells, are pooled; a third with no W or D cell
    forms no packet. A unit's cells are paired within a configuration only: the steady
    baseline fails on task a, so the truncating V failure of task a is not paired with it."""
    records = (
        _unit("a@0", {"base": False, "v": True, "w": True, "d": True})
        + _unit("b@0", {"base": True, "v": True, "w": False, "d": True})
        + _unit("a@0", {"base": True, "v": False, "w": True, "d": True}, profile="sim-truncating")
        + _unit("b@0", {"base": True, "v": True, "w": True, "d": True}, profile="sim-truncating")
        + _unit("a@0", {"base": True, "v": False}, profile="sim-lean")
    )
    got = packets(records, "base-sim-steady")
    assert got.configurations == (
        "sim-steady / routed / cap 1024",
        "sim-truncating / routed / cap 1024",
    )
    assert sorted(
        (p.configuration.split(" ")[0], p.failed.task_id, p.label) for p in got.single
    ) == [
        ("sim-steady", "b@0", "W"),
        ("sim-truncating", "a@0", "V"),
    ]
    # the configuration is a stratum, never a feature
    assert all(f.of(got.single[0].failed) == f.of(got.single[0].failed) for f in FEATURE_SETS)
    assert "sim" not in repr([f.of(p.failed) for p in got.single for f in FEATURE_SETS])


def test_infrastructure_and_incomplete_packets_are_left_out_and_counted() -> None:
    infra = _unit("a@0", {"base": True, "v": True, "w": True})
    infra.append(_rec("d-sim-steady", CELLS["d"], False, task="a@0", obligation="infrastructure"))
    records = (
        infra
        + _unit("b@0", {"base": True, "v": False, "w": True})  # no D record: incomplete
        + _unit("c@0", {"base": True, "v": False, "w": True, "d": True})
    )
    got = packets(records, "base-sim-steady")
    assert (got.infrastructure, got.incomplete, len(got.single)) == (1, 1, 1)
    result = decode_pressure(got)
    assert result is not None and result.reason is not None  # one intent: nothing to train on
    title, _, rows, note = decoder_tables(result)[0]
    assert rows == []
    assert "1 with an infrastructure failure, 1 incomplete" in note
    assert "too few intents (1 < 2)" in note


def test_no_configuration_with_the_four_cells_gives_no_table() -> None:
    records = _unit("a@0", {"base": True, "v": False})
    assert decode_pressure(packets(records, "base-sim-steady")) is None
    assert decoder_markdown(None) == []


# --- the ten feature sets ----------------------------------------------------------------


def test_the_ten_feature_sets_read_the_record_as_documented() -> None:
    assert [f.name for f in FEATURE_SETS] == SEED_ORDER
    verdicts: dict[str, bool | None] = {o: o not in ("selection", "budgets") for o in OBLIGATIONS}
    truncated = _rec(
        "x",
        CELLS["v"],
        False,
        obligation="selection",
        flag="completion_cap",
        calls=0,
        turns=1,
        tokens_input=14_000,
        verdicts=verdicts,
    )
    wrong = _rec("x", CELLS["w"], False, obligation="conclusion", calls=7, tokens_input=7_000)
    got = {name: (f(truncated), f(wrong)) for name, f in FEATURES.items()}
    assert got["constant"] == ((), ())
    assert got["flag"] == (("completion_cap",), ("wrong_conclusion",))
    assert got["obligation"] == (("selection",), ("conclusion",))
    assert got["record"] == (("selection", "completion_cap"), ("conclusion", "wrong_conclusion"))
    # trace shape: binned calls and the reason for an early stop (the limit, or answered)
    assert got["trace"] == (("0", "completion_cap"), ("6+", "answered"))
    assert got["record+trace"] == (
        ("selection", "completion_cap", "0", "completion_cap"),
        ("conclusion", "wrong_conclusion", "6+", "answered"),
    )
    assert got["calls"] == (("0",), ("6+",))
    # the nine verdicts in the check order A S P Q E X G B C; None where not recorded
    assert got["verdicts"][0] == tuple(verdicts[o] for o in OBLIGATIONS)
    assert got["verdicts"][1] == (None,) * 9
    # termination-aware: the limit that fired replaces the obligation, else the obligation
    assert got["termination"] == (("completion_cap",), ("conclusion",))
    # prompt tokens per request, by powers of two: 14,000 in 1 request, 7,000 in 8
    assert got["menu-proxy"] == ((f"2^{math.floor(math.log2(14_000))}",), ("2^9",))
    assert [calls_bin(c) for c in (0, 1, 2, 3, 5, 6, 40)] == [
        "0",
        "1-2",
        "1-2",
        "3-5",
        "3-5",
        "6+",
        "6+",
    ]


# --- the decoder against a plain re-implementation ---------------------------------------


def _reference_predict(train: list[Packet], rows: list[tuple[str, Any]], f: Any) -> list[str]:
    """Leave the row's intent out, look its tuple up, majority with ties V, W, D; an
    unseen tuple gets the training majority."""
    out = []
    for intent, record in rows:
        fold = [q for q in train if q.intent != intent]
        if not fold:
            out.append("V")
            continue
        same = [q.label for q in fold if f(q.failed) == f(record)]
        pool = same or [q.label for q in fold]
        counts = Counter(pool)
        best = max(counts.values())
        out.append(next(c for c in ("V", "W", "D") if counts.get(c, 0) == best))
    return out


def _reference_ba(labels: list[str], predicted: list[str]) -> float:
    recalls = []
    for c in ("V", "W", "D"):
        idx = [i for i, y in enumerate(labels) if y == c]
        if idx:
            recalls.append(sum(predicted[i] == c for i in idx) / len(idx))
    return sum(recalls) / len(recalls)


def _random_population(n_intents: int, seed: int) -> Population:
    """Random failed records over ``n_intents`` intents, the label loosely tied to them."""
    rng = np.random.default_rng(seed)
    obligations = ["selection", "dependencies", "evidence", "conclusion", "budgets"]
    flags = ["completion_cap", "episode_budget", "call_limit", "infeasible", "wrong_conclusion"]
    single: list[Packet] = []
    several: list[Packet] = []
    for i in range(n_intents):
        for j in range(int(rng.integers(3, 9))):
            label = LABELS[int(rng.choice(3, p=[0.55, 0.3, 0.15]))]
            bias = LABELS.index(label)
            record = _rec(
                "x",
                CELLS["v"],
                False,
                task=f"t{i}-{j}@0",
                intent=f"i{i:02d}",
                obligation=obligations[(bias + int(rng.integers(0, 3))) % 5],
                flag=flags[(bias + int(rng.integers(0, 2))) % 5],
                calls=int(rng.integers(0, 9)) + 2 * bias,
                turns=int(rng.integers(1, 9)),
                tokens_input=int(rng.integers(500, 40_000)) * (1 + (label == "V")),
                verdicts={o: bool(rng.integers(0, 2)) for o in OBLIGATIONS[: 3 + bias]},
            )
            packet = Packet(f"i{i:02d}", label, record)
            (several if rng.random() < 0.2 else single).append(packet)
    return Population(tuple(single), tuple(several), len(several), 0, 0, ("c",))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_leave_one_intent_out_agrees_with_a_plain_lookup_for_every_feature_set(seed: int) -> None:
    pop = _random_population(6, seed)
    items = list(pop.single)
    labels = [p.label for p in items]
    result = decode_pressure(pop, draws=10)
    assert result is not None
    for f in FEATURE_SETS:
        ref = _reference_predict(items, [(p.intent, p.failed) for p in items], f.of)
        assert loio_predictions(items, f.of) == ref, f.name
        got = result.accuracy[f.name]
        assert got.accuracy == pytest.approx(_reference_ba(labels, ref))
        assert got.recovered == (
            sum(y == p == "D" for y, p in zip(labels, ref, strict=True)),
            labels.count("D"),
        )
        # several-failure rows: trained on the other intents' single-failure packets
        rows = [(p.intent, p.failed) for p in pop.several]
        ref_several = _reference_predict(items, rows, f.of)
        several_labels = [p.label for p in pop.several]
        assert got.several == pytest.approx(_reference_ba(several_labels, ref_several))
    for c in result.comparisons:
        assert c.gain == pytest.approx(
            result.accuracy[c.a].accuracy - result.accuracy[c.b].accuracy
        )


def test_the_intervals_agree_with_a_resampling_loop() -> None:
    """12 intents, 400 draws (this checks the vectorised resampling, not the default):
    each draw's intents expanded into their packets, balanced accuracy by loops; 95% for a
    feature set, 99% for the five gains."""
    pop = _random_population(12, 7)
    items = list(pop.single)
    draws, seed = 400, 5
    result = decode_pressure(pop, draws=draws, seed=seed)
    assert result is not None and result.intents == 12
    intents = sorted({p.intent for p in items})
    picks = np.random.default_rng(seed).integers(0, 12, size=(draws, 12))
    labels = [p.label for p in items]
    preds = {
        f.name: _reference_predict(items, [(p.intent, p.failed) for p in items], f.of)
        for f in FEATURE_SETS
    }
    boot: dict[str, list[float]] = {f.name: [] for f in FEATURE_SETS}
    for row in picks:
        idx = [i for g in row for i, p in enumerate(items) if p.intent == intents[g]]
        for name, pr in preds.items():
            boot[name].append(_reference_ba([labels[i] for i in idx], [pr[i] for i in idx]))

    def quantiles(values: list[float], level: float) -> tuple[float, float]:
        low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
        return float(low), float(high)

    checked = 0
    for f in result.features:
        low, high = quantiles(boot[f.name], 0.95)
        if high - low < 1e-12:
            assert f.interval.low is None and "degenerate" in (f.interval.reason or "")
            continue
        if f.interval.low is None:  # withheld: the estimate lies outside
            assert not low <= f.accuracy <= high
            continue
        assert (f.interval.low, f.interval.high) == pytest.approx((low, high))
        checked += 1
    assert checked >= 5
    for c in result.comparisons:
        diff = list(np.subtract(boot[c.a], boot[c.b]))
        low, high = quantiles(diff, 0.99)
        if c.interval.low is not None:
            assert (c.interval.low, c.interval.high) == pytest.approx((low, high))
            checked += 1
    assert checked >= 8


def test_the_defaults_are_the_seeds() -> None:
    assert inspect.signature(decode_pressure).parameters["draws"].default == 10_000
    assert COMPARISONS == (
        ("record+trace", "calls"),
        ("record+trace", "obligation"),
        ("record+trace", "trace"),
        ("record+trace", "record"),
        ("record", "obligation"),
    )
    result = decode_pressure(_random_population(10, 3))
    assert result is not None
    assert result.draws == 10_000 and result.level == pytest.approx(0.99)
    tables = decoder_tables(result)
    assert "99% intervals, Bonferroni over 5 comparisons" in tables[1][0]
    assert "10,000" in tables[1][3] and "(10,000 draws)" in tables[0][3]


# --- small scale, hand counts, rendering --------------------------------------------------


def _packet(intent: str, label: str, obligation: str, calls: int) -> Packet:
    return Packet(intent, label, _rec("x", CELLS["v"], False, obligation=obligation, calls=calls))


def test_leave_one_intent_out_with_an_unseen_tuple_falls_back_to_the_prior() -> None:
    items = [
        _packet("i1", "V", "selection", 0),
        _packet("i1", "W", "evidence", 7),
        _packet("i2", "V", "selection", 0),
        _packet("i2", "W", "evidence", 7),
        _packet("i2", "V", "selection", 0),
        _packet("i3", "D", "protocol", 3),  # no other intent has 'protocol'
    ]
    predicted = loio_predictions(items, FEATURES["obligation"])
    # i3's tuple is unseen: the training prior is V (3 V, 2 W)
    assert predicted == ["V", "W", "V", "W", "V", "V"]
    # recalls: V 3/3, W 2/2, D 0/1
    assert balanced_accuracy([p.label for p in items], predicted) == pytest.approx(2 / 3)


def test_below_ten_intents_every_interval_is_withheld_with_its_reason() -> None:
    items = tuple(
        _packet(intent, label, obligation, calls)
        for intent in ("i1", "i2", "i3")
        for label, obligation, calls in (
            ("V", "selection", 3),
            ("W", "evidence", 4),
            ("D", "conclusion", 5),
        )
    )
    result = decode_pressure(Population(items, configurations=("c",)), draws=300)
    assert result is not None
    assert result.classes == {"V": 3, "W": 3, "D": 3}
    assert result.accuracy["obligation"].accuracy == pytest.approx(1.0)
    # one bin for all: the majority is a three-way tie, broken in the order V, W, D
    assert result.accuracy["calls"].accuracy == pytest.approx(1 / 3)
    assert result.accuracy["constant"].accuracy == pytest.approx(1 / 3)
    gains = {(c.a, c.b): c.gain for c in result.comparisons}
    assert gains[("record", "obligation")] == pytest.approx(0.0)
    for f in result.features:
        assert (
            f.interval.low is None and f.interval.reason == "too few intents (3 < 10): no interval"
        )
    tables = decoder_tables(result)
    assert [row[0] for row in tables[0][2]] == SEED_ORDER
    assert all("too few intents (3 < 10): no interval" in row[2] for row in tables[0][2])
    assert all("too few intents (3 < 10): no interval" in row[1] for row in tables[1][2])
    assert (
        "Below 10 intents (here 3) no interval is printed and nothing is resampled"
        in (tables[0][3])
    )


def test_the_printed_tables_satisfy_the_report_rules() -> None:
    """Every printed interval at 12 intents passes the study-table rules of
    docs/statistics.md (support, estimate inside, width, finite)."""
    result = decode_pressure(_random_population(12, 11), draws=2000)
    assert result is not None
    printed = 0
    for title, header, rows, note in decoder_tables(result):
        walk = _Walk(cast(Any, None))
        _study_table(walk, StudyTable(title=title, columns=header, rows=rows, note=note), "/t")
        assert walk.found == []
        printed += sum("[" in cell for row in rows for cell in row)
        assert not any("nan" in cell or "inf" in cell for row in rows for cell in row)
    assert printed >= 8
    text = "\n".join(decoder_markdown(result))
    assert "## Decoder comparisons" in text and "menu-proxy" in text


def test_packets_of_one_pressure_only_are_not_decoded() -> None:
    """Balanced accuracy over one class is 100% for every decoder: withheld, with why."""
    items = tuple(_packet(i, "V", "selection", 0) for i in ("i1", "i2", "i3"))
    result = decode_pressure(Population(items, configurations=("c",)))
    assert result is not None and result.features == ()
    title, header, rows, note = decoder_tables(result)[0]
    assert (header, rows) == ([], [])
    assert "only one pressure (V) has single-failure packets" in note
