"""The simulation loop: :func:`calibrate` and the state of one calibration.

Data sets are simulated in blocks (bounded in size) and every test, the stopping rule and
the family are applied to each block. Common random numbers: the same uniforms generate
every scenario, so scenarios differ only by the effect. This is the one module that knows
every evaluator; the others know nothing of the loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import draw_count, probability, refuse_text, rng_seed
from prereg.stats.calibration.bootstrap import _bootstrap, _BootstrapDraws
from prereg.stats.calibration.contrast import (
    _contrast,
    _outcomes,
    _unit_contrasts,
    contrast_pvalues,
)
from prereg.stats.calibration.equivalence import _Regions, _tost
from prereg.stats.calibration.outcome import Outcome, _Acc
from prereg.stats.calibration.paired import EVALUATORS
from prereg.stats.calibration.permutation import PERMUTATIONS, _permutation
from prereg.stats.calibration.plans import FamilyPlan, MonitorPlan, PlannedTest, family_levels
from prereg.stats.calibration.scenarios import (
    _contrast_deltas,
    _effect_sign,
    _margin_key,
    _scenarios,
    estimand,
)
from prereg.stats.calibration.stopping import _monitor
from prereg.stats.calibration.summary import (
    CalibrationResult,
    CalibrationRow,
    _family_row,
    _monitor_rows,
    _rows_of,
)
from prereg.stats.calibration_model import (
    BoolArray,
    Draws,
    Population,
    simulate,
    simulate_arms,
)

#: data sets simulated at once (bounded so that a block holds about 4 million outcomes)
_BLOCK_CELLS = 4_000_000

Progress = Callable[[int, int], None]


def _subset(y: BoolArray, subset: NDArray[np.intp] | None) -> BoolArray:
    return y if subset is None else y[:, subset, :]


class _Simulation:
    """The state of one calibration: effects, true values, cached resampling, results."""

    def __init__(
        self,
        pop: Population,
        tests: Sequence[PlannedTest],
        monitor: MonitorPlan | None,
        effect: float,
        draws: int,
        rng: np.random.Generator,
        family: FamilyPlan | None = None,
    ) -> None:
        self.pop, self.tests, self.monitor, self.draws = pop, list(tests), monitor, draws
        self.family, self.fam = family, _Acc()
        self.sign = _effect_sign(effect)
        self.effects: dict[str, float] = {
            "null": 0.0,
            "planned effect": pop.latent_effect("mean", effect),
        }
        for plan in tests:
            if plan.test == "tost_paired" and _margin_key(plan) not in self.effects:
                target = self.sign * float(plan.margin or 0.0)
                self.effects[_margin_key(plan)] = pop.latent_effect(plan.aggregate, target)
        self.truths: dict[tuple[str, float], float] = {}
        self.notes: list[str] = []
        # tests of contrasts: per-arm effects, true value, and a stream of K-arm data each
        self.contrasts: dict[int, tuple[tuple[float, ...], float]] = {}
        self.arm_streams: dict[int, np.random.Generator] = {}
        arm_seed = int(rng.integers(2**63))
        # a family of contrasts: its own stream of K-arm data (a tag no test index takes)
        self.family_stream = np.random.default_rng([arm_seed, len(tests), 1])
        for index, plan in enumerate(tests):
            if plan.weights is not None:
                deltas, value, note = _contrast_deltas(pop, plan.weights, effect)
                self.contrasts[index] = (deltas, value)
                self.arm_streams[index] = np.random.default_rng([arm_seed, index])
                if note:
                    self.notes.append(f"{plan.label}: {note}")
        self.side_seed = int(rng.integers(2**63))  # the permutation relabelings, not data
        self.relabelings: dict[int, NDArray[np.intp]] = {}
        self.regions = _Regions()
        self.boot: dict[tuple[int, int, int, int], _BootstrapDraws] = {}
        self.acc: dict[tuple[int, str], _Acc] = {}
        self.mon: dict[str, _Acc] = {"null": _Acc(), "planned effect": _Acc()}

    @property
    def latent(self) -> list[float]:
        return sorted(set(self.effects.values()))

    def truth(self, plan: PlannedTest, key: str) -> float:
        if plan.weights is not None:  # a contrast: 0 without an effect (weights sum to 0)
            index = self.tests.index(plan)
            return 0.0 if key == "null" else self.contrasts[index][1]
        agg, delta = estimand(plan), self.effects[key]
        if (agg, delta) not in self.truths:
            self.truths[(agg, delta)] = self.pop.truth(agg, delta)
        return self.truths[(agg, delta)]

    def relabel(self, g: int) -> NDArray[np.intp]:
        if g not in self.relabelings:
            keys = np.random.default_rng(self.side_seed).random((PERMUTATIONS, 2 * g))
            self.relabelings[g] = np.argpartition(keys, g - 1, axis=1)[:, :g]
        return self.relabelings[g]

    def evaluate(self, plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float) -> Outcome:
        if plan.test == "paired_bootstrap":
            return _bootstrap(plan, yc, yt, truth, self.pop, self.draws, self.boot)
        if plan.test == "tost_paired":
            return _tost(plan, yc, yt, truth, self.pop, self.regions)
        if plan.test == "exact_permutation_test":
            return _permutation(plan, yc, yt, truth, self.pop, self.relabel)
        return EVALUATORS[plan.test](plan, yc, yt, truth, self.pop)

    def block(self, data: Draws) -> None:
        """Apply every test (and the stopping rule) to one block of data sets."""
        size = data.control.shape[0]
        for index, plan in enumerate(self.tests):
            if plan.weights is not None:
                self._contrast_block(index, plan, size)
                continue
            yc = _subset(data.control, plan.subset)
            for key, _ in _scenarios(plan):
                yt = _subset(data.treatment[self.effects[key]], plan.subset)
                out = self.evaluate(plan, yc, yt, self.truth(plan, key))
                self.acc.setdefault((index, key), _Acc()).add(out)
        if self.family is not None:
            self._family_block(self.family, data)
        if self.monitor is not None:
            yc = _subset(data.control, self.monitor.subset)
            for key in ("null", "planned effect"):
                yt = _subset(data.treatment[self.effects[key]], self.monitor.subset)
                crossed, direction, used = _monitor(self.monitor, yc, yt)
                self.mon[key].add(Outcome(crossed, direction))
                self.mon[key].used.append(used)

    def _family_block(self, fam: FamilyPlan, data: Draws) -> None:
        """Whether the registered rule rejects any member under the global null (every
        member's null holds: no effect), per data set: the family-wise error, which is
        also the false discovery rate when every hypothesis is null (V = R)."""
        if fam.arms is not None:  # a family of contrasts: K arms of its own, no effect
            size = data.control.shape[0]
            arms = simulate_arms(self.pop, [(0.0,) * fam.arms], size, self.family_stream)[0]
            hits = contrast_family_rejects(fam, arms)
            self.fam.add(Outcome(hits, np.zeros(hits.size, dtype=np.int64)))
            return
        levels = family_levels(fam.method, fam.q, len(fam.members))
        counts = np.zeros((len(levels), data.control.shape[0]), dtype=np.int64)
        null = data.treatment[self.effects["null"]]
        for member in fam.members:
            if member is None:
                continue
            yc, yt = _subset(data.control, member.subset), _subset(null, member.subset)
            truth = self.truth(member, "null")
            for j, (_, alpha) in enumerate(levels):
                counts[j] += self.evaluate(replace(member, alpha=alpha), yc, yt, truth).reject
        needed = np.array([k for k, _ in levels], dtype=np.int64)[:, None]
        rejects: BoolArray = np.asarray((counts >= needed).any(axis=0), dtype=bool)
        self.fam.add(Outcome(rejects, np.zeros(rejects.size, dtype=np.int64)))

    def _contrast_block(self, index: int, plan: PlannedTest, size: int) -> None:
        deltas = self.contrasts[index][0]
        null = tuple(0.0 for _ in deltas)
        data = simulate_arms(self.pop, [null, deltas], size, self.arm_streams[index])
        for (key, _), arms in zip(_scenarios(plan), data, strict=True):
            arms = arms if plan.subset is None else arms[:, :, plan.subset, :]
            out = _contrast(plan, arms, self.truth(plan, key))
            self.acc.setdefault((index, key), _Acc()).add(out)

    def rows(self, power_target: float | None) -> list[CalibrationRow]:
        rows: list[CalibrationRow] = []
        for index, plan in enumerate(self.tests):
            values = {key: self.truth(plan, key) for key, _ in _scenarios(plan)}
            rows.extend(_rows_of(plan, index, self.acc, values, self.sign, power_target))
        if self.monitor is not None:
            rows.extend(_monitor_rows(self.monitor, self.mon, self.sign, power_target))
        if self.family is not None:
            rows.append(_family_row(self.family, self.fam))
        return rows


def contrast_family_rejects(fam: FamilyPlan, arms: BoolArray) -> BoolArray:
    """Per data set, whether the registered rule rejects any member of a family of
    contrasts (``fam.arms`` set) on K-arm data with no effect on any arm (arms: K x data
    sets x tasks x repeats): the family-wise error under the global null, and its false
    discovery rate (V = R there). Every member's p is the one the report adjusts
    (:func:`prereg.stats.calibration.contrast.contrast_pvalues`: the bootstrap's
    two-sided t-test p, or the sign-flip p), on the member's tasks and units; a member not
    simulated (None) counts in m and never rejects; the rule is
    :func:`~prereg.stats.calibration.plans.family_levels` (Holm: some p <= q/m; BH: p_(k)
    <= k q / m for some k; none: some p <= q). e-BH adjusts e-values, which contrasts do
    not have: its members are None."""
    arms = _outcomes(arms, "arms")
    if fam.arms is None or arms.ndim != 4 or arms.shape[0] != fam.arms:
        raise ValueError(
            f"arms must be (arms x data sets x tasks x repeats) with the family's {fam.arms} "
            f"arms, got shape {arms.shape}"
        )
    levels = family_levels(fam.method, fam.q, len(fam.members))
    counts = np.zeros((len(levels), arms.shape[1]), dtype=np.int64)
    for member in fam.members:
        if member is None:
            continue
        seen = arms if member.subset is None else arms[:, :, member.subset, :]
        p = contrast_pvalues(member, _unit_contrasts(member, seen))
        for j, (_, alpha) in enumerate(levels):
            counts[j] += p <= alpha
    needed = np.array([k for k, _ in levels], dtype=np.int64)[:, None]
    out: BoolArray = np.asarray((counts >= needed).any(axis=0), dtype=bool)
    return out


def calibrate(
    pop: Population,
    tests: Sequence[PlannedTest],
    *,
    effect: float,
    power_target: float | None = 0.8,
    monitor: MonitorPlan | None = None,
    sims: int = 1000,
    seed: int | None = 0,
    draws: int = 1000,
    progress: Progress | None = None,
    family: FamilyPlan | None = None,
) -> CalibrationResult:
    """Simulate the registered analysis ``sims`` times per scenario (see the module doc).

    ``effect`` is the planned effect as a difference of mean outcomes, treatment minus
    control (its sign is the planned direction); ``power_target`` the planned power (the
    nominal of the power rows; None: no verdict). ``progress(done, total)`` is called as
    blocks of data sets are analysed. Seeded with ``numpy.random.default_rng(seed)``; the
    same seed gives the same table. ``family``: the registered multiplicity family, whose
    error rate under the global null gets one row (:class:`FamilyPlan`; a family of
    contrasts, ``arms`` set, is simulated on K arms of its own with no effect on any).
    ValueError naming the argument for a non-positive ``sims`` or ``draws``, a non-finite
    ``effect``, a ``power_target`` outside (0, 1) or a negative ``seed``.
    """
    sims, draws = draw_count(sims, "sims"), draw_count(draws, "draws")
    seed = rng_seed(seed)
    refuse_text(effect, "effect")
    if not math.isfinite(float(effect)):
        raise ValueError(f"effect must be finite, got {effect!r}")
    if power_target is not None:
        probability(power_target, "power_target")
    rng = np.random.default_rng(seed)
    run = _Simulation(pop, tests, monitor, effect, draws, rng, family)
    block = max(1, _BLOCK_CELLS // (pop.prompts * pop.runs))
    if progress is not None:
        progress(0, sims)
    done = 0
    while done < sims:
        size = min(block, sims - done)
        run.block(simulate(pop, run.latent, size, rng))
        done += size
        if progress is not None:
            progress(done, sims)
    return CalibrationResult(
        rows=tuple(run.rows(power_target)),
        population=pop,
        effect=effect,
        effects=run.effects,
        sims=sims,
        seed=seed,
        draws=draws,
        method=(
            "simulation of the registered analysis: beta-binomial prompts matched to sigma_d, "
            "clipped additive run shifts matched to sigma_run, common random numbers"
        ),
        notes=tuple(run.notes),
    )
