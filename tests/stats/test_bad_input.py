"""Bad input to every public function of ``prereg.stats`` (issue 39, item 8).

Every public function refuses NaN, infinity, empty input, negative counts, mismatched
lengths, non-positive draw counts and levels outside (0, 1) with a ValueError whose message
names the argument. :data:`TABLE` holds, for each public function, a valid call and the
kinds of bad value each of its arguments must refuse; a property test, one case per
function and argument, substitutes a value of each kind in turn (hypothesis draws which
value and where it goes; a level is also always tried at 0, 1, 1.5 and -0.1, a draw count
at 0 and -1) into the valid call and asserts the ValueError and the name. A meta-test
keeps :data:`TABLE` complete: a new public function of ``prereg.stats``,
``prereg.stats.invokerank`` or ``prereg.stats.calibration`` fails it until it has an
entry. The examples of the issue each have a test of their own.

Arguments that may legitimately be empty (and say so in their docstrings) are not given
the ``empty`` kind: a multiplicity family (per-intent, without intents), the stream of a
sequential monitor (no paired task yet), no competitors for ``competitor_lever``. Zero
resamples of the Invoke Rating and the shares mean "no interval" (nan bounds), not
intervals, and are allowed; ``bootstrap_score`` printed intervals from none and refuses 0.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import prereg.stats as S

ir = importlib.import_module("prereg.stats.invokerank")
cal = importlib.import_module("prereg.stats.calibration")
cal_model = importlib.import_module("prereg.stats.calibration_model")

# ---- kinds of bad input -------------------------------------------------------------------

NAN = "nan"  # a NaN value (an element of an array, or the scalar)
INF = "inf"  # an infinite value
EMPTY = "empty"  # no values (the argument and every argument of its length group)
NEG = "negative"  # a negative count or scale
MISMATCH = "mismatch"  # one value more or fewer than the arguments it goes with
DRAWS = "draws"  # a draw (resample, permutation, simulation, unit) count of 0 or below
LEVEL = "level"  # a level, alpha or probability outside (0, 1): 0, 1, 1.5, -0.1, ...
LEVELS = "levels"  # one level of a sequence outside (0, 1)
ABOVE = "above"  # a rate, probability or 0/1 value above 1
NONPOS = "non-positive"  # a scale that must be positive: 0 or below
LABEL_NAN = "nan label"  # missing (NaN) labels, which numpy would merge into one group
CUSTOM = "custom"  # a structured bad value built by the entry (see Arg.custom)


@dataclass(frozen=True)
class Arg:
    """The kinds of bad value an argument must refuse.

    ``group``: arguments with one entry per row (per prompt, run, unit): ``empty`` empties
    them all, ``mismatch`` changes this one alone. ``custom``: kind -> a function of the
    valid value and a hypothesis ``data`` object giving a bad value (structured arguments,
    or a negative that must be below -1)."""

    kinds: tuple[str, ...]
    group: str | None = None
    custom: Mapping[str, Callable[[Any, Any], Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """A public function, a valid call of it (keyword arguments, built afresh each time)
    and its arguments' kinds of bad input."""

    func: Callable[..., Any]
    valid: Callable[[], dict[str, Any]]
    args: Mapping[str, Arg]


