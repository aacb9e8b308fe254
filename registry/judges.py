"""A registered judge: who decides an outcome no state oracle decides (issue 18).

A judge is configured like a host (driver, model, params) plus what it decides
(``outcome``), the rubric it is given (a file of the experiment, digested into the
registration like every referenced file, with a ``rubric_version`` string) and which
runs it judges (``sample``: every run that needs a verdict by default; ``arms``: every
arm by default, or the arms it is assigned, e.g. one judge per host), and optionally
which tasks people label as gold (``gold_sample``: a registered draw, :class:`GoldSample`)
and the kappa against gold from which it is trusted (``trust_kappa``, default
:data:`TRUST_KAPPA`; applied by :mod:`prereg.reports.judged.section`).

Model families (:data:`FAMILIES`): a judge of the same family as a host arm may prefer
its own family's answers (InvokeRank 5.5, 6.4 and 7.6: judge family and host family
confounded), so the registration is refused unless it declares the confound
(``confound_declared: true``). A family is read from the model name by prefix,
whatever driver serves it (a ``claude-*`` model behind a chat-completions gateway is
still a Claude model); a model no prefix matches is its own family (same name, same
family); the rule-based local judge (``driver: local``) is no model and has no family.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from prereg.core.yamlio import FieldRuleError
from prereg.registry.hosts import DRIVERS, DriverName

#: What a judge decides: a run's Completed stage, or whether a no-tool answer met the need.
JudgedOutcome = Literal["completed", "native_self_service"]
JUDGED_OUTCOMES: tuple[str, ...] = ("completed", "native_self_service")

#: The default trust threshold (seed 5.5: the judge is trusted at Cohen's kappa >= 0.70
#: against the gold set); a judge registers another with ``trust_kappa``.
TRUST_KAPPA = 0.70

#: The rule-based judge's only model name (driver ``local``): offline, deterministic.
LOCAL_JUDGE_MODEL = "local-rules-v1"

#: (model-name prefix, family), first match wins; compared in lower case. Documented in
#: docs/judging.md. Add a row when a new family is registered as a host or a judge.
FAMILIES: tuple[tuple[str, str], ...] = (
    ("claude", "anthropic-claude"),
    ("anthropic.claude", "anthropic-claude"),  # a cloud gateway's spelling
    ("gpt-oss", "openai-gpt-oss"),  # open weights: not the API's GPT family
    ("gpt", "openai-gpt"),
    ("chatgpt", "openai-gpt"),
    ("o1", "openai-gpt"),
    ("o3", "openai-gpt"),
    ("o4", "openai-gpt"),
    ("gemini", "google-gemini"),
    ("gemma", "google-gemma"),
    ("llama", "meta-llama"),
    ("meta-llama/", "meta-llama"),
    ("qwen", "alibaba-qwen"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("deepseek", "deepseek"),
)

#: Drivers whose "model" is not a language model: no family, never confounded.
_NO_FAMILY: frozenset[str] = frozenset({"replay", "local"})


def model_family(driver: str, model: str | None) -> str | None:
    """The family of ``model`` served by ``driver`` (see the module docstring), or None."""
    if driver in _NO_FAMILY or not model:
        return None
    name = model.strip().lower()
    for prefix, family in FAMILIES:
        if name.startswith(prefix):
            return family
    return f"model:{name}"


class GoldSample(BaseModel):
    """Which tasks people label for this judge's outcome, fixed before any verdict is read.

    The prediction-powered correction assumes the gold units are a random sample of the
    judged ones; a registered draw (a share of the tasks, chosen by a hash of the seed and
    the task id: every arm and repeat of a drawn task, so arms stay paired) makes that
    checkable: labels of runs outside the draw are counted and left out of the correction.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    share: float = Field(gt=0.0, le=1.0)
    seed: int = Field(0, ge=0)

    def drawn(self, task_id: str) -> bool:
        digest = hashlib.sha256(f"gold\0{self.seed}\0{task_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.share


class Judge(BaseModel):
    """One registered judge (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str = Field("", pattern=r"^([a-z0-9][a-z0-9-]*)?$", max_length=100)
    outcome: JudgedOutcome
    driver: DriverName
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    allow_sampling: bool = False
    rubric: str = Field(min_length=1, description="the rubric file, experiment-relative")
    rubric_version: str = Field(min_length=1, max_length=100)
    #: the share of the runs needing a verdict that are judged (deterministic by run id);
    #: None: every one
    sample: float | None = Field(None, gt=0.0, le=1.0)
    confound_declared: bool = False
    #: the registered gold draw (absent: none registered, and left out of every digest)
    gold_sample: GoldSample | None = None
    #: the trust threshold: the judge is trusted when its Cohen's kappa against unanimous
    #: gold labels is at least this (absent: :data:`TRUST_KAPPA`, the seed's 0.70)
    trust_kappa: float | None = Field(None, gt=0.0, le=1.0)
    #: the arms whose runs this judge decides (absent: every arm). The seed's judge per
    #: host lists each host's arms; the crossed design registers both judges without it.
    arms: list[str] | None = Field(None, min_length=1)

    @model_serializer(mode="wrap")
    def _omit_absent_gold_sample(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``gold_sample`` (``trust_kappa``, ``arms``) is left out, so a judge
        without one digests (and identifies its verdicts) exactly as before the field
        existed."""
        data = handler(self)
        if isinstance(data, dict):
            for name in ("gold_sample", "trust_kappa", "arms"):
                if data.get(name) is None:
                    data.pop(name, None)
        return data

    @property
    def threshold(self) -> float:
        """The registered trust threshold, or the default :data:`TRUST_KAPPA`."""
        return TRUST_KAPPA if self.trust_kappa is None else self.trust_kappa

    def decides(self, arm: str) -> bool:
        """Whether this judge decides runs of ``arm`` (its registered ``arms``, or all)."""
        return self.arms is None or arm in self.arms

    @model_validator(mode="after")
    def _rules(self) -> Judge:
        if self.driver == "replay":
            raise FieldRuleError("driver", "the replay driver cannot judge (it has no answer)")
        if self.driver == "local" and self.model not in (None, LOCAL_JUDGE_MODEL):
            raise FieldRuleError(
                "model",
                f"the local judge is the rule-based judge: model '{LOCAL_JUDGE_MODEL}' "
                "(or leave it out)",
            )
        if DRIVERS[self.driver].needs_model and not self.model:
            raise FieldRuleError("model", f"judge.model is required for driver '{self.driver}'")
        if self.params.keys() & {"temperature", "top_p", "top_k", "seed"} and not (
            self.allow_sampling
        ):
            raise FieldRuleError(
                "params", "sampling parameters in judge.params need judge.allow_sampling: true"
            )
        return self

    @property
    def key(self) -> str:
        """The judge's id, or its outcome when it gives none."""
        return self.id or self.outcome

    @property
    def model_name(self) -> str:
        return self.model or (LOCAL_JUDGE_MODEL if self.driver == "local" else "")


def wrap_judges(value: Any) -> Any:
    """``judge:`` may be one judge (a mapping) or a list of them: always a list after."""
    return [value] if isinstance(value, dict) else value


def confound_problem(
    judges: Sequence[Judge], hosts: Sequence[tuple[str, str, str | None]]
) -> tuple[str, str] | None:
    """(field, message) for the first judge of the family of a host arm it decides that
    does not declare the confound; ``hosts`` are (arm, driver, model)."""
    for index, judge in enumerate(judges):
        family = model_family(judge.driver, judge.model)
        if family is None or judge.confound_declared:
            continue
        same = [
            arm
            for arm, driver, model in hosts
            if judge.decides(arm) and model_family(driver, model) == family
        ]
        if same:
            return (
                f"judge[{index}].confound_declared",
                f"judge '{judge.key}' ({judge.driver} {judge.model}) is of model family "
                f"'{family}', like the host of arm(s) {', '.join(same)}: a judge may favour "
                "its own family, so judge family and host would be confounded. Use a judge "
                "of another family, or declare the confound with "
                "'confound_declared: true'",
            )
    return None


def judge_digest(judge: Judge, rubric_digest: str) -> str:
    """What identifies a judge's verdicts: its whole configuration and its rubric's digest."""
    body = json.dumps(
        {"judge": judge.model_dump(mode="json"), "rubric": rubric_digest},
        sort_keys=True,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class EntryJudge:
    """A judge of a registration with the digest of the rubric it reads: registered with
    it, or added after it (a post-hoc rubric revision, ``addendum`` its ledger line, see
    :mod:`prereg.registry.addenda`), whose verdicts are reported beside the registered
    judges' and never fill a registered figure or the verdict."""

    judge: Judge
    rubric_digest: str
    addendum: dict[str, Any] | None = None

    @property
    def digest(self) -> str:
        return judge_digest(self.judge, self.rubric_digest)

    @property
    def post_hoc(self) -> bool:
        return self.addendum is not None
