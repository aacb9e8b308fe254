"""Prediction-powered inference: closed form by hand, coverage by simulation.

The references are written out here independently of ``stats/ppi.py``:

    PPI:    theta = mean(f~) + mean(Y - f),
            se^2  = s^2(Y - f) / n + s^2(f~) / N            (ddof 1)
    PPI++:  lambda = Cov(Y, f) / ((1 + n / N) Var(f over gold and unlabelled)), in [0, 1]
            theta = lambda mean(f~) + mean(Y - lambda f),
            se^2  = s^2(Y - lambda f) / n + lambda^2 s^2(f~) / N

and the documented floors: the rectifier's variance at 1 / n (a gold set showing one
disagreement), the unlabelled variance at ((range of the values) / 2)^2 / N.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from prereg.stats import PPI_MIN_GOLD, ppi_difference, ppi_mean

Z95 = 1.959963984540054

# a hand-worked example: 10 gold runs, 20 unlabelled runs
GOLD_Y = [1, 1, 1, 0, 0, 1, 0, 1, 1, 1]
GOLD_F = [1, 1, 0, 0, 1, 1, 0, 1, 1, 0]
UNLAB = [1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1]


def test_ppi_mean_closed_form_by_hand() -> None:
    res = ppi_mean(GOLD_Y, GOLD_F, UNLAB, min_gold=10)
    # rectifier Y - f = (0, 0, 1, 0, -1, 0, 0, 0, 0, 1): mean 0.1,
    # s^2 = (3 - 10 * 0.1^2) / 9 = 2.9 / 9 (floor 1 / 10 does not bind)
    # unlabelled: 14 ones of 20, mean 0.7, s^2 = 20 * 0.7 * 0.3 / 19 = 4.2 / 19
    assert res.estimate == pytest.approx(0.7 + 0.1)
    se = math.sqrt((2.9 / 9) / 10 + (4.2 / 19) / 20)
    assert res.se == pytest.approx(se, rel=1e-12)
    assert res.low == pytest.approx(0.8 - Z95 * se, rel=1e-12)
    assert res.high == pytest.approx(0.8 + Z95 * se, rel=1e-12)
    # beside it: the judge's own rate over all 30 judged runs (6 + 14 ones) and the gold
    assert res.judge_rate == pytest.approx(20 / 30)
    assert res.gold_rate == pytest.approx(0.7)
    gse = math.sqrt((10 * 0.7 * 0.3 / 9) / 10)
    assert res.gold_low == pytest.approx(0.7 - Z95 * gse)
    assert res.rectifier == pytest.approx(0.1)
    assert res.lam == (1.0,) and (res.n_gold, res.n_unlabelled) == (10, 20)
    assert res.paired is None and "random sample" in res.method


def test_ppi_plus_plus_closed_form_by_hand() -> None:
    y, f, ft = (np.array(v, float) for v in (GOLD_Y, GOLD_F, UNLAB))
    res = ppi_mean(y, f, ft, method="ppi++", min_gold=10)
    n, big_n = 10, 20
    # Cov(Y, f): means 0.7 and 0.6; sum of products of deviations by hand
    cov = (np.sum(y * f) - n * 0.7 * 0.6) / (n - 1)  # (5 - 4.2) / 9
    assert cov == pytest.approx(0.8 / 9)
    f_all = np.concatenate([f, ft])  # 20 ones of 30
    var_all = 30 * (2 / 3) * (1 / 3) / 29
    lam = cov / ((1 + n / big_n) * var_all)
    assert 0 < lam < 1
    est = lam * 0.7 + np.mean(y - lam * f)
    r = y - lam * f
    v_rect = np.sum((r - r.mean()) ** 2) / (n - 1)
    se = math.sqrt(v_rect / n + lam**2 * (4.2 / 19) / big_n)
    assert res.lam[0] == pytest.approx(lam, rel=1e-12)
    assert res.estimate == pytest.approx(est, rel=1e-12)
    assert res.se == pytest.approx(se, rel=1e-12)
    assert res.judge_rate == pytest.approx(f_all.mean())


def test_floor_when_the_gold_shows_no_disagreement() -> None:
    y = [1] * 6 + [0] * 4
    res = ppi_mean(y, y, UNLAB, min_gold=10)
    # rectifier all 0: variance floored at ((1 - (-1)) / 2)^2 / 10 = 0.1
    assert res.se == pytest.approx(math.sqrt(0.1 / 10 + (4.2 / 19) / 20), rel=1e-12)


def _vector_ppi(
    y: np.ndarray, f: np.ndarray, n: int, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rows are replications; the first n columns are gold. The closed form, vectorised."""
    rect = y[:, :n] - f[:, :n]
    ft = f[:, n:]
    big_n = ft.shape[1]
    v_rect = np.maximum(rect.var(axis=1, ddof=1), 1.0 / n)  # one disagreement in n
    v_unl = np.maximum(ft.var(axis=1, ddof=1), ((hi - lo) / 2) ** 2 / big_n)
    est = ft.mean(axis=1) + rect.mean(axis=1)
    return est, np.sqrt(v_rect / n + v_unl / big_n)


