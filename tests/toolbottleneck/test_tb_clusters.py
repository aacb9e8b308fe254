"""Tool clusters of a study (issue 19, reading 32; seed: "Discovery contrasts resample 18
clusters of required tools").

A task's cluster is its family's tool cluster: the connected component of "shares a
required (operational) tool" or "gives the same ``tool_cluster`` label". The clusters
are checked against a hand-listed expectation and against a second, independent
computation (a breadth-first search over the raw family documents, a tool being its
name on its route); a ``unit: cluster`` contrast's bootstrap resamples the merged
clusters (its number of units, its estimate and its p value recomputed by hand from
the stored records); a bad label is refused with exit 2 naming the file and the field;
a family without a label digests as before.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from prereg.core.errors import BadInput
from prereg.experiments.loader import folder_reader, load_experiment
from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.experiments.toolbottleneck.registrable import required_tools, tool_clusters
from prereg.experiments.toolbottleneck.study import load_study
from prereg.runners.store.choose import open_store
from tests.conftest import tree_digest
from tests.toolbottleneck.helpers import BUNDLED, SMALL_SIZES, as_yaml, family

STUDY = "cluster-study"
R1 = ("northwind", "eu-west", "support")
R2 = ("fabrikam", "us-east", "finance")
R3 = ("contoso", "eu-central", "payments")
R4 = ("globex", "ap-south", "support")
R5 = ("initech", "us-west", "facilities")


def _doc(
    fid: str,
    route: tuple[str, str, str],
    kinds: list[str],
    *,
    label: Any = ...,
    action: bool = True,
) -> dict[str, Any]:
    """A three-source family on ``route`` whose tools are named after ``kinds`` (so two
    families on one route that name a kind share its search and read tools)."""
    facts = [f"{k}-fact" for k in kinds]
    tools: list[dict[str, Any]] = []
    for kind in kinds:
        base = kind.replace("-", "_")
        for op, name in (("search", f"search_{base}s"), ("read", f"read_{base}")):
            tools.append({"name": name, "operation": op, "kind": kind, "connector": f"{kind}-hub"})
    doc: dict[str, Any] = {
        "id": fid,
        "intent": f"{fid}-intent",
        "domain": "email",
        "request": f"Decide {fid} for {{ref}} on route {{route}}.",
        "route": dict(zip(("workspace", "region", "collection"), route, strict=True)),
        "sources": kinds,
        "facts": {f: {"value": f"v-{f}"} for f in facts},
        "decision": "yes",
        "tools": tools,
        "layouts": {
            "low": [facts],
            "medium": [facts[:1], facts[1:]],
            "high": [[f] for f in facts],
        },
        "sizes": copy.deepcopy(SMALL_SIZES),
    }
    if action:
        base = kinds[0].replace("-", "_")
        tools.append(
            {
                "name": f"flag_{base}",
                "operation": "act",
                "kind": kinds[0],
                "connector": f"{kinds[0]}-hub",
            }
        )
        doc["action"] = {"tool": f"flag_{base}", "field": "flag", "before": "no", "value": "yes"}
    if label is not ...:
        doc["tool_cluster"] = label
    return doc


def _docs() -> list[dict[str, Any]]:
    return [
        _doc("alpha", R1, ["case", "commitment", "contact"]),
        _doc("bravo", R1, ["order", "shipment", "contact"]),  # alpha's contact tools
        _doc("charlie", R1, ["parcel", "carrier", "shipment"], action=False),  # bravo's
        _doc("delta", R2, ["invoice", "vendor", "approver"], label="ledger"),
        _doc("echo", R3, ["payment", "account", "approver"], label="ledger"),  # label only
        _doc("foxtrot", R4, ["case", "commitment", "contact"]),  # alpha's names, other route
        _doc("golf", R5, ["room", "booking", "person"]),
    ]


#: the clusters of :func:`_docs`, listed by hand
EXPECTED = {
    "alpha": "alpha",
    "bravo": "alpha",
    "charlie": "alpha",  # through bravo: it shares nothing with alpha
    "delta": "ledger",
    "echo": "ledger",
    "foxtrot": "foxtrot",
    "golf": "golf",
}


def _by_hand(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The clusters again, independently: a breadth-first search over a graph whose edges
    join two families that list a tool of the same name on the same route, or give the
    same label; a cluster is named by its first label, else its first family id."""

    def tools_of(doc: dict[str, Any]) -> set[tuple[str, ...]]:
        route = tuple(doc["route"][k] for k in ("workspace", "region", "collection"))
        return {(t["name"], *route) for t in doc["tools"]}

    ids = [d["id"] for d in docs]
    edges: dict[str, set[str]] = defaultdict(set)
    for a, b in itertools.combinations(docs, 2):
        label = a.get("tool_cluster") is not None and a.get("tool_cluster") == b.get("tool_cluster")
        if label or tools_of(a) & tools_of(b):
            edges[a["id"]].add(b["id"])
            edges[b["id"]].add(a["id"])
    labels = {d["id"]: d.get("tool_cluster") for d in docs}
    out: dict[str, str] = {}
    for start in ids:
        if start in out:
            continue
        seen, queue = {start}, deque([start])
        while queue:
            for other in edges[queue.popleft()] - seen:
                seen.add(other)
                queue.append(other)
        given = sorted(str(labels[f]) for f in seen if labels[f] is not None)
        name = given[0] if given else min(seen)
        out.update(dict.fromkeys(seen, name))
    return out


