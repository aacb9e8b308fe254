"""``prereg corpus lint`` (issue 41, item 5): every planted finding is found with its file,
task or tool, rule and matched text; near misses and the bundled experiments are clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from prereg.experiments import load_experiment
from prereg.experiments.corpus_lint import lint, split_waived
from prereg.experiments.loader import folder_reader
from tests.corpus_planting import CANARY, PLANTED_TASKS, PLANTED_TOOLS, plant

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


def _load(folder: Path):
    return load_experiment(folder_reader(folder), folder.name)


def test_every_planted_prompt_is_found_with_its_rule(tmp_path: Path) -> None:
    experiment = _load(plant(tmp_path))
    findings = lint(experiment).findings
    by_task = {}
    for f in findings:
        if f.task is not None:
            by_task.setdefault(f.task, set()).add(f.rule)
            if f.other_task is not None:
                by_task.setdefault(f.other_task, set()).add(f.rule)
    for task_id, _, prompt, rule in PLANTED_TASKS:
        assert rule in by_task.get(task_id, set()), (task_id, prompt)
        for f in findings:
            if f.task == task_id and f.rule != "near-duplicate":
                assert f.file == "corpus.yaml" and f.field == "prompt"
                assert f.matched  # the matched text is named
    # only the planted tasks and the bundled prompts they copy are flagged
    assert set(by_task) == {t[0] for t in PLANTED_TASKS} | {"t003", "t005"}


def test_near_duplicates_name_both_tasks_splits_and_intents(tmp_path: Path) -> None:
    experiment = _load(plant(tmp_path))
    pairs = {
        frozenset((f.task, f.other_task)): f
        for f in lint(experiment).findings
        if f.rule == "near-duplicate"
    }
    assert set(pairs) == {frozenset(("t003", "p01")), frozenset(("t005", "p02"))}
    for pair, f in pairs.items():
        a, b = (experiment.task(t) for t in sorted(pair))
        across = experiment.split_of(a) != experiment.split_of(b)
        assert ("across splits" in f.message) is across
        assert ("across intents" in f.message) is (a.intent != b.intent)
        assert f.similarity is not None and f.similarity >= 0.55
    # p02 copies t005 into another intent
    assert "across intents" in pairs[frozenset(("t005", "p02"))].message


def test_the_registered_threshold_applies(tmp_path: Path) -> None:
    import yaml

    folder = plant(tmp_path)
    spec = yaml.safe_load((folder / "experiment.yaml").read_text())
    spec["corpus_lint"]["near_duplicate"] = 0.95
    (folder / "experiment.yaml").write_text(yaml.safe_dump(spec))
    rules = {f.rule for f in lint(_load(folder)).findings}
    assert "near-duplicate" not in rules  # the planted pairs sit at 0.77 and 0.89


def test_every_planted_tool_text_is_found(tmp_path: Path) -> None:
    findings = lint(_load(plant(tmp_path))).findings
    on_tools = {(f.tool, f.rule) for f in findings if f.tool is not None}
    for key, _, _, rule in PLANTED_TOOLS:
        assert (key, rule) in on_tools, (key, rule)
    for f in findings:
        if f.tool is not None:
            assert f.file == "surfaces/semantic.yaml"
    canary = [f for f in findings if f.rule == "canary"]
    assert {f.matched for f in canary} == {CANARY}
    # the untouched baseline surface (same integration name) is clean
    assert not [f for f in findings if (f.tool or "").startswith("baseline")]


def test_near_misses_are_clean(tmp_path: Path) -> None:
    result = lint(_load(plant(tmp_path, clean=True)))
    assert result.findings == []


@pytest.mark.parametrize("name", ["music-library", "podcast-selection", "toolbottleneck"])
def test_bundled_experiments_are_clean(name: str) -> None:
    """Documented in docs/experiments.md, "Corpus lint": no finding in any bundled
    experiment; a study's generated prompts skip the near-duplicate rule."""
    result = lint(load_experiment(folder_reader(BUNDLED / name), name))
    assert result.findings == []
    assert ("near-duplicate" in result.skipped) is (name == "toolbottleneck")


def test_waivers_match_rule_family_task_and_tool(tmp_path: Path) -> None:
    findings = lint(_load(plant(tmp_path))).findings
    waivers = [
        {"rule": "realism", "reason": "r"},
        {"rule": "near-duplicate", "task": "p01", "reason": "r"},
        {"rule": "guardrail.prefer", "tool": "semantic", "reason": "r"},
        {"rule": "brand", "task": "nope", "reason": "unused"},
    ]
    open_, waived, unused = split_waived(findings, waivers)
    assert {f.rule for f, _ in waived} == {
        "realism.attachment",
        "realism.screenshot",
        "realism.image",
        "realism.this-file",
        "realism.above",
        "realism.earlier-conversation",
        "near-duplicate",
        "guardrail.prefer",
    }
    assert {f.task for f, _ in waived if f.rule == "near-duplicate"} == {"t003"}
    assert [w["reason"] for w in unused] == ["unused"]
    assert len(open_) + len(waived) == len(findings)


def test_cli_lists_findings_and_strict_exits_1(ws: Path, cli) -> None:
    plant(ws / "experiments")
    out = cli("-w", ws, "corpus", "lint", "planted", "--json")
    assert out.code == 0, out.stderr
    data = out.json()
    assert {f["rule"] for f in data["findings"]} >= {"brand", "canary", "guardrail.hidden"}
    assert data["settings"]["near_duplicate"] == 0.55
    assert cli("-w", ws, "corpus", "lint", "planted", "--strict", "--json").code == 1
    text = cli("-w", ws, "corpus", "lint", "planted")
    assert "realism.screenshot" in text.stdout and "p04" in text.stdout
    assert cli("-w", ws, "corpus", "lint", "music-library", "--strict").code == 0


def test_cli_bad_input_names_file_and_field(ws: Path, cli) -> None:
    import yaml

    folder = plant(ws / "experiments")
    spec = yaml.safe_load((folder / "experiment.yaml").read_text())
    spec["corpus_lint"]["near_duplicate"] = 1.5
    (folder / "experiment.yaml").write_text(yaml.safe_dump(spec))
    out = cli("-w", ws, "corpus", "lint", "planted", "--json")
    assert out.code == 2
    err = out.json()
    assert err["file"].startswith("experiment.yaml") and "near_duplicate" in err["field"]
