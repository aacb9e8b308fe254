"""The bundled ToolBottleneckBench families (issue 42, item 5; reading K5): at least 12
families over at least 3 intents and 2 domains, each compiling with the seed's sizes and
linting clean, all of them in the bundled study and experiment, each its own tool
cluster; and the demo's primary contrasts have enough clusters that their intervals are
printed (docs/statistics.md: 10 resampled units), recomputed here with numpy from the
exported records.

Counts are read from the YAML files themselves, never from the code under test.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from prereg.experiments.toolbottleneck.compile import compile_family
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.lint import lint_files
from tests.toolbottleneck.helpers import BUNDLED

FOLDER = BUNDLED.parent
#: docs/statistics.md, "The rule for every printed interval": a cluster bootstrap keeps
#: its level from 10 resampled units (written here, not imported from the code)
MIN_CLUSTERS = 10


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _family_docs() -> dict[str, dict[str, Any]]:
    return {p.name: _yaml(p) for p in sorted(BUNDLED.glob("*.yaml"))}


def test_the_bundled_families_cover_enough_intents_domains_and_clusters() -> None:
    docs = _family_docs()
    assert len(docs) >= 12
    intents = {d["intent"] for d in docs.values()}
    domains = {d["domain"] for d in docs.values()}
    assert len(intents) >= MIN_CLUSTERS  # the intent-level tables print their intervals
    assert len(domains) >= 2 and len(intents) >= 3
    # every family on its own route and without labels: no two share a tool (a tool is
    # its name on its route), so each is its own tool cluster
    routes = [tuple(d["route"].values()) for d in docs.values()]
    assert len(set(routes)) == len(routes)
    assert not any("tool_cluster" in d for d in docs.values())
    assert not any("cluster" in t for d in docs.values() for t in d["tools"])


@pytest.mark.parametrize("name", ["experiment.yaml", "study.yaml"])
def test_the_bundled_study_runs_every_family(name: str) -> None:
    listed = _yaml(FOLDER / name)["families"]
    assert sorted(Path(p).name for p in listed) == sorted(_family_docs())


def test_every_bundled_family_lints_clean() -> None:
    result = lint_files([str(p) for p in sorted(BUNDLED.glob("*.yaml"))])
    assert [f.render() for f in result.findings] == []


def test_every_bundled_family_keeps_its_answer_and_hand_computed_minimum() -> None:
    for name, doc in _family_docs().items():
        compiled = compile_family(load_family(BUNDLED / name))
        acts = 1 if "action" in doc else 0
        facts = {k: v["value"] for k, v in doc["facts"].items()}
        for variant in compiled.variants:
            cell = variant.document["cell"]
            records = len(doc["layouts"][cell["W"]])
            frontier = cell["block"] == "frontier"  # read-only (reading 4)
            want = 2 * records + 2 * cell["handoffs"] + (0 if frontier else acts)
            workflow = variant.component("workflow")
            assert workflow["certified_minimum"] == want, (name, variant.id)
            assert workflow["reference_answer"]["decision"] == doc["decision"]
            assert workflow["reference_answer"]["facts"] == facts
        lows = [
            v.component("workflow")["certified_minimum"]
            for v in compiled.variants
            if v.document["cell"]["block"] == "frontier"
        ]
        assert sorted(lows) == [2, 6, 14, 30]  # the seed's frontier minima


def test_the_demo_contrasts_resample_every_family_and_print_their_intervals(
    demo: dict[str, Any],
) -> None:
    n_families = len(_yaml(FOLDER / "experiment.yaml")["families"])
    assert n_families >= MIN_CLUSTERS
    records = [r for r in demo["records"] if r["status"] == "ok"]
    runs: dict[tuple[str, str], list[int]] = defaultdict(list)
    cluster_of: dict[str, str] = {}
    for r in records:
        runs[(r["task_id"], r["arm"])].append(int(bool(r["success"])))
        cluster_of[r["task_id"]] = r["cluster"]
    assert len(set(cluster_of.values())) == n_families
    for contrast in demo["contrasts"]:
        weights: dict[str, float] = contrast["weights"]
        assert contrast["units"] == n_families
        interval = contrast["interval"]
        assert interval["reason"] is None and interval["low"] is not None
        # per cluster: the weighted arm means over the cluster's tasks (each task's arm
        # mean over its repeats, tasks weighted equally within the cluster)
        per_cluster: dict[str, list[float]] = defaultdict(list)
        for task, clu in cluster_of.items():
            per_cluster[clu].append(
                sum(w * np.mean(runs[(task, arm)]) for arm, w in weights.items())
            )
        values = np.array([np.mean(v) for v in per_cluster.values()])
        n = len(values)
        estimate = values.mean()
        assert contrast["estimate"] == pytest.approx(estimate, abs=1e-9)
        # docs/statistics.md: from 10 clusters the one-sample t interval of the cluster
        # contrasts, estimate -+ t(n-1) s / sqrt(n) (s with n - 1 df), kept inside the
        # contrast's support [sum of the negative weights, sum of the positive ones]
        half = sps.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n)
        low = max(estimate - half, sum(w for w in weights.values() if w < 0))
        high = min(estimate + half, sum(w for w in weights.values() if w > 0))
        assert interval["low"] == pytest.approx(low, abs=1e-9)
        assert interval["high"] == pytest.approx(high, abs=1e-9)
