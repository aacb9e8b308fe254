"""A plan from its inputs alone: what a paired design can detect, before a token is spent.

Every figure comes from :mod:`prereg.stats` (``mde_paired``, ``prompts_for_mde``,
``mcnemar_sample_size``, ``mcnemar_exact_sample_size``, ``mcnemar_exact_power``,
``min_discordant``, ``simulate_sequential_monitor``, ``sequential_monitor_exact``).
The paired design's closed forms come from :mod:`prereg.stats.sizing` (no numpy); the
McNemar and monitor figures are read from :mod:`prereg.stats` when a plan has discordance
rates, so a plan from ``--sigma-d`` alone imports neither numpy nor scipy.
:func:`build_plan` assembles the plan document that ``prereg plan --json`` prints; the
command validates the options first (exit 2 naming the option), so this module assumes a
:class:`PlanOptions` that passed that check. A plan from a pilot's runs
(:mod:`prereg.reports.planning.from_runs`) fills the inputs first and then calls the same
:func:`build_plan`; this module imports nothing of the registry or the run store, so
``prereg plan`` from options starts without them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prereg import stats
from prereg.stats import mde_paired, min_discordant, prompts_for_mde

if TYPE_CHECKING:
    from prereg.stats import MonitorExact, MonitorSimulation

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
    n = stats.mcnemar_exact_sample_size(p01, p10, alpha=opts.alpha, power=opts.power, sides=2)
    asymptotic = stats.mcnemar_sample_size(p01, p10, alpha=opts.alpha, power=opts.power, sides=2)
    finite = math.isfinite(n)
    return {
        "prompts": int(n) if finite else None,
        "power_exact": stats.mcnemar_exact_power(int(n), p01, p10, opts.alpha) if finite else None,
        "prompts_asymptotic": int(asymptotic) if math.isfinite(asymptotic) else None,
        "power_exact_at_asymptotic": (
            stats.mcnemar_exact_power(int(asymptotic), p01, p10, opts.alpha)
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
        return stats.sequential_monitor_exact(
            a, b, horizon, threshold=threshold, min_prompts=min_prompts, prior=prior
        )

    def sim(a: float, b: float) -> MonitorSimulation:
        return stats.simulate_sequential_monitor(
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


@dataclass
class Inputs:
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
    def from_options(cls, opts: PlanOptions) -> Inputs:
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


#: completes a plan's inputs from elsewhere (a pilot's runs), options winning
Fill = Callable[[Inputs], None]


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


def build_plan(opts: PlanOptions, fill: Fill | None = None) -> dict[str, Any]:
    """Compute and assemble the plan document (what ``prereg plan --json`` prints).

    ``opts`` must have passed the command's validation; ``fill`` (a plan from runs)
    completes the inputs the options left open before anything is computed.
    """
    inputs = Inputs.from_options(opts)
    if fill is not None:
        fill(inputs)
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
