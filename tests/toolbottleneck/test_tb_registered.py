"""A ToolBottleneckBench study through the registry (issue 19): register, run, records.

A small study (two families of three-source chains with the small sizes, one seed)
registered in a fresh workspace: the registration's digest covers every compiled
variant, a bad registration is refused naming its field with nothing written, the run
plays every unit and each record carries the nine obligations, the failure record and
the variant's digest; registrations and records that do not use a study digest as
before.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import yaml

from prereg.core.errors import IntegrityError
from prereg.core.workspace import Workspace
from prereg.experiments.loader import folder_reader, load_experiment
from prereg.experiments.toolbottleneck.cells import POLICIES, PolicyName
from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.experiments.toolbottleneck.verify import OBLIGATIONS
from prereg.registry.factorial import expand
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from prereg.reports.toolbottleneck.registered import Cells, per_configuration
from prereg.runners.exchange.rows import from_row, to_row
from prereg.runners.prepare import prepare
from prereg.runners.record import RunRecord
from prereg.runners.store.chain import content
from prereg.runners.store.choose import open_store
from prereg.runners.toolbottleneck import study as toolbottleneck_study
from prereg.runners.toolbottleneck.host import PROFILES
from prereg.runners.toolbottleneck.study import StudyUnits
from tests.conftest import tree_digest
from tests.toolbottleneck.helpers import as_yaml, family, family_doc

STUDY = "tiny-study"


def _families() -> list[dict[str, Any]]:
    first = family_doc(action=True)
    second = family_doc(action=False)
    second["id"], second["intent"] = "test-review", "review"
    return [first, second]


def _registration(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": "tiny",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "factorial": {
            "base": {"surface": "variants", "toolbottleneck": {"policy": "sim-truncating"}},
            "factors": [
                {"id": "menu", "sets": "toolbottleneck.menu", "levels": [8, 12]},
                {"id": "workflow", "sets": "toolbottleneck.workflow", "levels": ["low", "high"]},
            ],
            "extra_arms": [{"id": "fixed", "toolbottleneck": {"menu": 12, "menu_mode": "fixed"}}],
        },
        "contrasts": [{"id": "v", "effect": ["menu"], "unit": "cluster", "draws": 200}],
        "host": {"driver": "local"},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "design": {"repeats": 2, "seed": 3},
        "primary": {"test": "paired_bootstrap", "contrast": "v", "unit": "cluster"},
    }
    doc.update(over)
    return doc


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    names = []
    for doc in _families():
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    entry = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": [0]}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _write(ws: Path, doc: dict[str, Any], name: str = "reg.yaml") -> Path:
    path = ws / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _frozen_document(ws: Path, reg_id: str) -> dict[str, Any]:
    frozen = json.loads((ws / "registry" / "frozen" / f"{reg_id}.json").read_text())
    document: dict[str, Any] = frozen["document"]
    return document


def test_the_digest_covers_every_compiled_variant(study_ws: Path, cli) -> None:
    result = cli("-w", study_ws, "register", _write(study_ws, _registration()), "--json")
    assert result.code == 0, result.stderr
    document = _frozen_document(study_ws, "tiny")
    variants = document["experiment"]["variants"]
    arms = [a["id"] for a in document["registration"]["arms"]]
    assert len(arms) == 5  # 2 x 2 cells and the extra arm
    tasks = ["test-escalation-s0", "test-review-s0"]
    assert sorted(variants) == sorted(f"{a}/{t}" for a in arms for t in tasks)
    # each digest is the compiler's own for the arm's cell (compiled here independently)
    fam = family(_families()[1])
    cell = Cell("capacity", 12, "high", 0, "raw")
    assert variants["menu-12--workflow-high/test-review-s0"] == compile_cell(fam, cell).digest
    assert (
        variants["fixed/test-review-s0"]
        == compile_cell(fam, Cell("capacity", 12, "low", 0, "raw")).digest
    )
    # one changed byte of a family is another registration digest
    first = result.json()["digest"]
    path = study_ws / "experiments" / STUDY / "families" / "test-review.yaml"
    path.write_text(path.read_text().replace("Dana Okafor", "Dana Okafor "))
    again = cli("-w", study_ws, "register", _write(study_ws, _registration(id="tiny-2")), "--json")
    assert again.code == 0, again.stderr
    assert again.json()["digest"] != first


def _without_cells(doc: dict[str, Any]) -> None:
    """Plain arms on a study: no cell, so no variant to run."""
    doc.pop("factorial")
    doc.pop("contrasts")
    doc["arms"] = [{"id": "a", "surface": "variants"}, {"id": "b", "surface": "variants"}]
    doc["primary"] = {"test": "mcnemar_exact"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_without_cells, "arms[0].toolbottleneck"),
        (
            lambda d: d["factorial"]["factors"][1].update(levels=["low", "extreme"]),
            "workflow",
        ),
        (
            lambda d: d.update(
                repairs=[
                    {
                        "id": "r",
                        "pressure": "V",
                        "repaired": {"stressed": "nope", "unstressed": "fixed"},
                        "control": {"stressed": "fixed", "unstressed": "fixed"},
                        "switches": [{"id": "k", "stressed": "fixed", "unstressed": "fixed"}],
                    }
                ]
            ),
            "repairs[0].repaired.stressed",
        ),
        (
            lambda d: d["factorial"]["extra_arms"].append({"id": "fixed"}),
            "factorial.extra_arms[1].id",
        ),
    ],
)
def test_a_bad_study_registration_is_refused_naming_the_field(
    study_ws: Path, cli, change: Any, field: str
) -> None:
    doc = _registration()
    change(doc)
    before = tree_digest(study_ws / "registry")
    result = cli("-w", study_ws, "register", _write(study_ws, doc), "--json")
    assert result.code == 2, result.stdout
    assert field in json.loads(result.stdout)["field"]
    assert tree_digest(study_ws / "registry") == before  # nothing written


def test_a_study_cell_on_another_experiment_is_refused(ws: Path, cli) -> None:
    draft = yaml.safe_load((ws / "drafts" / "music-library-pilot.yaml").read_text())
    draft["arms"][0]["toolbottleneck"] = {"menu": 8}
    result = cli("-w", ws, "register", _write(ws, draft), "--json")
    assert result.code == 2
    assert json.loads(result.stdout)["field"] == "arms[0].toolbottleneck"


def test_a_study_experiment_with_a_missing_family_is_refused(study_ws: Path, cli) -> None:
    entry = study_ws / "experiments" / STUDY / "experiment.yaml"
    doc = yaml.safe_load(entry.read_text())
    doc["families"].append("families/absent.yaml")
    entry.write_text(yaml.safe_dump(doc))
    result = cli("-w", study_ws, "register", _write(study_ws, _registration()), "--json")
    assert result.code == 2
    assert json.loads(result.stdout)["field"] == "families[2]"


def test_every_unit_runs_and_its_record_carries_the_failure_record(study_ws: Path, cli) -> None:
    assert cli("-w", study_ws, "register", _write(study_ws, _registration())).code == 0
    result = cli("-w", study_ws, "run", "tiny", "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["planned"] == 5 * 2 * 2 == summary["completed"]
    workspace = Workspace(study_ws.resolve())
    store = open_store(workspace.runs)
    try:
        records = list(store.records())
    finally:
        store.close()
    document = _frozen_document(study_ws, "tiny")
    for r in records:
        assert r.obligations is not None and set(r.obligations) == set(OBLIGATIONS)
        # the seed's conjunction: success is every obligation met, else the first unmet one
        met = [r.obligations[o] is True for o in OBLIGATIONS]
        assert r.success == all(met)
        if not r.success:
            first = next(o for o in OBLIGATIONS if r.obligations[o] is not True)
            assert r.first_unmet_obligation == first and r.terminal_flag is not None
        assert r.variant_digest == document["experiment"]["variants"][f"{r.arm}/{r.task_id}"]
        assert r.latency_ms is None and r.cost_usd is None  # not measured: null
        assert r.model_requested == "sim-truncating" and r.evidence_class == "local"
    # resumed: nothing runs twice
    again = cli("-w", study_ws, "run", "tiny", "--json").json()
    assert again["completed"] == 0 and again["skipped_existing"] == 20


def test_registered_absolute_limits_bind_every_unit(study_ws: Path, cli) -> None:
    """A call limit of 1 (below every certified minimum) stops even the exact policy."""
    doc = _registration(budgets={"call_limit": 1, "turn_limit": 3})
    doc["factorial"]["base"]["toolbottleneck"]["policy"] = "sim-exact"
    assert cli("-w", study_ws, "register", _write(study_ws, doc)).code == 0
    assert cli("-w", study_ws, "run", "tiny", "--json").code == 0
    store = open_store(Workspace(study_ws.resolve()).runs)
    try:
        records = list(store.records())
    finally:
        store.close()
    assert len(records) == 20
    assert all(not r.success and r.calls <= 1 for r in records)
    assert {r.terminal_flag for r in records} <= {"call_limit", "infeasible"}


def test_discovery_and_frontier_cells_run_through_the_registry(study_ws: Path, cli) -> None:
    """A Discovery arm's episode without its required tools in the shortlist stops before
    any request (availability unmet, flag infeasible: success is A x S); the exact policy
    passes every frontier cell."""
    arms = [
        {"id": f"{r}-{n}", "surface": "variants", "toolbottleneck": {"catalog": n, "retriever": r}}
        for r in ("flat-lexical", "connector-first")
        for n in (16, 48)
    ] + [{"id": "h2", "surface": "variants", "toolbottleneck": {"menu": 8, "handoffs": 2}}]
    for arm in arms:
        arm["toolbottleneck"]["policy"] = "sim-exact"
    doc = _registration(arms=arms, primary={"test": "mcnemar_exact"}, design={"repeats": 1})
    doc.pop("factorial")
    doc.pop("contrasts")
    assert cli("-w", study_ws, "register", _write(study_ws, doc)).code == 0, "register"
    assert cli("-w", study_ws, "run", "tiny", "--json").code == 0
    store = open_store(Workspace(study_ws.resolve()).runs)
    try:
        records = list(store.records())
    finally:
        store.close()
    assert len(records) == 5 * 2
    for r in records:
        assert r.obligations is not None
        if r.obligations["availability"] is False:
            assert (r.calls, r.first_unmet_obligation, r.terminal_flag) == (
                0,
                "availability",
                "infeasible",
            )
        else:
            assert r.success, (r.arm, r.first_unmet_obligation)  # the exact policy
    assert all(r.success for r in records if r.arm == "h2")
    assert any(r.obligations and r.obligations["availability"] is False for r in records)


def test_a_variant_that_is_not_the_registered_one_is_refused(study_ws: Path, cli) -> None:
    assert cli("-w", study_ws, "register", _write(study_ws, _registration())).code == 0
    _, _, plan, experiment = prepare(Workspace(study_ws.resolve()), "tiny")
    key = next(iter(plan.variants))
    forged = dict(plan.variants) | {key: "sha256:" + "0" * 64}
    units = StudyUnits(replace(plan, variants=forged), experiment)
    arm, task = key.split("/")
    with pytest.raises(IntegrityError, match="register anew"):
        units.sandbox(arm, task)


def test_a_compiler_that_compiles_otherwise_is_refused_before_any_unit_runs(
    study_ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Variants compiled differently from the registered ones (here: under another seed,
    as a changed compiler would): exit 3, and not one record is written."""
    assert cli("-w", study_ws, "register", _write(study_ws, _registration())).code == 0
    real = toolbottleneck_study.build_sandbox

    def other(family: Any, cell: Any, *, seed: int = 0) -> Any:
        return real(family, cell, seed=seed + 1)

    monkeypatch.setattr(toolbottleneck_study, "build_sandbox", other)
    result = cli("-w", study_ws, "run", "tiny", "--json")
    assert result.code == 3 and "register anew" in result.stdout + result.stderr
    store = open_store(Workspace(study_ws.resolve()).runs)
    try:
        assert list(store.records()) == []
    finally:
        store.close()


