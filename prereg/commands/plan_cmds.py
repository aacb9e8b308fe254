"""``plan``: what a paired design can detect, before a token is spent.

Wiring only: every figure comes from :mod:`prereg.stats` (``mde_paired``,
``prompts_for_mde``, ``mcnemar_sample_size``, ``min_discordant``,
``simulate_sequential_monitor``) and, for ``--from-runs``, from the pilot estimators of
:mod:`prereg.reports.pilot`. This module validates the options (exit 2 naming the
option), assembles one JSON document and renders it as rich tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.table import Table

from prereg.commands._common import JsonOpt, workspace
from prereg.core.errors import BadInput
from prereg.core.output import console, emit

PLAN_HELP = """Plan a paired comparison: the minimum detectable effect (MDE) or the prompts needed.

Run this before registering, and put the answer in the registration's `plan:` block;
`prereg register` then checks it against the prompts the split actually holds (with the
registration's design.repeats as --runs-per-arm) and marks a design that cannot reach its
MDE [bold]not runnable[/].

[bold]Paired design[/] (normal approximation, two-sided, as in InvokeRank section 7.8):

  MDE = z * sqrt(sigma_d^2 / prompts + 2 sigma_run^2 / runs_per_arm),
  z = z_(1-alpha/2) + z_(power)  (2.80 at alpha 0.05, power 0.8)

--sigma-d is the SD over prompts of the per-prompt paired difference (treatment minus
control, each a success proportion). Give exactly one of --prompts (the answer is `mde`)
or --mde (the answer is `prompts`). MDEs are proportions: 0.10 is 10 points.

[bold]Between-run component[/]: --sigma-run is the SD of a shift shared by every prompt of
one run (session, day); --runs-per-arm replicate runs per arm. It sets a floor,
z * sqrt(2 sigma_run^2 / runs_per_arm), that no number of prompts removes; when the
requested MDE is at or below it the plan says so and how many runs per arm would do.

[bold]McNemar sample size[/] (Connor 1987): --p01 (share of prompts where only the treatment
succeeds) and --p10 (only the control succeeds) give the pairs McNemar's test needs.
Always reported: `min_discordant`, the fewest discordant pairs, all one way, with which the
exact two-sided McNemar test can reject at --alpha (6 at 0.05): fewer is inconclusive
whatever the split.

[bold]Anytime-valid stopping[/]: with discordance rates, the beta-mixture monitor (stop once
the e-value reaches --stopping-threshold after --min-prompts prompts, at most
--max-prompts) is simulated (--sims streams, --seed): its power and expected prompts to
stop under (p01, p10), and its type I error under the null with the same discordance,
p01 = p10 = (p01 + p10) / 2.

[bold]From a pilot[/]: --from-runs ID estimates sigma_d (at the planned --runs-per-arm),
the intraclass correlation of repeats (K repeats are worth K / (1 + (K-1) rho) runs), the
between-run SD (method of moments over the repeats as replicate runs, with a
within-prompt permutation test of excess variance) and the discordance rates from the
registration's runs, then plans with them. Explicit --sigma-d, --sigma-run, --p01/--p10
override the estimates. Without --prompts or --mde the pilot's prompt count is used.

Examples:

  prereg plan --sigma-d 0.28 --prompts 58            # MDE 0.103 (10.3 points)
  prereg plan --sigma-d 0.35 --mde 0.10              # 97 prompts
  prereg plan --sigma-d 0.23 --mde 0.10 --sigma-run 0.025 --runs-per-arm 3
  prereg plan --p01 0.45 --p10 0.05                  # Connor: 23 pairs
  prereg plan --from-runs music-library-pilot --mde 0.10 --json

JSON keys: prompts, mde, min_discordant, the inputs echoed (alpha, power, sigma_d,
sigma_run, runs_per_arm, p01, p10, and all options under `inputs`), floor_mde,
reachable, message, paired, mcnemar, sequential, pilot, table (the MDE grid), notes.
"""

#: Prompt counts and alphas of the MDE grid (Figure 9 of InvokeRank uses 58 to 400).
GRID_PROMPTS = (25, 50, 100, 200, 400, 800)
GRID_ALPHAS = (0.05, 0.10)
#: Default horizon of the simulated monitor when the plan gives no finite prompt count.
DEFAULT_HORIZON = 1000
#: The default horizon is capped so a default simulation stays quick.
MAX_DEFAULT_HORIZON = 5000
#: Largest runs per arm searched for when a requested MDE is below the run floor.
MAX_RUNS_SEARCH = 1000


@dataclass(frozen=True)
class PlanOptions:
    """The command's options as given (None where not given)."""

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
    stopping_threshold: float | None = None
    min_prompts: int | None = None
    max_prompts: int | None = None
    sims: int = 2000
    seed: int = 0


# ---- validation ----------------------------------------------------------------------------


def _finite(value: float, option: str) -> float:
    if not math.isfinite(value):
        raise BadInput(f"must be a finite number, got {value!r}", field=option)
    return value


def _open_unit(value: float, option: str, what: str) -> None:
    _finite(value, option)
    if not 0.0 < value < 1.0:
        raise BadInput(f"{what} must be strictly between 0 and 1, got {value!r}", field=option)


def validate(opts: PlanOptions) -> None:
    """Exit 2 (BadInput naming the option) on any input the plan cannot use."""
    _open_unit(opts.alpha, "--alpha", "alpha")
    _open_unit(opts.power, "--power", "power")
    if opts.sigma_d is not None and not (_finite(opts.sigma_d, "--sigma-d") > 0):
        raise BadInput(
            f"the SD of per-prompt differences must be > 0, got {opts.sigma_d!r}", field="--sigma-d"
        )
    if opts.sigma_run is not None and not (_finite(opts.sigma_run, "--sigma-run") >= 0):
        raise BadInput(
            f"the between-run SD must be >= 0, got {opts.sigma_run!r}", field="--sigma-run"
        )
    if opts.runs_per_arm is not None and opts.runs_per_arm < 1:
        raise BadInput(
            f"must be a positive integer, got {opts.runs_per_arm!r}", field="--runs-per-arm"
        )
    if opts.prompts is not None and opts.prompts < 1:
        raise BadInput(f"must be a positive integer, got {opts.prompts!r}", field="--prompts")
    if opts.mde is not None:
        _finite(opts.mde, "--mde")
        if not 0.0 < opts.mde < 1.0:
            hint = (
                f" ({opts.mde:g} points is {opts.mde / 100:g})" if 1.0 <= opts.mde < 100.0 else ""
            )
            raise BadInput(
                f"the MDE is a proportion strictly between 0 and 1, got {opts.mde!r}{hint}",
                field="--mde",
            )
    if opts.prompts is not None and opts.mde is not None:
        raise BadInput(
            "give either --prompts (to get the MDE) or --mde (to get the prompts), not both",
            field="--prompts/--mde",
        )
    if (opts.p01 is None) != (opts.p10 is None):
        missing = "--p10" if opts.p10 is None else "--p01"
        raise BadInput(
            "the McNemar plan needs both discordance rates --p01 and --p10", field=missing
        )
    if opts.p01 is not None and opts.p10 is not None:
        for name, value in (("--p01", opts.p01), ("--p10", opts.p10)):
            _finite(value, name)
            if not 0.0 <= value <= 1.0:
                raise BadInput(f"a discordance rate must be in [0, 1], got {value!r}", field=name)
        if opts.p01 + opts.p10 > 1.0 + 1e-12:
            raise BadInput(
                f"p01 + p10 is the share of discordant prompts and cannot exceed "
                f"1, got {opts.p01 + opts.p10:g}",
                field="--p01/--p10",
            )
    if opts.stopping_threshold is not None and not (
        _finite(opts.stopping_threshold, "--stopping-threshold") > 1.0
    ):
        raise BadInput(
            f"the e-value threshold must be > 1 (20 is the registered default), "
            f"got {opts.stopping_threshold!r}",
            field="--stopping-threshold",
        )
    if opts.min_prompts is not None and opts.min_prompts < 0:
        raise BadInput(
            f"must be a non-negative integer, got {opts.min_prompts!r}", field="--min-prompts"
        )
    if opts.max_prompts is not None and opts.max_prompts < 1:
        raise BadInput(
            f"must be a positive integer, got {opts.max_prompts!r}", field="--max-prompts"
        )
    if opts.sims < 0:
        raise BadInput(f"must be >= 0 (0 skips the simulation), got {opts.sims!r}", field="--sims")
    if opts.from_runs is None:
        if opts.sigma_d is None and (opts.prompts is not None or opts.mde is not None):
            raise BadInput(
                "--prompts and --mde plan a paired design and need --sigma-d (the "
                "SD of per-prompt differences) or --from-runs ID",
                field="--sigma-d",
            )
        if opts.sigma_d is not None and opts.prompts is None and opts.mde is None:
            raise BadInput(
                "give one of --prompts N (to get the MDE) or --mde D (to get the "
                "prompts) with --sigma-d",
                field="--prompts/--mde",
            )
        if opts.sigma_d is None and opts.p01 is None:
            raise BadInput(
                "nothing to plan: give --sigma-d with --prompts or --mde, or --p01 "
                "and --p10, or --from-runs ID",
                field="--sigma-d",
            )


# ---- the plan ---------------------------------------------------------------------------------


def _floor(sigma_d: float, alpha: float, power: float, sigma_run: float, runs: int) -> float:
    """The MDE no number of prompts goes below: the MDE at (practically) infinite prompts.

    Evaluated by :func:`prereg.stats.mde_paired` at 10^300 prompts, where the prompt term
    vanishes in floating point, so the formula stays in one place.
    """
    from prereg.stats import mde_paired

    if sigma_run == 0.0:
        return 0.0
    return mde_paired(
        sigma_d, 10**300, alpha=alpha, power=power, sigma_run=sigma_run, runs_per_arm=runs
    )


def _runs_needed(
    sigma_d: float, mde: float, alpha: float, power: float, sigma_run: float
) -> tuple[int, int] | None:
    """Fewest runs per arm that bring ``mde`` within reach, and the prompts it then needs."""
    from prereg.stats import prompts_for_mde

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
    from prereg.stats import mde_paired

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


def _paired(
    sigma_d: float, opts: PlanOptions, prompts: int | None, sigma_run: float, runs: int
) -> dict[str, Any]:
    from prereg.stats import mde_paired, prompts_for_mde

    out: dict[str, Any] = {
        "sigma_d": sigma_d,
        "sigma_run": sigma_run,
        "runs_per_arm": runs,
        "method": "two-sided normal approximation, InvokeRank 7.8",
    }
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
        out.update(
            solved_for="prompts",
            mde=opts.mde,
            prompts=int(n) if reachable else None,
            reachable=reachable,
        )
    else:
        assert prompts is not None
        m = mde_paired(
            sigma_d,
            prompts,
            alpha=opts.alpha,
            power=opts.power,
            sigma_run=sigma_run,
            runs_per_arm=runs,
        )
        out.update(solved_for="mde", mde=m, prompts=prompts, reachable=True)
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


def _mcnemar(p01: float, p10: float, opts: PlanOptions) -> dict[str, Any]:
    from prereg.stats import mcnemar_sample_size

    n = mcnemar_sample_size(p01, p10, alpha=opts.alpha, power=opts.power, sides=2)
    return {
        "prompts": int(n) if math.isfinite(n) else None,
        "p01": p01,
        "p10": p10,
        "psi": p01 + p10,
        "difference": p01 - p10,
        "alpha": opts.alpha,
        "power": opts.power,
        "sides": 2,
        "method": "Connor (1987), Biometrics 43:207-211",
        "note": None if math.isfinite(n) else "p01 = p10: no difference to detect",
    }


EXACT_HORIZON = 600


def _sequential(
    p01: float,
    p10: float,
    opts: PlanOptions,
    horizon: int,
    threshold: float,
    min_prompts: int,
    prior: tuple[float, float],
) -> dict[str, Any]:
    from prereg.stats import sequential_monitor_exact, simulate_sequential_monitor

    def exact(a: float, b: float) -> Any:
        # O(horizon^3): exact figures beside the simulation up to a horizon that stays quick
        if horizon > EXACT_HORIZON:
            return None
        return sequential_monitor_exact(
            a, b, horizon, threshold=threshold, min_prompts=min_prompts, prior=prior
        )

    def sim(a: float, b: float) -> Any:
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


def _pilot(
    ctx: typer.Context, reg_id: str, runs: int, seed: int
) -> tuple[dict[str, Any], Any, Any]:
    """Estimates from a registration's runs: (pilot JSON, estimate, registration)."""
    from prereg.registry.registry import Registry
    from prereg.reports.pilot import estimate_pilot, load_pilot

    ws = workspace(ctx)
    entry = Registry(ws.registry).get(reg_id)
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


def build_plan(opts: PlanOptions, ctx: typer.Context | None = None) -> dict[str, Any]:
    """Validate, compute and assemble the plan document (what ``--json`` prints)."""
    from prereg.stats import min_discordant

    validate(opts)
    notes: list[str] = []
    runs = opts.runs_per_arm if opts.runs_per_arm is not None else 1
    sigma_d = opts.sigma_d
    sigma_run = opts.sigma_run
    p01, p10 = opts.p01, opts.p10
    prompts = opts.prompts
    threshold = opts.stopping_threshold
    min_prompts = opts.min_prompts
    prior: tuple[float, float] = (1.0, 1.0)
    pilot: dict[str, Any] | None = None
    sources = {
        "sigma_d": "option" if sigma_d is not None else None,
        "sigma_run": "option" if sigma_run is not None else "default",
        "p01_p10": "option" if p01 is not None else None,
    }

    if opts.from_runs is not None:
        assert ctx is not None
        pilot, est, reg = _pilot(ctx, opts.from_runs, runs, opts.seed)
        if reg.kind != "exploratory":
            notes.append(
                f"'{opts.from_runs}' is {reg.kind}; plans are normally made from an "
                "exploratory pilot"
            )
        if sigma_d is None:
            sigma_d = est.sigma_d.at(runs)
            sources["sigma_d"] = "pilot"
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
            if runs != est.repeats and math.isfinite(est.sigma_d.omega2):
                notes.append(
                    f"sigma_d rescaled from the pilot's {est.repeats} repeat(s) to "
                    f"{runs} run(s) per arm: {est.sigma_d.sigma_d:.3f} -> "
                    f"{sigma_d:.3f}"
                )
        if sigma_run is None:
            if math.isfinite(est.between_run.sigma_run):
                sigma_run = est.between_run.sigma_run
                sources["sigma_run"] = "pilot"
            else:
                notes.append(
                    "the between-run SD is not estimable (the pilot has one run per "
                    "arm); planned with sigma_run = 0"
                )
        if p01 is None and est.discordance.pairs > 0:
            p01, p10 = est.discordance.p01, est.discordance.p10
            sources["p01_p10"] = "pilot"
        if prompts is None and opts.mde is None:
            prompts = est.prompts
            notes.append(f"no --prompts or --mde: planned at the pilot's {prompts} prompts")
        if reg.stopping is not None:
            threshold = threshold if threshold is not None else reg.stopping.threshold
            min_prompts = min_prompts if min_prompts is not None else reg.stopping.min_prompts
            prior = (float(reg.stopping.prior[0]), float(reg.stopping.prior[1]))
    sigma_run = 0.0 if sigma_run is None else sigma_run
    threshold = 20.0 if threshold is None else threshold
    min_prompts = 40 if min_prompts is None else min_prompts

    paired = None
    if sigma_d is not None:
        paired = _paired(sigma_d, opts, prompts, sigma_run, runs)
    mcnemar = _mcnemar(p01, p10, opts) if p01 is not None and p10 is not None else None

    if paired is not None:
        top_prompts, top_mde = paired["prompts"], paired["mde"]
    else:
        assert mcnemar is not None and p01 is not None and p10 is not None
        top_prompts, top_mde = mcnemar["prompts"], abs(p01 - p10)

    sequential = None
    if p01 is not None and p10 is not None and opts.sims > 0:
        if opts.max_prompts is not None:
            horizon = opts.max_prompts
        else:
            base = top_prompts if top_prompts is not None else DEFAULT_HORIZON
            horizon = min(max(base, min_prompts), MAX_DEFAULT_HORIZON)
            notes.append(
                f"sequential monitor simulated up to {horizon} prompts (--max-prompts to change)"
            )
        sequential = _sequential(p01, p10, opts, horizon, threshold, min_prompts, prior)

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
        "sources": sources,
        "inputs": {
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
            "stopping_threshold": opts.stopping_threshold,
            "min_prompts": opts.min_prompts,
            "max_prompts": opts.max_prompts,
            "sims": opts.sims,
            "seed": opts.seed,
        },
        "paired": None if paired is None else {k: v for k, v in paired.items() if k != "table"},
        "table": paired["table"] if paired else [],
        "mcnemar": mcnemar,
        "sequential": sequential,
        "pilot": pilot,
        "notes": notes,
    }


