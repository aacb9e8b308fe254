"""The development pilot of ToolBottleneckBench (seed appendix J, "Actions and access";
Table 13), offline on the simulated policy (:mod:`prereg.runners.toolbottleneck.host`).

A **block** is one incumbent configuration (a study arm) on one task (family and seed)
and repeat. Each block plays a **probe** (the incumbent, unchanged) and then the
**restarts**, each reset independently (a fresh harness and its own seeded generator,
never continuing the probe's episode):

- ``retry``: the incumbent unchanged, again;
- ``cap``: the incumbent with a 4,096-token completion cap (never below its own cap);
- ``router``: the public-description router. Before the first request it reads the
  route named in the user text (``workspace/region/collection``) and keeps the menu's
  functions whose public description names exactly that route; it never receives the
  gold operational tools, and leaves the menu unchanged when the request names no route
  of the menu or more than one (reading P2);
- ``controller``: the public-handoff controller
  (:func:`prereg.runners.toolbottleneck.controller.play_controlled`) follows the public
  handoffs and issues those calls itself, the incumbent making the requests;
- ``canonical``: canonical delivery, the wrong-layer encoding control (records return in
  one canonical encoding whatever the cell, :func:`~.host.play` with
  ``delivery="canonical"``);
- ``combined``: the router, the controller and canonical delivery with the larger cap;
- ``switch``: the fixed switch, another configuration (a simulated policy profile) on
  the same cell and budgets.

Each record keeps the block's public numeric features of the probe's requests and
responses (:data:`FEATURES`), which the trace selector reads
(:mod:`prereg.reports.toolbottleneck.pilot`); never a verdict, an obligation or a limit
the grader saw.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import rfc8785
from pydantic import BaseModel, ConfigDict, Field

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.experiments.toolbottleneck.study import Study
from prereg.runners.toolbottleneck.controller import play_controlled
from prereg.runners.toolbottleneck.host import (
    PROFILES,
    Contract,
    Played,
    SimParams,
    play,
    unit_rng,
)
from prereg.runners.toolbottleneck.study import _cell, arm_params

PILOT_FORMAT: Literal["prereg-toolbottleneck-pilot-records/1"] = (
    "prereg-toolbottleneck-pilot-records/1"
)
#: The probe and the seven restarts of the seed, in its order.
ACTIONS: tuple[str, ...] = (
    "probe",
    "retry",
    "cap",
    "router",
    "controller",
    "canonical",
    "combined",
    "switch",
)
LABELS: Mapping[str, str] = {
    "probe": "Retain incumbent (probe)",
    "retry": "Unchanged retry",
    "cap": "Larger completion cap",
    "router": "Public-description router",
    "controller": "Public-handoff controller",
    "canonical": "Canonical delivery",
    "combined": "Combined repairs",
    "switch": "Fixed switch",
}
#: Restarts prereg cannot play, listed with the reason and never simulated in their place
#: (reading P3): none since the public-handoff controller and canonical delivery exist.
UNAVAILABLE: Mapping[str, str] = {}
#: Public numeric features of the probe's requests and responses (reading P4).
FEATURES: tuple[str, ...] = (
    "requests",
    "calls",
    "schemas_first_request",
    "max_response_tokens",
    "output_tokens",
    "input_tokens",
    "empty_results",
    "repeated_calls",
    "answered",
)
LARGER_CAP = 4096
_ROUTE = re.compile(r"(?<![a-z0-9/-])([a-z0-9-]+/[a-z0-9-]+/[a-z0-9-]+)(?![a-z0-9/-])")


class PilotRecord(BaseModel):
    """One action of one block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["prereg-toolbottleneck-pilot-records/1"] = PILOT_FORMAT
    study: str
    study_digest: str
    block: str
    incumbent: str
    task_id: str
    family: str
    intent: str
    repeat: int = Field(ge=0)
    action: str
    available: bool
    reason: str | None = None
    profile: str | None = None
    completion_cap: int | None = None
    menu: int | None = None
    success: bool | None = None
    calls: int | None = None
    tokens: int | None = None
    features: dict[str, float] | None = None  # the probe's only
    evidence_class: Literal["simulated"] = "simulated"


