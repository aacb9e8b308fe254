"""The ToolBottleneckBench report (seed 001): capacity contrasts, census, decoder, repairs.

Owns: the section as data (:mod:`.model`), the report of a study run (:mod:`.study`) and of
a registered study (:mod:`.registered`), the failure census and first unmet obligation
(:mod:`.census`), the decoder that asks whether the failure record reveals the pressure
(:mod:`.decoder`), repairs against switches (:mod:`.repairs`), and which episodes a
registered study's tables count under its infrastructure policy (:mod:`.episodes`), the
development pilot's Table 13 and trace selector (:mod:`.pilot`), and the ToolSandbox check
of appendix K over ToolSandbox's saved summaries (:mod:`.toolsandbox`).

May import: the lower layers, the run record, the study's offline run, the simulated
harness contract, the pilot's records, the Markdown table writer its text sections
share, the report's interval (``prereg.reports.model``: ``Interval.resampled``, the one
rule for withholding a resampling interval) and the ToolSandbox summary reader.
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
    "prereg.reports.model",
    "prereg.runners.exchange.toolsandbox",
)