def _clusters(docs: list[dict[str, Any]]) -> dict[str, str]:
    return tool_clusters([(family(d, f"{d['id']}.yaml"), f"{d['id']}.yaml") for d in docs])


def test_shared_tools_and_labels_merge_families_into_tool_clusters() -> None:
    docs = _docs()
    assert _by_hand(docs) == EXPECTED
    assert _clusters(docs) == EXPECTED
    # the order the families are listed in changes nothing
    for seed in range(5):
        shuffled = docs[:]
        random.Random(seed).shuffle(shuffled)
        assert _clusters(shuffled) == EXPECTED


def test_a_label_merges_but_never_splits() -> None:
    # alpha and bravo share tools: different labels do not split them (the first names it)
    alpha = _doc("alpha", R1, ["case", "commitment", "contact"], label="zulu")
    bravo = _doc("bravo", R1, ["order", "shipment", "contact"], label="yankee")
    golf = _doc("golf", R5, ["room", "booking", "person"], label="rooms")
    assert _clusters([alpha, bravo, golf]) == {
        "alpha": "yankee",
        "bravo": "yankee",
        "golf": "rooms",
    }
    # without labels or shared tools every family is its own cluster, named as the family
    plain = [
        _doc(f"f{i}", route, ["case", "commitment", "contact"])
        for i, route in enumerate((R1, R2, R3))
    ]
    assert _clusters(plain) == {"f0": "f0", "f1": "f1", "f2": "f2"}


def test_random_families_cluster_as_the_independent_search_says() -> None:
    """200 random studies: 3 to 7 families, each three kinds of a pool of six on one of
    two routes, a label of two or none."""
    pool = ["case", "contact", "order", "invoice", "room", "person"]
    rng = random.Random(19)
    for _ in range(200):
        docs = []
        for i in range(rng.randint(3, 7)):
            label = rng.choice([..., ..., "lab-a", "lab-b"])
            docs.append(_doc(f"fam{i}", rng.choice((R1, R2)), rng.sample(pool, 3), label=label))
        assert _clusters(docs) == _by_hand(docs)


def test_the_required_tools_are_the_compiled_variants_operational_tools() -> None:
    for doc in _docs()[:3]:
        fam = family(doc)
        variant = compile_cell(fam, Cell("capacity", 8, "high", 0, "raw"))
        names = {t["name"] for t in variant.component("core")["operational_tools"]}
        assert required_tools(fam) == names


def test_the_bundled_families_are_each_their_own_cluster() -> None:
    """The bundled families share no tool and give no label: each task's cluster is its
    family, as before tool clusters (so the bundled registrations analyse as before)."""
    root = BUNDLED.parent
    experiment = load_experiment(folder_reader(root), "toolbottleneck")
    assert experiment.toolbottleneck is not None
    assert dict(experiment.toolbottleneck.clusters) == {
        f.family.id: f.family.id for f in experiment.toolbottleneck.families
    }
    for task in experiment.tasks:
        assert task.cluster == experiment.toolbottleneck.tasks[task.id][0]


