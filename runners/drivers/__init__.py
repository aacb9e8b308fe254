"""Drivers: the hosts a run talks to, one turn at a time (protocol in ``base``).

``replay`` follows the recorded solution path (evidence class ``replay``);
``local`` is the offline BM25 tool-search host (evidence class ``local``);
provider drivers (``anthropic``, ``openai``) carry evidence class ``api``.

The table from a driver's name to its factory is :data:`prereg.runners.drivers.table.FACTORIES`.

May import: the lower layers and the provider plumbing (:mod:`prereg.runners.providers`).
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.providers",
)