def _key(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"


# ---- valid data for the calls -------------------------------------------------------------


def _rating_data() -> dict[str, Any]:
    """Thirty first choices among three alternatives over two intents and ten prompts."""
    rng = np.random.default_rng(4)
    available = np.ones((30, 3), dtype=bool)
    chosen = np.array([-1, 0, 1, 2, 0, -1, 1, 0, 2, -1] * 3)
    return {
        "chosen": chosen,
        "available": available,
        "intent": np.repeat([0, 1], 15),
        "prompt": np.repeat(np.arange(10), 3),
        "position": np.array([rng.permutation(3) for _ in range(30)], dtype=float),
    }


def _logit(parameters: str) -> dict[str, Any]:
    """A conditional-logit design of :func:`_rating_data` and zero parameters for it."""
    d = _rating_data()
    runs = ir._choice_runs(d["chosen"], d["available"], d["intent"], d["prompt"], None, None)
    design = ir._design(runs, ir._terms(runs, 1.0), 1.0)
    return {"design": design, parameters: np.zeros(design.x.shape[2])}


def _design_with_nan(design: Any, data: Any) -> Any:
    x = np.array(design.x, dtype=np.float64)
    x.flat[data.draw(st.integers(0, x.size - 1))] = math.nan
    return dataclasses.replace(design, x=x)


def _prior_with_nan(prior: Any, data: Any) -> Any:
    which = data.draw(st.sampled_from(["mu", "kappa"]))
    return dataclasses.replace(prior, **{which: math.nan})


def _verdict_nan(verdicts: list[Any], data: Any) -> list[Any]:
    out = list(verdicts)
    out[data.draw(st.integers(0, len(out) - 1))] = math.nan
    return out


def _below_minus_one(value: Any, data: Any) -> Any:
    arr = np.array(value, dtype=np.float64)
    arr.flat[data.draw(st.integers(0, arr.size - 1))] = data.draw(st.integers(-1000, -2))
    return arr


def _one_cell_fewer(competitors: Any, data: Any) -> Any:
    """The competitors' rates on one intent cell fewer than the focal integration's."""
    return np.asarray(competitors)[:, :-1]


def _cells() -> list[dict[str, str]]:
    return [{"a": a, "b": b} for a in ("lo", "hi") for b in ("lo", "hi")]


def _population() -> Any:
    return cal_model.population(6, 2, 0.3)


def _planned() -> Any:
    return cal.PlannedTest("primary", "mcnemar_exact", draws=20)


def _arms() -> Any:
    pop = cal_model.population(6, 1, 0.3)
    return cal_model.simulate_arms(pop, [(0.0, 0.0)], 3, np.random.default_rng(1))[0]


def _contrast_plan() -> Any:
    return cal.PlannedTest("c", "paired_bootstrap", weights=(-1.0, 1.0), draws=20)


def _family() -> Any:
    return cal.FamilyPlan("f", "holm", 0.1, "contrasts", (_contrast_plan(),), arms=2)


def _bool_sims() -> Any:
    rng = np.random.default_rng(3)
    return rng.random((3, 6, 2)) < 0.5


VALUES = [[0.9, 0.2], [0.3, 0.5], [0.7, 0.1], [1.0, 0.0], [0.4, 0.6], [0.8, 0.3]]

D = Arg((NAN, INF, EMPTY))  # finite data, not empty
DG = Arg((NAN, INF, EMPTY, MISMATCH), "rows")  # the same, one per row
C = Arg((NAN, INF, EMPTY, NEG, MISMATCH), "rows")  # counts, one per row
SCALAR_COUNT = Arg((NAN, INF, NEG))
DRAW_COUNT = Arg((DRAWS, NAN, INF))
LVL = Arg((LEVEL, NAN, INF))
LVLS = Arg((LEVELS,))
PROB = Arg((NAN, INF, NEG, ABOVE))  # a probability or rate in [0, 1]
SCALE = Arg((NONPOS, NAN, INF))  # a positive scale
LABELS = Arg((LABEL_NAN, MISMATCH), "rows")
NONNEG = Arg((NAN, INF, NEG))  # a non-negative scale or count

TABLE: list[Entry] = [
    # -- paired binary comparisons (stats/paired.py) --
    Entry(S.mcnemar_exact, lambda: {"b": 3, "c": 9}, {"b": SCALAR_COUNT, "c": SCALAR_COUNT}),
    Entry(
        S.tango_interval,
        lambda: {"b": 3, "c": 5, "n": 20, "level": 0.95},
        {"b": SCALAR_COUNT, "c": SCALAR_COUNT, "n": SCALAR_COUNT, "level": LVL},
    ),
    Entry(
        S.tost_paired,
        lambda: {"differences": [0.1, -0.2, 0.05, 0.3, -0.1], "margin": 0.5, "alpha": 0.05},
        {"differences": D, "margin": SCALE, "alpha": LVL},
    ),
    Entry(
        S.equivalence_margin,
        lambda: {"differences": [0.1, -0.2, 0.05, 0.3, -0.1], "alpha": 0.05},
        {"differences": D, "alpha": LVL},
    ),
    # -- intervals and clustering --
    Entry(
        S.jeffreys_interval,
        lambda: {"successes": [3, 5, 0], "trials": [10, 10, 4], "level": 0.9, "deff": 1.2},
        {
            "successes": C,
            "trials": C,
            "level": LVL,
            "deff": Arg((NAN, INF, NEG, NONPOS, EMPTY)),
        },
    ),
    Entry(
        S.design_effect,
        lambda: {"cluster_sizes": [3, 3, 4], "rho": 0.3},
        {"cluster_sizes": Arg((NAN, INF, EMPTY, NEG)), "rho": PROB},
    ),
    Entry(
        S.icc_binary,
        lambda: {"outcomes": [1, 0, 1, 1, 0, 0], "groups": [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]},
        {"outcomes": Arg((NAN, INF, EMPTY, MISMATCH), "rows"), "groups": LABELS},
    ),
    # -- funnel --
    Entry(
        S.pass_hat_k,
        lambda: {"c": [3, 2, 5], "n": [5, 5, 5], "k": 2},
        {"c": C, "n": C, "k": SCALAR_COUNT},
    ),
    Entry(
        S.loss_shares,
        lambda: {"rates": [[0.9, 0.5, 0.8], [0.7, 0.6, 1.0]]},
        {"rates": Arg((NAN, INF, EMPTY, NEG, ABOVE))},
    ),
    # -- multiplicity (an empty family rejects nothing: documented) --
    Entry(
        S.benjamini_hochberg,
        lambda: {"pvalues": [0.01, 0.2, 0.04], "q": 0.1},
        {"pvalues": PROB, "q": LVL},
    ),
    Entry(
        S.holm,
        lambda: {"pvalues": [0.01, 0.2, 0.04], "alpha": 0.05},
        {"pvalues": PROB, "alpha": LVL},
    ),
    Entry(
        S.e_bh,
        lambda: {"evalues": [20.0, 1.5, 0.3], "q": 0.1},
        {"evalues": Arg((NAN, NEG)), "q": LVL},  # e = inf is documented: always rejected
    ),
    # -- anytime-valid --
    Entry(
        S.beta_mixture_evalue,
        lambda: {"b": [4, 2, 1], "c": [1, 3, 0], "prior": (1.0, 1.0)},
        {"b": C, "c": C, "prior": Arg((NAN, INF, NEG))},
    ),
    Entry(
        S.sequential_monitor,
        lambda: {
            "first": [1, 0, 1, 1, 0],
            "second": [0, 0, 1, 0, 0],
            "threshold": 20.0,
            "min_prompts": 0,
            "prior": (1.0, 1.0),
        },
        {
            "first": Arg((NAN, INF, MISMATCH), "rows"),  # an empty stream: documented
            "second": Arg((NAN, INF, MISMATCH), "rows"),
            "threshold": NONNEG,
            "min_prompts": SCALAR_COUNT,
            "prior": Arg((NAN, INF, NEG)),
        },
    ),
    # -- resampling (stats/bootstrap.py, stats/enumeration.py, stats/permutation.py) --
    Entry(
        S.paired_bootstrap,
        lambda: {
            "control": [0, 1, 1, 0, 1, 1],
            "treatment": [1, 1, 1, 0, 1, 0],
            "prompts": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0],
            "runs_control": [0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
            "runs_treatment": [0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
            "draws": 50,
            "level": 0.95,
        },
        {
            "control": DG,
            "treatment": DG,
            "prompts": LABELS,
            "runs_control": LABELS,
            "runs_treatment": LABELS,
            "draws": DRAW_COUNT,
            "level": LVL,
        },
    ),
    Entry(S.bootstrap_multiset_count, lambda: {"units": 4}, {"units": DRAW_COUNT}),
    Entry(S.bootstrap_multisets, lambda: {"units": 3}, {"units": DRAW_COUNT}),
    Entry(
        S.draws_for_mc_se,
        lambda: {"alpha": 0.05, "tests": 2, "target": 0.002},
        {"alpha": LVL, "tests": DRAW_COUNT, "target": SCALE},
    ),
    Entry(
        S.holm_mc_se,
        lambda: {"pvalues": [0.01, 0.04, 0.2], "mc_ses": [0.001, 0.002, 0.0]},
        {
            "pvalues": Arg((NAN, INF, NEG, ABOVE, MISMATCH), "rows"),
            "mc_ses": Arg((NAN, INF, NEG, MISMATCH), "rows"),
        },
    ),
    Entry(
        S.mc_standard_error,
        lambda: {"pvalue": 0.04, "draws": 1000},
        {"pvalue": PROB, "draws": DRAW_COUNT},
    ),
    Entry(
        S.resampled_contrast,
        lambda: {
            "values": VALUES,
            "weights": [-1.0, 1.0],
            "units": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0],
            "draws": 50,
            "level": 0.95,
            "max_enumerated": 1000,
        },
        {
            "values": DG,
            "weights": Arg((NAN, INF, EMPTY, MISMATCH)),
            "units": LABELS,
            "draws": DRAW_COUNT,
            "level": LVL,
            "max_enumerated": SCALAR_COUNT,
        },
    ),
    Entry(
        S.exact_permutation_test,
        lambda: {
            "x": [0.1, 0.5, 0.3, 0.9, 0.4],
            "y": [0.2, 0.0, 0.3, 0.1],
            "max_exact": 10,
            "draws": 100,
        },
        {"x": D, "y": D, "max_exact": SCALAR_COUNT, "draws": DRAW_COUNT},
    ),
    Entry(
        S.sign_flip_test,
        lambda: {"differences": [0.1, -0.2, 0.05, 0.3, 0.2], "draws": 100},
        {"differences": D, "draws": DRAW_COUNT},
    ),
    # -- registered contrasts (stats/contrasts.py) --
    Entry(
        S.factorial_weights,
        lambda: {
            "cells": _cells(),
            "effect": "a",
            "low_high": {"a": ("lo", "hi"), "b": ("lo", "hi")},
        },
        {"cells": Arg((EMPTY,)), "effect": Arg((EMPTY,)), "low_high": Arg((EMPTY,))},
    ),
    Entry(
        S.check_weights,
        lambda: {"weights": [0.5, -0.5], "sum_to": 0.0, "n_cells": 2},
        {
            "weights": Arg((NAN, INF, EMPTY, MISMATCH)),
            "sum_to": Arg((NAN, INF)),
            "n_cells": SCALAR_COUNT,
        },
    ),
    Entry(
        S.contrast_bootstrap,
        lambda: {
            "values": VALUES,
            "weights": [-1.0, 1.0],
            "units": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0],
            "draws": 50,
            "level": 0.95,
        },
        {
            "values": DG,
            "weights": Arg((NAN, INF, EMPTY, MISMATCH)),
            "units": LABELS,
            "draws": DRAW_COUNT,
            "level": LVL,
        },
    ),
    Entry(
        S.contrast_sign_flip,
        lambda: {
            "values": VALUES,
            "weights": [-1.0, 1.0],
            "units": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0],
            "draws": 100,
        },
        {
            "values": DG,
            "weights": Arg((NAN, INF, EMPTY, MISMATCH)),
            "units": LABELS,
            "draws": DRAW_COUNT,
        },
    ),
    # -- planning --
    Entry(
        S.mde_paired,
        lambda: {
            "sigma_d": 0.3,
            "prompts": 30,
            "alpha": 0.05,
            "power": 0.8,
            "sigma_run": 0.05,
            "runs_per_arm": 2,
        },
        {
            "sigma_d": SCALE,
            "prompts": DRAW_COUNT,
            "alpha": LVL,
            "power": LVL,
            "sigma_run": NONNEG,
            "runs_per_arm": DRAW_COUNT,
        },
    ),
    Entry(
        S.prompts_for_mde,
        lambda: {
            "sigma_d": 0.3,
            "mde": 0.1,
            "alpha": 0.05,
            "power": 0.8,
            "sigma_run": 0.01,
            "runs_per_arm": 2,
        },
        {
            "sigma_d": SCALE,
            "mde": SCALE,
            "alpha": LVL,
            "power": LVL,
            "sigma_run": NONNEG,
            "runs_per_arm": DRAW_COUNT,
        },
    ),
    Entry(
        S.mcnemar_sample_size,
        lambda: {"p01": 0.1, "p10": 0.2, "alpha": 0.05, "power": 0.8},
        {"p01": PROB, "p10": PROB, "alpha": LVL, "power": LVL},
    ),
    Entry(S.min_discordant, lambda: {"alpha": 0.05}, {"alpha": LVL}),
    Entry(
        S.sequential_monitor_exact,
        lambda: {
            "p01": 0.1,
            "p10": 0.2,
            "max_prompts": 10,
            "threshold": 20.0,
            "min_prompts": 2,
            "prior": (1.0, 1.0),
        },
        {
            "p01": PROB,
            "p10": PROB,
            "max_prompts": DRAW_COUNT,
            "threshold": NONNEG,
            "min_prompts": SCALAR_COUNT,
            "prior": Arg((NAN, INF, NEG)),
        },
    ),
    Entry(
        S.simulate_sequential_monitor,
        lambda: {
            "p01": 0.1,
            "p10": 0.2,
            "max_prompts": 10,
            "threshold": 20.0,
            "min_prompts": 2,
            "prior": (1.0, 1.0),
            "sims": 20,
        },
        {
            "p01": PROB,
            "p10": PROB,
            "max_prompts": DRAW_COUNT,
            "threshold": NONNEG,
            "min_prompts": SCALAR_COUNT,
            "prior": Arg((NAN, INF, NEG)),
            "sims": DRAW_COUNT,
        },
    ),
    Entry(
        S.mcnemar_exact_power,
        lambda: {"n": 30, "p01": 0.1, "p10": 0.3, "alpha": 0.05},
        {"n": DRAW_COUNT, "p01": PROB, "p10": PROB, "alpha": LVL},
    ),
    Entry(
        S.mcnemar_exact_sample_size,
        lambda: {"p01": 0.1, "p10": 0.4, "alpha": 0.05, "power": 0.8},
        {"p01": PROB, "p10": PROB, "alpha": LVL, "power": LVL},
    ),
    # -- the InvokeRank score --
    Entry(
        S.invokerank,
        lambda: {
            "runs": [4, 4, 4, 4],
            "reached": [[4, 3], [3, 2], [4, 4], [2, 1]],
            "cell": [0, 0, 1, 1],
            "stages": ("surfaced", "selected"),
            "weights": [1.0, 2.0],
            "draws": 50,
            "levels": (0.9, 0.95),
        },
        {
            "runs": C,
            "reached": C,
            "cell": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "weights": Arg((NAN, INF, NEG, MISMATCH)),
            "draws": DRAW_COUNT,
            "levels": LVLS,
        },
    ),
    Entry(
        S.fit_beta_prior,
        lambda: {"successes": [3, 5, 2], "trials": [10, 10, 8]},
        {"successes": C, "trials": C},
    ),
    Entry(
        S.betabinom_loglik,
        lambda: {"mu": 0.3, "kappa": 5.0, "successes": [3, 5, 2], "trials": [10, 10, 8]},
        {"mu": LVL, "kappa": SCALE, "successes": C, "trials": C},
    ),
    Entry(
        S.betabinom_moments,
        lambda: {"successes": [3, 5, 2], "trials": [10, 10, 8]},
        {"successes": C, "trials": C},
    ),
    Entry(
        S.cap_prior,
        lambda: {
            "prior": S.BetaPrior(0.35, 12.0, "beta-binomial marginal ML", True, -7.0, 3),
            "successes": [3, 5, 2],
            "trials": [10, 10, 8],
        },
        {"prior": Arg((CUSTOM,), custom={CUSTOM: _prior_with_nan}), "successes": C, "trials": C},
    ),
    Entry(
        S.grouped_icc,
        lambda: {"successes": [2, 0, 1], "trials": [2, 2, 2]},
        {"successes": C, "trials": C},
    ),
    Entry(
        S.equal_tailed,
        lambda: {"draws": np.linspace(0.1, 0.9, 50), "level": 0.9},
        {"draws": D, "level": LVL},
    ),
    Entry(
        S.beta_interval,
        lambda: {"alpha": [2.5, 1.0, 0.5], "beta": [3.5, 2.0, 4.0], "level": 0.9},
        {"alpha": C, "beta": C, "level": LVL},
    ),
    Entry(
        S.intervals_overlap,
        lambda: {"lows": [0.1, 0.3, 0.5], "highs": [0.35, 0.45, 0.6]},
        {"lows": DG, "highs": DG},
    ),
    Entry(
        S.funnel_lever,
        lambda: {
            "posterior_means": [[0.9, 0.5], [0.8, 0.7], [0.6, 0.9]],
            "reference": [0.9, 0.8],
        },
        {
            "posterior_means": Arg((NAN, INF, EMPTY, NEG, ABOVE)),
            "reference": Arg((NAN, INF, NEG, ABOVE, MISMATCH)),
        },
    ),
    Entry(
        S.false_invoke_rate,
        lambda: {"calls": [0, 1, 0], "runs": [3, 3, 2], "rho": 0.6, "level": 0.9},
        {"calls": C, "runs": C, "rho": PROB, "level": LVL},
    ),
    Entry(
        ir.bootstrap_score,
        lambda: {
            "runs": [4, 4, 4, 4, 3, 3, 3, 3],
            "reached": [4, 2, 3, 1, 3, 0, 2, 1],
            "cell": [0, 0, 0, 0, 1, 1, 1, 1],
            "prompt": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            "session": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "weights": [1.0, 1.0],
            "resamples": 20,
            "levels": (0.9, 0.95),
            "centre": [0.6, 0.5],
            "rollup_centre": 0.55,
            "min_prompts": 4,
            "min_sessions": 3,
        },
        {
            "runs": C,
            "reached": C,
            "cell": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "prompt": LABELS,
            "session": LABELS,
            "weights": Arg((NAN, INF, NEG, MISMATCH)),
            "resamples": DRAW_COUNT,
            "levels": LVLS,
            "centre": Arg((NAN, INF, NEG, ABOVE, MISMATCH)),
            "rollup_centre": PROB,
            "min_prompts": SCALAR_COUNT,
            "min_sessions": SCALAR_COUNT,
        },
    ),
    Entry(
        ir.too_few_prompts,
        lambda: {"prompts": [5, 3, 4], "weights": [1.0, 1.0, 0.0], "minimum": 4},
        {
            "prompts": C,
            "weights": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "minimum": SCALAR_COUNT,
        },
    ),
    Entry(
        ir.too_few_sessions,
        lambda: {"sessions": 2, "minimum": 3},
        {"sessions": DRAW_COUNT, "minimum": SCALAR_COUNT},
    ),
    Entry(
        ir.invoke_rating,
        lambda: {**_rating_data(), "prior_sd": 1.0, "resamples": 2, "levels": (0.9,)},
        {
            "chosen": Arg((NAN, INF, EMPTY, NEG, MISMATCH), "rows", custom={NEG: _below_minus_one}),
            "available": Arg((NAN, INF, EMPTY, ABOVE, MISMATCH), "rows"),
            "intent": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "prompt": LABELS,
            "position": Arg((INF, MISMATCH), "rows"),
            "prior_sd": SCALE,
            "resamples": SCALAR_COUNT,  # 0: no interval (documented)
            "levels": LVLS,
        },
    ),
    Entry(
        ir.choice_loglik,
        lambda: _logit("theta"),
        {
            "design": Arg((CUSTOM,), custom={CUSTOM: _design_with_nan}),
            "theta": Arg((NAN, INF, EMPTY, MISMATCH)),
        },
    ),
    Entry(
        ir.fit_choice_logit,
        lambda: _logit("start"),
        {
            "design": Arg((CUSTOM,), custom={CUSTOM: _design_with_nan}),
            "start": Arg((NAN, INF, EMPTY, MISMATCH)),
        },
    ),
    Entry(
        ir.choice_shares,
        lambda: {
            "hits": [[1, 0], [0, 1], [1, 0], [0, 0], [0, 1], [1, 0]],
            "intent": [0, 0, 0, 1, 1, 1],
            "eligible": [[1, 1], [1, 1]],
            "prompt": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            "weights": [1.0, 1.0],
            "resamples": 5,
            "levels": (0.9,),
        },
        {
            "hits": Arg((NAN, INF, EMPTY, ABOVE, MISMATCH), "rows"),
            "intent": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "eligible": Arg((NAN, INF, ABOVE)),
            "prompt": LABELS,
            "weights": Arg((NAN, INF, NEG, MISMATCH)),
            "resamples": SCALAR_COUNT,  # 0: no interval (documented)
            "levels": LVLS,
        },
    ),
    Entry(
        ir.competitor_lever,
        lambda: {
            "focal": [[0.5, 0.9], [0.4, 0.8]],
            "competitors": [[[0.6, 0.9], [0.3, 0.9]], [[0.2, 0.5], [math.nan, 0.7]]],
        },
        {
            "focal": Arg((NAN, INF, EMPTY, NEG, ABOVE)),
            # nan: not measured; no competitors at all: every best index -1
            "competitors": Arg((INF, NEG, ABOVE, CUSTOM), custom={CUSTOM: _one_cell_fewer}),
        },
    ),
    Entry(
        ir.resolution_split,
        lambda: {
            "terminal": [
                "focal",
                "answered_without_search",
                "competitor",
                "searched_then_declined",
                "unresolved",
                "focal",
            ],
            "native_met": [None, True, None, False, None, None],
            "intent": [0, 0, 1, 1, 0, 1],
            "prompt": [0.0, 1.0, 2.0, 3.0, 0.0, 2.0],
            "cells": 2,
            "weights": [1.0, 1.0],
            "level": 0.9,
        },
        {
            "terminal": Arg((EMPTY, MISMATCH), "rows"),
            "native_met": Arg((CUSTOM, MISMATCH), "rows", custom={CUSTOM: _verdict_nan}),
            "intent": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "prompt": LABELS,
            "cells": DRAW_COUNT,
            "weights": Arg((NAN, INF, NEG, MISMATCH)),
            "level": LVL,
        },
    ),
    Entry(
        ir.terminal_counts,
        lambda: {
            "classes": ["focal", "competitor", "unresolved", "focal"],
            "intent": [0, 1, 1, 0],
            "cells": 2,
        },
        {
            "classes": Arg((EMPTY, MISMATCH), "rows"),
            "intent": Arg((NAN, INF, NEG, MISMATCH), "rows"),
            "cells": DRAW_COUNT,
        },
    ),
    Entry(
        ir.prompt_rate,
        lambda: {"hit": [1, 0, 1, 1, 0, 0], "prompt": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0], "level": 0.9},
        {"hit": Arg((NAN, INF, EMPTY, ABOVE, MISMATCH), "rows"), "prompt": LABELS, "level": LVL},
    ),
    Entry(
        ir.replicate_variance,
        lambda: {
            "outcomes": np.array([[[1, 0], [1, 1]], [[0, 0], [1, 0]], [[1, 1], [0, 1]]]),
            "permutations": 20,
        },
        {"outcomes": Arg((NAN, INF, EMPTY, ABOVE)), "permutations": DRAW_COUNT},
    ),
    # -- judged outcomes: prediction-powered inference and agreement --
    Entry(
        S.ppi_mean,
        lambda: {
            "gold_labels": [1, 0, 1, 1, 0],
            "gold_predictions": [1, 0, 0, 1, 1],
            "unlabelled_predictions": [1, 0, 1, 1, 0, 1, 0],
            "level": 0.95,
            "min_gold": 3,
        },
        {
            "gold_labels": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "gold"),
            "gold_predictions": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "gold"),
            "unlabelled_predictions": Arg((NAN, INF, EMPTY, NEG, ABOVE)),
            "level": LVL,
            "min_gold": SCALAR_COUNT,
        },
    ),
    Entry(
        S.ppi_difference,
        lambda: {
            "control_labels": [1, 0, 1, 1, 0],
            "control_predictions": [1, 0, 0, 1, 1],
            "control_unlabelled": [1, 0, 1, 1, 0, 1],
            "treatment_labels": [1, 1, 1, 0, 0],
            "treatment_predictions": [1, 1, 0, 0, 0],
            "treatment_unlabelled": [0, 1, 1, 1, 1, 1],
            "paired": True,
            "level": 0.95,
            "min_gold": 3,
        },
        {
            "control_labels": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "gold"),
            "control_predictions": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "gold"),
            "control_unlabelled": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "unlabelled"),
            "treatment_labels": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "gold"),
            "treatment_predictions": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "gold"),
            "treatment_unlabelled": Arg((NAN, INF, EMPTY, NEG, ABOVE, MISMATCH), "unlabelled"),
            "level": LVL,
            "min_gold": SCALAR_COUNT,
        },
    ),
    Entry(
        S.cohens_kappa,
        lambda: {
            "rater_a": [1, 0, 1, 1, 0, 0, 1, 0, 1, 1],
            "rater_b": [1, 0, 0, 1, 0, 1, 1, 0, 1, 0],
            "level": 0.95,
            "draws": 1000,
        },
        {
            "rater_a": Arg((LABEL_NAN, EMPTY, MISMATCH), "items"),
            "rater_b": Arg((LABEL_NAN, EMPTY, MISMATCH), "items"),
            "level": LVL,
            "draws": DRAW_COUNT,
        },
    ),
    Entry(
        S.cohens_kappa_table,
        lambda: {"table": [[8, 2], [3, 7]], "level": 0.95, "draws": 1000},
        {"table": Arg((NAN, INF, EMPTY, NEG)), "level": LVL, "draws": DRAW_COUNT},
    ),
    Entry(
        S.judge_rates,
        lambda: {"gold": [1, 0, 1, 1, 0], "judge": [1, 0, 0, 1, 1], "level": 0.95},
        {
            "gold": Arg((NAN, INF, EMPTY, ABOVE, MISMATCH), "items"),
            "judge": Arg((NAN, INF, EMPTY, ABOVE, MISMATCH), "items"),
            "level": LVL,
        },
    ),
    # -- calibration by simulation (stats/calibration/**, stats/calibration_model.py) --
    Entry(
        cal_model.population,
        lambda: {"prompts": 6, "runs": 2, "sigma_d": 0.3, "sigma_run": 0.02, "base_rate": 0.5},
        {
            "prompts": DRAW_COUNT,
            "runs": DRAW_COUNT,
            "sigma_d": SCALE,
            "sigma_run": NONNEG,
            "base_rate": LVL,
        },
    ),
    Entry(
        cal.calibrate,
        lambda: {
            "pop": _population(),
            "tests": [_planned()],
            "effect": 0.1,
            "power_target": 0.8,
            "sims": 4,
            "draws": 20,
        },
        {  # no tests at all is allowed: every test skipped, a stopping rule alone
            "effect": Arg((NAN, INF)),
            "power_target": LVL,
            "sims": DRAW_COUNT,
            "draws": DRAW_COUNT,
        },
    ),
    Entry(
        cal.bootstrap_intervals,
        lambda: {
            "yc": _bool_sims(),
            "yt": _bool_sims(),
            "units": None,
            "draws": 20,
            "seed": 0,
            "levels": [0.95],
        },
        {
            "yc": Arg((NAN, EMPTY, MISMATCH), "sims"),
            "yt": Arg((NAN, EMPTY, MISMATCH), "sims"),
            "draws": DRAW_COUNT,
            "levels": LVLS,
        },
    ),
    Entry(
        cal.verdict,
        lambda: {"quantity": "coverage", "estimate": 0.9, "nominal": 0.95, "sims": 100},
        {"estimate": Arg((INF,)), "nominal": LVL, "sims": DRAW_COUNT},
    ),
    Entry(
        cal.family_levels,
        lambda: {"method": "holm", "q": 0.1, "m": 3},
        {"q": LVL, "m": DRAW_COUNT},
    ),
    Entry(
        cal.contrast_intervals,
        lambda: {
            "d": np.array([[0.1, -0.2, 0.3, 0.0], [0.2, 0.1, -0.1, 0.4]]),
            "level": 0.9,
            "weights": (-1.0, 1.0),
        },
        {"d": D, "level": LVL, "weights": Arg((NAN, INF, EMPTY))},
    ),
    Entry(
        cal.contrast_pvalues,
        lambda: {"plan": _contrast_plan(), "d": np.array([[0.1, -0.2, 0.3, 0.0]])},
        {"d": D},
    ),
    Entry(
        cal.contrast_family_rejects,
        lambda: {"fam": _family(), "arms": _arms()},
        {"arms": Arg((NAN, EMPTY))},
    ),
]

