"""The public-handoff controller and delivery (issue 42, item 5): the controller passes
the 30-call frontier cells in exactly the certified calls, issuing all but the model's
first; it stops safely on invalid, empty or ambiguous handoffs; delivery encodings
round-trip; the study arms' schema is validated with file-and-field errors and leaves
earlier studies' documents (their digests) unchanged."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.encoding import decode, deliver, encode, received
from prereg.experiments.toolbottleneck.family import parse_family
from prereg.experiments.toolbottleneck.sandbox import build_sandbox
from prereg.experiments.toolbottleneck.study import StudyArm, StudyFile, load_study
from prereg.experiments.toolbottleneck.world import Returned
from prereg.runners.toolbottleneck.controller import PublicHandoffController, play_controlled
from prereg.runners.toolbottleneck.host import PROFILES, Contract, play
from tests.toolbottleneck.helpers import BUNDLED

FAMILIES = sorted(p.name for p in BUNDLED.glob("*.yaml"))


def _family(name: str) -> Any:
    path = BUNDLED / name
    return parse_family(path.read_bytes(), str(path))


@pytest.mark.parametrize("name", FAMILIES[:6])
@pytest.mark.parametrize("encoding", ["raw", "compact", "linked"])
def test_controller_passes_30_call_cells_in_exactly_the_certified_calls(
    name: str, encoding: str
) -> None:
    family = _family(name)
    sandbox = build_sandbox(family, Cell("frontier", 8, "low", 14, encoding), seed=0)  # type: ignore[arg-type]
    program = [(c.function, c.arg) for c in sandbox.workflow.program]
    assert len(program) == 30 == sandbox.key.certified_minimum
    played = play_controlled(sandbox, PROFILES["sim-exact"], Contract(), random.Random(0), "native")
    executed = [(c.function, next(iter(c.arguments.values()))) for c in played.episode.calls]
    # hand-checked against the certified program: the same 30 calls in the same order
    assert executed == program
    assert played.verification.success
    # the model issues the first search (the key its request names); the controller the
    # other 29; the model makes two requests: its first call and its answer
    assert played.issuers == ("model",) + ("controller",) * 29
    assert played.turns == 2
    # the search/read alternation the handoffs name, checked from the calls themselves
    for i in range(0, 30, 2):
        search, read = played.episode.calls[i], played.episode.calls[i + 1]
        assert search.operation == "search" and read.operation == "read"
        assert next(iter(read.arguments.values())) == search.returned[0].id
        if i + 2 < 30:
            hop = read.returned[0].fields["next_handoff"]
            nxt = played.episode.calls[i + 2]
            assert next(iter(nxt.arguments.values())) == hop["query"]  # type: ignore[index]


def test_controller_at_two_calls_issues_the_read() -> None:
    sandbox = build_sandbox(_family(FAMILIES[0]), Cell("frontier", 8, "low", 0, "raw"), seed=0)
    played = play_controlled(sandbox, PROFILES["sim-exact"], Contract(), random.Random(0))
    assert sandbox.key.certified_minimum == 2
    assert played.issuers == ("model", "controller")
    assert played.verification.success and played.turns == 2


def test_model_run_baseline_issues_every_call_itself() -> None:
    sandbox = build_sandbox(_family(FAMILIES[0]), Cell("frontier", 8, "low", 14, "raw"), seed=0)
    played = play(sandbox, PROFILES["sim-exact"], Contract(), random.Random(0), "canonical")
    assert set(played.issuers) == {"model"}
    assert len(played.issuers) == len(played.episode.calls) == 30
    assert played.turns == 31  # one request per call and one for the answer


def _fn(op: str, kind: str, connector: str, where: str = "r") -> Any:
    class F:
        pass

    f = F()
    f.operation, f.kind, f.connector, f.where = op, kind, connector, where  # type: ignore[attr-defined]
    f.name = f"{op}_{kind}_{where}"  # type: ignore[attr-defined]
    f.arg = "query" if op == "search" else "id"  # type: ignore[attr-defined]
    return f


@pytest.mark.parametrize(
    "hop",
    [
        {"connector": "case-hub"},  # no query
        {"connector": "case-hub", "query": ""},  # empty
        {"connector": 3, "query": "CAS-1"},  # not two strings
        {"connector": "case-hub", "query": "CAS-1", "extra": "x"},
        "CAS-1",
    ],
)
def test_controller_stops_safely_on_an_invalid_or_empty_handoff(hop: Any) -> None:
    menu = [_fn("search", "case", "case-hub"), _fn("read", "case", "case-hub")]
    ctrl = PublicHandoffController("r")
    read = menu[1]
    records = [{"id": "x", "kind": "case", "fields": {"next_handoff": hop}}]
    assert ctrl.after(menu, read, records, set()) is None


def test_controller_follows_a_valid_handoff_and_stops_when_ambiguous_or_absent() -> None:
    search, read = _fn("search", "case", "case-hub"), _fn("read", "case", "case-hub")
    ctrl = PublicHandoffController("r")
    rec = [
        {
            "id": "x",
            "kind": "case",
            "fields": {"next_handoff": {"connector": "case-hub", "query": "CAS-9"}},
        }
    ]
    assert ctrl.after([search, read], read, rec, set()) == (search.name, {"query": "CAS-9"})
    # already executed: never repeated
    assert ctrl.after([search, read], read, rec, {(search.name, "CAS-9")}) is None
    # two search functions of the connector on the route: ambiguous, stop
    twin = _fn("search", "case", "case-hub")
    twin.name = "other"
    assert ctrl.after([search, twin, read], read, rec, set()) is None
    # the connector's search function on another route only: absent, stop
    assert (
        ctrl.after([_fn("search", "case", "case-hub", "elsewhere"), read], read, rec, set()) is None
    )
    # a content record (no handoff): the controller stops and the model continues
    assert (
        ctrl.after([search, read], read, [{"id": "x", "kind": "case", "fields": {"a": 1}}], set())
        is None
    )
    # a search's hit: the read of its first record
    hits = [{"id": "REC-1", "kind": "case", "fields": {"ref": "CAS-9"}}]
    assert ctrl.after([search, read], search, hits, set()) == (read.name, {"id": "REC-1"})
    assert ctrl.after([search, read], search, [], set()) is None


RESULTS = [
    Returned("r-1", "case", {"ref": "CAS-1", "amount": "12.50", "due": "2026-01-31"}),
    Returned(
        "r-2", "commitment", {"ref": "CAS-2", "next_handoff": {"connector": "c", "query": "CAS-3"}}
    ),
]
DECLARED = {"amount": "money", "due": "date"}


@pytest.mark.parametrize("encoding", ["raw", "compact", "typed", "linked"])
@pytest.mark.parametrize("delivery", ["native", "canonical"])
def test_delivery_round_trips(encoding: str, delivery: str) -> None:
    body = encode(RESULTS, encoding, DECLARED)  # type: ignore[arg-type]
    delivered = deliver(body, encoding, delivery)  # type: ignore[arg-type]
    assert received(delivered, encoding, delivery) == [r.value() for r in RESULTS]  # type: ignore[arg-type]
    if delivery == "native":
        assert delivered == body
    else:
        # one canonical encoding whatever the cell: the same bytes from every encoding
        assert set(delivered) == {"records"}
        raw = deliver(encode(RESULTS, "raw", DECLARED), "raw", "canonical")
        assert delivered == raw
        assert decode(body, encoding) == delivered["records"]  # type: ignore[arg-type]


def _arm(**kw: Any) -> dict[str, Any]:
    return {"id": "a", "menu": 8, "workflow": "low", "encoding": "raw"} | kw


def test_absent_fields_leave_the_documents_unchanged() -> None:
    arm = StudyArm.model_validate(_arm())
    assert "controller" not in arm.model_dump() and "delivery" not in arm.model_dump()
    assert arm.cell == {"V": 8, "W": "low", "D": "raw"}
    spec = StudyFile.model_validate({"id": "s", "families": ["f.yaml"], "arms": [_arm()]})
    assert "holdout" not in spec.model_dump(mode="json")
    held = StudyArm.model_validate(_arm(controller="public-handoff"))
    assert held.model_dump()["controller"] == "public-handoff"
    assert held.cell["orchestration"] == "controller" and held.cell["delivery"] == "native"


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    fams = tmp_path / "families"
    fams.mkdir(exist_ok=True)
    for name in FAMILIES[:3]:
        (fams / name).write_bytes((BUNDLED / name).read_bytes())
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"arms": [_arm(controller="public-handoff", workflow="high")]}, "arms[0].controller"),
        ({"arms": [_arm(delivery="sideways")]}, "arms[0].delivery"),
        ({"arms": [_arm(controller="model")]}, "arms[0].controller"),
        ({"holdout": ["no-such-family"]}, "holdout[0]"),
        ({"holdout": []}, "holdout"),
        ({"arms": [_arm()], "holdout": [FAMILIES[0][:-5]]}, "holdout"),
    ],
)
def test_bad_holdout_fields_exit_2_naming_file_and_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    doc = {
        "id": "s",
        "families": [f"families/{n}" for n in FAMILIES[:3]],
        "arms": [_arm(delivery="native", handoffs=0)],
    } | change
    path = _write(tmp_path, doc)
    with pytest.raises(BadInput) as err:
        load_study(path)
    assert str(err.value.file).startswith(str(path))  # with the line where known
    assert err.value.field == field


def _planted(sandbox: Any, hop: Any) -> Any:
    """The sandbox with the 5th handoff record's ``next_handoff`` replaced by ``hop``."""
    from dataclasses import replace

    from prereg.experiments.toolbottleneck.world import World

    hops = [r for r in sandbox.world.records if "next_handoff" in r.fields]
    target = hops[4].id
    records = tuple(
        replace(r, fields={**r.fields, "next_handoff": hop}) if r.id == target else r
        for r in sandbox.world.records
    )
    w = sandbox.world
    return replace(sandbox, world=World(records, w.functions, w.request_literals))


