"""Shares, the Lever against the best competitor, terminal classes and the Agent
Resolution Split against hand counts from constructed runs."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from scipy import stats as sps

ir = importlib.import_module("prereg.stats.invokerank")

# Two intents, three integrations (0 focal, 1 and 2 competitors); intent 1 has only the
# focal integration eligible, so it is not contested.
ELIGIBLE = np.array([[True, True, True], [True, False, False]])


def _runs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # intent 0: 10 prompts x 2 runs; first choices: focal 8, competitor-1 4, comp-2 2,
    # no tool 6; intent 1: 4 prompts x 2 runs, focal 5
    first = [0] * 8 + [1] * 4 + [2] * 2 + [-1] * 6 + [0] * 5 + [-1] * 3
    intent = [0] * 20 + [1] * 8
    prompt = [t // 2 for t in range(28)]
    hits = np.zeros((28, 3))
    for t, j in enumerate(first):
        if j >= 0:
            hits[t, j] = 1
    return hits, np.array(intent), np.array(prompt)


def test_selection_shares_against_hand_counts() -> None:
    hits, intent, prompt = _runs()
    got = ir.choice_shares(hits, intent, ELIGIBLE, prompt=prompt, resamples=300, seed=1)
    np.testing.assert_allclose(got.share[0], [8 / 14, 4 / 14, 2 / 14])
    assert np.all(np.isnan(got.share[1]))  # one eligible integration: not contested
    assert got.contested.tolist() == [True, False]
    np.testing.assert_array_equal(got.hits, [[8, 4, 2], [5, 0, 0]])
    # the roll-up over contested intents only
    np.testing.assert_allclose(got.rollup, [8 / 14, 4 / 14, 2 / 14])
    for lv in (0.90, 0.95):
        assert np.all(got.low[lv][0] <= got.share[0]) and np.all(got.share[0] <= got.high[lv][0])
    # compositional: in every resample the shares of an intent sum to one, so the
    # focal share's interval is the mirror of its complement's
    assert got.share[0].sum() == pytest.approx(1.0)


def test_share_weights_and_refusals() -> None:
    hits = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], dtype=float)
    intent = np.array([0, 0, 1, 1])
    eligible = np.ones((2, 2), bool)
    got = ir.choice_shares(hits, intent, eligible, weights=[3, 1], resamples=0)
    assert got.rollup[0] == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    with pytest.raises(ValueError, match="at most one"):
        ir.choice_shares(np.ones((1, 2)), [0], eligible, resamples=0)


def test_lever_against_the_best_competitor_by_hand() -> None:
    focal = np.array([[0.5, 0.4], [0.9, 0.1]])
    competitors = np.array(
        [[[0.8, 0.3], [0.2, 0.2]], [[0.6, 0.6], [np.nan, np.nan]]]
    )  # cell 0: Q 0.24 vs 0.36 -> competitor 1; cell 1: only competitor 0 measured
    lever, best = ir.competitor_lever(focal, competitors)
    assert best.tolist() == [1, 0]
    q0, q1 = 0.5 * 0.4, 0.9 * 0.1
    np.testing.assert_allclose(lever[0], [q0 * (0.6 / 0.5 - 1), q0 * (0.6 / 0.4 - 1)])
    np.testing.assert_allclose(lever[1], [0.0, q1 * (0.2 / 0.1 - 1)])  # (.)^+ clips at 0


CLASSES = ["focal"] * 3 + ["competitor", "answered_without_search", "searched_then_declined"]
CLASSES += ["searched_then_declined", "unresolved", "other_external", "answered_without_search"]


def test_terminal_counts_by_hand() -> None:
    intent = [0, 0, 1, 1, 0, 0, 1, 1, 0, 1]
    got = ir.terminal_counts(CLASSES, intent, 2)
    # columns: focal, competitor, other_external, answered w/o search, declined, unresolved
    np.testing.assert_array_equal(got, [[2, 0, 1, 1, 1, 0], [1, 1, 0, 1, 1, 1]])
    with pytest.raises(ValueError, match="unknown terminal"):
        ir.terminal_counts(["native"], [0], 1)


def test_resolution_split_unjudged_is_degenerate_and_keeps_every_run() -> None:
    intent = np.array([0, 0, 1, 1, 0, 0, 1, 1, 0, 1])
    prompt = np.arange(10) // 2
    got = ir.resolution_split(CLASSES, [None] * 10, intent, prompt, 2)
    assert got.degenerate and got.unjudged == 4  # two answered w/o search, two declined
    assert got.host_self_serve is None and got.no_tool_decline is None
    # the denominator is every positive run: focal is 3 of 10, not 3 of 6
    assert got.shares[ir.SPLIT_CLASSES.index("focal")] == pytest.approx(0.3)
    assert got.counts.sum() == 10 and got.shares.sum() == pytest.approx(1.0)


def test_resolution_split_with_native_verdicts_by_hand() -> None:
    intent = np.zeros(10, dtype=int)
    prompt = np.arange(10)  # one run per prompt: no clustering, DEFF 1
    native = [None] * 4 + [True, False, True, None, None, False]
    got = ir.resolution_split(CLASSES, native, intent, prompt, 1)
    # answered w/o search + met: self-service; declined + not met: declined; declined +
    # met: self-service; no answer: unresolved; answered w/o search + not met: unresolved
    by = dict(zip(ir.SPLIT_CLASSES, got.counts[0].tolist(), strict=True))
    assert by == {
        "focal": 3,
        "competitor": 1,
        "other_external": 1,
        "native_self_service": 2,
        "searched_then_declined": 1,
        "unresolved": 2,
        "unjudged": 0,
    }
    assert not got.degenerate
    hss = got.host_self_serve
    assert hss is not None and hss.estimate == pytest.approx(0.2)
    # Jeffreys on 2 of 10 (DEFF 1: one run per prompt), scipy's beta quantiles
    assert hss.low == pytest.approx(sps.beta.ppf(0.05, 2.5, 8.5))
    assert hss.high == pytest.approx(sps.beta.ppf(0.95, 2.5, 8.5))
    assert got.no_tool_decline is not None and got.no_tool_decline.estimate == pytest.approx(0.1)
