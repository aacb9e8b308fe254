"""Runs in Inspect AI's viewer: each run record's episode as a transcript, and the viewer.

Owns: a run record's trace as Inspect messages and events (:mod:`.transcript`, used by
:mod:`prereg.reports.inspect_export`), and Inspect's own viewer started on the exported
logs and stopped cleanly (:mod:`.serve`, for ``prereg view``). inspect_ai is an optional
extra, imported where it is used.

May import: the kernel, the run record and the text a host is shown for a tool result.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.runners.record",
    "prereg.runners.drivers.base",
)
