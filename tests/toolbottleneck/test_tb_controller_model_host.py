"""The public-handoff controller and canonical delivery on a model host (issue 42, item
5; docs/toolbottleneck.md readings H1 and H4): a registered holdout study runs through
the real Anthropic SDK client against the local provider fake (tests/providers/fakes.py),
whose scripted model (tests/toolbottleneck/tb_agent.py) reads only the wire.

Expectations worked out from the seed and the family files, not read from the code: on
the read-only frontier the low workflow is one record behind ``handoffs`` public
handoffs, so 2 certified calls at 0 handoffs and 30 at 14. The model-run arms are told
``sloppy`` (they stop after the first record they read), so they pass the 2-call cell,
whose first record holds every fact, and fail the 30-call cell, whose first record holds
only a handoff; the controller arms' model follows what it is given. Under the controller
the model makes the first call (the search of its key) and its answer: 2 requests, 1
model call, the controller's 1 (2-call) or 29 (30-call) calls issued with no request.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.sandbox import build_sandbox
from prereg.runners.drivers.local import create
from prereg.runners.toolbottleneck.harness import HostUnit, play_host
from prereg.runners.toolbottleneck.host import Contract
from tests.providers.fake_chat import FakeChat
from tests.providers.fakes import provider_env
from tests.toolbottleneck.helpers import BUNDLED, run_cli
from tests.toolbottleneck.tb_agent import StudyBrain

REG = "holdout-on-a-model-host"
STUDY = "holdout-host"
#: two families: the fewest L, Gamma, Sigma and Delta are computed on (without intervals)
FAMILIES = ("overdue-case-escalation", "invoice-payment-approval")
#: arm -> (orchestration, delivery, handoffs, encoding, the scripted model's mode)
ARMS: dict[str, tuple[str, str, int, str, str]] = {
    "model-native-2": ("model", "native", 0, "raw", "sloppy"),
    "model-native-30": ("model", "native", 14, "raw", "sloppy"),
    "model-canonical-2": ("model", "canonical", 0, "raw", "sloppy"),
    "model-canonical-30": ("model", "canonical", 14, "raw", "sloppy"),
    "compact-canonical-2": ("model", "canonical", 0, "compact", "sloppy"),
    "controller-2": ("controller", "native", 0, "raw", "correct"),
    "controller-30": ("controller", "native", 14, "raw", "correct"),
}
#: a family's request key prefix (its primary record kind's)
PREFIX = {"overdue-case-escalation": "CAS", "invoice-payment-approval": "INV"}
MARK = "issued by the public-handoff controller"


def _arm(arm: str) -> dict[str, Any]:
    orchestration, delivery, handoffs, encoding, mode = ARMS[arm]
    cell: dict[str, Any] = {
        "menu": 8,
        "handoffs": handoffs,
        "encoding": encoding,
        "delivery": delivery,
    }
    if orchestration == "controller":
        cell["controller"] = "public-handoff"
    # the arm's id in the prompt lets the test attribute the fake's requests to arms
    prompt = f"You are a careful agent. mode: {mode} arm: {arm}"
    return {"id": arm, "surface": "variants", "toolbottleneck": cell, "system_prompt": prompt}


def _registration() -> dict[str, Any]:
    return {
        "id": REG,
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [_arm(a) for a in ARMS],
        "host": {"driver": "anthropic", "model": "claude-haiku-4-5"},
        "budgets": {
            "completion_cap": 512,
            "episode_tokens": 100000,
            "call_limit_over_certified": 2,
            "turn_limit_over_calls": 2,
            "spend_usd": 5,
        },
        "design": {"repeats": 1, "seed": 3},
        "primary": {"test": "mcnemar_exact"},
    }


def _run(root: Path) -> dict[str, Any]:
    code, out = run_cli("init", root)
    assert code == 0, out
    folder = root / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    for name in FAMILIES:
        shutil.copy(BUNDLED / f"{name}.yaml", folder / "families" / f"{name}.yaml")
    entry = {
        "name": STUDY,
        "kind": "toolbottleneck",
        "families": [f"families/{name}.yaml" for name in FAMILIES],
        "seeds": [0],
    }
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    path = root / f"{REG}.yaml"
    path.write_text(yaml.safe_dump(_registration(), sort_keys=False))
    with pytest.MonkeyPatch.context() as mp, FakeChat(StudyBrain()) as fake:  # type: ignore[arg-type]
        provider_env(mp, fake)
        code, out = run_cli("-w", root, "register", path, "--json")
        assert code == 0, out
        code, out = run_cli("-w", root, "run", REG, "--json", "--concurrency", "1")
        assert code == 0, out
        summary = json.loads(out)
        bodies = fake.model_bodies("anthropic")
    exported = root / "records.jsonl"
    code, out = run_cli("-w", root, "export", REG, "--out", exported)
    assert code == 0, out
    code, out = run_cli("-w", root, "analyse", REG, "--json")
    assert code == 0, out[-2000:]
    return {
        "summary": summary,
        "bodies": bodies,
        "records": [json.loads(line) for line in exported.read_text().splitlines()],
        "report": json.loads(out),
    }


def _arm_of(body: dict[str, Any]) -> str:
    found = re.search(r"arm: ([a-z0-9-]+)", json.dumps(body.get("system")))
    assert found is not None
    return found.group(1)


def _key(body: dict[str, Any]) -> str:
    found = re.search(r"\b([A-Z]{3}-[0-9A-F]{6,})\b", str(body["messages"][0]["content"]))
    assert found is not None
    return found.group(1)


def _results(body: dict[str, Any]) -> list[Any]:
    """The tool results a request carries, parsed, in order."""
    return [
        json.loads(block["content"])
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


def _family(record: dict[str, Any]) -> str:
    return str(record["task_id"]).removesuffix("-s0")  # one seed: <family>-s0


def _by_controller(record: dict[str, Any]) -> int:
    return sum(1 for t in record["trace"] if t["kind"] == "tool_call" and t["text"] == MARK)


def _family_facts(name: str) -> dict[str, str]:
    doc = yaml.safe_load((BUNDLED / f"{name}.yaml").read_text())
    return {k: str(v["value"]) for k, v in doc["facts"].items()}


def _every_unit_ran_on_the_model_host(run: dict[str, Any]) -> None:
    records = run["records"]
    assert run["summary"]["evidence_class"] == "api"
    assert len(records) == len(ARMS) * len(FAMILIES)
    assert all(r["status"] == "ok" and r["evidence_class"] == "api" for r in records)


def _the_controllers_calls_need_no_model_request(run: dict[str, Any]) -> None:
    requests: dict[tuple[str, str], int] = defaultdict(int)
    for body in run["bodies"]:
        requests[(_arm_of(body), _key(body)[:3])] += 1
    for r in run["records"]:
        orchestration, _, handoffs, _, _ = ARMS[r["arm"]]
        certified = 2 + 2 * handoffs
        prefix = PREFIX[_family(r)]
        counted = requests[(r["arm"], prefix)]
        assert counted == r["turns"], r["arm"]  # one record turn per request at the server
        if orchestration == "controller":
            # the model's search and its answer: 2 requests; the controller the rest
            assert counted == 2 and r["calls"] == certified
            assert _by_controller(r) == certified - 1
            assert r["success"] is True
            issued = [t["text"] == MARK for t in r["trace"] if t["kind"] == "tool_call"]
            assert issued == [False] + [True] * (certified - 1)
        else:
            assert _by_controller(r) == 0
            # sloppy: its search, its read, its answer; the 30-call cell's first record
            # holds only the handoff, so its answer misses the facts
            assert counted == 3 and r["calls"] == 2
            assert r["success"] is (handoffs == 0), r["arm"]
    assert sum(requests.values()) == len(run["bodies"])


def _the_controllers_records_reach_the_models_next_request(run: dict[str, Any]) -> None:
    for family in FAMILIES:
        prefix = PREFIX[family]
        bodies = [
            b for b in run["bodies"] if _arm_of(b) == "controller-30" and _key(b)[:3] == prefix
        ]
        first, second = bodies
        assert _results(first) == []
        (result,) = _results(second)  # the model's one call, with the controller's
        delivered = result["controller_calls"]
        assert len(delivered) == 29
        record = next(
            r for r in run["records"] if r["arm"] == "controller-30" and _family(r) == family
        )
        traced = [
            (t["tool"], t["arguments"])
            for t in record["trace"]
            if t["kind"] == "tool_call" and t["text"] == MARK
        ]
        assert [(d["tool"], d["arguments"]) for d in delivered] == traced
        # the chain, checked from the delivered records: a search's hit is read next,
        # a read's handoff names the next search's query
        key = _key(second)
        assert result["objects"][0]["payload"]["ref"] == key
        previous = result
        for i, call in enumerate(delivered):
            (arg,) = call["arguments"].values()
            obj = previous["objects"][0]
            if i % 2 == 0:
                assert call["tool"].startswith("read_") and arg == obj["id"]
            else:
                assert arg == obj["payload"]["next_handoff"]["query"]
            previous = call["result"]
        facts = previous["objects"][0]["payload"]
        assert {k: str(facts[k]) for k in _family_facts(family)} == _family_facts(family)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _canonical_delivery_is_the_same_bytes_whatever_the_encoding(run: dict[str, Any]) -> None:
    def texts(arm: str, prefix: str) -> list[str]:
        body = next(
            b
            for b in run["bodies"]
            if _arm_of(b) == arm and _key(b)[:3] == prefix and len(_results(b)) == 2
        )
        return [
            block["content"]
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for block in m["content"]
            if block.get("type") == "tool_result"
        ]

    for prefix in (PREFIX[f] for f in FAMILIES):
        raw, compact = texts("model-canonical-2", prefix), texts("compact-canonical-2", prefix)
        assert raw == compact  # byte for byte, whatever the cell's encoding
        # and it is the native raw observation's records, decoded, keys sorted
        for native, canonical in zip(texts("model-native-2", prefix), raw, strict=True):
            obs = json.loads(native)
            records = [
                _sorted({"id": o["id"], "kind": o["type"], "fields": o["payload"]})
                for o in obs.pop("objects")
            ]
            assert canonical == json.dumps({**obs, "records": records}, ensure_ascii=False)
            assert "objects" not in json.loads(canonical)


def _table(run: dict[str, Any], title: str) -> dict[str, Any]:
    return next(t for t in run["report"]["toolbottleneck"]["tables"] if t["title"] == title)


def _table_10_is_computed_for_the_model_host_records(run: dict[str, Any]) -> None:
    table = _table(run, "Structural holdout arms (Table 10)")
    got = {(row[0], row[1], int(row[2])): row for row in table["rows"]}
    pooled: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in run["records"]:
        orchestration, delivery, handoffs, _, _ = ARMS[r["arm"]]
        pooled[(orchestration.capitalize(), delivery, 2 + 2 * handoffs)].append(r)
    assert set(got) == set(pooled)
    for key, rs in pooled.items():
        ctrl = np.array([_by_controller(r) for r in rs], dtype=float)
        calls = np.array([r["calls"] for r in rs], dtype=float)
        tokens = [r["tokens"]["input"] + r["tokens"]["output"] for r in rs]
        want = [
            key[0],
            key[1],
            str(key[2]),
            str(len(rs)),
            f"{100 * np.mean([r['success'] for r in rs]):.1f}",
            f"{np.mean([r['turns'] for r in rs]):.1f}",
            f"{ctrl.mean():.1f}",
            f"{(calls - ctrl).mean():.1f}",
            f"{calls.mean():.1f}",
            f"{np.mean(tokens):,.0f}",
            str(sum(r["terminal_flag"] == "episode_budget" for r in rs)),
        ]
        assert got[key] == want, key


def _l_gamma_sigma_delta_are_computed_for_the_model_host_records(
    run: dict[str, Any],
) -> None:
    table = _table(run, "Structural holdout: L, Gamma, Sigma and Delta of the controller")
    cells = {row[0]: row[1] for row in table["rows"]}
    success = {(_family(r), r["arm"]): float(r["success"]) for r in run["records"]}
    order = [
        "model-native-2",
        "model-native-30",
        "model-canonical-2",  # the raw-encoding arm of its (orchestration, delivery, calls)
        "model-canonical-30",
        "controller-2",
        "controller-30",
    ]
    n0, n1, k0, k1, c0, c1 = np.array([[success[(f, a)] for a in order] for f in FAMILIES]).mean(
        axis=0
    )
    # by hand from the design: the model-run arms pass 2 calls and fail 30; the
    # controller passes both
    assert (n0, n1, k0, k1, c0, c1) == (1.0, 0.0, 1.0, 0.0, 1.0, 1.0)
    sigma, sigma_k = (c1 - n1) - (c0 - n0), (k1 - n1) - (k0 - n0)
    want = {
        "L": n0 - n1,
        "Gamma": c1 - n1,
        "Sigma": sigma,
        "Sigma^canonical": sigma_k,
        "Delta": sigma - sigma_k,
        "L^canonical": k0 - n0,
        "Gamma^canonical": k1 - n1,
    }
    assert set(cells) == set(want)
    for name, value in want.items():
        head = re.match(r"^([+-]\d+\.\d)", cells[name])
        assert head is not None, cells[name]
        assert float(head.group(1)) == pytest.approx(100 * value, abs=0.051), name
        # two families: fewer than a printed interval needs, so none is printed
        assert "no interval" in cells[name] and "[" not in cells[name], name


def test_holdout_arms_on_a_model_host(tmp_path: Path) -> None:
    """One run (the expensive part, done once whatever the workers), each property
    checked on it in turn."""
    run = _run(tmp_path / "ws")
    _every_unit_ran_on_the_model_host(run)
    _the_controllers_calls_need_no_model_request(run)
    _the_controllers_records_reach_the_models_next_request(run)
    _canonical_delivery_is_the_same_bytes_whatever_the_encoding(run)
    _table_10_is_computed_for_the_model_host_records(run)
    _l_gamma_sigma_delta_are_computed_for_the_model_host_records(run)


def test_the_controller_on_the_local_host() -> None:
    """A local host profile plays a controller arm through the same loop: after its first
    call (the search of its key), the controller issues the other 29 calls of the 30-call
    chain, which are the certified program's, in order, with no request of the host."""
    family = load_family(BUNDLED / f"{FAMILIES[0]}.yaml")
    sandbox = build_sandbox(family, Cell("frontier", 8, "low", 14, "raw"), seed=0)
    unit = HostUnit("local-default", {}, None, 1, 1, "local")
    played = asyncio.run(
        play_host(sandbox, create("local-default"), unit, Contract(), controller=True)
    )
    program = [(c.function, c.arg) for c in sandbox.workflow.program]
    assert len(program) == 30
    calls = [(c.function, next(iter(c.arguments.values()))) for c in played.episode.calls]
    assert calls[:30] == program
    issued = [t.text == MARK for t in played.trace if t.kind == "tool_call"]
    assert issued[:30] == [False] + [True] * 29 and sum(issued) == 29
    # one request for its first call, then what it does with the delivered records
    assert len(played.turns) == len(calls) - 29 + (played.episode.answer is not None)
