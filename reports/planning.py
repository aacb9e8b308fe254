"""Planning a paired comparison: what a design can detect, before a token is spent.

Every figure comes from :mod:`prereg.stats` (``mde_paired``, ``prompts_for_mde``,
``mcnemar_sample_size``, ``mcnemar_exact_sample_size``, ``mcnemar_exact_power``,
``min_discordant``, ``simulate_sequential_monitor``,
``sequential_monitor_exact``) and, for a plan from a pilot, from the estimators of
:mod:`prereg.reports.pilot`. :func:`build_plan` assembles the plan document that
``prereg plan --json`` prints; the command validates the options first (exit 2 naming
the option), so this module assumes a :class:`PlanOptions` that passed that check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.registry.registry import Entry, Registry
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.registry.verify import verified_entry
from prereg.reports.pilot import PilotData, PilotEstimate, estimate_pilot, load_pilot
from prereg.stats import (
    MonitorExact,
    MonitorSimulation,
    mcnemar_exact_power,
    mcnemar_exact_sample_size,
    mcnemar_sample_size,
    mde_paired,
    min_discordant,
    prompts_for_mde,
    sequential_monitor_exact,
    simulate_sequential_monitor,
)
from prereg.stats.invokerank import REPLICATE_PERMUTATIONS, replicate_variance

#: Prompt counts and alphas of the MDE grid (Figure 9 of InvokeRank uses 58 to 400).
GRID_PROMPTS = (25, 50, 100, 200, 400, 800)
GRID_ALPHAS = (0.05, 0.10)
#: Default horizon of the simulated monitor when the plan gives no finite prompt count.
DEFAULT_HORIZON = 1000
#: The default horizon is capped so a default simulation stays quick.
MAX_DEFAULT_HORIZON = 5000
#: Largest runs per arm searched for when a requested MDE is below the run floor.
MAX_RUNS_SEARCH = 1000
#: Largest horizon for which the exact (O(horizon^3)) monitor figures are computed.
EXACT_HORIZON = 600
#: Defaults of the monitor when neither an option nor the pilot's registration sets them.
DEFAULT_THRESHOLD = 20.0
DEFAULT_MIN_PROMPTS = 40


@dataclass(frozen=True)
class PlanOptions:
    """The plan's request: the command's options as given (None where not given)."""

    sigma_d: float | None = None
    prompts: int | None = None
    mde: float | None = None
    alpha: float = 0.05
    power: float = 0.8
    sigma_run: float | None = None
    runs_per_arm: int | None = None
    p01: float | None = None
    p10: float | None = None
    from_runs: str | None = None
    #: further registrations of the same design: with ``from_runs``, replicate runs
    replicates: tuple[str, ...] = ()
    stopping_threshold: float | None = None
    min_prompts: int | None = None
    max_prompts: int | None = None
    sims: int = 2000
    seed: int = 0


# ---- the paired design ------------------------------------------------------------------------


def _floor(sigma_d: float, alpha: float, power: float, sigma_run: float, runs: int) -> float:
    """The MDE no number of prompts goes below: the MDE at (practically) infinite prompts.

    Evaluated by :func:`prereg.stats.mde_paired` at 10^300 prompts, where the prompt term
    vanishes in floating point, so the formula stays in one place.
    """
    if sigma_run == 0.0:
        return 0.0
    return mde_paired(
        sigma_d, 10**300, alpha=alpha, power=power, sigma_run=sigma_run, runs_per_arm=runs
    )


def _runs_needed(
    sigma_d: float, mde: float, alpha: float, power: float, sigma_run: float
) -> tuple[int, int] | None:
    """Fewest runs per arm that bring ``mde`` within reach, and the prompts it then needs."""
    for runs in range(1, MAX_RUNS_SEARCH + 1):
        n = prompts_for_mde(
            sigma_d, mde, alpha=alpha, power=power, sigma_run=sigma_run, runs_per_arm=runs
        )
        if math.isfinite(n):
            return runs, int(n)
    return None


def mde_grid(
    sigma_d: float, alpha: float, power: float, sigma_run: float, runs: int, planned: int | None
) -> list[dict[str, Any]]:
    """MDE by prompts and alpha, without and with the run component (Figure 9's layout)."""
    prompts = sorted(set(GRID_PROMPTS) | ({planned} if planned else set()))
    alphas = sorted(set(GRID_ALPHAS) | {alpha})
    return [
        {
            "prompts": n,
            "alpha": a,
            "planned": n == planned and a == alpha,
            "mde": mde_paired(sigma_d, n, alpha=a, power=power),
            "mde_with_runs": mde_paired(
                sigma_d, n, alpha=a, power=power, sigma_run=sigma_run, runs_per_arm=runs
            ),
        }
        for a in alphas
        for n in prompts
    ]


def _solve(
    sigma_d: float, opts: PlanOptions, prompts: int | None, sigma_run: float, runs: int
) -> dict[str, Any]:
    """The prompts for the requested MDE, or the MDE of the given prompts."""
    if opts.mde is not None:
        n = prompts_for_mde(
            sigma_d,
            opts.mde,
            alpha=opts.alpha,
            power=opts.power,
            sigma_run=sigma_run,
            runs_per_arm=runs,
        )
        reachable = math.isfinite(n)
        return {
            "solved_for": "prompts",
            "mde": opts.mde,
            "prompts": int(n) if reachable else None,
            "reachable": reachable,
        }
    assert prompts is not None
    m = mde_paired(
        sigma_d,
        prompts,
        alpha=opts.alpha,
        power=opts.power,
        sigma_run=sigma_run,
        runs_per_arm=runs,
    )
    return {"solved_for": "mde", "mde": m, "prompts": prompts, "reachable": True}


def _paired(
    sigma_d: float, opts: PlanOptions, prompts: int | None, sigma_run: float, runs: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sigma_d": sigma_d,
        "sigma_run": sigma_run,
        "runs_per_arm": runs,
        "method": "two-sided normal approximation, InvokeRank 7.8",
    }
    out.update(_solve(sigma_d, opts, prompts, sigma_run, runs))
    floor = _floor(sigma_d, opts.alpha, opts.power, sigma_run, runs)
    out["floor_mde"] = floor
    out["message"] = None
    if opts.mde is not None and not out["reachable"]:
        need = _runs_needed(sigma_d, opts.mde, opts.alpha, opts.power, sigma_run)
        text = (
            f"the requested MDE {opts.mde:.3f} is at or below the between-run floor "
            f"{floor:.3f} (sigma_run {sigma_run:g}, {runs} run(s) per arm): no number of "
            "prompts reaches it"
        )
        if need is not None:
            text += f"; {need[0]} runs per arm would, with {need[1]} prompts"
            out["runs_per_arm_needed"] = {"runs_per_arm": need[0], "prompts": need[1]}
        out["message"] = text
    out["table"] = mde_grid(sigma_d, opts.alpha, opts.power, sigma_run, runs, out["prompts"])
    return out


# ---- McNemar and the anytime-valid monitor ------------------------------------------------------


def _mcnemar(p01: float, p10: float, opts: PlanOptions) -> dict[str, Any]:
    """The registered test is the exact McNemar test: ``prompts`` is the fewest pairs at
    which its exact power reaches the target; Connor's asymptotic n is shown beside it
    with the exact power it actually gives."""
    n = mcnemar_exact_sample_size(p01, p10, alpha=opts.alpha, power=opts.power, sides=2)
    asymptotic = mcnemar_sample_size(p01, p10, alpha=opts.alpha, power=opts.power, sides=2)
    finite = math.isfinite(n)
    return {
        "prompts": int(n) if finite else None,
        "power_exact": mcnemar_exact_power(int(n), p01, p10, opts.alpha) if finite else None,
        "prompts_asymptotic": int(asymptotic) if math.isfinite(asymptotic) else None,
        "power_exact_at_asymptotic": (
            mcnemar_exact_power(int(asymptotic), p01, p10, opts.alpha)
            if math.isfinite(asymptotic)
            else None
        ),
        "p01": p01,
        "p10": p10,
        "psi": p01 + p10,
        "difference": p01 - p10,
        "alpha": opts.alpha,
        "power": opts.power,
        "sides": 2,
        "method": (
            "exact McNemar test, exact power by enumeration (Suissa and Shuster 1991); "
            "asymptotic n: Connor (1987), Biometrics 43:207-211"
        ),
        "note": None if finite else "p01 = p10: no difference to detect",
    }


def _sequential(
    p01: float,
    p10: float,
    opts: PlanOptions,
    horizon: int,
    threshold: float,
    min_prompts: int,
    prior: tuple[float, float],
) -> dict[str, Any]:
    def exact(a: float, b: float) -> MonitorExact | None:
        # O(horizon^3): exact figures beside the simulation up to a horizon that stays quick
        if horizon > EXACT_HORIZON:
            return None
        return sequential_monitor_exact(
            a, b, horizon, threshold=threshold, min_prompts=min_prompts, prior=prior
        )

    def sim(a: float, b: float) -> MonitorSimulation:
        return simulate_sequential_monitor(
            a,
            b,
            horizon,
            threshold=threshold,
            min_prompts=min_prompts,
            prior=prior,
            sims=opts.sims,
            seed=opts.seed,
        )

    alt = sim(p01, p10)
    half = (p01 + p10) / 2.0
    null = sim(half, half)
    alt_exact, null_exact = exact(p01, p10), exact(half, half)
    return {
        "power_exact": None if alt_exact is None else alt_exact.rejection_rate,
        "expected_prompts_exact": None if alt_exact is None else alt_exact.expected_prompts,
        "type_i_error_exact": None if null_exact is None else null_exact.rejection_rate,
        "expected_prompts_null_exact": None if null_exact is None else null_exact.expected_prompts,
        "threshold": threshold,
        "min_prompts": min_prompts,
        "max_prompts": horizon,
        "prior": list(prior),
        "sims": opts.sims,
        "seed": opts.seed,
        "power": alt.rejection_rate,
        "power_se": alt.rejection_se,
        "expected_prompts": alt.expected_prompts,
        "expected_prompts_se": alt.expected_prompts_se,
        "median_prompts": alt.median_prompts,
        "type_i_error": null.rejection_rate,
        "type_i_error_se": null.rejection_se,
        "type_i_bound": 1.0 / threshold,
        "expected_prompts_null": null.expected_prompts,
        "null_p01": half,
        "null_p10": half,
        "method": alt.method,
    }


# ---- from a pilot -------------------------------------------------------------------------------


def pilot_estimates(
    ws: Workspace, reg_id: str, runs: int, seed: int
) -> tuple[dict[str, Any], PilotEstimate, Registration]:
    """Estimates from a registration's runs: (pilot JSON, estimate, registration)."""
    entry = verified_entry(Registry(ws.registry), reg_id)
    reg = entry.registration
    control, treatment = reg.compared_arms()
    data = load_pilot(
        ws.runs, entry.id, [control, treatment], digest=entry.digest, outcome=reg.outcome
    )
    est = estimate_pilot(data, control, treatment, seed=seed)
    info = est.to_json()
    info.update(
        registration=entry.id,
        digest=entry.digest,
        kind=reg.kind,
        split=reg.split,
        outcome=reg.outcome,
        sigma_d_planned=est.sigma_d.at(runs),
        effective_runs_planned=est.icc.effective(runs),
    )
    return info, est, reg


@dataclass
class _Inputs:
    """The plan's inputs as resolved so far: the options, then the pilot's estimates."""

    runs: int
    sigma_d: float | None
    sigma_run: float | None
    p01: float | None
    p10: float | None
    prompts: int | None
    threshold: float | None
    min_prompts: int | None
    sources: dict[str, str | None]
    prior: tuple[float, float] = (1.0, 1.0)
    pilot: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_options(cls, opts: PlanOptions) -> _Inputs:
        return cls(
            runs=opts.runs_per_arm if opts.runs_per_arm is not None else 1,
            sigma_d=opts.sigma_d,
            sigma_run=opts.sigma_run,
            p01=opts.p01,
            p10=opts.p10,
            prompts=opts.prompts,
            threshold=opts.stopping_threshold,
            min_prompts=opts.min_prompts,
            sources={
                "sigma_d": "option" if opts.sigma_d is not None else None,
                "sigma_run": "option" if opts.sigma_run is not None else "default",
                "p01_p10": "option" if opts.p01 is not None else None,
            },
        )


def _sigma_d_from_pilot(inputs: _Inputs, est: PilotEstimate) -> None:
    """sigma_d at the planned runs per arm; BadInput when the pilot cannot give one."""
    sigma_d = est.sigma_d.at(inputs.runs)
    inputs.sigma_d = sigma_d
    inputs.sources["sigma_d"] = "pilot"
    if not math.isfinite(sigma_d):
        raise BadInput(
            f"the pilot has {est.sigma_d.prompts} prompt(s) with outcomes "
            "in both arms; sigma_d needs at least two (or give --sigma-d)",
            field="--from-runs",
        )
    if sigma_d == 0.0:
        raise BadInput(
            "every prompt of the pilot had the same paired difference "
            "(sigma_d = 0), which plans nothing; give --sigma-d",
            field="--from-runs",
        )
    if inputs.runs != est.repeats and math.isfinite(est.sigma_d.omega2):
        inputs.notes.append(
            f"sigma_d rescaled from the pilot's {est.repeats} repeat(s) to "
            f"{inputs.runs} run(s) per arm: {est.sigma_d.sigma_d:.3f} -> "
            f"{sigma_d:.3f}"
        )


def _sigma_run_from_pilot(inputs: _Inputs, est: PilotEstimate) -> None:
    if math.isfinite(est.between_run.sigma_run):
        inputs.sigma_run = est.between_run.sigma_run
        inputs.sources["sigma_run"] = "pilot"
    else:
        inputs.notes.append(
            "the between-run SD is not estimable (the pilot has one run per "
            "arm); planned with sigma_run = 0"
        )


def _stopping_from_registration(inputs: _Inputs, reg: Registration) -> None:
    if reg.stopping is None:
        return
    if inputs.threshold is None:
        inputs.threshold = reg.stopping.threshold
    if inputs.min_prompts is None:
        inputs.min_prompts = reg.stopping.min_prompts
    inputs.prior = (float(reg.stopping.prior[0]), float(reg.stopping.prior[1]))


def _apply_pilot(inputs: _Inputs, opts: PlanOptions, reg_id: str, ws: Workspace) -> None:
    """Fill what the options left open from the registration's runs (options win)."""
    inputs.pilot, est, reg = pilot_estimates(ws, reg_id, inputs.runs, opts.seed)
    if reg.kind != "exploratory":
        inputs.notes.append(
            f"'{reg_id}' is {reg.kind}; plans are normally made from an exploratory pilot"
        )
    if inputs.sigma_d is None:
        _sigma_d_from_pilot(inputs, est)
    if inputs.sigma_run is None:
        _sigma_run_from_pilot(inputs, est)
    if inputs.p01 is None and est.discordance.pairs > 0:
        inputs.p01, inputs.p10 = est.discordance.p01, est.discordance.p10
        inputs.sources["p01_p10"] = "pilot"
    if inputs.prompts is None and opts.mde is None:
        inputs.prompts = est.prompts
        inputs.notes.append(
            f"no --prompts or --mde: planned at the pilot's {inputs.prompts} prompts"
        )
    _stopping_from_registration(inputs, reg)


# ---- replicate registrations as runs (InvokeRank 7.3, Figure 7) -------------------------------


def _design_key(reg: Registration) -> dict[str, Any]:
    """What must match for registrations to be runs of one design (ids and texts may not)."""
    control, treatment = reg.compared_arms()
    return {
        "experiment": reg.experiment,
        "split": reg.split,
        "outcome": reg.outcome,
        "compared arms": [control, treatment],
        "arm configurations": [arm_config(reg, a).digest() for a in (control, treatment)],
        "repeats": reg.design.repeats,
    }


def _replicate_outcomes(data: Sequence[PilotData], arm: str) -> tuple[Any, int]:
    """prompts x runs x repeats of one arm over the prompts every run completed."""
    repeats = min(len(d.repeats) for d in data)
    common = sorted(set.intersection(*(set(d.prompts) for d in data)))
    cube = (
        np.stack(
            [
                np.stack([d.matrices[arm][d.prompts.index(p), :repeats] for d in data])
                for p in common
            ]
        )
        if common and repeats
        else np.zeros((0, len(data), max(repeats, 1)))
    )
    complete = ~np.any(np.isnan(cube), axis=(1, 2))
    return cube[complete], int(np.sum(~complete))


def replicate_entries(ws: Workspace, reg_ids: Sequence[str]) -> list[Entry]:
    """The verified registrations, refused (exit 2) unless they share one design."""
    if len(set(reg_ids)) != len(reg_ids):
        raise BadInput("a registration is named twice", field="--from-runs")
    registry = Registry(ws.registry)
    entries = [verified_entry(registry, r) for r in reg_ids]
    first = _design_key(entries[0].registration)
    for e in entries[1:]:
        key = _design_key(e.registration)
        differ = [k for k in first if key[k] != first[k]]
        if differ or e.files != entries[0].files:
            what = ", ".join(differ) or "experiment files"
            raise BadInput(
                f"'{e.id}' is not a replicate of '{entries[0].id}': {what} differ; "
                "replicate runs must share one design",
                field="--from-runs",
            )
    return entries


def replicate_estimates(
    ws: Workspace,
    reg_ids: Sequence[str],
    seed: int,
    permutations: int = REPLICATE_PERMUTATIONS,
) -> dict[str, Any]:
    """Between-run SD over registrations of one design, each one run (exit 2 otherwise).

    Each arm's prompts x runs x repeats outcomes over the prompts every registration
    completed go to :func:`prereg.stats.invokerank.replicate_variance`; the pooled SD is
    the root of the mean of the arms' clipped-at-zero moment estimates squared, and the
    pooled p-value the smaller arm p-value times the number of arms (Bonferroni, capped
    at 1).
    """
    entries = replicate_entries(ws, reg_ids)
    reg = entries[0].registration
    arms = list(reg.compared_arms())
    data = [load_pilot(ws.runs, e.id, arms, digest=e.digest, outcome=reg.outcome) for e in entries]
    by_arm: list[dict[str, Any]] = []
    pvalues: list[float] = []
    sigmas: list[float] = []
    for arm in arms:
        cube, dropped = _replicate_outcomes(data, arm)
        if cube.shape[0] < 2:
            raise BadInput(
                f"arm '{arm}' has fewer than two prompts completed in every registration",
                field="--from-runs",
            )
        v = replicate_variance(cube, permutations=permutations, seed=seed)
        pvalues.append(v.pvalue)
        sigmas.append(v.sigma_run)
        by_arm.append(
            {
                "arm": arm,
                "runs": v.runs,
                "prompts": v.prompts,
                "prompts_incomplete": dropped,
                "repeats": v.repeats,
                "run_rates": [float(x) for x in v.run_rates],
                "observed_sd": v.observed_sd,
                "within_sd": v.within_sd,
                "variance_ratio": v.variance_ratio,
                "sigma_run": v.sigma_run,
                "pvalue": v.pvalue,
            }
        )
    pooled = float(np.mean(np.square(sigmas))) ** 0.5
    return {
        "registrations": [e.id for e in entries],
        "sigma_run": pooled,
        "pvalue": min(1.0, min(pvalues) * len(pvalues)),
        "by_arm": by_arm,
        "permutations": permutations,
        "seed": seed,
        "method": "each registration one run; method of moments over the runs' rates; "
        "within-prompt permutation test of excess variance (InvokeRank 7.3), "
        "arms pooled by the mean of their squared SDs, p by Bonferroni over arms",
    }


def _apply_replicates(
    inputs: _Inputs, opts: PlanOptions, reg_ids: Sequence[str], ws: Workspace
) -> None:
    """The between-run SD from replicate registrations (an explicit --sigma-run wins)."""
    replicates = replicate_estimates(ws, reg_ids, opts.seed)
    if inputs.pilot is not None:
        inputs.pilot["replicates"] = replicates
    if opts.sigma_run is None:
        inputs.sigma_run = replicates["sigma_run"]
        inputs.sources["sigma_run"] = "replicate registrations"
    inputs.notes.append(
        f"between-run SD from {len(reg_ids)} registrations as replicate runs: "
        f"{replicates['sigma_run']:.4f} (permutation p = {replicates['pvalue']:.3f}); "
        f"the other estimates are from '{reg_ids[0]}'"
    )


# ---- the plan document --------------------------------------------------------------------------


def _horizon(opts: PlanOptions, top_prompts: int | None, min_prompts: int, notes: list[str]) -> int:
    """The monitor's horizon: --max-prompts, else the plan's prompts (capped), noted."""
    if opts.max_prompts is not None:
        return opts.max_prompts
    base = top_prompts if top_prompts is not None else DEFAULT_HORIZON
    horizon = min(max(base, min_prompts), MAX_DEFAULT_HORIZON)
    notes.append(f"sequential monitor simulated up to {horizon} prompts (--max-prompts to change)")
    return horizon


def _echo(opts: PlanOptions) -> dict[str, Any]:
    """All options as given, under the plan's ``inputs`` key."""
    return {
        "sigma_d": opts.sigma_d,
        "prompts": opts.prompts,
        "mde": opts.mde,
        "alpha": opts.alpha,
        "power": opts.power,
        "sigma_run": opts.sigma_run,
        "runs_per_arm": opts.runs_per_arm,
        "p01": opts.p01,
        "p10": opts.p10,
        "from_runs": opts.from_runs,
        "replicates": list(opts.replicates),
        "stopping_threshold": opts.stopping_threshold,
        "min_prompts": opts.min_prompts,
        "max_prompts": opts.max_prompts,
        "sims": opts.sims,
        "seed": opts.seed,
    }


def build_plan(opts: PlanOptions, ws: Workspace | None = None) -> dict[str, Any]:
    """Compute and assemble the plan document (what ``prereg plan --json`` prints).

    ``opts`` must have passed the command's validation; ``ws`` is needed only with
    ``from_runs`` (the workspace whose registry and runs hold the pilot).
    """
    inputs = _Inputs.from_options(opts)
    if opts.from_runs is not None:
        assert ws is not None
        if opts.replicates:  # refuse a non-replicate before reading any run
            replicate_entries(ws, (opts.from_runs, *opts.replicates))
        _apply_pilot(inputs, opts, opts.from_runs, ws)
        if opts.replicates:
            _apply_replicates(inputs, opts, (opts.from_runs, *opts.replicates), ws)
    notes, runs = inputs.notes, inputs.runs
    sigma_d, p01, p10 = inputs.sigma_d, inputs.p01, inputs.p10
    sigma_run = 0.0 if inputs.sigma_run is None else inputs.sigma_run
    threshold = DEFAULT_THRESHOLD if inputs.threshold is None else inputs.threshold
    min_prompts = DEFAULT_MIN_PROMPTS if inputs.min_prompts is None else inputs.min_prompts

    paired = None
    if sigma_d is not None:
        paired = _paired(sigma_d, opts, inputs.prompts, sigma_run, runs)
    mcnemar = _mcnemar(p01, p10, opts) if p01 is not None and p10 is not None else None

    if paired is not None:
        top_prompts, top_mde = paired["prompts"], paired["mde"]
    else:
        assert mcnemar is not None and p01 is not None and p10 is not None
        top_prompts, top_mde = mcnemar["prompts"], abs(p01 - p10)

    sequential = None
    if p01 is not None and p10 is not None and opts.sims > 0:
        horizon = _horizon(opts, top_prompts, min_prompts, notes)
        sequential = _sequential(p01, p10, opts, horizon, threshold, min_prompts, inputs.prior)

    floor = paired["floor_mde"] if paired is not None else 0.0
    return {
        "prompts": top_prompts,
        "mde": top_mde,
        "min_discordant": min_discordant(opts.alpha),
        "alpha": opts.alpha,
        "power": opts.power,
        "sigma_d": sigma_d,
        "sigma_run": sigma_run,
        "runs_per_arm": runs,
        "p01": p01,
        "p10": p10,
        "solved_for": paired["solved_for"] if paired else "prompts",
        "floor_mde": floor,
        "reachable": paired["reachable"] if paired else top_prompts is not None,
        "message": paired["message"] if paired else mcnemar and mcnemar["note"],
        "sources": inputs.sources,
        "inputs": _echo(opts),
        "paired": None if paired is None else {k: v for k, v in paired.items() if k != "table"},
        "table": paired["table"] if paired else [],
        "mcnemar": mcnemar,
        "sequential": sequential,
        "pilot": inputs.pilot,
        "notes": notes,
    }
