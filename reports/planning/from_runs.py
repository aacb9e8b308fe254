"""Planning from runs: a pilot registration's estimates, replicate registrations' runs.

``prereg plan --from-runs`` reads a registration's runs (verified: ledger, digest,
chain) and fills what the options left open (the runs per arm, sigma_d, sigma_run,
p01/p10, the prompts, the stopping rule) before
:func:`prereg.reports.planning.design.build_plan` computes the plan.

Replicate sessions (``design.sessions`` S >= 2, issue 41): the replicate run is the
session, so the between-run SD is estimated over the sessions
(:func:`prereg.reports.planning.pilot.between_sessions`, the K repeats inside a session
being repeat clustering), sigma_d is rescaled in sessions, the runs per arm default to the
pilot's S sessions and the plan reads ``run_unit: session``. With one session observed the
between-run component is not estimable: withheld with the reason, planned without it.

Runs per arm: without ``--runs-per-arm`` the plan is made at the pilot's repeats (each
repeat of an arm is a replicate run of it, the layout :mod:`.pilot` estimates from, and
the runs per arm ``prereg register`` checks a plan with are the registration's repeats),
and a note says so. Between-run SD: an arm without variance (one run, or runs identical
outcome by outcome) is left out of the pooled SD, from the pilot's repeats and from
replicate registrations alike, and a note names it and says why.
The figures come from the estimators of :mod:`prereg.reports.planning.pilot`; a plan from options
alone needs none of this module (see :mod:`prereg.reports.planning.design`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.registry.registrations import Entry, Registry
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.registry.verify import verified_entry
from prereg.reports.planning import design as plan_core
from prereg.reports.planning.design import Inputs, PlanOptions
from prereg.reports.planning.pilot import (
    PilotData,
    PilotEstimate,
    estimate_pilot,
    load_pilot,
    without_variance,
)
from prereg.runners.store.choose import resolve_store
from prereg.stats.invokerank import REPLICATE_PERMUTATIONS, replicate_variance

__all__ = ["PlanOptions", "build_plan", "pilot_estimates", "replicate_entries"]


# ---- from a pilot -------------------------------------------------------------------------------


def pilot_estimates(
    ws: Workspace, reg_id: str, runs: int | None, seed: int, store: str | None = None
) -> tuple[dict[str, Any], PilotEstimate, Registration]:
    """Estimates from a registration's runs: (pilot JSON, estimate, registration).

    ``runs``: the planned runs per arm (None: the pilot's repeats); ``store``:
    ``--store`` (else ``PREREG_STORE``, else the workspace's runs/)."""
    entry = verified_entry(Registry(ws.registry), reg_id)
    reg = entry.registration
    control, treatment = reg.compared_arms()
    data = load_pilot(
        resolve_store(ws.runs, store),
        entry.id,
        [control, treatment],
        digest=entry.digest,
        outcome=reg.outcome,
    )
    design = reg.design
    est = estimate_pilot(
        data,
        control,
        treatment,
        seed=seed,
        sessions=design.sessions,
        per_session=design.per_session,
    )
    if runs is None:
        runs = est.sessions if est.sessions > 1 else est.repeats
    planned = _planned_repeats(est, runs)
    info = est.to_json()
    info.update(
        registration=entry.id,
        digest=entry.digest,
        kind=reg.kind,
        split=reg.split,
        outcome=reg.outcome,
        sigma_d_planned=est.sigma_d.at(planned),
        effective_runs_planned=est.icc.effective(runs if est.sessions < 2 else est.per_session),
    )
    return info, est, reg


def _planned_repeats(est: PilotEstimate, runs: int) -> int:
    """The repeats :meth:`SigmaD.at` reads for ``runs`` planned runs per arm: the runs
    themselves, or with sessions that many sessions of the pilot's K repeats."""
    return runs * est.per_session if est.sessions > 1 else runs


def _sigma_d_from_pilot(inputs: Inputs, est: PilotEstimate) -> None:
    """sigma_d at the planned runs per arm; BadInput when the pilot cannot give one."""
    sigma_d = est.sigma_d.at(_planned_repeats(est, inputs.runs))
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
    if est.sessions > 1:
        pilot_sessions = est.sigma_d.repeats / est.per_session
        if inputs.runs != pilot_sessions and math.isfinite(est.sigma_d.omega2):
            inputs.notes.append(
                f"sigma_d rescaled from the pilot's {pilot_sessions:g} session(s) to "
                f"{inputs.runs} session(s) per arm of {est.per_session} repeat(s): "
                f"{est.sigma_d.sigma_d:.3f} -> {sigma_d:.3f}"
            )
        return
    if inputs.runs != est.repeats and math.isfinite(est.sigma_d.omega2):
        inputs.notes.append(
            f"sigma_d rescaled from the pilot's {est.repeats} repeat(s) to "
            f"{inputs.runs} run(s) per arm: {est.sigma_d.sigma_d:.3f} -> "
            f"{sigma_d:.3f}"
        )


def _left_out(ignored: Sequence[dict[str, Any]], source: str) -> list[str]:
    """One note per arm left out of a pooled between-run SD: which arm, and why."""
    return [
        f"arm '{a['arm']}' left out of the between-run SD {source}: {a['reason']}" for a in ignored
    ]


def _sigma_run_from_sessions(inputs: Inputs, est: PilotEstimate) -> None:
    """The between-run SD over the pilot's sessions, or a note saying why it is withheld
    (the plan is then made without a run component, and says so)."""
    br = est.between_run
    if math.isfinite(br.sigma_run):
        inputs.sigma_run = br.sigma_run
        inputs.sources["sigma_run"] = "pilot sessions"
        inputs.notes.extend(_left_out(br.ignored, "of the pilot's sessions"))
        return
    why = "; ".join(f"arm '{a['arm']}': {a['reason']}" for a in br.ignored)
    inputs.notes.append(
        f"the between-run component is not estimable from the pilot's sessions ({why}); "
        "withheld, and planned with sigma_run = 0: give --sigma-run to plan with one"
    )


def _sigma_run_from_pilot(inputs: Inputs, est: PilotEstimate) -> None:
    if est.sessions > 1:
        _sigma_run_from_sessions(inputs, est)
        return
    ignored = est.between_run.ignored
    if math.isfinite(est.between_run.sigma_run):
        inputs.sigma_run = est.between_run.sigma_run
        inputs.sources["sigma_run"] = "pilot"
        inputs.notes.extend(_left_out(ignored, "of the pilot's repeats"))
    elif ignored and all(a["runs"] < 2 for a in ignored):
        inputs.notes.append(
            "the between-run SD is not estimable (the pilot has one run per "
            "arm); planned with sigma_run = 0"
        )
    else:
        why = "; ".join(f"arm '{a['arm']}': {a['reason']}" for a in ignored)
        inputs.notes.append(
            f"the between-run SD is not estimable (no arm of the pilot has runs that "
            f"vary: {why}); planned with sigma_run = 0"
        )


def _runs_from_pilot(inputs: Inputs, opts: PlanOptions, est: PilotEstimate) -> None:
    """Without --runs-per-arm: the pilot's repeats, said in a note."""
    if opts.runs_per_arm is not None:
        return
    if est.sessions > 1:
        inputs.runs = est.sessions
        inputs.notes.append(
            f"no --runs-per-arm: planned at the pilot's {est.sessions} sessions per arm "
            f"(each of {est.per_session} repeat(s); the between-run component is one per "
            "session, as register checks a registration with design.sessions); give "
            "--runs-per-arm to plan another number of sessions"
        )
        return
    inputs.runs = est.repeats
    inputs.notes.append(
        f"no --runs-per-arm: planned at the pilot's {est.repeats} "
        f"repeat{'' if est.repeats == 1 else 's'} as runs per arm "
        "(each repeat of an arm is a replicate run of it, as a registration's "
        "design.repeats are when register checks its plan); give --runs-per-arm to "
        "plan another number"
    )


def _stopping_from_registration(inputs: Inputs, reg: Registration) -> None:
    if reg.stopping is None:
        return
    if inputs.threshold is None:
        inputs.threshold = reg.stopping.threshold
    if inputs.min_prompts is None:
        inputs.min_prompts = reg.stopping.min_prompts
    inputs.prior = (float(reg.stopping.prior[0]), float(reg.stopping.prior[1]))


def _apply_pilot(
    inputs: Inputs, opts: PlanOptions, reg_id: str, ws: Workspace, store: str | None
) -> None:
    """Fill what the options left open from the registration's runs (options win)."""
    inputs.pilot, est, reg = pilot_estimates(ws, reg_id, opts.runs_per_arm, opts.seed, store)
    _runs_from_pilot(inputs, opts, est)
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
    store: str | None = None,
) -> dict[str, Any]:
    """Between-run SD over registrations of one design, each one run (exit 2 otherwise).

    Each arm's prompts x runs x repeats outcomes over the prompts every registration
    completed go to :func:`prereg.stats.invokerank.replicate_variance`; the pooled SD is
    the root of the mean of the arms' clipped-at-zero moment estimates squared, and the
    pooled p-value the smallest arm p-value times the number of arms pooled (Bonferroni,
    capped at 1). An arm without variance (every prompt the same outcome in every run
    and repeat: the within-run variance is 0 and so is the runs') is left out of both
    and listed in ``ignored`` (:func:`prereg.reports.planning.pilot.without_variance`);
    when no arm varies, ``sigma_run`` and ``pvalue`` are None.
    """
    entries = replicate_entries(ws, reg_ids)
    reg = entries[0].registration
    arms = list(reg.compared_arms())
    runs = resolve_store(ws.runs, store)
    data = [load_pilot(runs, e.id, arms, digest=e.digest, outcome=reg.outcome) for e in entries]
    by_arm: list[dict[str, Any]] = []
    ignored: list[dict[str, Any]] = []
    pvalues: list[float] = []
    sigmas: list[float] = []
    for arm in arms:
        cube, dropped = _replicate_outcomes(data, arm)
        if cube.shape[0] < 2:
            raise BadInput(
                f"arm '{arm}' has fewer than two prompts completed in every registration",
                field="--from-runs",
            )
        n, r, k = cube.shape
        flat = cube.reshape(n, r * k)
        why = without_variance(r, n, bool(np.all(flat == flat[:, :1])))
        if why is not None:
            ignored.append({"arm": arm, "runs": r, "prompts": n, "repeats": k, "reason": why})
            continue
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
    pooled = float(np.mean(np.square(sigmas))) ** 0.5 if sigmas else None
    return {
        "registrations": [e.id for e in entries],
        "sigma_run": pooled,
        "pvalue": min(1.0, min(pvalues) * len(pvalues)) if pvalues else None,
        "by_arm": by_arm,
        "ignored": ignored,
        "permutations": permutations,
        "seed": seed,
        "method": "each registration one run; method of moments over the runs' rates; "
        "within-prompt permutation test of excess variance (InvokeRank 7.3), "
        "arms pooled by the mean of their squared SDs, p by Bonferroni over arms; "
        "an arm without variance (identical runs) left out",
    }


def _apply_replicates(
    inputs: Inputs, opts: PlanOptions, reg_ids: Sequence[str], ws: Workspace, store: str | None
) -> None:
    """The between-run SD from replicate registrations (an explicit --sigma-run wins)."""
    replicates = replicate_estimates(ws, reg_ids, opts.seed, store=store)
    if inputs.pilot is not None:
        inputs.pilot["replicates"] = replicates
    source = f"of the {len(reg_ids)} replicate registrations"
    if replicates["sigma_run"] is None:
        why = "; ".join(f"arm '{a['arm']}': {a['reason']}" for a in replicates["ignored"])
        inputs.notes.append(
            f"the between-run SD {source} is not estimable (no arm varies: {why}); "
            "sigma_run as from the pilot's repeats or the options"
        )
        return
    if opts.sigma_run is None:
        inputs.sigma_run = replicates["sigma_run"]
        inputs.sources["sigma_run"] = "replicate registrations"
    inputs.notes.append(
        f"between-run SD from {len(reg_ids)} registrations as replicate runs: "
        f"{replicates['sigma_run']:.4f} (permutation p = {replicates['pvalue']:.3f}); "
        f"the other estimates are from '{reg_ids[0]}'"
    )
    inputs.notes.extend(_left_out(replicates["ignored"], source))


def build_plan(
    opts: PlanOptions, ws: Workspace | None = None, store: str | None = None
) -> dict[str, Any]:
    """The plan document, from a pilot's runs when ``opts.from_runs`` names one.

    ``ws`` is needed only with ``from_runs`` (the workspace whose registry holds the
    pilot), ``store`` is ``--store`` (else ``PREREG_STORE``, else the workspace's runs/);
    a non-replicate is refused before any run is read.
    """
    if opts.from_runs is None:
        return plan_core.build_plan(opts)
    assert ws is not None
    reg_ids = (opts.from_runs, *opts.replicates)

    def fill(inputs: Inputs) -> None:
        if opts.replicates:  # refuse a non-replicate before reading any run
            _refuse_sessions(replicate_entries(ws, reg_ids))
        _apply_pilot(inputs, opts, reg_ids[0], ws, store)
        if opts.replicates:
            _apply_replicates(inputs, opts, reg_ids, ws, store)

    plan = plan_core.build_plan(opts, fill)
    if plan["pilot"] is not None and plan["pilot"].get("sessions", 1) > 1:
        _in_sessions(plan)
    return plan


def _refuse_sessions(entries: Sequence[Entry]) -> None:
    """Replicate registrations are each one run; a registration with replicate sessions
    already has its runs (the sessions), and the two units are not mixed (exit 2)."""
    for e in entries:
        if e.registration.design.sessions > 1:
            raise BadInput(
                f"'{e.id}' registers {e.registration.design.sessions} replicate sessions: "
                "its between-run SD comes from its own sessions; plan --from-runs "
                f"{e.id} alone",
                field="--from-runs",
            )


def _in_sessions(plan: dict[str, Any]) -> None:
    """A plan from a pilot with sessions is made in sessions: say so where the unit shows
    (``run_unit``, and the runs-per-arm wording of the paired design's message)."""
    plan["run_unit"] = "session"
    paired = plan["paired"]
    if paired is not None and paired["message"]:
        text = paired["message"].replace("run(s) per arm", "session(s) per arm")
        paired["message"] = text.replace("runs per arm would", "sessions per arm would")
        plan["message"] = paired["message"]
