"""The harness contract: budgets, an arm's budget override, and the registration-wide rules.

Budgets and their limit rules (a limit or the rule that replaces it) are read together
by the registration and by each arm's override, so they live in one module.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from prereg.core.yamlio import FieldRuleError
from prereg.registry.schema.base import Strict

#: (limit, the rule that may replace it): a limit and its rule are never both given.
LIMIT_RULES: tuple[tuple[str, str], ...] = (
    ("call_limit", "call_limit_over_certified"),
    ("turn_limit", "turn_limit_over_calls"),
)


class Budgets(Strict):
    """Harness budgets (ToolBottleneckBench's harness contract, 3.3); an arm may override.

    ``call_limit_over_certified: k`` sets each task's call limit to its certified minimum
    plus k (the corpus declares each task's certified shortest path, ``solution:
    {certified: true}``; every task of the split must have one, checked at register);
    ``turn_limit_over_calls: k`` sets the turn limit to the (task's) call limit plus k.
    A rule replaces its limit: giving both is refused, and with the rule the limit reads
    null (it is per task, resolved by :func:`prereg.registry.units.unit_budgets`).
    """

    completion_cap: int = Field(1024, gt=0)
    episode_tokens: int = Field(128_000, gt=0)
    call_limit: int | None = Field(20, gt=0)
    turn_limit: int | None = Field(24, gt=0)
    spend_usd: float | None = Field(None, ge=0)
    call_limit_over_certified: int | None = Field(None, ge=0, le=1000)
    turn_limit_over_calls: int | None = Field(None, ge=0, le=1000)

    @model_validator(mode="before")
    @classmethod
    def _limit_rules(cls, data: Any) -> Any:
        """A rule replaces its limit (which then reads null); both given is refused.

        Read on the given keys (what ``model_fields_set`` would say), before defaults: a
        frozen copy lists the replaced limit as null, which is not "given".
        """
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for limit, rule in LIMIT_RULES:
            if out.get(rule) is None:
                if limit in out and out[limit] is None:
                    raise FieldRuleError(limit, f"{limit} may be null only with {rule}")
                continue
            if out.get(limit) is not None:
                raise FieldRuleError(
                    rule,
                    f"give either budgets.{limit} or budgets.{rule}, not both: the rule "
                    f"sets the {limit.replace('_', ' ')} of each task",
                )
            out[limit] = None
        return out


class HarnessRules(Strict):
    """Registration-wide harness rules (ToolBottleneckBench, 3.3 and 4.2).

    ``infrastructure``: what a unit whose runs fail on infrastructure (a driver raising,
    a provider down) becomes. ``retry`` (the default): its ``infra_error`` records are
    kept out of the analysis and the unit is run again by the next ``prereg run``; until
    a run completes it is missing. ``count_as_failure`` (intention to treat, seed 001
    4.2): the unit is retried until it has ``attempts`` infra_error records; then it is
    settled, and counts as a failure of its arm in every registered outcome (never
    silently dropped). A unit with an ok record is that record, whatever came before.

    ``cache_credit``: ``true`` (the default) prices cached input tokens at the provider's
    cached rate; ``false`` prices every input token at the uncached input rate (seed
    001's frozen route prices "without cache credit").
    """

    infrastructure: Literal["retry", "count_as_failure"] = "retry"
    attempts: int | None = Field(None, ge=1, le=100)
    cache_credit: bool = True

    @model_validator(mode="after")
    def _attempts(self) -> HarnessRules:
        if self.infrastructure == "count_as_failure" and self.attempts is None:
            raise FieldRuleError(
                "attempts",
                "count_as_failure needs the number of attempts after which a unit that "
                "failed on infrastructure counts as a failure (attempts: 3, say)",
            )
        if self.infrastructure == "retry" and self.attempts is not None:
            raise FieldRuleError(
                "attempts",
                "'attempts' is for infrastructure: count_as_failure (retry runs a unit "
                "again until it completes)",
            )
        return self


class BudgetsOverride(Strict):
    """An arm's budgets, over the registration's, field by field.

    ``spend_usd`` is not here: the spend cap is the registration's (one cap over every
    arm's requests).
    """

    completion_cap: int | None = Field(None, gt=0)
    episode_tokens: int | None = Field(None, gt=0)
    call_limit: int | None = Field(None, gt=0)
    turn_limit: int | None = Field(None, gt=0)
    call_limit_over_certified: int | None = Field(None, ge=0, le=1000)
    turn_limit_over_calls: int | None = Field(None, ge=0, le=1000)

    @model_validator(mode="after")
    def _limit_rules(self) -> BudgetsOverride:
        for limit, rule in LIMIT_RULES:
            if getattr(self, limit) is not None and getattr(self, rule) is not None:
                raise FieldRuleError(rule, f"give either {limit} or {rule}, not both")
        return self

    def apply(self, base: Budgets) -> Budgets:
        """The arm's budgets: a limit given replaces the registration's rule for it, and a
        rule given replaces the registration's limit."""
        given = self.model_dump(exclude_none=True)
        for limit, rule in LIMIT_RULES:
            if limit in given:
                given[rule] = None
            elif rule in given:
                given[limit] = None
        return Budgets.model_validate({**base.model_dump(), **given})