def _judge(y: np.ndarray, e: float, kind: str, rng: np.random.Generator) -> np.ndarray:
    u = rng.random(y.shape)
    if kind == "symmetric":  # errors either way at rate e
        return np.where(u < e, 1.0 - y, y)
    return np.where((y == 1) & (u < 2 * e), 0.0, y)  # misses completions only: biased


@pytest.mark.parametrize("kind", ["symmetric", "biased"])
def test_ppi_mean_covers_with_a_known_judge_error_rate(kind: str) -> None:
    rng = np.random.default_rng(20231110)
    reps, n, big_n, theta, e = 3000, 100, 1000, 0.6, 0.10
    y = (rng.random((reps, n + big_n)) < theta).astype(float)
    f = _judge(y, e, kind, rng)
    est, se = _vector_ppi(y, f, n, 0.0, 1.0)
    # the function computes exactly this closed form (checked on 60 replications)
    for r in range(60):
        res = ppi_mean(y[r, :n], f[r, :n], f[r, n:])
        assert res.estimate == pytest.approx(est[r], rel=1e-10, abs=1e-12)
        assert res.se == pytest.approx(se[r], rel=1e-10)
    cover = np.mean(np.abs(est - theta) <= Z95 * se)
    assert abs(cover - 0.95) <= 0.02, cover
    # the judge alone is biased (by -2 e theta when it misses completions) and its naive
    # binomial interval misses the truth when it is
    judge = f.mean(axis=1)
    naive = np.mean(np.abs(judge - theta) <= Z95 * np.sqrt(judge * (1 - judge) / (n + big_n)))
    if kind == "biased":
        assert naive < 0.05


def test_ppi_narrower_than_gold_only_when_the_judge_is_good() -> None:
    rng = np.random.default_rng(5)
    reps, n, big_n, theta = 300, 150, 3000, 0.4
    y = (rng.random((reps, n + big_n)) < theta).astype(float)
    f = _judge(y, 0.03, "symmetric", rng)
    ratios = []
    for r in range(reps):
        res = ppi_mean(y[r, :n], f[r, :n], f[r, n:])
        gold = y[r, :n]
        gold_half = Z95 * math.sqrt(gold.var(ddof=1) / n)  # the classical interval
        assert res.gold_high - res.gold_rate == pytest.approx(gold_half, rel=1e-12)
        ratios.append((res.high - res.low) / (2 * gold_half))
    assert max(ratios) < 1.0 and np.mean(ratios) < 0.6


def test_ppi_plus_plus_covers_and_is_no_wider_than_gold_only_with_a_useless_judge() -> None:
    rng = np.random.default_rng(9)
    reps, n, big_n, theta = 400, 200, 1000, 0.5
    hits, wider = 0, 0
    for _ in range(reps):
        y = (rng.random(n + big_n) < theta).astype(float)
        f = (rng.random(n + big_n) < 0.5).astype(float)  # a coin-flipping judge
        res = ppi_mean(y[:n], f[:n], f[n:], method="ppi++")
        hits += res.low <= theta <= res.high
        wider += (res.high - res.low) > 1.05 * (res.gold_high - res.gold_low)
    assert abs(hits / reps - 0.95) <= 0.03  # MC SE 0.011 at 400
    assert wider == 0  # lambda near 0: about the gold-only interval


