"""A registration made ready to run: its registry entry, run plan and frozen experiment.

What every way of running a registration starts with (``prereg run``, its dry run
and its batch path), with the protocol checks that write nothing: the registration
must be runnable, and a unit on the locked split runs only under a confirmatory
registration. The experiment is loaded through the registry's frozen objects (the
content whose digest was registered), never the editable workspace files.
"""

from __future__ import annotations

import json
from dataclasses import replace

from prereg.core.errors import ProtocolRefusal
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.hosts import DRIVERS
from prereg.registry.pilot import PilotOptions
from prereg.registry.registrations import Entry, Registry
from prereg.registry.units import RunPlan, plan_from_registration
from prereg.registry.verify import verified_entry


def open_registry(ws: Workspace) -> Registry:
    """The workspace's registry."""
    return Registry(ws.registry)


#: drivers whose runs come only from ``prereg import`` (another harness made them)
IMPORTED = frozenset(name for name, spec in DRIVERS.items() if spec.imported)


def prepare(
    ws: Workspace, registration_id: str, pilot: PilotOptions | None = None
) -> tuple[Registry, Entry, RunPlan, Experiment]:
    """(registry, entry, plan, frozen experiment) of a verified registration, with the
    protocol checks that do not write anything (runnable, locked split kind).

    ``pilot``: a pilot's options (``run --limit/--task/--arm/--intent/--cache``), checked
    (a confirmatory registration refuses them, exit 4) and carried on the plan."""
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    reg = entry.registration
    if not entry.runnable:
        raise ProtocolRefusal(
            f"'{entry.id}' was registered as not runnable (its feasibility "
            "gate failed); register a new design instead",
            field="id",
        )
    if reg.split == LOCKED_SPLIT and reg.kind != "confirmatory":
        raise ProtocolRefusal(
            f"'{entry.id}' is {reg.kind}: units on the locked test split run "
            "only under a confirmatory registration",
            field="split",
        )
    imported = sorted({reg.config_of(a.id).host.driver for a in reg.arms} & IMPORTED)
    if imported:
        raise ProtocolRefusal(
            f"'{entry.id}' names driver {imported[0]}: its runs are made by another harness "
            f"and imported (prereg import --from {imported[0]} LOG --registration "
            f"{entry.id}), never run by prereg",
            field="host.driver",
        )
    experiment = load_experiment(registry.experiment_reader(entry), reg.experiment)
    plan = plan_from_registration(reg, entry.digest)
    if experiment.toolbottleneck is not None:  # the registered variant digests (issue 19)
        document = json.loads(entry.frozen_path.read_bytes())["document"]
        plan = replace(plan, variants=dict(document["experiment"]["variants"]))
    if pilot:
        pilot.check(plan, experiment.tasks_in_split(plan.split))
        plan = replace(plan, pilot=pilot)
    return registry, entry, plan, experiment
