"""MCP snapshots and the replay server (issue 8, items 1, 2 and 6).

* :mod:`prereg.experiments.mcp_snapshot`: the snapshot model, :func:`load_snapshot`,
  :func:`snapshot_digest` (re-exported here).
* :mod:`.capture`: records a live server with the ``mcp`` SDK (imported lazily).
* :mod:`.replay`: the transport-free protocol core that serves a snapshot verbatim,
  negotiates every protocol revision it recorded (issue 43; docs/mcp.md) and refuses
  every tool call; :mod:`.serve_stdio` and :mod:`.serve_http` carry it.

Recorded metadata is untrusted third-party data throughout: it is stored, hashed and
served as opaque JSON, never executed or interpreted; :mod:`.untrusted` makes it safe
to show on a terminal.

May import: the kernel and the experiment's snapshot model, nothing else.
"""

from prereg.experiments.mcp_snapshot import (
    FORMAT,
    Snapshot,
    load_snapshot,
    read_snapshot,
    snapshot_digest,
)
from prereg.runners.mcp.replay import ReplayServer, is_refusal

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.experiments",
)

__all__ = [
    "FORMAT",
    "ReplayServer",
    "Snapshot",
    "is_refusal",
    "load_snapshot",
    "read_snapshot",
    "snapshot_digest",
]
