"""The funnel per listed integration (issue 17, item 5): each server an arm's positive
runs listed, with its own stages and a Jeffreys interval per stage over prompts.

It checks each first call's arguments against the called tool's input schema, so it
carries the schema validation (remembered per tool and arguments) the rest does not need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from prereg.experiments.offers import ArmOffer
from prereg.experiments.surfaces import Tool
from prereg.reports.invokerank.intervals import LEVELS, _iv
from prereg.reports.model import Provenance, ServerFunnel, ServerStage
from prereg.reports.observations import STAGES, Obs, outcome_place
from prereg.reports.pairs import runset
from prereg.stats.invokerank import prompt_rate

# Over an arm's positive runs that listed the integration: surfaced = one of its tools
# entered the host's candidate set before the first call (every listed tool when the run
# recorded no search; not measured where the run's own Surfaced is not), selected = the
# first call went to it, invoked = and that call's arguments validate against the called
# tool's input schema (the focal funnel's definitions, runners/scoring.py, applied to each
# server); executed and completed = selected and the run's Executed / Completed, for the
# focal role only: competitors and decoys are replayed, so they are never executed.
# Each stage is a share of the listing runs with a Jeffreys interval deflated at its own
# rho over prompts (stats.prompt_rate), not a sequential rate.

SERVER_NOTE = {
    "focal": "stages as the focal funnel records them, per copy",
    "competitor": "replayed: never executed, so executed and completed are not measured",
    "decoy": "replayed: never executed, so executed and completed are not measured",
}


def _valid(tool: Tool, arguments: Any) -> bool:
    """Whether ``arguments`` (untrusted data) validate against the tool's input schema."""
    schema = dict(tool.input_schema)
    return bool(validator_for(schema, default=Draft202012Validator)(schema).is_valid(arguments))


class _Validity:
    """:func:`_valid`, remembered per tool and arguments: repeats of a task mostly send
    the same first call, and building a validator per run dominated the funnel's cost.
    Arguments are keyed by their type and ``repr``, which for parsed JSON (dicts, lists,
    strings, numbers, booleans, null) writes every value back exactly and keeps the
    types apart (1, 1.0 and True differ; a key order that differs only misses); any
    other object is checked every time."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, str], bool] = {}

    def __call__(self, tool: Tool, arguments: Any) -> bool:
        if not _plain_json(arguments):
            return _valid(tool, arguments)
        key = (id(tool), repr(arguments))
        if key not in self.seen:
            self.seen[key] = _valid(tool, arguments)
        return self.seen[key]


_JSON_LEAVES = (str, int, float, bool, type(None))


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of what a JSON parser makes (so its repr is faithful)."""
    if type(value) is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    if type(value) is list:
        return all(_plain_json(v) for v in value)
    return type(value) in _JSON_LEAVES


def _server_hits(
    o: Obs, key: str, role: str, tools: Mapping[str, Tool], valid: Callable[[Tool, Any], bool]
) -> list[Any]:
    """[surfaced, selected, invoked, executed, completed] of server ``key`` in run ``o``
    (None: not measured); ``tools``: the run's listed tools by name, for this server;
    ``valid``: :func:`_valid` or a remembering one."""
    outcomes = o.outcomes
    surfaced: bool | None = None
    if outcomes[_SURFACED] is not None:
        surfaced = o.surfaced_tools is None or not o.surfaced_tools.isdisjoint(tools)
    selected = o.first_server == key
    call = o.first_call
    invoked = bool(
        selected and call is not None and call[0] in tools and valid(tools[call[0]], call[1])
    )
    later: list[bool | None] = [None, None]
    if role == "focal":
        later = [None if (v := outcomes[k]) is None else bool(selected and v) for k in _LATER]
    return [surfaced, selected, invoked, *later]


_SURFACED = outcome_place("surfaced")
_LATER = (outcome_place("executed"), outcome_place("completed"))


def _listed_name(o: Obs, key: str) -> str | None:
    """The name server ``key`` was listed under in run ``o`` (None: not listed)."""
    return _listed_names(o).get(key)


def _listed_names(o: Obs) -> dict[Any, str]:
    """Every server key run ``o`` listed -> the name it was listed under (the first
    listing of a key wins): :func:`_listed_name` of each key from one pass."""
    names: dict[Any, str] = {}
    for server in (o.offer or {}).get("servers") or []:
        names.setdefault(server["key"], str(server.get("name")))
    return names


def _listed_tools(offer: ArmOffer) -> dict[tuple[str, str], dict[str, Tool]]:
    """(server key, name as listed) -> its tools by name: a clone_swap copy's tool names
    follow the label it carried in the unit, which the run's offer names."""
    return {
        (s.key, s.surface.name): {t.name: t for t in s.surface.tools} for s in offer.every_server()
    }


def server_funnel(runs: Sequence[Obs], offer: ArmOffer | None, arm: str) -> list[ServerFunnel]:
    """The funnel of every integration the arm's positive runs listed (comment above)."""
    if offer is None:
        return []
    tools = _listed_tools(offer)
    usable = [o for o in runs if o.ok and o.offer is not None]
    listed: dict[str, str] = {}
    for o in usable:
        for server in (o.offer or {}).get("servers") or []:
            listed.setdefault(str(server["key"]), str(server["role"]))
    rows = []
    valid = _Validity()
    every = [_listed_names(o) for o in usable]  # once per run, not once per run and server
    for key, role in listed.items():
        names = [run.get(key) for run in every]
        mine = [o for o, name in zip(usable, names, strict=True) if name is not None]
        tasks = {task: i for i, task in enumerate(dict.fromkeys(o.task_id for o in mine))}
        prompt = [tasks[o.task_id] for o in mine]
        hits = [
            _server_hits(o, key, role, tools.get((key, str(name)), {}), valid)
            for o, name in zip(usable, names, strict=True)
            if name is not None
        ]
        stages = []
        for k, stage in enumerate(STAGES):
            measured = [i for i, h in enumerate(hits) if h[k] is not None]
            if not measured:
                stages.append(ServerStage(stage=stage, reached=None, rate=None, interval=None))
                continue
            ji = prompt_rate(
                [float(hits[i][k]) for i in measured], [prompt[i] for i in measured], LEVELS[0]
            )
            stages.append(
                ServerStage(
                    stage=stage,
                    reached=int(ji.successes),
                    rate=float(ji.estimate),
                    interval=_iv(ji.low, ji.high, LEVELS[0], ji.method),
                )
            )
        rows.append(
            ServerFunnel(
                integration=key,
                role=role,
                listed=len(mine),
                stages=stages,
                note=SERVER_NOTE.get(role, ""),
                provenance=Provenance(
                    function=(
                        "prereg.reports.invokerank.servers.server_funnel; prereg.stats.prompt_rate"
                    ),
                    parameters={"level": LEVELS[0], "stages": list(STAGES)},
                    registration_field=None,
                    runs=runset(
                        [o.unit for o in mine],
                        f"arm {arm}; positive tasks; status ok; listed {key}",
                    ),
                ),
            )
        )
    return rows
