"""The InvokeRank section of a report (seed 000): scores, Lever, funnels, controls.

Owns: the published score per arm and intent and everything the section shows beside it
(:mod:`.section`), and the registered control arms judged by their fixed rules
(:mod:`.controls`). The estimator itself is :mod:`prereg.stats.invokerank`; this package
turns analysed runs into its inputs and its results into the report model.

May import: the lower layers and the report's own data (the model, observations, pairs).
"""

#: What modules here may import from the rest of the project (module prefixes); checked
#: by tests/test_architecture.py. Lower layers are listed whole, siblings one by one.
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.reports.model",
    "prereg.reports.observations",
    "prereg.reports.pairs",
)