@pytest.mark.parametrize("name", FAMILIES[:4])
@pytest.mark.parametrize(
    "hop", [{"connector": "x", "query": ""}, {"query": "CAS-1"}, {"connector": "c", "query": 7}]
)
def test_controller_stops_safely_at_an_invalid_handoff_in_a_30_call_task(
    name: str, hop: Any
) -> None:
    sandbox = _planted(build_sandbox(_family(name), Cell("frontier", 8, "low", 14, "raw")), hop)
    played = play_controlled(sandbox, PROFILES["sim-exact"], Contract(), random.Random(0))
    # the model's search, then the controller's reads and searches up to the planted
    # record (the 5th handoff: calls 1-10), where it stops issuing; nothing else runs
    assert played.issuers[:10] == ("model",) + ("controller",) * 9
    assert "controller" not in played.issuers[10:]
    assert len(played.episode.calls) == 10
    assert not played.verification.success  # the facts lie past the broken handoff


def test_controller_does_not_read_the_hidden_program() -> None:
    sandbox = build_sandbox(_family(FAMILIES[1]), Cell("frontier", 8, "low", 14, "raw"))
    from dataclasses import replace

    # the same sandbox with the reference program reversed: what the controller issues
    # (the same calls, in the same order) does not depend on it
    workflow = replace(sandbox.workflow, program=tuple(reversed(sandbox.workflow.program)))
    a = play_controlled(sandbox, PROFILES["sim-exact"], Contract(), random.Random(0))
    b = play_controlled(
        replace(sandbox, workflow=workflow), PROFILES["sim-exact"], Contract(), random.Random(0)
    )
    assert [c.function for c in a.episode.calls] == [c.function for c in b.episode.calls]
    assert a.issuers == b.issuers
