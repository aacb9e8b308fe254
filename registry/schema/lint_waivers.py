"""``corpus_lint`` of a registration: the corpus-lint findings it waives, each with a reason
(issue 41, item 5). A confirmatory ``register`` refuses an experiment whose
``prereg corpus lint`` findings are not all waived here; the report shows every waiver
and its reason. Absent: nothing waived, and left out of the digested document."""

from __future__ import annotations

from pydantic import Field

from prereg.registry.schema.base import Strict


class LintWaiver(Strict):
    """Waive the findings of ``rule`` (a rule id such as ``realism.attachment``, or a
    family: ``near-duplicate``, ``realism``, ``brand``, ``canary``, ``guardrail``), for one
    ``task`` (either task of a near-duplicate pair) or one ``tool`` (``surface`` or
    ``surface/tool``) when given, else for every finding of the rule."""

    rule: str = Field(min_length=1, max_length=100)
    task: str | None = Field(None, min_length=1, max_length=100)
    tool: str | None = Field(None, min_length=1, max_length=200)
    reason: str = Field(min_length=1)

    def to_json(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class CorpusLintWaivers(Strict):
    waive: list[LintWaiver] = Field(min_length=1)