def test_registrations_and_records_without_a_study_digest_as_before(ws: Path) -> None:
    draft = yaml.safe_load((ws / "drafts" / "music-library-factorial.yaml").read_text())
    reg = Registration.model_validate(draft)
    document = build_document(reg, {"experiment.yaml": b"x"})
    assert "variants" not in document["experiment"]
    assert "repairs" not in document["registration"]
    assert "extra_arms" not in document["registration"]["factorial"]
    assert all("toolbottleneck" not in arm for arm in document["registration"]["arms"])
    record = _plain_record()
    assert "obligations" not in content(record) and "variant_digest" not in content(record)


def _plain_record(**over: Any) -> RunRecord:
    data: dict[str, Any] = {
        "record_id": "r" * 16,
        "registration_id": "x",
        "registration_digest": "sha256:" + "a" * 64,
        "experiment": "e",
        "arm": "a",
        "surface": "s",
        "task_id": "t",
        "intent": "i",
        "cluster": "c",
        "split": "dev",
        "polarity": "positive",
        "repeat": 0,
        "rotation": 0,
        "driver": "local",
        "evidence_class": "local",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
        "success": True,
    }
    data.update(over)
    return RunRecord.model_validate(data)


def test_a_study_record_names_one_of_the_nine_obligations() -> None:
    verdicts = dict.fromkeys(OBLIGATIONS, True) | {"evidence": False}
    failed = {"success": False, "terminal_flag": "wrong_conclusion"}
    ok = _plain_record(**failed, first_unmet_obligation="evidence", obligations=verdicts)
    assert ok.obligations == verdicts
    with pytest.raises(ValueError, match="unknown obligation"):  # a study one, corpus record
        _plain_record(**failed, first_unmet_obligation="evidence")
    with pytest.raises(ValueError, match="nine obligations"):  # eight are not the nine
        _plain_record(
            **failed,
            first_unmet_obligation="evidence",
            obligations={k: v for k, v in verdicts.items() if k != "contract"},
        )


