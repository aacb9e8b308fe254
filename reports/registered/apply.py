"""Registered tests, applied exactly as registered, through :mod:`prereg.stats` only.

One function per registrable test turns a :class:`TestSpec` and the paired data
into a :class:`TestReport` with its provenance. No statistic is computed here;
this module chooses the inputs the registration names and reads the results.

Conventions (fixed before any data):

- ``compare`` is ``[control, treatment]``; differences are treatment minus
  control, ``sides: greater`` means the treatment is ahead.
- Intervals are at the registered ``level`` when given, else at ``1 - alpha``
  for a two-sided test and ``1 - 2 alpha`` for a one-sided test (the interval
  the decision is equivalent to).
- McNemar, one-sided: the exact one-sided conditional binomial test, computed as
  the exact sign-flip test on the paired binary differences (the two coincide).
- The beta-mixture test used without a stopping rule rejects when its e-value
  reaches ``1/alpha`` (Markov's inequality keeps the type I error at alpha).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg import stats
from prereg.registry.schema import TestSpec
from prereg.reports.model import Discordant, Interval, Provenance, TestReport
from prereg.reports.pairs import BINARY_AGGREGATES, PairData
from prereg.reports.registered.verdict import (
    Evidence,
    favoured_direction,
    read_equivalence,
    read_superiority,
)
from prereg.stats.bootstrap import FEW_CLUSTERS

PairsFor = Callable[[str], PairData]


def _f(value: Any) -> float | None:
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _sign(value: float | None) -> int:
    if value is None or value == 0:
        return 0
    return 1 if value > 0 else -1


def interval_level(spec: TestSpec) -> float:
    if spec.level is not None:
        return spec.level
    return 1.0 - spec.alpha if spec.sides == "two-sided" else 1.0 - 2.0 * spec.alpha


def _binary_aggregate(spec: TestSpec) -> tuple[str, str]:
    if spec.aggregate in BINARY_AGGREGATES:
        return spec.aggregate, ""
    return "majority", (
        "aggregate 'mean' read as 'majority': this test needs one binary outcome per task"
    )


def _tango(b_control: int, c_treatment: int, n: int, level: float) -> Interval | None:
    if n == 0:
        return None
    res = stats.tango_interval(c_treatment, b_control, n, level=level)
    return Interval(low=_f(res.low), high=_f(res.high), level=level, method=res.method)


class _Ctx:
    """What every test needs: the spec, where it was registered, its data."""

    def __init__(
        self,
        spec: TestSpec,
        role: str,
        field_name: str,
        pairs: PairData,
        seed: int,
        prior: tuple[float, float],
    ) -> None:
        self.spec = spec
        self.role = role
        self.field = field_name
        self.pairs = pairs
        self.seed = seed
        self.prior = prior
        self.favoured = favoured_direction(spec.favours, spec.sides, pairs.control, pairs.treatment)
        self.deciding = role == "primary"

    def report(
        self,
        *,
        estimate: float | None,
        estimate_label: str,
        interval: Interval | None,
        decision: str,
        evidence: Evidence | None,
        function: str,
        parameters: dict[str, Any],
        method: str,
        note: str = "",
        statistic: float | None = None,
        pvalue: float | None = None,
        evalue: float | None = None,
        discordant: tuple[int, int] | None = None,
        min_disc: int | None = None,
        reading: tuple[str, str] | None = None,
        aggregate: str | None = None,
    ) -> TestReport:
        spec = self.spec
        if reading is None and evidence is not None:
            reading = read_superiority(
                evidence, self.favoured, (self.pairs.control, self.pairs.treatment)
            )
        read, reason = reading if reading is not None else (None, "")
        if not reason:
            reason = {
                "reject": "rejects at the registered alpha",
                "no_reject": "does not reject at the registered alpha",
                "undefined": "undefined on these runs",
            }[decision]
        disc = None
        if discordant is not None:
            disc = Discordant(b=discordant[0], c=discordant[1], n=discordant[0] + discordant[1])
        return TestReport(
            role=self.role,
            registration_field=self.field,
            test=spec.test,
            compare=[self.pairs.control, self.pairs.treatment],
            favours=spec.favours,
            sides=spec.sides,
            alpha=spec.alpha,
            aggregate=aggregate or spec.aggregate,
            unit=spec.unit,
            units=self.pairs.n_units(spec.unit) if self.pairs.n else 0,
            outcome=self.pairs.outcome,
            estimate=_f(estimate),
            estimate_label=estimate_label,
            interval=interval,
            statistic=_f(statistic),
            pvalue=_f(pvalue),
            evalue=_f(evalue),
            n=self.pairs.n,
            discordant=disc,
            min_discordant=min_disc,
            margin=spec.margin,
            decision=decision,
            reading=read if self.deciding else None,
            reason=reason,
            method=method,
            note=note,
            provenance=Provenance(
                function=function,
                parameters=parameters,
                registration_field=self.field,
                runs=self.pairs.runset(),
            ),
        )


def _empty(ctx: _Ctx, function: str) -> TestReport:
    ev = Evidence(
        rejects=None,
        direction=0,
        attainable=False,
        unattainable_reason=f"no task has the outcome '{ctx.pairs.outcome}' measured in both arms",
    )
    reading = None
    if ctx.spec.test == "tost_paired":
        reading = read_equivalence(None, False, ev.unattainable_reason)
    return ctx.report(
        estimate=None,
        estimate_label="no paired tasks",
        interval=None,
        decision="undefined",
        evidence=ev,
        function=function,
        parameters={},
        method="not computed",
        reading=reading,
        note=ev.unattainable_reason,
    )


def _mcnemar(ctx: _Ctx) -> TestReport:
    spec, pairs = ctx.spec, ctx.pairs
    if pairs.n == 0:
        return _empty(ctx, "prereg.stats.mcnemar_exact")
    agg, note = _binary_aggregate(spec)
    b, c = pairs.discordant(agg)
    sides = 2 if spec.sides == "two-sided" else 1
    min_disc = stats.min_discordant(spec.alpha, sides=sides)
    if sides == 2:
        res = stats.mcnemar_exact(b, c)
        p, statistic, method = res.pvalue, res.statistic, res.method
        function = "prereg.stats.mcnemar_exact"
        params: dict[str, Any] = {"b": b, "c": c}
    else:
        ctl, trt = pairs.per_task(agg)
        res2 = stats.sign_flip_test(trt - ctl, alternative=spec.sides)
        p, statistic = res2.pvalue, float(c)
        method = (
            f"McNemar exact, one-sided ({spec.sides}), computed as the exact sign-flip "
            "test on paired binary differences"
        )
        function, params = (
            "prereg.stats.sign_flip_test",
            {"differences": "treatment - control per task", "alternative": spec.sides},
        )
    level = interval_level(spec)
    attainable = b + c >= min_disc
    ev = Evidence(
        rejects=p <= spec.alpha,
        direction=_sign(c - b),
        attainable=attainable,
        unattainable_reason=(
            f"{b + c} discordant pair(s), fewer than the {min_disc} that the exact "
            f"test needs to reach alpha {spec.alpha:g} even if all favoured one arm "
            "(pre-committed: inconclusive whatever the raw difference)"
        ),
    )
    return ctx.report(
        estimate=(c - b) / pairs.n,
        estimate_label=(
            f"difference in the share of tasks succeeding, {pairs.treatment} - "
            f"{pairs.control}, repeats aggregated by '{agg}'"
        ),
        interval=_tango(b, c, pairs.n, level),
        decision="reject" if ev.rejects else "no_reject",
        evidence=ev,
        function=function,
        parameters={
            **params,
            "alpha": spec.alpha,
            "sides": spec.sides,
            "aggregate": agg,
            "min_discordant": min_disc,
            "tasks": pairs.n,
        },
        method=method,
        note=note,
        statistic=statistic,
        pvalue=p,
        discordant=(b, c),
        min_disc=min_disc,
        aggregate=agg,
    )


@dataclass(frozen=True)
class _BootstrapFit:
    """The paired bootstrap of a spec on paired data: at the decision level, and at the
    registered display level when that differs (else the same result)."""

    res: stats.BootstrapResult
    shown: stats.BootstrapResult
    rows: int
    decision_level: float


def _bootstrap_fit(spec: TestSpec, pairs: PairData, seed: int) -> _BootstrapFit | None:
    """:func:`stats.paired_bootstrap` as the registered test runs it (None: no row)."""
    yc, yt, prompts, runs = pairs.long_form(spec.unit)
    if yc.size == 0:
        return None
    decision_level = 1.0 - spec.alpha if spec.sides == "two-sided" else 1.0 - 2.0 * spec.alpha
    res = stats.paired_bootstrap(
        yc,
        yt,
        prompts,
        runs_control=runs,
        runs_treatment=runs,
        draws=spec.draws,
        level=decision_level,
        seed=seed,
    )
    shown = res
    if spec.level is not None and abs(spec.level - decision_level) > 1e-12:
        shown = stats.paired_bootstrap(
            yc,
            yt,
            prompts,
            runs_control=runs,
            runs_treatment=runs,
            draws=spec.draws,
            level=spec.level,
            seed=seed,
        )
    return _BootstrapFit(res, shown, int(yc.size), decision_level)


def _shown_interval(fit: _BootstrapFit, unit: str, units: int) -> Interval:
    """The printed interval: withheld below FEW_CLUSTERS units and when it has no width
    (:meth:`Interval.resampled`)."""
    shown = fit.shown
    return Interval.resampled(
        _f(shown.low),
        _f(shown.high),
        shown.level,
        shown.method,
        unit=unit,
        units=units,
        minimum=FEW_CLUSTERS,
    )


def paired_difference(
    spec: TestSpec, pairs: PairData, seed: int
) -> tuple[float | None, Interval | None]:
    """(estimate, interval) of the registered paired bootstrap ``spec`` on ``pairs``: what
    :func:`run_test` reports for them, without the rest of its report (the descriptive
    pairwise table shows only these two, for every pair of arms)."""
    fit = _bootstrap_fit(spec, pairs, seed)
    if fit is None:
        return None, None
    return _f(fit.res.estimate), _shown_interval(fit, spec.unit, pairs.n_units(spec.unit))


def _bootstrap(ctx: _Ctx) -> TestReport:
    spec, pairs = ctx.spec, ctx.pairs
    fit = _bootstrap_fit(spec, pairs, ctx.seed)
    if fit is None:
        return _empty(ctx, "prereg.stats.paired_bootstrap")
    res, decision_level = fit.res, fit.decision_level
    n_units = pairs.n_units(spec.unit)
    params = {
        "draws": spec.draws,
        "seed": ctx.seed,
        "level": decision_level,
        "runs": pairs.run_label,
        "rows": fit.rows,
        "prompts": pairs.n,
        "unit": spec.unit,
        "units": n_units,
    }
    if fit.shown is not res:
        params["display_level"] = spec.level
    low, high = _f(res.low), _f(res.high)
    if low is None or high is None:
        rejects: bool | None = None
    elif spec.sides == "greater":
        rejects = low > 0
    elif spec.sides == "less":
        rejects = high < 0
    else:
        rejects = low > 0 or high < 0
    ctl, trt = pairs.per_task("mean")
    differs = bool(np.any(trt != ctl))
    # Below FEW_CLUSTERS units the bootstrap's level is not established (bench/
    # cluster_coverage.py: its worst designs under-cover below 10 clusters), so the test
    # cannot decide either way: inconclusive, never "supported" (issues 14 and 39), and
    # its interval is withheld with the reason.
    ev = Evidence(
        rejects=rejects,
        direction=_sign(res.estimate),
        attainable=differs and n_units >= FEW_CLUSTERS,
        unattainable_reason=(
            f"too few {spec.unit}s ({n_units} < {FEW_CLUSTERS}): the cluster bootstrap "
            f"keeps its level from {FEW_CLUSTERS} {spec.unit}s, so its decision cannot be read"
            if differs
            else "no task differs between the arms (every paired difference is zero), "
            "so no interval can exclude zero"
        ),
    )
    decision = "undefined" if rejects is None else ("reject" if rejects else "no_reject")
    return ctx.report(
        estimate=res.estimate,
        estimate_label=(
            f"difference in mean outcome, {pairs.treatment} - {pairs.control}, "
            f"{spec.unit}-weighted over every run"
        ),
        interval=_shown_interval(fit, spec.unit, n_units),
        decision=decision,
        evidence=ev,
        function="prereg.stats.paired_bootstrap",
        parameters=params,
        method=res.method,
        pvalue=res.pvalue,
        note="; ".join(
            part
            for part in (
                f"the decision uses the interval at level {decision_level:g}; the p-value "
                "inverts the two-sided interval",
                f"too few {spec.unit}s ({n_units} < {FEW_CLUSTERS}): interval withheld"
                if n_units < FEW_CLUSTERS
                else "",
                res.note,
            )
            if part
        ),
        aggregate="none (every run)",
    )


def _tost(ctx: _Ctx) -> TestReport:
    spec, pairs = ctx.spec, ctx.pairs
    if pairs.n == 0:
        return _empty(ctx, "prereg.stats.tost_paired")
    ctl, trt = pairs.per_unit(spec.aggregate, spec.unit)
    d = trt - ctl
    margin = float(spec.margin or 0.0)
    # per-unit outcomes are proportions, so their mean difference lies in [-1, 1]: the
    # t interval is cut to it (the decision is unchanged for margins inside it)
    res = stats.tost_paired(d, margin=margin, alpha=spec.alpha, support=(-1.0, 1.0))
    defined = res.pvalue is not None and math.isfinite(res.pvalue)
    # equivalence reachable at all with this many tasks: the margin Tango's test needs
    # with no discordant pair (binary per-task outcomes); t-based: undefined -> None
    reachable = True
    reason = ""
    if res.b is not None:
        floor = stats.equivalence_margin(np.zeros(d.size), alpha=spec.alpha)
        reachable = floor <= margin
        reason = (
            f"with {d.size} {spec.unit}(s) equivalence within ±{margin:g} is unreachable even "
            f"with no discordant pair (the smallest reachable margin is {floor:.3f})"
        )
    elif not defined:
        reason = res.note
    reading = read_equivalence(res.equivalent if defined else None, reachable, reason)
    disc = (res.b, res.c) if res.b is not None and res.c is not None else None
    # Tango's convention: b = +1 differences (treatment only); report as (control, treatment)
    discordant = (disc[1], disc[0]) if disc is not None else None
    return ctx.report(
        estimate=res.estimate,
        estimate_label=(
            f"mean per-{spec.unit} difference, {pairs.treatment} - {pairs.control}, "
            f"repeats aggregated by '{spec.aggregate}'"
        ),
        interval=(
            Interval(low=_f(res.low), high=_f(res.high), level=res.level, method=res.method)
            if defined or res.b is not None
            else None
        ),
        decision="undefined" if not defined else ("reject" if res.equivalent else "no_reject"),
        evidence=None,
        reading=reading,
        function="prereg.stats.tost_paired",
        parameters={
            "margin": margin,
            "alpha": spec.alpha,
            "aggregate": spec.aggregate,
            "tasks": pairs.n,
            "unit": spec.unit,
            "units": int(d.size),
            "min_margin": _f(res.min_margin),
        },
        method=res.method,
        note=res.note,
        pvalue=res.pvalue if defined else None,
        discordant=discordant,
    )


def _sign_flip(ctx: _Ctx) -> TestReport:
    spec, pairs = ctx.spec, ctx.pairs
    if pairs.n == 0:
        return _empty(ctx, "prereg.stats.sign_flip_test")
    ctl, trt = pairs.per_unit(spec.aggregate, spec.unit)
    d = trt - ctl
    res = stats.sign_flip_test(d, alternative=spec.sides)
    sides = 2 if spec.sides == "two-sided" else 1
    min_disc = stats.min_discordant(spec.alpha, sides=sides)
    nonzero = int(np.count_nonzero(d))
    ev = Evidence(
        rejects=res.pvalue <= spec.alpha,
        direction=_sign(res.estimate),
        attainable=nonzero >= min_disc,
        unattainable_reason=(
            f"{nonzero} {spec.unit}(s) differ, fewer than the {min_disc} "
            "an exact sign-flip test needs to reach alpha"
        ),
    )
    # per-task binary differences have Tango's interval; per-cluster means do not
    binary = spec.aggregate in BINARY_AGGREGATES and spec.unit == "task"
    b = int(np.sum(d < 0))
    c = int(np.sum(d > 0))
    return ctx.report(
        estimate=res.estimate,
        estimate_label=(
            f"mean per-{spec.unit} difference, {pairs.treatment} - {pairs.control}, "
            f"repeats aggregated by '{spec.aggregate}'"
        ),
        interval=_tango(b, c, pairs.n, interval_level(spec)) if binary else None,
        decision="reject" if ev.rejects else "no_reject",
        evidence=ev,
        function="prereg.stats.sign_flip_test",
        parameters={
            "alternative": spec.sides,
            "aggregate": spec.aggregate,
            "tasks": pairs.n,
            "unit": spec.unit,
            "units": int(d.size),
        },
        method=res.method,
        statistic=res.statistic,
        pvalue=res.pvalue,
        discordant=(b, c) if binary else None,
        min_disc=min_disc,
    )


def _permutation(ctx: _Ctx) -> TestReport:
    spec, pairs = ctx.spec, ctx.pairs
    if pairs.n == 0:
        return _empty(ctx, "prereg.stats.exact_permutation_test")
    ctl, trt = pairs.per_unit(spec.aggregate, spec.unit)
    res = stats.exact_permutation_test(trt, ctl, alternative=spec.sides, seed=ctx.seed)
    pooled = np.concatenate([ctl, trt])
    ev = Evidence(
        rejects=res.pvalue <= spec.alpha,
        direction=_sign(res.estimate),
        attainable=bool(np.ptp(pooled) > 0),
        unattainable_reason="every per-task value is identical in both arms",
    )
    return ctx.report(
        estimate=res.estimate,
        estimate_label=(
            f"difference of per-{spec.unit} means, {pairs.treatment} - {pairs.control} "
            "(unpaired, as registered)"
        ),
        interval=None,
        decision="reject" if ev.rejects else "no_reject",
        evidence=ev,
        function="prereg.stats.exact_permutation_test",
        parameters={
            "x": pairs.treatment,
            "y": pairs.control,
            "alternative": spec.sides,
            "aggregate": spec.aggregate,
            "unit": spec.unit,
            "seed": ctx.seed,
        },
        method=res.method,
        statistic=res.statistic,
        pvalue=res.pvalue,
    )


def _beta_mixture(ctx: _Ctx) -> TestReport:
    spec, pairs = ctx.spec, ctx.pairs
    if pairs.n == 0:
        return _empty(ctx, "prereg.stats.beta_mixture_evalue")
    agg, note = _binary_aggregate(spec)
    b, c = pairs.discordant(agg)
    res = stats.beta_mixture_evalue(b, c, prior=ctx.prior)
    best = stats.beta_mixture_evalue(b + c, 0, prior=ctx.prior)
    threshold = 1.0 / spec.alpha
    ev = Evidence(
        rejects=float(res.evalue) >= threshold,
        direction=_sign(c - b),
        attainable=float(best.evalue) >= threshold,
        unattainable_reason=(
            f"{b + c} discordant pair(s): even all one way the "
            f"e-value would stay below 1/alpha = {threshold:g}"
        ),
    )
    if spec.sides != "two-sided":
        note = (note + "; " if note else "") + (
            "the beta-mixture e-value with a symmetric prior is two-sided; direction from favours"
        )
    return ctx.report(
        estimate=(c - b) / pairs.n,
        estimate_label=(
            f"difference in the share of tasks succeeding, {pairs.treatment} - "
            f"{pairs.control}, repeats aggregated by '{agg}'"
        ),
        interval=_tango(b, c, pairs.n, interval_level(spec)),
        decision="reject" if ev.rejects else "no_reject",
        evidence=ev,
        function="prereg.stats.beta_mixture_evalue",
        parameters={
            "b": b,
            "c": c,
            "prior": list(ctx.prior),
            "threshold": threshold,
            "aggregate": agg,
        },
        method=res.method,
        note=note,
        evalue=float(res.evalue),
        pvalue=float(res.pvalue),
        discordant=(b, c),
        aggregate=agg,
    )


#: One adapter per registrable test (the table is :data:`prereg.stats.REGISTRABLE_TESTS`;
#: tests/test_architecture.py checks the two name the same tests).
ADAPTERS: Mapping[stats.TestName, Callable[[_Ctx], TestReport]] = {
    "mcnemar_exact": _mcnemar,
    "paired_bootstrap": _bootstrap,
    "tost_paired": _tost,
    "sign_flip_test": _sign_flip,
    "exact_permutation_test": _permutation,
    "beta_mixture": _beta_mixture,
}


def run_test(
    spec: TestSpec,
    *,
    role: str,
    field_name: str,
    pairs: PairData,
    seed: int,
    prior: tuple[float, float] = (1.0, 1.0),
) -> TestReport:
    """Apply one registered test to paired data (see the module docstring)."""
    return ADAPTERS[spec.test](_Ctx(spec, role, field_name, pairs, seed, prior))
