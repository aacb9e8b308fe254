"""How much evidence is collected: the run design, the stopping rule, the planning figures.

Repeats and rotations per task, an optional sequential stopping rule and the planning
figures checked at ``register`` against the split's prompt count.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from prereg.registry.schema.base import Probability, Strict, StrictFloatPair


class Design(Strict):
    repeats: int = Field(1, ge=1, le=100)
    rotations: int = Field(1, ge=1, le=100)
    seed: int = 0


class Stopping(Strict):
    rule: Literal["beta-mixture"]
    threshold: float = Field(20.0, gt=1.0)
    min_prompts: int = Field(40, ge=1)
    prior: StrictFloatPair = (1.0, 1.0)


class Plan(Strict):
    """Planning figures; checked at ``register`` against the split's prompt count."""

    mde: Probability
    power: Probability = 0.8
    sigma_d: float = Field(gt=0)
    sigma_run: float = Field(0.0, ge=0)
    alpha: Probability | None = None
