"""ToolBottleneckBench task families and the deterministic variant compiler (seed 001).

A family (:mod:`.family`) fixes what decides a task's correct outcome; the compiler
(:mod:`.compile`) changes one pressure at a time (R catalog, V menu, W workflow, D
encoding) and digests each variant, refusing a family whose variants would differ in
more than their pressure. See docs/toolbottleneck.md for the readings of the seed.

Import from the submodules (:mod:`.compile`, :mod:`.family`, ...): this package module
imports none of them, so the registration schema, which reads only :mod:`.cells`, does
not load the compiler on every command.
"""
