"""``holdout:`` in a registered study (issue 42, item 5; reading H6): the held-out
families are played by the holdout arms only and the other families by the other arms
only; the offline study's rules refuse a bad list (exit 2 naming the file and the field);
a registration without it digests exactly as before the field existed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from tests.toolbottleneck.helpers import BUNDLED

STUDY = "holdout-split"
CORE, HELD = "overdue-case-escalation", "invoice-payment-approval"
#: a copy of the core family under another id: the same intent as the core family
TWIN = "overdue-case-escalation-twin"

#: a study registration with a holdout arm and no ``holdout``
REGISTRATION: dict[str, Any] = {
    "id": "holdout-digest",
    "title": "t",
    "hypothesis": "h",
    "falsification": "f",
    "experiment": "holdout-host",
    "kind": "exploratory",
    "split": "dev",
    "arms": [
        {"id": "core", "surface": "variants", "toolbottleneck": {"menu": 8}},
        {
            "id": "controller-2",
            "surface": "variants",
            "toolbottleneck": {"menu": 8, "controller": "public-handoff", "delivery": "native"},
        },
    ],
    "host": {"driver": "local"},
    "design": {"repeats": 1, "seed": 3},
    "primary": {"test": "mcnemar_exact"},
}
FILES = {"experiment.yaml": b"x"}
VARIANTS = {"core/a-s0": "sha256:" + "0" * 64}
#: the digest of REGISTRATION, computed by the code at commit 1d27a0c (before a
#: registration could carry ``holdout``)
DIGEST_BEFORE = "sha256:7c6877cea285e8bb36088e4079307cbf7a5185a71c5b81bd8c93a652d16195a0"


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES, VARIANTS))


def test_a_registration_without_holdout_digests_as_before() -> None:
    assert _digest(REGISTRATION) == DIGEST_BEFORE
    document = build_document(Registration.model_validate(REGISTRATION), FILES, VARIANTS)
    assert "holdout" not in document["registration"]
    held = {**REGISTRATION, "holdout": [HELD]}
    assert _digest(held) != DIGEST_BEFORE  # which families are held out decides a result
    reloaded = Registration.model_validate(
        build_document(Registration.model_validate(held), FILES, VARIANTS)["registration"]
    )
    assert reloaded.holdout == [HELD]


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    for name in (CORE, HELD):
        shutil.copy(BUNDLED / f"{name}.yaml", folder / "families" / f"{name}.yaml")
    twin = (BUNDLED / f"{CORE}.yaml").read_text().replace(f"id: {CORE}\n", f"id: {TWIN}\n", 1)
    (folder / "families" / f"{TWIN}.yaml").write_text(twin)
    entry = {
        "name": STUDY,
        "kind": "toolbottleneck",
        "families": [f"families/{n}.yaml" for n in (CORE, HELD, TWIN)],
        "seeds": [0],
    }
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _document(holdout: Any, *, holdout_arm: bool = True) -> dict[str, Any]:
    arms = [
        {"id": "core-8", "surface": "variants", "toolbottleneck": {"menu": 8}},
        {"id": "core-12", "surface": "variants", "toolbottleneck": {"menu": 12}},
        {
            "id": "controller-2",
            "surface": "variants",
            "toolbottleneck": {"menu": 8, "controller": "public-handoff", "delivery": "native"},
        },
        {
            "id": "model-2",
            "surface": "variants",
            "toolbottleneck": {"menu": 8, "delivery": "native"},
        },
    ]
    doc = {
        **REGISTRATION,
        "id": "held",
        "experiment": STUDY,
        "arms": arms if holdout_arm else arms[:2],
        "primary": {"test": "mcnemar_exact", "compare": ["core-8", "core-12"]},
    }
    if holdout is not None:
        doc["holdout"] = holdout
    return doc


def test_held_out_families_are_played_by_the_holdout_arms_only(study_ws: Path, cli: Any) -> None:
    path = study_ws / "held.yaml"
    path.write_text(yaml.safe_dump(_document([HELD]), sort_keys=False))
    result = cli("-w", study_ws, "register", path, "--json")
    assert result.code == 0, result.stderr
    result = cli("-w", study_ws, "run", "held", "--json")
    assert result.code == 0, result.stderr
    out = study_ws / "records.jsonl"
    assert cli("-w", study_ws, "export", "held", "--out", out).code == 0
    played = {(r["arm"], r["task_id"]) for r in map(json.loads, out.read_text().splitlines())}
    # by hand: one task a family (seed 0); the core families are CORE and TWIN
    core_tasks = {f"{CORE}-s0", f"{TWIN}-s0"}
    held_tasks = {f"{HELD}-s0"}
    want = {(a, t) for a in ("core-8", "core-12") for t in core_tasks} | {
        (a, t) for a in ("controller-2", "model-2") for t in held_tasks
    }
    assert played == want
    # the report plans each arm's own units: nothing reads as missing
    result = cli("-w", study_ws, "analyse", "held", "--json")
    assert result.code == 0, result.stdout[-2000:]
    report = result.json()
    planned = {a["id"]: (a["planned_runs"], a["runs_ok"]) for a in report["arms"]}
    assert planned == {a: (2, 2) if a.startswith("core") else (1, 1) for a in planned}
    table = next(
        t
        for t in report["toolbottleneck"]["tables"]
        if t["title"] == "Structural holdout arms (Table 10)"
    )
    assert sorted((row[0], row[3]) for row in table["rows"]) == [
        ("Controller", "1"),
        ("Model", "1"),
    ]


@pytest.mark.parametrize(
    ("holdout", "holdout_arm", "field"),
    [
        (["no-such-family"], True, "holdout[0]"),
        ([HELD, HELD], True, "holdout"),
        ([HELD], False, "holdout"),
        ([CORE, HELD, TWIN], True, "holdout"),
        ([CORE, HELD], True, "holdout[0]"),  # TWIN, a core family, shares CORE's intent
        ([], True, "holdout"),
    ],
)
def test_a_bad_holdout_exits_2_naming_the_file_and_field(
    study_ws: Path, cli: Any, holdout: list[str], holdout_arm: bool, field: str
) -> None:
    path = study_ws / "bad.yaml"
    path.write_text(yaml.safe_dump(_document(holdout, holdout_arm=holdout_arm), sort_keys=False))
    result = cli("-w", study_ws, "register", path, "--json")
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()
    assert error["field"] == field and Path(error["file"].split(":")[0]).name == "bad.yaml"
    assert not (study_ws / "registry" / "held").exists()
