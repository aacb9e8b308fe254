"""The ToolBottleneckBench report (seed 001): capacity contrasts, census, decoder, repairs.

Owns: the section as data (:mod:`.model`), the report of a study run (:mod:`.study`) and of
a registered study (:mod:`.registered`), the failure census and first unmet obligation
(:mod:`.census`), the decoder that asks whether the failure record reveals the pressure
(:mod:`.decoder`), repairs against switches (:mod:`.repairs`), and which episodes a
registered study's tables count under its infrastructure policy (:mod:`.episodes`), and
the development pilot's Table 13 and trace selector (:mod:`.pilot`).

May import: the lower layers, the run record, the study's offline run, the simulated
harness contract, the pilot's records and the Markdown table writer its text sections
share.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.record",
    "prereg.runners.toolbottleneck.study",
    "prereg.runners.toolbottleneck.host",
    "prereg.runners.toolbottleneck.pilot",
    "prereg.reports.render.markdown",
)
