"""Provider plumbing shared by the model-backed drivers (anthropic, openai).

Credentials and redaction, bounded retries, a client-side rate limiter, the
versioned price table and cost, spend-cap accounting, batch submission and
resume, and the dry-run estimate. The drivers themselves live in
``prereg.runners.drivers.anthropic`` and ``prereg.runners.drivers.openai``.

May import: the lower layers, the drivers and the run store. Three modules here run a
registration with providers and so sit above the orchestration they call: the driver
factory (:mod:`.factory`), ``--dry-run`` and ``--batch`` (:mod:`.runs`) and the run
summary (:mod:`.summary`); they import the orchestration, the harness, the preparation
and the study runner.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.api",
    "prereg.runners.harness",
    "prereg.runners.orchestrate",
    "prereg.runners.prepare",
    "prereg.runners.share",
    "prereg.runners.drivers",
    "prereg.runners.store",
    "prereg.runners.toolbottleneck.study",
)
