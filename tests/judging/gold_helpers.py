"""A podcast-style experiment big enough for a gold set of 100+ tasks per arm (offline)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import yaml

from tests.judging.helpers import write

BIG = "podcast-big"


def big_experiment(ws: Path, tasks: int) -> None:
    """Copy podcast-selection with ``tasks`` find-a-podcast tasks (each its own cluster),
    no competitor pool, and nearly every task on the dev split."""
    src = ws / "experiments" / "podcast-selection"
    dst = ws / "experiments" / BIG
    shutil.copytree(src, dst)
    corpus = yaml.safe_load((src / "corpus.yaml").read_text())
    # p02-p04: the local host finds and calls the focal search tool on these
    base = [t for t in corpus["tasks"] if t["intent"] == "find-podcast"][1:]
    corpus["tasks"] = [
        {**base[i % len(base)], "id": f"g{i:04d}", "cluster": f"c{i:04d}"} for i in range(tasks)
    ]
    (dst / "corpus.yaml").write_text(yaml.safe_dump(corpus, sort_keys=False))
    exp = yaml.safe_load((dst / "experiment.yaml").read_text())
    exp["name"] = BIG
    exp.pop("pool", None)
    exp["splits"]["fractions"] = {"dev": 0.9, "validation": 0.05, "test": 0.05}
    (dst / "experiment.yaml").write_text(yaml.safe_dump(exp, sort_keys=False))


def big_registration(ws: Path, reg_id: str = "big") -> Path:
    """Two arms of the local host that always call a tool (threshold far below any
    score), one completion judge (local rules)."""
    always = {"threshold": -5.0, "prompt_sd": 0.0}
    doc: dict[str, Any] = {
        "id": reg_id,
        "title": "gold set",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": BIG,
        "kind": "exploratory",
        "split": "dev",
        "arms": [
            {"id": "a", "surface": "focal"},
            {
                "id": "b",
                "surface": "focal",
                "host": {"driver": "local", "params": {**always, "search_k": 3}},
            },
        ],
        "host": {"driver": "local", "params": always},
        "budgets": {"completion_cap": 1024, "episode_tokens": 32000, "call_limit": 8},
        "design": {"repeats": 1, "seed": 3},
        "outcome": "selected",
        "primary": {"test": "mcnemar_exact", "compare": ["a", "b"], "alpha": 0.05},
        "judge": [
            {
                "id": "completion",
                "outcome": "completed",
                "driver": "local",
                "rubric": "judge-rubric.md",
                "rubric_version": "v1",
            }
        ],
    }
    return write(ws, doc)


def stored_verdicts(ws: Path) -> list[dict[str, Any]]:
    """The verdicts as stored (read with sqlite3, not through prereg)."""
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    try:
        return [json.loads(b) for (b,) in conn.execute("SELECT body FROM verdicts ORDER BY seq")]
    finally:
        conn.close()


def gold_count(ws: Path) -> int:
    path = ws / "runs" / "verdicts.sqlite"
    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        return (
            int(conn.execute("SELECT count(*) FROM gold").fetchone()[0]) if "gold" in tables else 0
        )
    finally:
        conn.close()
