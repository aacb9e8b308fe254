"""The hosts a registration may name: one table of drivers, read by the schema and the runners.

The schema (this package) must validate ``host.driver`` and decide, at register time,
what a driver needs (a model) and which evidence class its runs carry; the runners, one
layer up, build the driver. So the table of what may be named lives here, and
:data:`prereg.runners.drivers.table.FACTORIES` maps each name to its implementation; a test
(tests/test_architecture.py) checks that the two agree and that every driver built
reports the evidence class declared here. Adding a driver: docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

#: Runs of different evidence classes are never pooled (DESIGN.md, invariant 8).
EvidenceClass = Literal["replay", "local", "api"]
DriverName = Literal["replay", "local", "anthropic", "openai"]


@dataclass(frozen=True)
class DriverSpec:
    """What the registry knows about a driver without building it."""

    evidence_class: EvidenceClass
    #: ``host.model`` is required (a provider needs to be told which model)
    needs_model: bool
    #: speaks to a provider API: keys, price table, spend cap, batches
    provider: bool
    summary: str


DRIVERS: Mapping[DriverName, DriverSpec] = {
    "replay": DriverSpec(
        "replay",
        needs_model=False,
        provider=False,
        summary="follows each task's recorded solution path (no model)",
    ),
    "local": DriverSpec(
        "local",
        needs_model=False,
        provider=False,
        summary="offline BM25 tool-search host (a simulated host, no model)",
    ),
    "anthropic": DriverSpec(
        "api", needs_model=True, provider=True, summary="the Anthropic Messages API"
    ),
    "openai": DriverSpec(
        "api", needs_model=True, provider=True, summary="the OpenAI Responses API"
    ),
}

#: Names of the drivers that call a provider API, in table order.
PROVIDER_DRIVERS: tuple[DriverName, ...] = tuple(n for n, s in DRIVERS.items() if s.provider)

assert tuple(DRIVERS) == get_args(DriverName), "DRIVERS and DriverName must list the same names"