@dataclass(frozen=True)
class PilotRun:
    digest: str
    switch: str
    incumbents: tuple[str, ...]
    records: tuple[PilotRecord, ...]


def route_menu(sandbox: Sandbox) -> Sandbox:
    """The public-description router (reading P2): the menu narrowed to the functions
    whose description names the one route the request names, else unchanged."""
    named = set(_ROUTE.findall(sandbox.request.lower()))
    routes: dict[str, str] = {}
    for fn in sandbox.menu:
        d = fn.schema()["description"]
        m = re.search(r"workspace=(\S+) region=(\S+) collection=(\S+)", d)
        if m is not None:
            routes[fn.name] = "/".join(m.groups()).lower()
    matched = {r for r in routes.values() if r in named}
    if len(matched) != 1:
        return sandbox
    route = next(iter(matched))
    return replace(sandbox, menu=tuple(f for f in sandbox.menu if routes.get(f.name) == route))


def pilot_digest(
    study: Study, incumbents: Sequence[str], switch: str, boxes: Iterable[Sandbox]
) -> str:
    """sha256 over the study file, its families' bytes, the pilot's settings and the
    digest of every compiled variant a block runs (RFC 8785 canonical JSON)."""
    doc: dict[str, Any] = {
        "format": PILOT_FORMAT,
        "study": study.spec.model_dump(mode="json"),
        "files": study.file_digests(),
        "incumbents": list(incumbents),
        "switch": switch,
        "larger_cap": LARGER_CAP,
        "variants": sorted({f"{b.variant.id}@{b.seed}={b.variant.digest}" for b in boxes}),
    }
    return "sha256:" + hashlib.sha256(rfc8785.dumps(doc)).hexdigest()


def probe_features(played: Played) -> dict[str, float]:
    """The probe's public numeric features (:data:`FEATURES`): what a harness sees of
    requests and responses, never a verdict or the grader's state."""
    responses = [e for e in played.trace if e["kind"] == "response"]
    calls = [e for e in played.trace if e["kind"] == "call"]
    seen: set[str] = set()
    repeated = 0
    for c in calls:
        key = json.dumps([c["tool"], c["arguments"]], sort_keys=True)
        repeated += key in seen
        seen.add(key)
    return {
        "requests": float(len(responses)),
        "calls": float(len(calls)),
        "schemas_first_request": float(responses[0]["schemas"]) if responses else 0.0,
        "max_response_tokens": float(max((e["tokens"] for e in responses), default=0)),
        "output_tokens": float(played.output_tokens),
        "input_tokens": float(played.input_tokens),
        "empty_results": float(sum(1 for c in calls if not c["hits"])),
        "repeated_calls": float(repeated),
        "answered": float(played.episode.answer is not None),
    }


Play = Callable[[Sandbox, SimParams, Contract, random.Random], Played]


def _native(box: Sandbox, params: SimParams, c: Contract, rng: random.Random) -> Played:
    return play(box, params, c, rng)


def _canonical(box: Sandbox, params: SimParams, c: Contract, rng: random.Random) -> Played:
    return play(box, params, c, rng, delivery="canonical")


def _controlled(box: Sandbox, params: SimParams, c: Contract, rng: random.Random) -> Played:
    return play_controlled(box, params, c, rng)


def _combined(box: Sandbox, params: SimParams, c: Contract, rng: random.Random) -> Played:
    """The router's menu (``box``), the controller and canonical delivery, the larger
    cap (``c``)."""
    return play_controlled(box, params, c, rng, delivery="canonical")


