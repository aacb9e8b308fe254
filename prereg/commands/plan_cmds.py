"""``plan``: what a paired design can detect, before a token is spent.

Wiring only: the plan is computed by :func:`prereg.reports.planning.design.build_plan` (from
:mod:`prereg.stats`) and, for ``--from-runs``, by
:func:`prereg.reports.planning.from_runs.build_plan` (the pilot estimators of
:mod:`prereg.reports.planning.pilot` over the verified registry and run store). That module
is imported only for ``--from-runs`` (:data:`FROM_RUNS`), so a plan from options starts
without the registry, pydantic's models or the run store. This module validates the options
(exit 2 naming the option), calls it and renders the plan document as rich tables (rich's
tables imported only to draw them: ``--json`` needs none).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.text import Text

from prereg.commands._common import JsonOpt, workspace
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.core.workspace import Workspace
from prereg.reports.planning.design import PlanOptions, build_plan

#: The module that plans from a registration's runs (``--from-runs``): imported by name
#: when the option is given, so a plan from options never loads it. Its layer is checked
#: like any import (tests/cli/test_lazy_cli.py).
FROM_RUNS = "prereg.reports.planning.from_runs"
#: its ``build_plan(opts, ws, store=None)``
PlanFromRuns = Callable[..., dict[str, Any]]

PLAN_HELP = """Plan a paired comparison: the minimum detectable effect (MDE) or the prompts needed.

Run this before registering, and put the answer in the registration's `plan:` block;
`prereg register` then checks it against the prompts the split actually holds (with the
registration's design.repeats as --runs-per-arm, or its design.sessions when it registers
two or more replicate sessions) and marks a design that cannot reach its MDE
[bold]not runnable[/].

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
A registration with design.sessions S (S replicate sessions of repeats / S each) has S
runs per arm: give --runs-per-arm S, not the repeats (the shift is one per session).