def test_extra_arms_are_the_base_with_their_fields_merged() -> None:
    arms = expand(
        {
            "base": {"surface": "variants", "toolbottleneck": {"menu_mode": "routed", "menu": 8}},
            "factors": [{"id": "w", "sets": "toolbottleneck.workflow", "levels": ["low", "high"]}],
            "extra_arms": [{"id": "x", "toolbottleneck": {"menu_mode": "fixed"}}],
        }
    )
    assert [a["id"] for a in arms] == ["w-low", "w-high", "x"]
    assert arms[2] == {
        "id": "x",
        "surface": "variants",
        "toolbottleneck": {"menu_mode": "fixed", "menu": 8},
    }
    assert arms[0]["toolbottleneck"] == {"menu_mode": "routed", "menu": 8, "workflow": "low"}


def test_the_bundled_study_experiment_loads_its_families_as_tasks() -> None:
    root = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "toolbottleneck"
    experiment = load_experiment(folder_reader(root), "toolbottleneck")
    assert experiment.toolbottleneck is not None
    tasks = experiment.tasks_in_split("dev")
    # the counts derive from the file itself (issue 42 grew the bundled families)
    spec = yaml.safe_load((root / "experiment.yaml").read_text())
    n_families, n_seeds = len(spec["families"]), len(spec["seeds"])
    assert n_families >= 12
    assert len(tasks) == n_families * n_seeds and {t.cluster for t in tasks} == {
        f.family.id for f in experiment.toolbottleneck.families
    }
    assert experiment.files[0] == "experiment.yaml" and len(experiment.files) == 1 + n_families