#: (function, argument, kind) cases a file's owner has still to fix, each marked as a strict
#: expected failure naming the file, e.g. ``("check_weights", "n_cells", NAN): "owner:
#: stats/contrasts.py"``: it flips (XPASS, a failure) once the check is added, and the entry
#: is then removed. None is left.
KNOWN_GAPS: dict[tuple[str, str, str], str] = {}


# ---- substitution -------------------------------------------------------------------------


def _element(value: Any, data: Any, bad: Any) -> Any:
    """``value`` with one element (drawn) replaced by ``bad``; a scalar is replaced."""
    if np.ndim(value) == 0:
        return bad
    arr = np.array(value, dtype=np.float64)
    arr.flat[data.draw(st.integers(0, arr.size - 1), label="index")] = bad
    return arr


def _empty(value: Any) -> Any:
    if np.ndim(value) == 0:
        return np.zeros(0)
    if isinstance(value, list) and (not value or isinstance(value[0], str | type(None) | bool)):
        return []
    return np.asarray(value)[:0]


def _resized(value: Any, data: Any) -> Any:
    """One row fewer or one more (never a single row, which would broadcast)."""
    longer = data.draw(st.booleans(), label="longer")
    if isinstance(value, list):
        return [*value, value[-1]] if longer else value[:-1]
    arr = np.asarray(value)
    return np.concatenate([arr, arr[-1:]]) if longer else arr[:-1]


