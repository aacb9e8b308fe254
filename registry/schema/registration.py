"""The registration document and its cross-field rules.

Every part is a model of its own module; the rules that relate parts (arms named by
tests and contrasts, controls and their references, one evidence class, the locked
split) live here, checked in one order. Rules that need the experiment (surfaces exist,
split has tasks) live in :mod:`prereg.registry.resolve`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from prereg.core.yamlio import FieldRuleError
from prereg.experiments.models import LOCKED_SPLIT, SplitName
from prereg.experiments.toolbottleneck.cells import (
    HoldoutFamilies,
    StudyRepair,
    check_holdout,
    check_repair_ids,
)
from prereg.registry.factorial import DesignError, expand
from prereg.registry.hosts import DRIVERS
from prereg.registry.judges import Judge, confound_problem, wrap_judges
from prereg.registry.schema.analysis import (
    Contrast,
    InvokeRankSpec,
    Multiplicity,
    OutcomeName,
    TestSpec,
)
from prereg.registry.schema.arms import Arm, Configuration, Factorial, SystemPrompt
from prereg.registry.schema.base import Identifier, PositiveWeight, Strict
from prereg.registry.schema.design import Design, Plan, Stopping
from prereg.registry.schema.harness import Budgets, HarnessRules
from prereg.registry.schema.host import Host
from prereg.registry.schema.lint_waivers import CorpusLintWaivers
from prereg.stats import check_weights, factorial_weights


class Registration(Strict):
    """A registration document (YAML). See README, "The registration format"."""

    id: Identifier
    title: str = Field(min_length=1)
    hypothesis: str = Field(min_length=1)
    falsification: str = Field(min_length=1)
    experiment: Identifier
    kind: Literal["exploratory", "confirmatory"]
    split: SplitName
    arms: list[Arm] = Field(min_length=1)
    factorial: Factorial | None = None
    contrasts: list[Contrast] = Field(default_factory=list)
    host: Host
    budgets: Budgets = Field(default_factory=lambda: Budgets())
    harness: HarnessRules = Field(default_factory=lambda: HarnessRules())
    system_prompt: SystemPrompt | None = None
    design: Design = Field(default_factory=lambda: Design())
    outcome: OutcomeName = "success"
    primary: TestSpec
    secondary: list[TestSpec] = Field(default_factory=list)
    multiplicity: Multiplicity | None = None
    stopping: Stopping | None = None
    plan: Plan | None = None
    supersedes: Identifier | None = None
    notes: str | None = None
    intent_weights: dict[Identifier, PositiveWeight] | None = Field(
        None,
        description="InvokeRank roll-up weights per intent (normalised; equal when absent; "
        "an intent not listed weighs 0)",
    )
    #: judges of outcomes no oracle decides (issue 18; registry/judges.py); absent: none
    judge: list[Judge] | None = None
    #: the InvokeRank score's interval method (issue 17, item 5); absent: published
    invokerank: InvokeRankSpec | None = None
    #: ToolBottleneckBench repairs against switches (issue 19, seed 4.3): each names the
    #: repaired lane, the no-repair lane and the switches (arm ids); issue 42 adds the
    #: other pressures' repairs, more incumbents and a TOST margin, each left out of the
    #: document when absent (cells.StudyRepair); absent: none
    repairs: list[StudyRepair] | None = None
    #: corpus-lint findings waived, each with a reason (issue 41, item 5;
    #: schema/lint_waivers.py); absent: none waived, and not digested
    corpus_lint: CorpusLintWaivers | None = None
    #: a ToolBottleneckBench study's structural holdout (issue 42, item 5; reading H6):
    #: family ids the holdout arms play and the other arms do not; absent: every arm
    #: plays every family, and not digested
    holdout: HoldoutFamilies | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_intent_weights(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``intent_weights`` is left out of the document, so a registration that
        does not use it digests exactly as before the field existed."""
        data = handler(self)
        if isinstance(data, dict):
            # added fields: absent, not digested
            for name in ("intent_weights", "judge", "repairs", "corpus_lint", "holdout"):
                if data.get(name) is None:
                    data.pop(name, None)
            if data.get("invokerank") is None:  # added (issue 17): absent, not digested
                data.pop("invokerank", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_judge(cls, data: Any) -> Any:
        """``judge:`` may be written as one judge or a list of judges."""
        if isinstance(data, dict) and "judge" in data:
            return {**data, "judge": wrap_judges(data["judge"])}
        return data

    @model_validator(mode="before")
    @classmethod
    def _expand_factorial(cls, data: Any) -> Any:
        """``factorial:`` becomes ``arms:`` (one arm per cell); arms already listed (a frozen
        copy lists what it was expanded to) must be exactly the expansion."""
        if not isinstance(data, dict) or data.get("factorial") is None:
            return data
        try:
            design = Factorial.model_validate(data["factorial"])
            arms = expand(design.model_dump(mode="python"))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            cause = first.get("ctx", {}).get("error")
            if isinstance(cause, FieldRuleError):
                where = ".".join(filter(None, [where, *map(str, cause.field_path)]))
            raise FieldRuleError(f"factorial.{where}".rstrip("."), first["msg"]) from None
        except DesignError as exc:
            raise FieldRuleError(exc.field, str(exc)) from None
        if data.get("arms") is None:
            return {**data, "arms": arms}
        try:
            listed = [Arm.model_validate(a).model_dump() for a in data["arms"]]
            matches = listed == [Arm.model_validate(a).model_dump() for a in arms]
        except (ValidationError, TypeError):
            matches = False
        if not matches:
            raise FieldRuleError(
                "arms",
                "a factorial registration's arms are its cells: leave 'arms' out (they are "
                "generated from 'factorial')",
            )
        return data

    @model_validator(mode="after")
    def _rules(self) -> Registration:
        """Cross-field rules, checked in this order (the first broken one is reported)."""
        self._check_split()
        ids = [arm.id for arm in self.arms]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise FieldRuleError("arms", f"duplicate arm id(s): {', '.join(dupes)}")
        for where, spec in [("primary", self.primary)] + [
            (f"secondary[{i}]", s) for i, s in enumerate(self.secondary)
        ]:
            _check_compared_arms(where, spec, ids)
        self._check_controls(ids)
        self._check_configurations()
        self._check_contrasts(ids)
        self._check_judges()
        self._check_repairs(ids)
        check_holdout(
            self.holdout,
            any(a.toolbottleneck is not None and a.toolbottleneck.holdout_arm for a in self.arms),
        )
        self._check_sessions()
        self._check_stages()
        self._check_telemetry(ids)
        if self.supersedes == self.id:
            raise FieldRuleError("supersedes", "a registration cannot supersede itself")
        return self

    def _check_sessions(self) -> None:
        """Replicate sessions (``design.sessions`` >= 2) are there to put the run-to-run
        component into the score's interval, which only the calibrated interval carries
        (InvokeRank 7.3, 7.5): they need ``invokerank.interval: calibrated``."""
        if self.design.sessions > 1 and (
            self.invokerank is None or self.invokerank.interval != "calibrated"
        ):
            raise FieldRuleError(
                "design.sessions",
                f"{self.design.sessions} replicate sessions need the score's interval to "
                "carry the run component: register invokerank: {interval: calibrated} (the "
                "published path pools sessions as if they were repeats)",
            )

    def _check_telemetry(self, ids: list[str]) -> None:
        """``invokerank.telemetry`` names arms of this registration (issue 41, item 5)."""
        named = self.invokerank.telemetry if self.invokerank is not None else None
        for arm in named or {}:
            if arm not in ids:
                raise FieldRuleError(
                    f"invokerank.telemetry.{arm}",
                    f"names unknown arm '{arm}' (arms: {', '.join(ids)})",
                )

    def _check_stages(self) -> None:
        """Run stages (``arms[].stage``, seed 5.5): named on every arm once on one; an
        execution arm needs ``host.live`` and has the live surface as its own, without a
        control (only the untransformed focal integration is called live); ``host.live``
        with stages needs an execution arm."""
        staged = [i for i, arm in enumerate(self.arms) if arm.stage is not None]
        if not staged:
            return
        for i, arm in enumerate(self.arms):
            if arm.stage is None:
                raise FieldRuleError(
                    f"arms[{i}].stage",
                    f"arm '{arm.id}' names no stage while arm '{self.arms[staged[0]].id}' "
                    "does: once one arm names its stage (selection or execution), every arm "
                    "names one",
                )
        live = self.host.live
        for i, arm in enumerate(self.arms):
            if arm.stage != "execution":
                continue
            if live is None:
                raise FieldRuleError(
                    f"arms[{i}].stage",
                    f"arm '{arm.id}' is an execution arm, which needs the live server of its "
                    "focal integration: register host.live {surface, command or url}",
                )
            if arm.surface != live.surface or arm.control is not None:
                raise FieldRuleError(
                    f"arms[{i}].stage",
                    f"execution arm '{arm.id}' must offer the live surface '{live.surface}' "
                    f"as its own, without a control (it offers '{arm.surface}'"
                    + (f" with control {arm.control}" if arm.control else "")
                    + "): only the untransformed focal integration is called live",
                )
        if live is not None and not any(a.stage == "execution" for a in self.arms):
            raise FieldRuleError(
                "host.live",
                "host.live is given but every arm is a selection arm: mark the arm(s) that "
                "run live with stage: execution, or leave host.live out",
            )

    def _check_judges(self) -> None:
        """Judge ids are unique; a judge's ``arms`` are registered arms; a judge of the model
        family of a host arm it decides declares the confound."""
        judges = self.judge or []
        keys = [j.key for j in judges]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise FieldRuleError("judge", f"duplicate judge id(s): {', '.join(dupes)} (give 'id')")
        ids = [a.id for a in self.arms]
        for index, judge in enumerate(judges):
            unknown = [a for a in judge.arms or [] if a not in ids]
            if unknown:
                raise FieldRuleError(
                    f"judge[{index}].arms",
                    f"names unknown arm(s) {', '.join(unknown)} (arms: {', '.join(ids)})",
                )
        hosts = [
            (a.id, self.config_of(a.id).host.driver, self.config_of(a.id).host.model)
            for a in self.arms
        ]
        problem = confound_problem(judges, hosts)
        if problem is not None:
            raise FieldRuleError(*problem)

    def _check_repairs(self, ids: list[str]) -> None:
        """Every lane of a repair names registered arms (study arms, issue 19); repair ids
        are unique (issue 42: several repairs may aim at one pressure)."""
        check_repair_ids(self.repairs)
        for index, repair in enumerate(self.repairs or []):
            for name, lane in repair.lanes():
                for side in ("stressed", "unstressed"):
                    arm = getattr(lane, side)
                    if arm not in ids:
                        raise FieldRuleError(
                            f"repairs[{index}].{name}.{side}", f"names unknown arm '{arm}'"
                        )

    def _check_split(self) -> None:
        if self.kind == "confirmatory" and self.split != LOCKED_SPLIT:
            raise FieldRuleError(
                "split",
                f"a confirmatory registration must use split '{LOCKED_SPLIT}' "
                f"(the locked split), not '{self.split}'",
            )
        if self.kind == "exploratory" and self.split == LOCKED_SPLIT:
            raise FieldRuleError(
                "split",
                "an exploratory registration may not use split "
                f"'{LOCKED_SPLIT}': the locked split is reserved for one confirmatory run",
            )

    def _check_controls(self, ids: list[str]) -> None:
        plain = [arm.id for arm in self.arms if arm.control is None]
        for index, arm in enumerate(self.arms):
            if arm.control is None:
                continue
            where = f"arms[{index}]"
            reference = arm.reference or (plain[0] if plain else None)
            if reference is None:
                raise FieldRuleError(
                    where,
                    f"control arm '{arm.id}' needs a reference arm: "
                    "an arm without a control (or name one with 'reference')",
                )
            if reference not in ids:
                raise FieldRuleError(f"{where}.reference", f"names unknown arm '{reference}'")
            ref = next(a for a in self.arms if a.id == reference)
            if ref.control is not None:
                raise FieldRuleError(
                    f"{where}.reference",
                    f"the reference '{reference}' is "
                    "itself a control arm; name an arm without a control",
                )
            if ref.surface != arm.surface:
                raise FieldRuleError(
                    f"{where}.surface",
                    f"a control is a transformation of "
                    f"its reference's surface: '{arm.surface}' differs from "
                    f"'{ref.surface}' of arm '{reference}'",
                )

    def _check_configurations(self) -> None:
        """Every arm's host resolves; all arms share one evidence class; batch is uniform."""
        for index, arm in enumerate(self.arms):
            if arm.host is None:
                continue
            try:
                arm.host.apply(self.host)
            except FieldRuleError as exc:
                raise FieldRuleError(f"arms[{index}].host.{exc.field_path[-1]}", str(exc)) from None
            except ValidationError as exc:
                first = exc.errors()[0]
                cause = first.get("ctx", {}).get("error")
                if isinstance(cause, FieldRuleError):  # a rule of Host, on one of its fields
                    where, message = ".".join(map(str, cause.field_path)), str(cause)
                else:
                    where = ".".join(str(p) for p in first["loc"]) or "driver"
                    message = first["msg"]
                raise FieldRuleError(f"arms[{index}].host.{where}", message) from None
        configs = [self.config_of(arm.id) for arm in self.arms]
        classes = {DRIVERS[c.host.driver].evidence_class for c in configs}
        if len(classes) > 1:
            listed = ", ".join(
                f"{arm.id}: {c.host.driver} ({DRIVERS[c.host.driver].evidence_class})"
                for arm, c in zip(self.arms, configs, strict=True)
            )
            raise FieldRuleError(
                "arms",
                "all arms of a registration share one evidence class (runs of different "
                f"classes are never compared); these arms mix them: {listed}",
            )
        if self.host.batch and len({_request_key(c.host) for c in configs}) > 1:
            raise FieldRuleError(
                "host.batch",
                "a batch registration sends every arm through one provider batch: its "
                "arms may not differ in driver, model or params",
            )

    def _check_contrasts(self, ids: list[str]) -> None:
        """Contrasts name existing arms or factors, sum as declared; tests name contrasts."""
        names = [c.id for c in self.contrasts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise FieldRuleError("contrasts", f"duplicate contrast id(s): {', '.join(dupes)}")
        for index, contrast in enumerate(self.contrasts):
            where = f"contrasts[{index}]"
            try:
                self.contrast_weights(contrast.id)
            except ValueError as exc:
                field = "effect" if contrast.effect is not None else "weights"
                raise FieldRuleError(f"{where}.{field}", str(exc)) from None
        specs = [("primary", self.primary)] + [
            (f"secondary[{i}]", s) for i, s in enumerate(self.secondary)
        ]
        for where, spec in specs:
            if spec.contrast is not None and spec.contrast not in names:
                raise FieldRuleError(
                    f"{where}.contrast",
                    f"names unknown contrast '{spec.contrast}' (registered: "
                    f"{', '.join(names) or 'none'})",
                )
        family = self.multiplicity.family if self.multiplicity else None
        if self.primary.contrast is not None:
            if self.stopping is not None:
                raise FieldRuleError(
                    "stopping",
                    "the stopping rule monitors the discordant pairs of two arms; a primary "
                    "test of a contrast has none (register a fixed-sample design)",
                )
            if family == "per-intent":
                raise FieldRuleError(
                    "multiplicity.family",
                    "the per-intent family tests the primary comparison on each intent; a "
                    "primary test of a contrast is not a comparison of two arms (use "
                    "family: contrasts or secondary)",
                )
        if family == "contrasts":
            assert self.multiplicity is not None
            if not self.contrasts:
                raise FieldRuleError(
                    "multiplicity.family", "the family 'contrasts' needs registered contrasts"
                )
            if self.multiplicity.method == "e-bh":
                raise FieldRuleError(
                    "multiplicity.method",
                    "contrasts are tested by p-values; correct them with holm, bh or none "
                    "(e-bh needs e-values)",
                )

    def contrast_weights(self, contrast_id: str) -> dict[str, float]:
        """Arm id -> weight of a registered contrast (ValueError if it cannot be built)."""
        contrast = next(c for c in self.contrasts if c.id == contrast_id)
        ids = [a.id for a in self.arms]
        if contrast.weights is not None:
            unknown = sorted(set(contrast.weights) - set(ids))
            if unknown:
                raise ValueError(
                    f"weights name unknown arm(s) {', '.join(unknown)} (arms: {', '.join(ids)})"
                )
            weights = {arm: float(w) for arm, w in contrast.weights.items()}
            check_weights(list(weights.values()), sum_to=contrast.sum_to)
            return weights
        assert contrast.effect is not None
        if self.factorial is None:
            raise ValueError("an 'effect' contrast needs a factorial design ('factorial:')")
        factors = {f.id: f for f in self.factorial.factors}
        for factor in contrast.effect:
            if factor not in factors:
                raise ValueError(f"unknown factor '{factor}' (factors: {', '.join(factors)})")
            if len(factors[factor].levels) != 2:
                raise ValueError(
                    f"factor '{factor}' has {len(factors[factor].levels)} levels; an effect "
                    "contrast needs two-level factors (give 'weights' instead)"
                )
        cells = [a.cell or {} for a in self.arms]
        low_high = {f.id: (f.levels[0], f.levels[1]) for f in self.factorial.factors}
        weights = dict(zip(ids, factorial_weights(cells, contrast.effect, low_high), strict=True))
        check_weights(list(weights.values()), sum_to=0.0)
        return {arm: w for arm, w in weights.items() if w != 0.0}

    def config_of(self, arm_id: str) -> Configuration:
        """The arm's fully resolved configuration (registration defaults, arm overrides)."""
        arm = next(a for a in self.arms if a.id == arm_id)
        host = self.host if arm.host is None else arm.host.apply(self.host)
        budgets = self.budgets if arm.budgets is None else arm.budgets.apply(self.budgets)
        prompt = arm.system_prompt if arm.system_prompt is not None else self.system_prompt
        return Configuration(host=host, budgets=budgets, system_prompt=prompt)

    def reference_of(self, arm_id: str) -> str | None:
        """The arm a control arm is judged against (None for an arm without a control)."""
        arm = next(a for a in self.arms if a.id == arm_id)
        if arm.control is None:
            return None
        return arm.reference or next(a.id for a in self.arms if a.control is None)

    def compared_arms(self, spec: TestSpec | None = None) -> tuple[str, str]:
        """(control, treatment) of a test: ``compare`` or the first two arms."""
        spec = spec or self.primary
        if spec.compare:
            return spec.compare
        return (self.arms[0].id, self.arms[1].id)


def _request_key(host: Host) -> str:
    """What a provider request depends on in a host (batch arms must agree on it)."""
    return repr((host.driver, host.model, sorted(host.params.items()), host.tool_search))


def _check_compared_arms(where: str, spec: TestSpec, ids: list[str]) -> None:
    """A test compares two distinct registered arms and favours one of them."""
    if spec.contrast is not None:
        return  # a contrast's arms are its weights' (checked with the contrasts)
    pair = spec.compare or tuple(ids[:2])
    if len(ids) < 2 or len(pair) != 2:
        raise FieldRuleError(where, "a comparative test needs at least two arms")
    for arm_id in pair:
        if arm_id not in ids:
            raise FieldRuleError(f"{where}.compare", f"names unknown arm '{arm_id}'")
    if pair[0] == pair[1]:
        raise FieldRuleError(f"{where}.compare", "names the same arm twice")
    if spec.favours is not None and spec.favours not in pair:
        raise FieldRuleError(
            f"{where}.favours",
            f"must be one of the compared arms {list(pair)}, got '{spec.favours}'",
        )