def test_a_study_record_survives_the_csv_export_unchanged() -> None:
    verdicts = dict.fromkeys(OBLIGATIONS, True) | {"conclusion": False, "budgets": None}
    record = _plain_record(
        success=False,
        terminal_flag="wrong_conclusion",
        first_unmet_obligation="conclusion",
        obligations=verdicts,
        variant_digest="sha256:" + "b" * 64,
    )
    back = RunRecord.model_validate(from_row(to_row(record)))
    assert back == record and content(back) == content(record)
    plain = _plain_record()  # a corpus record: the new columns are empty, nothing added
    row = to_row(plain)
    assert row["obligations"] == row["variant_digest"] == ""
    assert content(RunRecord.model_validate(from_row(row))) == content(plain)


def test_the_policies_a_cell_may_name_are_the_simulated_profiles() -> None:
    """The schema's light table of policy names and the host's profiles agree."""
    assert set(get_args(PolicyName)) == set(POLICIES) == set(PROFILES)


def test_a_contrast_by_configuration_by_hand() -> None:
    """Two families (two tasks in f1, one in f2), two configurations: each configuration's
    contrast is twice its own arms' weighted family-equal means, and their mean is the
    contrast; weights that cross configurations are not separable."""
    values = np.array(
        [
            [1.0, 0.0, 1.0, 1.0],  # f1, task 1: arms a1 b1 (config 1), a2 b2 (config 2)
            [1.0, 1.0, 1.0, 0.0],  # f1, task 2
            [0.5, 0.0, 1.0, 1.0],  # f2
        ]
    )
    cells = Cells(
        ["t1", "t2", "t3"], ["f1", "f1", "f2"], ["i", "i", "j"], ["a1", "b1", "a2", "b2"], values
    )
    config = {"a1": "one", "b1": "one", "a2": "two", "b2": "two"}
    weights = {"a1": 0.5, "b1": -0.5, "a2": 0.5, "b2": -0.5}
    # family means: f1 = (1, .5, 1, .5), f2 = (.5, 0, 1, 1); over families (.75, .25, 1, .75)
    got = per_configuration(cells, weights, config)
    assert got == pytest.approx({"one": 2 * 0.5 * (0.75 - 0.25), "two": 2 * 0.5 * (1 - 0.75)})
    assert per_configuration(cells, {"a1": 1.0, "a2": -1.0}, config) is None
