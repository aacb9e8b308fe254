"""Provider plumbing shared by the model-backed drivers (anthropic, openai).

Credentials and redaction, bounded retries, a client-side rate limiter, the
versioned price table and cost, spend-cap accounting, batch submission and
resume, and the dry-run estimate. The drivers themselves live in
``prereg.runners.drivers.anthropic`` and ``prereg.runners.drivers.openai``.
"""