_LEVEL_BAD = st.one_of(
    st.sampled_from([0.0, 1.0, 1.5, -0.1]),
    st.floats(min_value=1.0, max_value=1e6),
    st.floats(min_value=-1e6, max_value=0.0),
)


def _bad(kind: str, arg: Arg, value: Any, data: Any) -> Any:
    if kind in arg.custom:
        return arg.custom[kind](value, data)
    if kind == NAN:
        return _element(value, data, math.nan)
    if kind == INF:
        return _element(value, data, data.draw(st.sampled_from([math.inf, -math.inf])))
    if kind == NEG:
        return _element(value, data, data.draw(st.integers(-1000, -1), label="negative"))
    if kind == ABOVE:
        return _element(value, data, data.draw(st.floats(1.5, 1e6), label="above"))
    if kind == NONPOS:
        return data.draw(st.one_of(st.just(0.0), st.floats(-1e6, -1e-9)), label="scale")
    if kind == DRAWS:
        return data.draw(st.integers(-1000, 0), label="draws")
    if kind == LEVEL:
        return data.draw(_LEVEL_BAD, label="level")
    if kind == LEVELS:
        levels = list(value)
        levels[data.draw(st.integers(0, len(levels) - 1))] = data.draw(_LEVEL_BAD)
        return tuple(levels)
    if kind == LABEL_NAN:
        arr = np.array(value, dtype=np.float64)
        where = data.draw(st.sets(st.integers(0, arr.size - 1), min_size=1), label="nan labels")
        arr[sorted(where)] = math.nan
        return arr
    if kind == MISMATCH:
        return _resized(value, data)
    raise AssertionError(f"no substitution for kind {kind!r}")