# ---- rendering ----------------------------------------------------------------------------------


def _pts(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "—" if x is None or not math.isfinite(x) else format(x, fmt)


def render(plan: dict[str, Any]) -> None:
    """The plan as a person reads it: headline, MDE grid, McNemar, monitor, pilot."""
    paired = plan["paired"]
    alpha, power = plan["alpha"], plan["power"]
    if plan["pilot"] is not None:
        _render_pilot(plan["pilot"])
    if paired is not None:
        runs = (
            f", sigma_run {plan['sigma_run']:.3g} with {plan['runs_per_arm']} run(s) per arm"
            if plan["sigma_run"]
            else ""
        )
        console.print(
            f"[bold]Paired design[/]: sigma_d {plan['sigma_d']:.3g}, alpha {alpha:g}"
            f", power {power:g}{runs}"
        )
        if paired["solved_for"] == "mde":
            console.print(
                f"  {paired['prompts']} prompts detect [bold]{_pts(paired['mde'])} "
                f"points[/] (mde {paired['mde']:.3f})"
            )
        elif paired["reachable"]:
            console.print(
                f"  [bold]{paired['prompts']} prompts[/] detect "
                f"{_pts(paired['mde'])} points (mde {paired['mde']:.3f})"
            )
        if paired["floor_mde"]:
            console.print(
                f"  between-run floor: {_pts(paired['floor_mde'])} points, whatever "
                "the number of prompts"
            )
        if paired["message"]:
            console.print(f"  [bold yellow]{paired['message']}[/]", highlight=False)
        table = Table(
            "prompts",
            "alpha",
            "MDE (points)",
            "MDE with run component (points)",
            title=f"MDE by prompts and alpha (power {power:g})",
            caption=f"run component: sigma_run {plan['sigma_run']:.3g}, "
            f"{plan['runs_per_arm']} run(s) per arm; floor "
            f"{_pts(paired['floor_mde'])} points. Bold: this plan.",
            title_justify="left",
            caption_justify="left",
        )
        for row in plan["table"]:
            style = "bold" if row["planned"] else None
            table.add_row(
                str(row["prompts"]),
                f"{row['alpha']:g}",
                _pts(row["mde"]),
                _pts(row["mde_with_runs"]),
                style=style,
            )
        console.print(table)
    mc = plan["mcnemar"]
    if mc is not None:
        size = f"[bold]{mc['prompts']} pairs[/]" if mc["prompts"] is not None else "no size"
        console.print(
            f"[bold]McNemar[/] (Connor 1987): p01 {mc['p01']:.3g}, p10 "
            f"{mc['p10']:.3g} -> {size} at alpha {alpha:g}, power {power:g}"
            + (f" ({mc['note']})" if mc["note"] else "")
        )
    console.print(
        f"[bold]Minimum discordant pairs[/]: the exact two-sided McNemar test needs "
        f"at least {plan['min_discordant']} discordant pairs, all one way, to reject "
        f"at alpha {alpha:g}; fewer is inconclusive whatever the split"
    )
    seq = plan["sequential"]
    if seq is not None:
        table = Table(
            "scenario",
            "p01",
            "p10",
            "rejects",
            "expected prompts",
            title=f"Anytime-valid monitor: e-value >= {seq['threshold']:g} after "
            f"{seq['min_prompts']} prompts, at most {seq['max_prompts']} "
            f"({seq['sims']} simulations, seed {seq['seed']})",
            title_justify="left",
        )
        table.add_row(
            "alternative (power)",
            _num(plan["p01"]),
            _num(plan["p10"]),
            f"{seq['power']:.3f} ± {seq['power_se']:.3f}",
            f"{seq['expected_prompts']:.1f} (median {seq['median_prompts']:.0f})",
        )
        table.add_row(
            "null (type I error)",
            _num(seq["null_p01"]),
            _num(seq["null_p10"]),
            f"{seq['type_i_error']:.3f} ± {seq['type_i_error_se']:.3f} "
            f"(bound {seq['type_i_bound']:.3f})",
            f"{seq['expected_prompts_null']:.1f}",
        )
        console.print(table)
        if seq["power_exact"] is not None:
            console.print(
                f"exact (dynamic programme): power {seq['power_exact']:.4f}, "
                f"type I error {seq['type_i_error_exact']:.4f}, expected prompts "
                f"{seq['expected_prompts_exact']:.1f}",
                highlight=False,
            )
    for note in plan["notes"]:
        console.print(f"[dim]note: {note}[/]", highlight=False)


def _render_pilot(p: dict[str, Any]) -> None:
    table = Table(
        "estimate",
        "value",
        "how",
        title=f"Pilot {p['registration']} "
        f"({p['kind']}, split {p['split']}): {p['prompts']} prompts x "
        f"{p['repeats']} repeat(s), {p['control']} vs {p['treatment']}",
        title_justify="left",
    )
    sd, icc, br, dis = p["sigma_d"], p["icc"], p["between_run"], p["discordance"]
    table.add_row(
        "sigma_d",
        _num(sd["sigma_d"]),
        f"SD of per-prompt differences of arm means over {p['repeats']} repeat(s)",
    )
    table.add_row(
        "sigma_d planned",
        _num(p["sigma_d_planned"]),
        "rescaled to the planned runs per arm: sqrt(tau^2 + omega^2 / K)",
    )
    table.add_row(
        "rho (repeats)",
        _num(icc["rho"]),
        f"design effect {_num(icc['design_effect'], '.2f')}: {icc['repeats']} "
        f"repeats carry {_num(icc['effective_runs'], '.2f')} runs of information",
    )
    table.add_row(
        "sigma_run",
        _num(br["sigma_run"]),
        f"variance ratio {_num(br['variance_ratio'], '.2f')}, permutation p {_num(br['pvalue'])}",
    )
    table.add_row(
        "p01 / p10",
        f"{_num(dis['p01'])} / {_num(dis['p10'])}",
        f"{dis['pairs']} repeat-matched pairs",
    )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the app."""

    @app.command("plan", help=PLAN_HELP)
    def plan_cmd(
        ctx: typer.Context,
        sigma_d: Annotated[
            float | None,
            typer.Option(
                "--sigma-d",
                help="SD over prompts of the per-prompt paired difference.",
                show_default=False,
            ),
        ] = None,
        prompts: Annotated[
            int | None,
            typer.Option(
                "--prompts",
                help="Prompts (paired units) in the design: gives the MDE.",
                show_default=False,
            ),
        ] = None,
        mde: Annotated[
            float | None,
            typer.Option(
                "--mde",
                help="Effect to detect, a proportion (0.10 = 10 points): gives the prompts.",
                show_default=False,
            ),
        ] = None,
        alpha: Annotated[float, typer.Option("--alpha", help="Two-sided level.")] = 0.05,
        power: Annotated[float, typer.Option("--power", help="Power to reach.")] = 0.8,
        sigma_run: Annotated[
            float | None,
            typer.Option(
                "--sigma-run",
                help="Between-run SD of a run's rate (default 0, or the pilot's estimate).",
                show_default=False,
            ),
        ] = None,
        runs_per_arm: Annotated[
            int | None,
            typer.Option(
                "--runs-per-arm", help="Replicate runs per arm (default 1).", show_default=False
            ),
        ] = None,
        p01: Annotated[
            float | None,
            typer.Option(
                "--p01",
                help="Share of prompts where only the treatment (second arm) succeeds.",
                show_default=False,
            ),
        ] = None,
        p10: Annotated[
            float | None,
            typer.Option(
                "--p10",
                help="Share of prompts where only the control (first arm) succeeds.",
                show_default=False,
            ),
        ] = None,
        from_runs: Annotated[
            str | None,
            typer.Option(
                "--from-runs",
                metavar="ID",
                help="Estimate the inputs from this registration's runs.",
                show_default=False,
            ),
        ] = None,
        stopping_threshold: Annotated[
            float | None,
            typer.Option(
                "--stopping-threshold",
                help="Monitor's e-value threshold (default 20, or the registration's).",
                show_default=False,
            ),
        ] = None,
        min_prompts: Annotated[
            int | None,
            typer.Option(
                "--min-prompts",
                help="Prompts before the monitor may stop (default 40, or the registration's).",
                show_default=False,
            ),
        ] = None,
        max_prompts: Annotated[
            int | None,
            typer.Option(
                "--max-prompts",
                help="Horizon of the simulated monitor (default: the planned "
                "prompts, at least --min-prompts).",
                show_default=False,
            ),
        ] = None,
        sims: Annotated[
            int, typer.Option("--sims", help="Simulated streams for the monitor (0 skips it).")
        ] = 2000,
        seed: Annotated[
            int, typer.Option("--seed", help="Seed of the simulation and the permutation test.")
        ] = 0,
        as_json: JsonOpt = False,
    ) -> None:
        opts = PlanOptions(
            sigma_d=sigma_d,
            prompts=prompts,
            mde=mde,
            alpha=alpha,
            power=power,
            sigma_run=sigma_run,
            runs_per_arm=runs_per_arm,
            p01=p01,
            p10=p10,
            from_runs=from_runs,
            stopping_threshold=stopping_threshold,
            min_prompts=min_prompts,
            max_prompts=max_prompts,
            sims=sims,
            seed=seed,
        )
        if as_json:
            plan = build_plan(opts, ctx)
        else:
            with console.status("planning…"):
                plan = build_plan(opts, ctx)
        emit(plan, as_json, lambda: render(plan))