[bold]McNemar sample size[/]: --p01 (share of prompts where only the treatment succeeds) and
--p10 (only the control succeeds) give the pairs the exact McNemar test (the registered
test) needs, by exact power; Connor's (1987) asymptotic n is shown beside it with the exact
power it actually gives (about 0.77 for a target of 0.80).
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
A pilot registered with design.sessions S >= 2 is read in sessions: the between-run SD
over its sessions (each prompt's success rate per session; the repeats inside a session
are repeat clustering, their rho shown), sigma_d rescaled in sessions, and the plan made
in sessions per arm (default the pilot's S; JSON run_unit "session"). With one session
observed the between-run component is not estimable and is withheld with the reason.

[bold]Replicate registrations[/]: --from-runs A B C takes registrations of one design (same
experiment, split, outcome, compared arms and their configurations, repeats and files) as
replicate runs, each one run, and estimates the between-run SD from their run rates with
the within-prompt permutation test of InvokeRank 7.3; the other estimates come from A.

Examples:

  prereg plan --sigma-d 0.28 --prompts 58            # MDE 0.103 (10.3 points)
  prereg plan --sigma-d 0.35 --mde 0.10              # 97 prompts
  prereg plan --sigma-d 0.23 --mde 0.10 --sigma-run 0.025 --runs-per-arm 3
  prereg plan --p01 0.45 --p10 0.05                  # exact: 25 pairs (Connor: 23)
  prereg plan --from-runs music-library-pilot --mde 0.10 --json
  prereg plan --from-runs pilot-a pilot-b pilot-c --mde 0.10   # between-run SD from 3 runs

JSON keys: prompts, mde, min_discordant, the inputs echoed (alpha, power, sigma_d,
sigma_run, runs_per_arm, p01, p10, and all options under `inputs`), floor_mde,
reachable, message, paired, mcnemar, sequential, pilot, table (the MDE grid), notes;
run_unit "session" only when planned from a pilot with sessions.
"""

# ---- validation ----------------------------------------------------------------------------


def _finite(value: float, option: str) -> float:
    if not math.isfinite(value):
        raise BadInput(f"must be a finite number, got {value!r}", field=option)
    return value


def _open_unit(value: float, option: str, what: str) -> None:
    _finite(value, option)
    if not 0.0 < value < 1.0:
        raise BadInput(f"{what} must be strictly between 0 and 1, got {value!r}", field=option)


def _check_levels(opts: PlanOptions) -> None:
    _open_unit(opts.alpha, "--alpha", "alpha")
    _open_unit(opts.power, "--power", "power")


def _check_mde(mde: float) -> None:
    _finite(mde, "--mde")
    if not 0.0 < mde < 1.0:
        hint = f" ({mde:g} points is {mde / 100:g})" if 1.0 <= mde < 100.0 else ""
        raise BadInput(
            f"the MDE is a proportion strictly between 0 and 1, got {mde!r}{hint}",
            field="--mde",
        )


def _check_paired(opts: PlanOptions) -> None:
    """The paired design's options: SDs, runs per arm, and one of prompts and MDE."""
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
        _check_mde(opts.mde)
    if opts.prompts is not None and opts.mde is not None:
        raise BadInput(
            "give either --prompts (to get the MDE) or --mde (to get the prompts), not both",
            field="--prompts/--mde",
        )


def _check_discordance(opts: PlanOptions) -> None:
    """--p01 and --p10: both or neither, each in [0, 1], together at most 1."""
    if (opts.p01 is None) != (opts.p10 is None):
        missing = "--p10" if opts.p10 is None else "--p01"
        raise BadInput(
            "the McNemar plan needs both discordance rates --p01 and --p10", field=missing
        )
    if opts.p01 is None or opts.p10 is None:
        return
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


def _check_monitor(opts: PlanOptions) -> None:
    """The anytime-valid monitor's options."""
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


def _check_something_to_plan(opts: PlanOptions) -> None:
    """Without --from-runs, the options must name a paired or a McNemar plan."""
    if opts.from_runs is not None:
        return
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


def validate(opts: PlanOptions) -> None:
    """Exit 2 (BadInput naming the option) on any input the plan cannot use."""
    if opts.replicates and opts.from_runs is None:
        raise BadInput(
            f"registrations {', '.join(opts.replicates)} are replicate runs and need "
            "--from-runs A first (plan --from-runs A B C)",
            field="--from-runs",
        )
    _check_levels(opts)
    _check_paired(opts)
    _check_discordance(opts)
    _check_monitor(opts)
    _check_something_to_plan(opts)


# ---- rendering ----------------------------------------------------------------------------------


def _pts(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.1f}"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "—" if x is None or not math.isfinite(x) else format(x, fmt)


def render(plan: dict[str, Any]) -> None:
    """The plan as a person reads it: headline, MDE grid, McNemar, monitor, pilot."""
    from rich.table import Table  # lazy: only drawn without --json (start-up, issue 15)

    paired = plan["paired"]
    alpha, power = plan["alpha"], plan["power"]
    unit = plan.get("run_unit", "run")  # "session": planned from a pilot with sessions
    if plan["pilot"] is not None:
        _render_pilot(plan["pilot"])
    if paired is not None:
        runs = (
            f", sigma_run {plan['sigma_run']:.3g} with {plan['runs_per_arm']} {unit}(s) per arm"
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
            console.print(display(f"  {paired['message']}", "bold yellow"))
        table = Table(
            "prompts",
            "alpha",
            "MDE (points)",
            "MDE with run component (points)",
            title=f"MDE by prompts and alpha (power {power:g})",
            caption=f"run component: sigma_run {plan['sigma_run']:.3g}, "
            f"{plan['runs_per_arm']} {unit}(s) per arm; floor "
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
        size = (f"{mc['prompts']} pairs", "bold") if mc["prompts"] is not None else "no size"
        console.print(
            Text.assemble(
                ("McNemar", "bold"),
                f" (exact test): p01 {mc['p01']:.3g}, p10 {mc['p10']:.3g} -> ",
                size,
                f" at alpha {alpha:g}, power {power:g}",
                (
                    f"; Connor's asymptotic {mc['prompts_asymptotic']} pairs give exact "
                    f"power {mc['power_exact_at_asymptotic']:.3f}"
                    if mc["prompts_asymptotic"] is not None
                    else ""
                ),
                display(f" ({mc['note']})" if mc["note"] else ""),
            )
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
        console.print(display(f"note: {note}", "dim"))


def _render_pilot(p: dict[str, Any]) -> None:
    """The pilot's estimates as a table; with replicate sessions the run unit is the
    session and the repeats are clustered within it."""
    from rich.table import Table  # lazy: only drawn without --json (start-up, issue 15)

    sessions = p.get("sessions", 1)
    by_session = sessions > 1
    design = (
        f"{sessions} sessions of {p['per_session']} repeat(s)"
        if by_session
        else f"{p['repeats']} repeat(s)"
    )
    table = Table(
        "estimate",
        "value",
        "how",
        title=display(
            f"Pilot {p['registration']} "
            f"({p['kind']}, split {p['split']}): {p['prompts']} prompts x "
            f"{design}, {p['control']} vs {p['treatment']}"
        ),
        title_justify="left",
    )
    sd, icc, br, dis = p["sigma_d"], p["icc"], p["between_run"], p["discordance"]
    over = f"{sessions} session(s)" if by_session else f"{p['repeats']} repeat(s)"
    table.add_row(
        "sigma_d", _num(sd["sigma_d"]), f"SD of per-prompt differences of arm means over {over}"
    )
    table.add_row(
        "sigma_d planned",
        _num(p["sigma_d_planned"]),
        "rescaled to the planned sessions per arm: sqrt(tau^2 + omega_s^2 / S)"
        if by_session
        else "rescaled to the planned runs per arm: sqrt(tau^2 + omega^2 / K)",
    )
    within = " in a session" if by_session else ""
    table.add_row(
        f"rho (repeats{within})",
        _num(icc["rho"]),
        f"design effect {_num(icc['design_effect'], '.2f')}: {icc['repeats']} "
        f"repeats{within} carry {_num(icc['effective_runs'], '.2f')} runs of information",
    )
    run = "sigma_run (sessions)" if by_session else "sigma_run"
    if by_session and (br["sigma_run"] is None or not math.isfinite(br["sigma_run"])):
        why = "; ".join(f"{a['arm']}: {a['reason']}" for a in br["ignored"])
        table.add_row(run, "withheld", display(f"not estimable ({why})"))
    else:
        table.add_row(
            run,
            _num(br["sigma_run"]),
            ("over sessions: " if by_session else "")
            + f"variance ratio {_num(br['variance_ratio'], '.2f')}, "
            f"permutation p {_num(br['pvalue'])}",
        )
    table.add_row(
        "p01 / p10",
        f"{_num(dis['p01'])} / {_num(dis['p10'])}",
        f"{dis['pairs']} repeat-matched pairs",
    )
    console.print(table)
    rep = p.get("replicates")
    if rep:
        console.print(
            display(
                f"Replicate registrations {', '.join(rep['registrations'])} as runs: "
                f"between-run SD {_num(rep['sigma_run'])} (permutation p {_num(rep['pvalue'])})"
            )
        )
        for a in rep["by_arm"]:
            rates = ", ".join(f"{100 * r:.1f}" for r in a["run_rates"])
            console.print(
                display(
                    f"  {a['arm']}: run rates {rates} on {a['prompts']} prompts x "
                    f"{a['repeats']} repeat(s); observed SD {_num(a['observed_sd'])}, "
                    f"within {_num(a['within_sd'])}, p {_num(a['pvalue'])}"
                ),
                highlight=False,
            )


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the app."""

    @app.command("plan", help=PLAN_HELP)
    def plan_cmd(
        ctx: typer.Context,
        replicates: Annotated[
            list[str] | None,
            typer.Argument(
                metavar="[REPLICATE]...",
                help="With --from-runs A: further registrations of the same design, each "
                "taken as one run (plan --from-runs A B C) for the between-run SD.",
                show_default=False,
            ),
        ] = None,
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
        store: StoreOpt = None,
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
            replicates=tuple(replicates or ()),
            stopping_threshold=stopping_threshold,
            min_prompts=min_prompts,
            max_prompts=max_prompts,
            sims=sims,
            seed=seed,
        )
        validate(opts)
        ws = workspace(ctx) if from_runs is not None else None  # only --from-runs reads one
        if as_json:
            plan = _plan(opts, ws, store)
        else:
            with console.status("planning…"):
                plan = _plan(opts, ws, store)
        emit(plan, as_json, lambda: render(plan))


def _plan(opts: PlanOptions, ws: Workspace | None, store: str | None) -> dict[str, Any]:
    """The plan: from options alone, or from the runs of ``opts.from_runs`` in ``store``."""
    if opts.from_runs is None:
        if store is not None:
            raise BadInput("--store is read only with --from-runs", field="--store")
        return build_plan(opts)
    from_runs: PlanFromRuns = importlib.import_module(FROM_RUNS).build_plan
    return from_runs(opts, ws, store=store)