def _names(message: str, names: list[str]) -> bool:
    """Whether the message names one of ``names`` as a word (``n``, not the n of "in")."""
    return any(
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names
    )


def _cases() -> list[Any]:
    """One case per (function, argument) with every kind of bad input it must refuse, and
    one strict expected failure per known gap (:data:`KNOWN_GAPS`) apart."""
    out = []
    for entry in TABLE:
        fn = entry.func.__name__
        for name, arg in entry.args.items():
            gaps = [kind for kind in arg.kinds if (fn, name, kind) in KNOWN_GAPS]
            rest = tuple(kind for kind in arg.kinds if kind not in gaps)
            if rest:
                out.append(pytest.param(entry, name, rest, id=f"{fn}-{name}"))
            for kind in gaps:
                mark = pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[(fn, name, kind)])
                out.append(pytest.param(entry, name, (kind,), id=f"{fn}-{name}-{kind}", marks=mark))
    return out


@pytest.mark.parametrize(("entry", "name", "kinds"), _cases())
@given(data=st.data())
@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,  # the same examples every run: an expected failure stays one
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure names its case
    suppress_health_check=[HealthCheck.too_slow],
)
def test_bad_input_is_refused_naming_the_argument(
    entry: Entry, name: str, kinds: tuple[str, ...], data: Any
) -> None:
    """Each kind of bad value in turn, substituted for ``name`` in the valid call."""
    arg = entry.args[name]
    together = [n for n, a in entry.args.items() if arg.group is not None and a.group == arg.group]
    valid = entry.valid()  # the functions are pure: one valid call serves every value
    for kind in kinds:
        # an empty group, or lengths that differ, is named by any argument of the group
        blamed = together if kind in (EMPTY, MISMATCH) and together else [name]
        if kind == EMPTY:
            emptied = {other: _empty(valid[other]) for other in together or [name]}
            _assert_refused(entry, {**valid, **emptied}, blamed, kind)
            continue
        values = [_bad(kind, arg, valid[name], data)]
        if kind in CANONICAL and kind not in arg.custom:  # every run: 0, 1, 1.5, -0.1; 0, -1
            values += [_canonical(kind, valid[name], bad) for bad in CANONICAL[kind]]
        for value in values:
            _assert_refused(entry, {**valid, name: value}, blamed, kind)


