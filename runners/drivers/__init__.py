"""Drivers: the hosts a run talks to, one turn at a time (protocol in ``base``).

``replay`` follows the recorded solution path (evidence class ``replay``);
``local`` is the offline BM25 tool-search host (evidence class ``local``);
provider drivers (``anthropic``, ``openai``) carry evidence class ``api``.

The table from a driver's name to its factory is :data:`prereg.runners.drivers.table.FACTORIES`.
"""
