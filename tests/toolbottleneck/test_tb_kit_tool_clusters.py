"""Tool-cluster labels registered per tool (issue 42, item 5; reading K4).

A tool's ``cluster:`` label says the tool is shared with the families whose tools give
the same label; a tool without one is its family's own, so the default cluster stays the
family. The clusters are checked against hand-listed expectations and an independent
breadth-first search over the raw documents (an edge for a shared exposed function,
a shared family label or a shared tool label); a bad label is refused naming the file
and the field; a family without tool labels dumps as before.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.core.errors import BadInput
from prereg.experiments.loader import folder_reader, load_experiment
from prereg.experiments.toolbottleneck.registrable import tool_clusters
from tests.toolbottleneck.helpers import SMALL_SIZES, as_yaml, family

ROUTES = {
    "alpha": ("northwind", "eu-west", "support"),
    "bravo": ("fabrikam", "us-east", "finance"),
    "charlie": ("contoso", "eu-central", "payments"),
    "delta": ("globex", "ap-south", "support"),
    "echo": ("initech", "us-west", "facilities"),
}


def _doc(fid: str) -> dict[str, Any]:
    kinds = [f"{fid}-case", f"{fid}-note", f"{fid}-owner"]
    facts = [f"{k}-fact" for k in kinds]
    tools = []
    for kind in kinds:
        base = kind.replace("-", "_")
        tools.append(
            {
                "name": f"search_{base}s",
                "operation": "search",
                "kind": kind,
                "connector": "hub",
                "description": f"Find a {kind}.",
            }
        )
        tools.append(
            {
                "name": f"read_{base}",
                "operation": "read",
                "kind": kind,
                "connector": "hub",
                "description": f"Read a {kind}.",
            }
        )
    workspace, region, collection = ROUTES[fid]
    return {
        "id": fid,
        "intent": "check",
        "domain": "email",
        "request": 'Case {ref} on {route}: answer {"decision": "yes" or "no"}.',
        "route": {"workspace": workspace, "region": region, "collection": collection},
        "sources": kinds,
        "facts": {f: {"value": f"v-{f}"} for f in facts},
        "decision": "yes",
        "tools": tools,
        "layouts": {
            "low": [facts],
            "medium": [facts[:1], facts[1:]],
            "high": [[f] for f in facts],
        },
        "sizes": dict(SMALL_SIZES),
    }


def _reference(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Independent: BFS over families, edges for a shared exposed name (base on route),
    a shared family label or a shared tool label; named by the smallest label, else the
    smallest family id."""

    def keys(doc: dict[str, Any]) -> set[str]:
        route = "/".join(doc["route"][k] for k in ("workspace", "region", "collection"))
        code = hashlib.sha256(f"route\x00{route}".encode()).hexdigest()[:8]
        out = {f"fn:{t['name']}_{code}" for t in doc["tools"]}
        if "tool_cluster" in doc:
            out.add(f"label:{doc['tool_cluster']}")
        out |= {f"label:{t['cluster']}" for t in doc["tools"] if "cluster" in t}
        return out

    ids = [d["id"] for d in docs]
    key_sets = {d["id"]: keys(d) for d in docs}
    seen: set[str] = set()
    out: dict[str, str] = {}
    for start in ids:
        if start in seen:
            continue
        component, queue = [], deque([start])
        seen.add(start)
        while queue:
            cur = queue.popleft()
            component.append(cur)
            for other in ids:
                if other not in seen and key_sets[cur] & key_sets[other]:
                    seen.add(other)
                    queue.append(other)
        labels = sorted(k[6:] for c in component for k in key_sets[c] if k.startswith("label:"))
        name = labels[0] if labels else min(component)
        out.update(dict.fromkeys(component, name))
    return out


def _clusters(docs: list[dict[str, Any]]) -> dict[str, str]:
    return tool_clusters(
        [(family(d, f"families/{d['id']}.yaml"), f"families/{d['id']}.yaml") for d in docs]
    )