#: the values a level (or a draw count) is always tried with, besides the drawn ones
CANONICAL: dict[str, tuple[float, ...]] = {
    LEVEL: (0.0, 1.0, 1.5, -0.1),
    LEVELS: (0.0, 1.0, 1.5, -0.1),
    DRAWS: (0, -1),
}


def _canonical(kind: str, value: Any, bad: float) -> Any:
    return (bad, *tuple(value)[1:]) if kind == LEVELS else bad


def _assert_refused(entry: Entry, kwargs: dict[str, Any], blamed: list[str], kind: str) -> None:
    """A ValueError naming one of ``blamed``; a failure says which kind of input got in."""
    try:
        entry.func(**kwargs)
    except ValueError as refused:
        message = str(refused)
    else:
        pytest.fail(f"{entry.func.__name__} answered {kind} input to {blamed} without an error")
    assert _names(message, blamed), f"{kind}: the message does not name {blamed}: {message!r}"


# ---- the table covers every public function, and its calls are valid -----------------------


def _public_functions() -> dict[str, Callable[..., Any]]:
    out: dict[str, Callable[..., Any]] = {}
    for module in (S, ir, cal):
        for public in module.__all__:
            value = getattr(module, public)
            if not public.startswith("_") and inspect.isfunction(value):
                out[_key(value)] = value
    return out


