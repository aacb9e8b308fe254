"""``prereg split show EXPERIMENT --tasks``: every task with its split, intent, cluster and
polarity, never its prompt (issue 43: what an Inspect import or a debugging session needs
to name tasks)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml


def test_every_task_is_listed_once_with_what_the_corpus_says(ws: Path, cli: Any) -> None:
    corpus = yaml.safe_load((ws / "experiments" / "music-library" / "corpus.yaml").read_text())
    by_id = {t["id"]: t for t in corpus["tasks"]}
    result = cli("-w", ws, "split", "show", "music-library", "--tasks", "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    rows = data["task_list"]
    assert sorted(r["id"] for r in rows) == sorted(by_id)  # each task once
    for r in rows:
        task = by_id[r["id"]]
        assert (r["intent"], r["cluster"]) == (task["intent"], task["cluster"])
        assert r["polarity"] == task.get("polarity", "positive")
        assert set(r) == {"id", "split", "intent", "cluster", "polarity"}  # no prompt
    # the listing agrees with the counts beside it, and a cluster never straddles splits
    assert Counter(r["split"] for r in rows) == {s: v["tasks"] for s, v in data["splits"].items()}
    assert all(
        len({r["split"] for r in rows if r["cluster"] == c}) == 1
        for c in {r["cluster"] for r in rows}
    )


def test_one_split_and_the_refusals(ws: Path, cli: Any) -> None:
    result = cli("-w", ws, "split", "show", "music-library", "--tasks", "--split", "dev", "--json")
    assert result.code == 0, result.stderr
    rows = result.json()["task_list"]
    assert rows and {r["split"] for r in rows} == {"dev"}
    assert len(rows) == result.json()["splits"]["dev"]["tasks"]
    human = cli("-w", ws, "split", "show", "music-library", "--tasks", "--split", "dev")
    assert human.code == 0 and rows[0]["id"] in human.stdout
    unknown = cli("-w", ws, "split", "show", "music-library", "--tasks", "--split", "nope")
    assert unknown.code == 2 and "no split 'nope'" in unknown.stderr
    alone = cli("-w", ws, "split", "show", "music-library", "--split", "dev")
    assert alone.code == 2 and "--tasks" in alone.stderr
