"""With replicate sessions the paired bootstrap resamples sessions, not repeats (issue 41,
item 1): repeats inside one session share its run effect, so they are one replicate run.
Before, each repeat was a run of its own, which gave the run part R - 1 degrees of
freedom it does not have (and an interval too narrow when sessions differ)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from prereg import stats
from prereg.reports.pairs import build_pairs
from tests.judging.helpers import registration, write
from tests.reports import observation


def test_a_repeats_run_label_is_its_session() -> None:
    obs = [
        observation(
            record_id=f"{arm}{t}{r}", arm=arm, task_id=t, repeat=r, success=(r + i) % 3 == 0
        )
        for i, t in enumerate(("t1", "t2"))
        for arm in ("a", "b")
        for r in range(6)
    ]
    pairs = build_pairs(obs, "a", "b", "success", ["t1", "t2"], {}, per_session=2)
    *_, runs = pairs.long_form()
    assert runs.tolist() == [0, 0, 1, 1, 2, 2] * 2
    *_, plain = build_pairs(obs, "a", "b", "success", ["t1", "t2"], {}).long_form()
    assert plain.tolist() == [0, 1, 2, 3, 4, 5] * 2
    assert pairs.subset(["t2"]).long_form()[3].tolist() == [0, 0, 1, 1, 2, 2]


def test_the_registered_bootstrap_resamples_sessions(cli: Any, ws: Path, tmp_path: Path) -> None:
    """4 repeats in 2 sessions: the registered bootstrap equals stats.paired_bootstrap
    run on the exported records with each repeat labelled by its session (2 runs an arm,
    1 df each), and its provenance says so."""
    doc = registration("sessions-boot", repeats=4)
    doc["design"] = {"repeats": 4, "sessions": 2, "seed": 3}
    doc["invokerank"] = {"interval": "calibrated"}
    doc["secondary"] = [{"test": "paired_bootstrap", "draws": 2000, "level": 0.95}]
    assert cli("-w", ws, "register", write(ws, doc)).code == 0
    assert cli("-w", ws, "run", "sessions-boot", "--no-progress").code == 0
    analysed = cli("-w", ws, "analyse", "sessions-boot", "--json")
    assert analysed.code == 0, analysed.stderr
    report = json.loads((ws / "reports" / "sessions-boot" / "report.json").read_text())
    (test,) = [t for t in report["secondary"] if t["test"] == "paired_bootstrap"]
    assert test["provenance"]["parameters"]["runs"].startswith("replicate session")
    assert "runs 1 and 1 df" in test["method"]
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", "sessions-boot", "--out", out).code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    outcome = {
        (r["arm"], r["task_id"], r["repeat"]): r["funnel"]["selected"]
        for r in rows
        if r["status"] == "ok" and r["polarity"] == "positive"
    }
    tasks = sorted({t for _, t, _ in outcome})
    yc: list[float] = []
    yt: list[float] = []
    prompts: list[int] = []
    runs: list[int] = []
    for i, task in enumerate(tasks):
        for repeat in range(4):
            c, t = outcome.get(("a", task, repeat)), outcome.get(("b", task, repeat))
            if c is None or t is None:
                continue
            yc.append(float(c))
            yt.append(float(t))
            prompts.append(i)
            runs.append(repeat // 2)  # the session of the repeat: 2 repeats a session
    label = np.array(runs)
    expected = stats.paired_bootstrap(
        np.array(yc), np.array(yt), np.array(prompts), label, label, draws=2000, level=0.95, seed=3
    )
    assert test["estimate"] == expected.estimate
    assert test["pvalue"] == expected.pvalue