def test_every_public_function_is_in_the_table() -> None:
    covered = {_key(entry.func) for entry in TABLE}
    missing = sorted(set(_public_functions()) - covered)
    assert not missing, f"add these public functions to TABLE: {missing}"
    assert len(covered) == len(TABLE), "a function has two entries"


@pytest.mark.parametrize("entry", TABLE, ids=lambda e: e.func.__name__)
def test_each_valid_call_is_valid_and_names_real_arguments(entry: Entry) -> None:
    params = inspect.signature(entry.func).parameters
    kwargs = entry.valid()
    assert set(kwargs) <= set(params), set(kwargs) - set(params)
    assert set(entry.args) <= set(kwargs), set(entry.args) - set(kwargs)
    entry.func(**kwargs)  # no error: every refusal above is the substituted value's doing


# ---- the examples of the issue ---------------------------------------------------------------


def _refused(call: Callable[[], Any], name: str) -> None:
    with pytest.raises(ValueError) as refused:
        call()
    assert _names(str(refused.value), [name]), str(refused.value)


def test_beta_interval_of_nan_is_refused() -> None:
    _refused(lambda: S.beta_interval(math.nan, 3.0, 0.9), "alpha")


def test_grouped_icc_refuses_negative_successes() -> None:
    # it read -1 as 0 (no success) and returned an ICC
    _refused(lambda: S.grouped_icc([-1, 2, 1], [3, 3, 3]), "successes")


