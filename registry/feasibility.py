"""The feasibility gate: can the registered design reach its registered MDE?

Checked at ``register`` against the prompts the split actually holds. A design
that cannot is still recorded (what was believed beforehand matters) but is
marked not runnable in the ledger; ``run`` refuses it and ``analyse`` reports
the pre-committed verdict ``not_runnable``.
"""

from __future__ import annotations

from typing import Any

from prereg.registry.schema import Registration
from prereg.stats import mde_paired


def check(registration: Registration, n_prompts: int) -> dict[str, Any] | None:
    """None when nothing was planned; else the plan, what the design reaches, and a verdict.

    The runs per arm that the between-run component divides by are the
    registered repeats: each repeat is a replicate run of the arm over the split.
    """
    plan = registration.plan
    if plan is None:
        return None

    alpha = plan.alpha if plan.alpha is not None else registration.primary.alpha
    runs_per_arm = registration.design.repeats
    achievable = float(
        mde_paired(
            plan.sigma_d,
            n_prompts,
            alpha=alpha,
            power=plan.power,
            sigma_run=plan.sigma_run,
            runs_per_arm=runs_per_arm,
        )
    )
    runnable = achievable <= plan.mde + 1e-12
    return {
        "prompts": n_prompts,
        "runs_per_arm": runs_per_arm,
        "alpha": alpha,
        "power": plan.power,
        "sigma_d": plan.sigma_d,
        "sigma_run": plan.sigma_run,
        "registered_mde": plan.mde,
        "achievable_mde": achievable,
        "runnable": runnable,
        "reason": None
        if runnable
        else (
            f"with {n_prompts} prompts and {runs_per_arm} run(s) per arm the design detects "
            f"{achievable:.3f} at power {plan.power}, not the registered MDE {plan.mde:.3f}"
        ),
    }