def test_without_tool_labels_each_family_is_its_own_cluster() -> None:
    docs = [_doc(f) for f in ROUTES]
    assert _clusters(docs) == {f: f for f in ROUTES} == _reference(docs)


def test_a_shared_tool_label_joins_families_and_names_the_cluster() -> None:
    docs = [_doc(f) for f in ROUTES]
    docs[0]["tools"][0]["cluster"] = "casebook"  # alpha's search tool
    docs[2]["tools"][3]["cluster"] = "casebook"  # charlie's read tool
    docs[3]["tools"][1]["cluster"] = "directory"  # delta alone: a label of its own
    want = {
        "alpha": "casebook",
        "bravo": "bravo",
        "charlie": "casebook",
        "delta": "directory",
        "echo": "echo",
    }
    assert _clusters(docs) == want == _reference(docs)
    # the order of the families does not matter
    for perm in itertools.islice(itertools.permutations(docs), 0, 24, 5):
        assert _clusters(list(perm)) == want


def test_tool_and_family_labels_merge_transitively() -> None:
    docs = [_doc(f) for f in ROUTES]
    docs[0]["tools"][0]["cluster"] = "mail"
    docs[1]["tools"][2]["cluster"] = "mail"
    docs[1]["tool_cluster"] = "accounts"
    docs[4]["tool_cluster"] = "accounts"
    got = _clusters(docs)
    assert got == _reference(docs)
    assert got["alpha"] == got["bravo"] == got["echo"] == "accounts"  # sorted: accounts < mail
    assert got["charlie"] == "charlie" and got["delta"] == "delta"


def test_a_tool_label_naming_another_clusters_family_is_refused() -> None:
    docs = [_doc(f) for f in ROUTES]
    docs[4]["tools"][5]["cluster"] = "delta"  # echo's tool says delta (its own cluster)
    with pytest.raises(BadInput) as info:
        _clusters(docs)
    assert info.value.field == "tools[5].cluster"
    assert info.value.file == "families/echo.yaml" and info.value.exit_code == 2


@pytest.mark.parametrize("label", ["", None, "Not A Slug", 7, ["x"]])
def test_a_bad_tool_label_is_refused_naming_the_field(label: Any) -> None:
    doc = _doc("alpha")
    doc["tools"][1]["cluster"] = label
    with pytest.raises(BadInput) as info:
        family(doc, "families/alpha.yaml")
    assert str(info.value.file).startswith("families/alpha.yaml")
    assert "tools" in str(info.value.field) and "cluster" in str(info.value.field)


def test_a_family_without_tool_labels_dumps_as_before() -> None:
    doc = _doc("alpha")
    plain = family(doc).model_dump(mode="json")
    assert all("cluster" not in t for t in plain["tools"])
    doc["tools"][0]["cluster"] = "casebook"
    labelled = family(doc).model_dump(mode="json")
    assert labelled["tools"][0]["cluster"] == "casebook"


def test_a_loaded_study_gives_each_task_its_tool_cluster(tmp_path: Path) -> None:
    docs = [_doc(f) for f in ROUTES]
    docs[1]["tools"][0]["cluster"] = "ledger"
    docs[3]["tools"][4]["cluster"] = "ledger"
    (tmp_path / "families").mkdir()
    for d in docs:
        (tmp_path / "families" / f"{d['id']}.yaml").write_text(as_yaml(d))
    spec = {
        "name": "kit",
        "kind": "toolbottleneck",
        "families": [f"families/{d['id']}.yaml" for d in docs],
        "seeds": [0, 3],
    }
    (tmp_path / "experiment.yaml").write_text(yaml.safe_dump(spec))
    experiment = load_experiment(folder_reader(tmp_path), "kit")
    want = _reference(docs)
    assert {t.id: t.cluster for t in experiment.tasks} == {
        f"{fid}-s{seed}": want[fid] for fid in ROUTES for seed in (0, 3)
    }
    assert want["bravo"] == want["delta"] == "ledger"
