"""The InvokeRank section of a report (seed 000): scores, Lever, funnels, controls.

Owns: the section assembled per arm (:mod:`.section`) from its blocks: runs gathered into
per-intent counts (:mod:`.counts`), the published score and its intervals per arm and
intent (:mod:`.scores`, bounds as the model's intervals in :mod:`.intervals`), false
invokes on negative prompts (:mod:`.negatives`), first choices (:mod:`.choices`), the
rating, Selection Shares and competitor Levers (:mod:`.rating`), terminal classes and the
resolution split (:mod:`.terminal`), the per-server funnel (:mod:`.servers`) and the
seed's further analyses: need type and the intent-level test, false invokes per intent,
rho per intent, the two-level choice (:mod:`.analyses`); replicate sessions not yet run,
which withhold the calibrated interval (:mod:`.sessions`); and the
registered control arms judged by their fixed rules (:mod:`.controls`). The estimator
itself is :mod:`prereg.stats.invokerank`; this package turns analysed runs into its inputs
and its results into the report model.

May import: the lower layers and the report's own data (the model, observations, pairs).
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.reports.model",
    "prereg.reports.observations",
    "prereg.reports.pairs",
)
