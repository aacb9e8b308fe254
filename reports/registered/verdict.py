"""The mechanical verdict: registered rules in, one word out, nobody choosing.

The rules, in the order they are applied (first match wins):

1. ``not_runnable``: the registry marked the registration not runnable at
   ``register`` (the feasibility gate). Pre-committed; no run is needed or used.
2. ``incomplete``: the run set does not cover the planned units (or, with a
   registered stopping rule, the prompts up to where the e-process crossed).
   Only reachable with ``--allow-incomplete``; otherwise analysis refuses.
3. Otherwise the *deciding procedure* gives the verdict: the registered stopping
   rule's e-process when one is registered (the only procedure that stays valid
   under optional stopping; its type I error is at most 1/threshold), else the
   primary test. Secondary tests, per-intent claims and everything exploratory
   are shown and never consulted.

A deciding procedure reads as follows (:func:`read_superiority`):

- ``inconclusive`` when the data cannot reach the registered threshold whatever
  their direction: for McNemar and the sign-flip test fewer than
  ``min_discordant(alpha)`` discordant pairs (seed 002: "fewer is pre-committed
  as inconclusive whatever the raw difference"); for an e-value, the e-value of
  all observed discordant pairs pointing one way stays below the threshold; for
  the bootstrap and the permutation test, no prompt differs at all; and when the
  test is undefined on the data (the outcome was never measured).
- ``supported`` when the test rejects at the registered alpha and the effect
  points the registered way (``favours``; for a one-sided test its side; for a
  two-sided test with no ``favours``, either way).
- ``not_supported`` otherwise: the test could have rejected and did not, or it
  rejected in the direction opposite to the one registered. This is "the
  registered criterion for support was not met", not a claim of equivalence.

For an equivalence test (TOST) registered as the primary test the hypothesis is
equivalence (:func:`read_equivalence`): ``supported`` when the TOST rejects,
``inconclusive`` when equivalence at the registered margin is unreachable with
this many tasks even with no discordant pair (or the test is undefined),
``not_supported`` otherwise.

The verdict depends only on the registration and the runs: no CLI flag is an
input to :func:`final_verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass

from prereg.reports.model import Reading, Verdict


@dataclass(frozen=True)
class Evidence:
    """What a test says, reduced to what the rules need."""

    rejects: bool | None  # None: undefined on these data
    direction: int  # +1 treatment ahead, -1 control ahead, 0 tied / undefined
    attainable: bool  # could these data reach the threshold at all?
    unattainable_reason: str = ""


def favoured_direction(favours: str | None, sides: str, control: str, treatment: str) -> int:
    """+1 if the registration expects the treatment ahead, -1 the control, 0 either.

    ``sides`` is relative to treatment minus control (``greater``: the second compared
    arm is ahead). A one-sided test has a direction even without ``favours``.
    """
    if favours == treatment:
        return 1
    if favours == control:
        return -1
    if sides == "greater":
        return 1
    if sides == "less":
        return -1
    return 0


def read_superiority(
    evidence: Evidence, favoured: int, arms: tuple[str, str]
) -> tuple[Reading, str]:
    """The reading of a difference test (see the module docstring)."""
    control, treatment = arms
    if evidence.rejects is None:
        return "inconclusive", "the test is undefined on these runs" + (
            f" ({evidence.unattainable_reason})" if evidence.unattainable_reason else ""
        )
    if not evidence.attainable:
        return "inconclusive", evidence.unattainable_reason
    ahead = {1: treatment, -1: control}.get(evidence.direction)
    if evidence.rejects:
        if favoured == 0:
            return "supported", f"the test rejects at the registered alpha ({ahead} ahead)"
        if evidence.direction == favoured:
            return "supported", (
                f"the test rejects at the registered alpha in the registered "
                f"direction ({ahead} ahead)"
            )
        return "not_supported", (
            f"the test rejects at the registered alpha, but against the "
            f"registered direction ({ahead} ahead)"
        )
    return "not_supported", (
        "the test could have rejected at the registered alpha and did not "
        "(the registered criterion for support is not met; this is not a "
        "finding of equivalence)"
    )


def read_equivalence(equivalent: bool | None, attainable: bool, reason: str) -> tuple[Reading, str]:
    """The reading of a TOST registered as the deciding test (hypothesis: equivalence)."""
    if equivalent is None:
        return "inconclusive", f"the equivalence test is undefined on these runs ({reason})"
    if equivalent:
        return "supported", "both one-sided tests reject: the arms are equivalent within the margin"
    if not attainable:
        return "inconclusive", reason
    return "not_supported", "equivalence within the registered margin is not shown"


def final_verdict(
    runnable: bool,
    complete: bool,
    reading: Reading | None,
    decided_by: str,
    reading_reason: str,
    not_runnable_reason: str | None = None,
) -> tuple[Verdict, str, str]:
    """(verdict, deciding procedure, reason): rules 1 to 3 of the module docstring."""
    if not runnable:
        return (
            "not_runnable",
            "registry (feasibility gate at register)",
            not_runnable_reason or "the registry marked this registration not runnable",
        )
    if not complete:
        return (
            "incomplete",
            "completeness check",
            "the run set does not cover the planned units; any reading of it is exploratory",
        )
    if reading is None:
        return "inconclusive", decided_by, reading_reason or "no deciding test could be computed"
    return reading, decided_by, reading_reason