def test_intervals_overlap_refuses_mismatched_lengths() -> None:
    # three lows against two highs broadcast into a 3 x 2 table of "overlaps"
    _refused(lambda: S.intervals_overlap([0.1, 0.3, 0.5], [0.35, 0.45]), "highs")


def test_paired_bootstrap_refuses_nan_prompt_labels() -> None:
    # two NaN labels were merged into one prompt
    nan = math.nan
    _refused(
        lambda: S.paired_bootstrap([0, 1, 1, 0], [1, 1, 0, 0], [0.0, 1.0, nan, nan], draws=50),
        "prompts",
    )


def test_icc_binary_of_nothing_is_refused() -> None:
    _refused(lambda: S.icc_binary([], []), "outcomes")


def test_invokerank_refuses_zero_draws() -> None:
    # it raised an IndexError from the interval of no draws
    _refused(
        lambda: S.invokerank([4, 4], [[3], [2]], [0, 0], stages=("surfaced",), draws=0), "draws"
    )


def test_equal_tailed_of_no_draws_is_refused() -> None:
    _refused(lambda: S.equal_tailed([], 0.9), "draws")


def test_bootstrap_score_refuses_zero_resamples() -> None:
    # it printed intervals from no resample
    _refused(
        lambda: ir.bootstrap_score([4, 4, 4, 4], [3, 1, 2, 4], [0, 0, 0, 0], resamples=0),
        "resamples",
    )


def test_pass_hat_k_refuses_infinite_repeats() -> None:
    # pass^2 of 3 successes in infinitely many repeats read 0.0
    _refused(lambda: S.pass_hat_k(3, math.inf, 2), "n")
