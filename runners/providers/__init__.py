"""Provider plumbing shared by the model-backed drivers (anthropic, openai).

Credentials and redaction, bounded retries, a client-side rate limiter, the
versioned price table and cost, spend-cap accounting, batch submission and
resume, and the dry-run estimate. The drivers themselves live in
``prereg.runners.drivers.anthropic`` and ``prereg.runners.drivers.openai``.

Import order: the drivers package (its table of factories) imports the provider
drivers, which build on this package, whose modules use the driver protocol in
``prereg.runners.drivers.base``. Importing the drivers package first here makes every
import of this package enter that chain at its top, whatever module a caller names
first, so no module of the chain is ever seen half-initialised.
"""

import prereg.runners.drivers  # noqa: F401  (see "Import order" above)
