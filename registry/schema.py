"""The registration schema: what a researcher commits to before any run exists.

Unknown fields are rejected everywhere (``extra="forbid"``), so a typo cannot
silently drop a commitment. Cross-field rules that need only the document live
here; rules that need the experiment (surfaces exist, split has tasks) live in
:mod:`prereg.registry.resolve`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from prereg.yamlio import FieldRuleError

ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"

#: Tests the statistics library implements and a registration may name.
TESTS = ("mcnemar_exact", "paired_bootstrap", "tost_paired", "sign_flip_test",
         "exact_permutation_test", "beta_mixture")
#: Outcomes a run record carries and a registration may analyse.
OUTCOMES = ("success", "surfaced", "selected", "invoked", "executed", "completed", "focal")
#: Host parameters that change sampling; refused unless the registration allows them.
SAMPLING_PARAMS = frozenset({"temperature", "top_p", "top_k", "seed", "frequency_penalty",
                             "presence_penalty", "min_p", "typical_p", "repetition_penalty"})
DRIVERS = ("replay", "local", "anthropic", "openai")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Identifier = Annotated[str, Field(pattern=ID_PATTERN, min_length=1, max_length=100)]
Probability = Annotated[float, Field(gt=0.0, lt=1.0)]


class Arm(Strict):
    """One arm: a surface of the experiment (optionally transformed by a control)."""

    id: Identifier
    surface: str = Field(min_length=1)
    control: Literal["placebo", "blinded", "decoy", "clone_swap"] | None = None
    description: str | None = None


class Host(Strict):
    """Where the arms run. Sampling parameters need ``allow_sampling: true``."""

    driver: Literal["replay", "local", "anthropic", "openai"]
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    allow_sampling: bool = False
    tool_search: bool = False
    batch: bool = False

    @model_validator(mode="after")
    def _sampling(self) -> Host:
        sampling = sorted(SAMPLING_PARAMS & set(self.params))
        if sampling and not self.allow_sampling:
            raise FieldRuleError(
                "params", f"sampling parameter(s) {', '.join(sampling)} in host.params are "
                "refused unless host.allow_sampling is true (the registration must say so "
                "explicitly)")
        if self.driver in ("anthropic", "openai") and not self.model:
            raise FieldRuleError("model", f"host.model is required for driver '{self.driver}'")
        return self


class Budgets(Strict):
    """Harness budgets, identical for every arm (ToolBottleneckBench's harness contract)."""

    completion_cap: int = Field(1024, gt=0)
    episode_tokens: int = Field(128_000, gt=0)
    call_limit: int = Field(20, gt=0)
    turn_limit: int = Field(24, gt=0)
    spend_usd: float | None = Field(None, ge=0)


class Design(Strict):
    repeats: int = Field(1, ge=1, le=100)
    rotations: int = Field(1, ge=1, le=100)
    seed: int = 0


class TestSpec(Strict):
    """A statistical test as registered. ``compare`` defaults to the first two arms."""

    test: str
    alpha: Probability = 0.05
    sides: Literal["two-sided", "greater", "less"] = "two-sided"
    favours: str | None = None
    compare: tuple[str, str] | None = None
    outcome: str | None = None
    aggregate: Literal["majority", "all", "any", "first", "mean"] = "majority"
    margin: float | None = Field(None, gt=0, lt=1)
    level: Probability | None = None
    draws: int = Field(10_000, ge=100, le=1_000_000)

    @field_validator("test")
    @classmethod
    def _known_test(cls, value: str) -> str:
        if value not in TESTS:
            import difflib

            close = difflib.get_close_matches(value, TESTS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"unknown test '{value}'{hint}; known tests: {', '.join(TESTS)}")
        return value

    @field_validator("outcome")
    @classmethod
    def _known_outcome(cls, value: str | None) -> str | None:
        if value is not None and value not in OUTCOMES:
            raise ValueError(f"unknown outcome '{value}'; known: {', '.join(OUTCOMES)}")
        return value

    @model_validator(mode="after")
    def _margin(self) -> TestSpec:
        if self.test == "tost_paired" and self.margin is None:
            raise FieldRuleError("margin",
                                 "tost_paired needs an equivalence margin (margin: 0.05, say)")
        return self


class Multiplicity(Strict):
    method: Literal["bh", "e-bh", "holm", "none"] = "bh"
    q: Probability = 0.10
    family: Literal["per-intent", "secondary"] = "per-intent"


class Stopping(Strict):
    rule: Literal["beta-mixture"]
    threshold: float = Field(20.0, gt=1.0)
    min_prompts: int = Field(40, ge=1)
    prior: tuple[float, float] = (1.0, 1.0)


class Plan(Strict):
    """Planning figures; checked at ``register`` against the split's prompt count."""

    mde: Probability
    power: Probability = 0.8
    sigma_d: float = Field(gt=0)
    sigma_run: float = Field(0.0, ge=0)
    alpha: Probability | None = None


class Registration(Strict):
    """A registration document (YAML). See README, "The registration format"."""

    id: Identifier
    title: str = Field(min_length=1)
    hypothesis: str = Field(min_length=1)
    falsification: str = Field(min_length=1)
    experiment: Identifier
    kind: Literal["exploratory", "confirmatory"]
    split: Literal["dev", "validation", "test"]
    arms: list[Arm] = Field(min_length=1)
    host: Host
    budgets: Budgets = Field(default_factory=lambda: Budgets())
    design: Design = Field(default_factory=lambda: Design())
    outcome: Literal["success", "surfaced", "selected", "invoked", "executed", "completed",
                     "focal"] = "success"
    primary: TestSpec
    secondary: list[TestSpec] = Field(default_factory=list)
    multiplicity: Multiplicity | None = None
    stopping: Stopping | None = None
    plan: Plan | None = None
    supersedes: Identifier | None = None
    notes: str | None = None

    @model_validator(mode="after")
    def _rules(self) -> Registration:
        if self.kind == "confirmatory" and self.split != "test":
            raise FieldRuleError("split", "a confirmatory registration must use split 'test' "
                                 f"(the locked split), not '{self.split}'")
        if self.kind == "exploratory" and self.split == "test":
            raise FieldRuleError("split", "an exploratory registration may not use split "
                                 "'test': the locked split is reserved for one confirmatory run")
        ids = [arm.id for arm in self.arms]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise FieldRuleError("arms", f"duplicate arm id(s): {', '.join(dupes)}")
        for where, spec in [("primary", self.primary)] + [
                (f"secondary[{i}]", s) for i, s in enumerate(self.secondary)]:
            pair = spec.compare or tuple(ids[:2])
            if len(ids) < 2 or len(pair) != 2:
                raise FieldRuleError(where, "a comparative test needs at least two arms")
            for arm in pair:
                if arm not in ids:
                    raise FieldRuleError(f"{where}.compare", f"names unknown arm '{arm}'")
            if pair[0] == pair[1]:
                raise FieldRuleError(f"{where}.compare", "names the same arm twice")
            if spec.favours is not None and spec.favours not in pair:
                raise FieldRuleError(f"{where}.favours", "must be one of the compared arms "
                                 f"{list(pair)}, got '{spec.favours}'")
        if self.supersedes == self.id:
            raise FieldRuleError("supersedes", "a registration cannot supersede itself")
        return self

    def compared_arms(self, spec: TestSpec | None = None) -> tuple[str, str]:
        """(control, treatment) of a test: ``compare`` or the first two arms."""
        spec = spec or self.primary
        if spec.compare:
            return spec.compare
        return (self.arms[0].id, self.arms[1].id)


def is_valid_id(value: str) -> bool:
    return re.fullmatch(ID_PATTERN, value) is not None
