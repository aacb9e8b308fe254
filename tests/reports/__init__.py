"""Helpers for the report tests: a synthetic paired-lab experiment and constructed runs.

The tests design paired outcomes directly (which task succeeds in which arm and
repeat), write them as :class:`RunRecord` s into the workspace's run store, and
read the analysis back through ``prereg analyse --json``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prereg.core.errors import ProtocolRefusal
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.registrations import Registry
from prereg.reports.observations import Obs
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore


def _dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def make_lab(
    ws: Path,
    name: str = "lab",
    n_tasks: int = 24,
    n_intents: int = 4,
    split: str = "test",
    description: str = "Read one item.",
    prompt: str = "Tell me about item number {k}.",
    negatives: int = 0,
) -> list[str]:
    """Write experiment ``name``: ``n_tasks`` one-task clusters, all in ``split``.

    Returns the task ids in corpus order. Surfaces ``a`` and ``b`` offer the same
    single tool; ``description`` is the tool description of surface ``b``.
    """
    root = ws / "experiments" / name
    _dump(
        root / "service.yaml",
        {
            "name": "lab",
            "collections": {
                "items": {
                    "id_prefix": "itm",
                    "fields": {"name": "string"},
                    "records": [{"id": "itm-001", "name": "Alpha"}],
                }
            },
            "operations": {
                "get_item": {
                    "kind": "get",
                    "collection": "items",
                    "key": "item_id",
                    "params": {"item_id": {"type": "string", "required": True, "ref": "items"}},
                }
            },
        },
    )
    schema = {
        "type": "object",
        "properties": {"item_id": {"type": "string"}},
        "required": ["item_id"],
        "additionalProperties": False,
    }
    for surface, desc in (("a", "Get one item by id."), ("b", description)):
        _dump(
            root / "surfaces" / f"{surface}.yaml",
            {
                "name": f"Lab {surface}",
                "title": f"Lab surface {surface}",
                "description": "A lab surface.",
                "tools": [
                    {
                        "name": "get_item",
                        "title": "Get item",
                        "description": desc,
                        "operation": "get_item",
                        "input_schema": schema,
                    }
                ],
            },
        )
    intents = {f"i{j + 1}": f"intent {j + 1}" for j in range(n_intents)}
    tasks = []
    ids = []
    for k in range(n_tasks):
        tid = f"t{k + 1:03d}"
        ids.append(tid)
        tasks.append(
            {
                "id": tid,
                "intent": f"i{k % n_intents + 1}",
                "cluster": f"c{k + 1:03d}",
                "prompt": prompt.format(k=k + 1),
                "permits": ["get_item"],
                "solution": {"steps": [{"op": "get_item", "args": {"item_id": "itm-001"}}]},
            }
        )
    for k in range(negatives):
        tid = f"n{k + 1:03d}"
        ids.append(tid)
        tasks.append(
            {
                "id": tid,
                "intent": "i1",
                "cluster": f"n{k + 1:03d}",
                "polarity": "negative",
                "prompt": f"Say hello number {k + 1}.",
            }
        )
    if negatives:
        intents = dict(intents)
    _dump(root / "corpus.yaml", {"intents": intents, "tasks": tasks})
    clusters = [t["cluster"] for t in tasks]
    assign = {s: (clusters if s == split else []) for s in ("dev", "validation", "test")}
    _dump(
        root / "experiment.yaml",
        {
            "name": name,
            "service": "service.yaml",
            "corpus": "corpus.yaml",
            "surfaces": {"a": "surfaces/a.yaml", "b": "surfaces/b.yaml"},
            "splits": {"assign": assign},
            # templated prompts ("item number {k}") are near-duplicates by design: only an
            # exact copy counts here (the corpus lint's confirmatory gate, issue 41 item 5)
            "corpus_lint": {"near_duplicate": 1.0},
        },
    )
    return ids


def registration(
    reg_id: str, experiment: str = "lab", kind: str = "confirmatory", repeats: int = 1, **extra: Any
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": reg_id,
        "title": f"Registration {reg_id}",
        "hypothesis": "Surface b raises task success over surface a.",
        "falsification": "McNemar's exact test does not reject at alpha 0.05.",
        "experiment": experiment,
        "kind": kind,
        "split": "test" if kind == "confirmatory" else "dev",
        "arms": [{"id": "baseline", "surface": "a"}, {"id": "semantic", "surface": "b"}],
        "host": {"driver": "local"},
        "design": {"repeats": repeats, "seed": 3},
        "outcome": "success",
        "primary": {
            "test": "mcnemar_exact",
            "alpha": 0.05,
            "sides": "two-sided",
            "favours": "semantic",
            "aggregate": "majority",
        },
    }
    if kind == "confirmatory":
        # the lab's tool text and prompts carry hostile strings in some tests: the corpus
        # lint's confirmatory gate (issue 41 item 5) needs them waived, with a reason
        doc["corpus_lint"] = {
            "waive": [
                {"rule": family, "reason": "synthetic lab fixture (hostile strings)"}
                for family in ("guardrail", "realism")
            ]
        }
    doc.update(extra)
    return doc


def register(cli: Callable[..., Any], ws: Path, doc: dict[str, Any]) -> str:
    """Register ``doc``; returns its digest."""
    path = ws / "drafts" / f"{doc['id']}.yaml"
    _dump(path, doc)
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stdout + result.stderr
    return str(result.json()["digest"])


def record(
    reg_id: str,
    digest: str,
    arm: str,
    task_id: str,
    success: bool | None,
    repeat: int = 0,
    intent: str = "i1",
    evidence_class: str = "local",
    driver: str = "local",
    status: str = "ok",
    polarity: str = "positive",
    **extra: Any,
) -> RunRecord:
    now = datetime.now(UTC)
    fields: dict[str, Any] = dict(
        record_id=uuid.uuid4().hex,
        registration_id=reg_id,
        registration_digest=digest,
        experiment="lab",
        arm=arm,
        surface="a" if arm == "baseline" else "b",
        task_id=task_id,
        intent=intent,
        cluster=f"c{task_id[1:]}",
        split="test",
        polarity=polarity,
        repeat=repeat,
        rotation=0,
        driver=driver,
        evidence_class=evidence_class,
        started_at=now,
        finished_at=now,
        status=status,
    )
    if status == "ok":
        fields.update(
            success=bool(success),
            terminal_flag=None if success else "wrong_conclusion",
            first_unmet_obligation=None if success else "final_state",
        )
    else:
        fields.update(success=None, error="simulated infrastructure failure")
    fields.update(extra)
    return RunRecord(**fields)


def intent_of(task_ids: Sequence[str], n_intents: int = 4) -> dict[str, str]:
    return {t: f"i{k % n_intents + 1}" for k, t in enumerate(task_ids)}


def paired_records(
    reg_id: str,
    digest: str,
    tasks: Sequence[str],
    control: Sequence[Sequence[bool]],
    treatment: Sequence[Sequence[bool]],
    n_intents: int = 4,
    **extra: Any,
) -> list[RunRecord]:
    """Records for per-task outcome lists (one bool per repeat) of both arms."""
    intents = intent_of(tasks, n_intents)
    out = []
    for arm, outcomes in (("baseline", control), ("semantic", treatment)):
        for task, by_repeat in zip(tasks, outcomes, strict=True):
            for r, ok in enumerate(by_repeat):
                out.append(
                    record(reg_id, digest, arm, task, ok, repeat=r, intent=intents[task], **extra)
                )
    return out


def seed002_outcomes(
    n: int, control_successes: int, treatment_successes: int, discordant: int
) -> tuple[list[list[bool]], list[list[bool]]]:
    """Per-task single-repeat outcomes with the given marginals and discordant pairs."""
    # b + c = discordant and c - b = treatment - control
    diff = treatment_successes - control_successes
    assert (discordant - abs(diff)) % 2 == 0
    c = (discordant + diff) // 2
    b = discordant - c
    both = control_successes - b
    assert both >= 0 and both + b + c <= n
    ctl, trt = [], []
    for k in range(n):
        if k < both:
            pair = (True, True)
        elif k < both + b:
            pair = (True, False)
        elif k < both + b + c:
            pair = (False, True)
        else:
            pair = (False, False)
        ctl.append([pair[0]])
        trt.append([pair[1]])
    return ctl, trt


def append(ws: Path, records: Sequence[RunRecord]) -> None:
    """Store ``records`` as ``prereg run`` would, claiming the locked split first for a
    registration on it (a second confirmatory registration on the same split cannot
    claim it; the compare tests store its records all the same)."""
    registry = Registry(ws / "registry")
    for reg_id in dict.fromkeys(r.registration_id for r in records):
        entry = registry.find(reg_id)  # records may name an unregistered id (refusal tests)
        if entry is not None and entry.registration.split == LOCKED_SPLIT:
            try:
                registry.claim_locked_split(entry)
            except ProtocolRefusal:
                pass
    store = RunStore(ws / "runs")
    try:
        for rec in records:
            store.append(rec)
    finally:
        store.close()


def observation(**fields: Any) -> Obs:
    """An observation of an ok, successful positive run of arm ``a``; ``fields`` override."""
    base: dict[str, Any] = dict(
        record_id="r0000001",
        registration_id="r",
        digest="sha256:" + "1" * 64,
        arm="a",
        task_id="t",
        intent="i",
        cluster="c",
        polarity="positive",
        repeat=0,
        rotation=0,
        status="ok",
        evidence_class="local",
        driver="local",
        model_requested=None,
        model_returned=None,
        success=True,
        funnel={},
        terminal_class="focal",
        selection_rate=None,
        cost_usd=None,
        tokens=None,
    )
    return Obs(**{**base, **fields})