def test_paired_difference_closed_form_and_coverage() -> None:
    rng = np.random.default_rng(77)
    reps, n, big_n = 2000, 120, 800
    base = rng.random((reps, n + big_n))
    yc = (base < 0.5).astype(float)
    yt = (base < 0.6).astype(float)  # pairs share the task: treatment succeeds where control does
    fc = _judge(yc, 0.1, "biased", rng)
    ft = _judge(yt, 0.1, "symmetric", rng)
    # PPI on per-task differences in [-1, 1]; the rectifier's floor is still 1 / n
    d_y, d_f = yt - yc, ft - fc
    est, se = _vector_ppi(d_y, d_f, n, -1.0, 1.0)
    for r in range(40):
        res = ppi_difference(
            yc[r, :n], fc[r, :n], fc[r, n:], yt[r, :n], ft[r, :n], ft[r, n:], paired=True
        )
        assert res.estimate == pytest.approx(est[r], abs=1e-12)
        assert res.se == pytest.approx(se[r], rel=1e-10)
        assert res.paired is True and res.n_gold == n
        assert res.judge_rate == pytest.approx(d_f[r].mean())
    cover = np.mean(np.abs(est - 0.1) <= Z95 * se)
    assert abs(cover - 0.95) <= 0.02, cover


def test_unpaired_difference_adds_the_arms() -> None:
    rng = np.random.default_rng(2)
    arms = []
    for rate in (0.3, 0.5):
        y = (rng.random(150) < rate).astype(float)
        f = _judge(y, 0.1, "symmetric", rng)
        arms.append((y[:110], f[:110], f[110:]))
    (yc, fc, uc), (yt, ft, ut) = arms
    res = ppi_difference(yc, fc, uc, yt, ft, ut)
    c, t = ppi_mean(yc, fc, uc), ppi_mean(yt, ft, ut)
    # independent arms: estimates subtract, variances add
    assert res.estimate == pytest.approx(t.estimate - c.estimate)
    assert res.se == pytest.approx(math.hypot(c.se, t.se))
    assert res.judge_rate == pytest.approx(t.judge_rate - c.judge_rate)
    assert res.paired is False and res.n_gold == 220 and len(res.lam) == 2


def test_validation_names_the_argument() -> None:
    y = np.ones(PPI_MIN_GOLD)
    with pytest.raises(ValueError, match="gold_labels.*min_gold"):
        ppi_mean(y[:50], y[:50], y)
    with pytest.raises(ValueError, match="gold_predictions"):
        ppi_mean(y, y[:-1], y)
    with pytest.raises(ValueError, match="unlabelled_predictions"):
        ppi_mean(y, y, [0.5, 2.0])
    with pytest.raises(ValueError, match="unlabelled_predictions"):
        ppi_mean(y, y, [])
    with pytest.raises(ValueError, match="gold_labels"):
        ppi_mean(["1"] * PPI_MIN_GOLD, y, y)
    with pytest.raises(ValueError, match="gold_labels"):
        ppi_mean(np.r_[y[:-1], np.nan], y, y)
    with pytest.raises(ValueError, match="method"):
        ppi_mean(y, y, y, method="bayes")
    with pytest.raises(ValueError, match="level"):
        ppi_mean(y, y, y, level=95)
    with pytest.raises(ValueError, match="treatment_labels"):
        ppi_difference(y, y, y, y[:-1], y[:-1], y, paired=True, min_gold=10)
    with pytest.raises(ValueError, match="treatment_unlabelled"):
        ppi_difference(y, y, y, y, y, y[:-3], paired=True)
    with pytest.raises(ValueError, match="control_predictions"):
        ppi_difference(y, y[:-1], y, y, y, y)
    res = ppi_mean(y, y, y)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.estimate = 0.0  # type: ignore[misc]
