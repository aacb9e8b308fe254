"""Drivers: the hosts a run talks to, one turn at a time (protocol in ``base``).

``replay`` follows the recorded solution path (evidence class ``replay``);
``local`` is the offline BM25 tool-search host (evidence class ``local``);
provider drivers (``anthropic``, ``openai``) carry evidence class ``api``.
A driver module exposes ``create(model, params) -> Driver``.
"""