def _incumbents(
    study: Study, incumbents: Sequence[str], switch: str, filename: str
) -> dict[str, tuple[str, SimParams, Contract]]:
    """Each incumbent's (profile, policy, contract), checked: BadInput naming the field."""
    spec = study.spec
    chosen = list(incumbents) or [spec.baseline_arm]
    if len(set(chosen)) != len(chosen):
        raise BadInput("each incumbent once", file=filename, field="--incumbent")
    if switch not in PROFILES:
        raise BadInput(
            f"no simulated policy profile '{switch}' (known: {', '.join(PROFILES)})",
            file=filename,
            field="--switch",
        )
    arms = {a.id: a for a in spec.arms}
    b = spec.budgets
    out: dict[str, tuple[str, SimParams, Contract]] = {}
    for name in chosen:
        arm = arms.get(name)
        if arm is None:
            raise BadInput(f"'{name}' is not an arm of the study", file=filename, field="arms")
        if arm.catalog is not None or arm.handoffs:
            raise BadInput(
                f"arm '{name}' is not a capacity cell (the pilot restarts a capacity cell)",
                file=filename,
                field=f"arms.{name}",
            )
        profile, sim = arm_params(study, arm, filename)
        if sim == PROFILES[switch]:
            raise BadInput(
                f"the switch '{switch}' is the policy of the incumbent '{name}': a switch "
                f"is another configuration (choose one of {', '.join(PROFILES)})",
                file=filename,
                field="--switch",
            )
        contract = Contract(
            arm.completion_cap or b.completion_cap,
            b.episode_tokens,
            b.call_limit_over_certified,
            b.turn_limit_over_calls,
            arm.menu_mode,
        )
        out[name] = (profile, sim, contract)
    return out


def run_pilot(
    study: Study,
    filename: str = "<study>",
    *,
    incumbents: Sequence[str] = (),
    switch: str = "sim-steady",
) -> PilotRun:
    """Every block's probe and restarts; refused whole (BadInput) before anything runs.

    ``incumbents``: study arms (capacity cells; default the baseline arm); ``switch``: the
    fixed switch's simulated policy profile."""
    spec = study.spec
    chosen = _incumbents(study, incumbents, switch, filename)
    arms = {a.id: a for a in spec.arms}
    boxes: dict[tuple[str, str, int], Sandbox] = {}
    for name in chosen:
        for family, _, _ in study.families:
            for seed in spec.seeds:
                cell = _cell(arms[name], family.sizes.shortlist)
                boxes[(name, family.id, seed)] = build_sandbox(family, cell, seed=seed)
    digest = pilot_digest(study, list(chosen), switch, boxes.values())
    records: list[PilotRecord] = []
    for (name, family_id, seed), sandbox in boxes.items():
        profile, sim, contract = chosen[name]
        larger = replace(contract, completion_cap=max(LARGER_CAP, contract.completion_cap))
        routed = route_menu(sandbox)
        plays: dict[str, tuple[Sandbox, SimParams, Contract, str, Play]] = {
            "probe": (sandbox, sim, contract, profile, _native),
            "retry": (sandbox, sim, contract, profile, _native),
            "cap": (sandbox, sim, larger, profile, _native),
            "router": (routed, sim, contract, profile, _native),
            "controller": (sandbox, sim, contract, profile, _controlled),
            "canonical": (sandbox, sim, contract, profile, _canonical),
            "combined": (routed, sim, larger, profile, _combined),
            "switch": (sandbox, PROFILES[switch], contract, switch, _native),
        }
        task = f"{family_id}@{seed}"
        for repeat in range(spec.repeats):
            base: dict[str, Any] = {
                "study": spec.id,
                "study_digest": digest,
                "block": f"{name}/{task}/{repeat}",
                "incumbent": name,
                "task_id": task,
                "family": family_id,
                "intent": sandbox.family.intent,
                "repeat": repeat,
            }
            for action in ACTIONS:
                if action in UNAVAILABLE:
                    records.append(
                        PilotRecord(
                            **base, action=action, available=False, reason=UNAVAILABLE[action]
                        )
                    )
                    continue
                box, params, c, prof, how = plays[action]
                rng = unit_rng(spec.id, "pilot", action, name, family_id, seed, repeat)
                played = how(box, params, c, rng)
                records.append(
                    PilotRecord(
                        **base,
                        action=action,
                        available=True,
                        profile=prof,
                        completion_cap=c.completion_cap,
                        menu=len(box.menu),
                        success=played.verification.success,
                        calls=len(played.episode.calls),
                        tokens=played.input_tokens + played.output_tokens,
                        features=probe_features(played) if action == "probe" else None,
                    )
                )
    return PilotRun(digest, switch, tuple(chosen), tuple(records))