def test_a_family_without_a_label_digests_as_before() -> None:
    """The field is left out of an unlabelled family's dump (its family digest is as it
    was), and a label is no part of a compiled variant (only of the family file)."""
    doc = _doc("alpha", R1, ["case", "commitment", "contact"])
    plain = family(doc)
    assert "tool_cluster" not in plain.model_dump(mode="json")
    labelled = family({**doc, "tool_cluster": "crm"})
    assert labelled.model_dump(mode="json")["tool_cluster"] == "crm"
    cell = Cell("discovery", 8, "low", 0, "raw", 16, "flat-lexical")
    assert compile_cell(plain, cell).digest == compile_cell(labelled, cell).digest


# -- through the registry ----------------------------------------------------------------


def _study(ws: Path, docs: list[dict[str, Any]], **entry: Any) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True, exist_ok=True)
    names = []
    for doc in docs:
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    data = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": [0, 1]}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(data | entry))
    return folder


def _registration(ws: Path, reg_id: str = "clusters", **over: Any) -> Path:
    doc: dict[str, Any] = {
        "id": reg_id,
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [
            {
                "id": retriever,
                "surface": "variants",
                "toolbottleneck": {"catalog": 48, "retriever": retriever, "policy": "sim-steady"},
            }
            for retriever in ("flat-lexical", "connector-first")
        ],
        "contrasts": [
            {
                "id": "r",
                "weights": {"connector-first": 1, "flat-lexical": -1},
                "unit": "cluster",
                "draws": 2000,
            }
        ],
        "host": {"driver": "local"},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "design": {"repeats": 2, "seed": 5},
        "primary": {"test": "paired_bootstrap", "contrast": "r", "unit": "cluster"},
    }
    doc.update(over)
    path = ws / f"{reg_id}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _five() -> list[dict[str, Any]]:
    """alpha+bravo (a shared tool), delta+echo (a label), golf: three clusters."""
    docs = {d["id"]: d for d in _docs()}
    return [docs[f] for f in ("alpha", "bravo", "delta", "echo", "golf")]


def test_a_cluster_contrast_resamples_the_merged_tool_clusters(ws: Path, cli: Any) -> None:
    docs = _five()
    _study(ws, docs)
    assert cli("-w", ws, "register", _registration(ws), "--json").code == 0
    assert cli("-w", ws, "run", "clusters", "--json").code == 0
    out = cli("-w", ws, "analyse", "clusters", "--json")
    assert out.code == 0, out.stderr
    contrast = next(c for c in out.json()["contrasts"] if c["id"] == "r")

    store = open_store(ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "clusters"]
    finally:
        store.close()
    cluster_of = _by_hand(docs)
    assert len(set(cluster_of.values())) == 3
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        family_id = r.task_id.rsplit("-s", 1)[0]
        assert r.cluster == cluster_of[family_id]  # the record carries the tool cluster
        runs[(r.task_id, r.arm)].append(float(bool(r.success)))
    tasks = sorted({t for t, _ in runs})
    assert len(tasks) == 5 * 2
    # the registered weights (connector-first minus flat-lexical), per task, then per cluster
    diff = {
        t: np.mean(runs[(t, "connector-first")]) - np.mean(runs[(t, "flat-lexical")]) for t in tasks
    }
    groups: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        groups[cluster_of[t.rsplit("-s", 1)[0]]].append(float(diff[t]))
    d = np.array([np.mean(groups[c]) for c in sorted(groups)])
    assert contrast["units"] == 3 and contrast["unit"] == "cluster"
    assert contrast["estimate"] == pytest.approx(d.mean(), abs=1e-12)
    assert d.mean() != 0  # the retrievers differ here, so the p value says something
    # contrast_bootstrap's default p (issue 39): its interval inverted, the one-sample t
    # test of the three cluster contrasts on 2 degrees of freedom
    assert np.ptp(d) > 0  # the clusters differ, so the t test has a p
    assert contrast["pvalue"] == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue, rel=1e-9)
    # the study section's family unit resamples the five families, not the three clusters
    table = out.json()["toolbottleneck"]["tables"][0]
    assert table["title"].startswith("Contrasts by resampling unit")
    by_unit = {row[1].split(" ")[0]: row[1] for row in table["rows"] if row[0] == "r"}
    assert by_unit["family"] == f"family ({len({r.task_id.rsplit('-s', 1)[0] for r in records})})"
    assert by_unit["family"] == "family (5)"


