"""How much evidence is collected: the run design, the stopping rule, the planning figures.

Repeats, replicate sessions and rotations per task, an optional sequential stopping rule
and the planning figures checked at ``register`` against the split's prompt count.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from prereg.core.yamlio import FieldRuleError
from prereg.registry.schema.base import Probability, Strict, StrictFloatPair


class Design(Strict):
    """How often each prompt runs in each arm, and how those runs are grouped.

    ``repeats`` is the number of runs of each prompt in each arm over the whole
    registration (every count of planned units reads it). ``sessions`` (issue 41, item 1;
    InvokeRank 7.3) splits those runs into S replicate sessions of ``repeats / S`` runs
    each: session s holds the repeats ``s * K .. (s + 1) * K - 1`` (K = repeats / S), and
    the units are played session by session (repeat-major), so each session is a whole
    replicate run of the arm over every prompt. Repeats inside a session are the seed's
    K repeats of a prompt (their agreement is rho); sessions are the seed's replicate
    runs (their spread is the between-run component, which enters the calibrated
    interval and Figure 7). ``repeats`` must be a multiple of ``sessions``. One session
    (the default) is left out of the digested document, so a registration without the
    field digests exactly as before it existed.
    """

    repeats: int = Field(1, ge=1, le=100)
    rotations: int = Field(1, ge=1, le=100)
    seed: int = 0
    sessions: int = Field(1, ge=1, le=100)

    @model_serializer(mode="wrap")
    def _omit_one_session(self, handler: SerializerFunctionWrapHandler) -> Any:
        """One session (the default) is left out, so earlier designs keep their digest."""
        data = handler(self)
        if isinstance(data, dict) and data.get("sessions") == 1:
            data.pop("sessions")
        return data

    @model_validator(mode="after")
    def _whole_sessions(self) -> Design:
        if self.repeats % self.sessions:
            raise FieldRuleError(
                "sessions",
                f"design.repeats ({self.repeats}) must be a multiple of design.sessions "
                f"({self.sessions}): repeats counts every run of a prompt in an arm, and each "
                "session holds the same number of them (repeats / sessions)",
            )
        return self

    @property
    def per_session(self) -> int:
        """The repeats of each prompt in one session (K = repeats / sessions)."""
        return self.repeats // self.sessions

    @property
    def repeats_per_run(self) -> int:
        """The repeats that share one replicate run (the run a bootstrap resamples): a
        session's K with two or more sessions; 1 without (each repeat its own run, as
        before sessions existed)."""
        return self.per_session if self.sessions > 1 else 1


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
