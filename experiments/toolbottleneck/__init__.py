"""ToolBottleneckBench task families and the deterministic variant compiler (seed 001).

A family (:mod:`.family`) fixes what decides a task's correct outcome; the compiler
(:mod:`.compile`) changes one pressure at a time (R catalog, V menu, W workflow, D
encoding) and digests each variant, refusing a family whose variants would differ in
more than their pressure. See docs/toolbottleneck.md for the readings of the seed.
"""

from prereg.experiments.toolbottleneck.compile import (
    Cell,
    CompiledFamily,
    Variant,
    compile_cell,
    compile_family,
)
from prereg.experiments.toolbottleneck.family import (
    FamilyError,
    FamilyFile,
    load_family,
    parse_family,
)

__all__ = [
    "Cell",
    "CompiledFamily",
    "FamilyError",
    "FamilyFile",
    "Variant",
    "compile_cell",
    "compile_family",
    "load_family",
    "parse_family",
]