@pytest.mark.parametrize(
    "label",
    ["", 5, None, "Not A Slug", ["crm"], True],
    ids=["empty", "integer", "null", "not-a-slug", "list", "boolean"],
)
def test_a_bad_label_is_refused_at_register_naming_file_and_field(
    ws: Path, cli: Any, label: Any
) -> None:
    docs = _five()
    docs[1] = {**docs[1], "tool_cluster": label}
    _study(ws, docs)
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", _registration(ws), "--json")
    assert result.code == 2, result.stdout
    error = json.loads(result.stdout)
    assert error["field"] == "tool_cluster"
    assert "families/bravo.yaml" in error["file"]
    assert tree_digest(ws / "registry") == before  # nothing written


def test_a_label_that_names_another_clusters_family_is_refused(ws: Path, cli: Any) -> None:
    docs = _five()
    docs[4] = {**docs[4], "tool_cluster": "delta"}  # golf says delta, which is in "ledger"
    _study(ws, docs)
    result = cli("-w", ws, "register", _registration(ws), "--json")
    assert result.code == 2, result.stdout
    error = json.loads(result.stdout)
    assert error["field"] == "tool_cluster" and "families/golf.yaml" in error["file"]
    # the same label on a family of its own cluster is only a name
    docs[4] = {**docs[4], "tool_cluster": "golf"}
    _study(ws, docs)
    assert cli("-w", ws, "register", _registration(ws), "--json").code == 0


def test_a_cluster_in_two_splits_is_refused(ws: Path, cli: Any) -> None:
    # alpha and bravo share a tool: bravo in test, alpha (unlisted) in dev
    _study(ws, _five(), splits={"test": ["bravo"]})
    result = cli("-w", ws, "register", _registration(ws), "--json")
    assert result.code == 2, result.stdout
    error = json.loads(result.stdout)
    assert error["field"] == "splits.test" and error["file"].endswith("experiment.yaml")
    # the whole cluster in one split loads: its tasks are in that split
    folder = _study(ws, _five(), splits={"test": ["alpha", "bravo"]})
    experiment = load_experiment(folder_reader(folder), STUDY)
    assert {t.id for t in experiment.tasks_in_split("test")} == {
        f"{f}-s{s}" for f in ("alpha", "bravo") for s in (0, 1)
    }


def test_a_label_changes_the_registration_digest(ws: Path, cli: Any) -> None:
    docs = _five()
    _study(ws, docs)
    first = cli("-w", ws, "register", _registration(ws, "before"), "--json")
    assert first.code == 0, first.stderr
    docs[4] = {**docs[4], "tool_cluster": "ledger"}  # golf joins delta and echo
    folder = _study(ws, docs)
    second = cli("-w", ws, "register", _registration(ws, "after"), "--json")
    assert second.code == 0, second.stderr
    assert first.json()["digest"] != second.json()["digest"]
    experiment = load_experiment(folder_reader(folder), STUDY)
    assert {t.cluster for t in experiment.tasks} == {"alpha", "ledger"}


def test_a_bad_label_is_refused_by_the_study_commands(tmp_path: Path, cli: Any) -> None:
    """``prereg study compile`` reads one family; a study file reads them all."""
    doc = {**_doc("alpha", R1, ["case", "commitment", "contact"]), "tool_cluster": ""}
    path = tmp_path / "alpha.yaml"
    path.write_text(as_yaml(doc))
    result = cli("study", "compile", path, "--json")
    assert result.code == 2
    assert json.loads(result.stdout)["field"] == "tool_cluster"
    docs = _five()
    docs[4] = {**docs[4], "tool_cluster": "delta"}
    for doc in docs:
        (tmp_path / f"{doc['id']}.yaml").write_text(as_yaml(doc))
    study = {
        "id": "s",
        "families": [f"{d['id']}.yaml" for d in docs],
        "arms": [{"id": "a", "menu": 8, "workflow": "low", "encoding": "raw"}],
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    with pytest.raises(BadInput) as caught:
        load_study(tmp_path / "study.yaml")
    assert caught.value.field == "tool_cluster" and "golf.yaml" in str(caught.value.file)
