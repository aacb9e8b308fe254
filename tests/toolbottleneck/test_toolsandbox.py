"""``prereg study toolsandbox``: the ToolSandbox check (seed 001, appendix K) over summaries
written in ToolSandbox's exact format (tests/toolbottleneck/toolsandbox_format.py cites
the source lines). The contrasts and intervals are recomputed here with numpy and scipy,
independently of prereg's reader and of :func:`prereg.stats.contrast_bootstrap`."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from prereg.core.errors import BadInput
from prereg.reports.toolbottleneck.toolsandbox import markdown, toolsandbox_check
from prereg.runners.exchange.toolsandbox import read_result_summaries
from tests.conftest import CliResult
from tests.toolbottleneck.toolsandbox_format import (
    MENU_SUFFIX,
    document,
    played,
    scenarios,
    write,
)

BASES = 12
DROPPED = ("scenario_03_send_message", "10")
RAISED = ("scenario_05_send_message", "all")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs (two agents) of 12 base scenarios; run A lacks one 10-tool scenario and
    saves one all-tools scenario as raised."""
    root = tmp_path_factory.mktemp("toolsandbox")
    rows_a = scenarios(BASES, seed=1, drop=(DROPPED,), raise_at=(RAISED,))
    rows_b = scenarios(BASES, seed=2)
    a = write(root / "agent_a" / "result_summary.json", document(rows_a))
    b = write(root / "agent_b" / "result_summary.json", document(rows_b, git_sha=None))
    tiny = write(root / "tiny" / "result_summary.json", document(scenarios(3, seed=3)))
    return {"root": root, "a": a, "b": b, "rows_a": rows_a, "rows_b": rows_b, "tiny": tiny}


# ---- the independent reference ---------------------------------------------------------


def _base_and_menu(row: dict[str, Any]) -> tuple[str, str] | None:
    if any(c.endswith("_SCRAMBLED") for c in row["categories"]):
        return None
    for menu, (suffix, category) in MENU_SUFFIX.items():
        if category in row["categories"]:
            return (row["name"][: len(row["name"]) - len(suffix)], menu)
    raise AssertionError(row)


def reference(
    files: list[list[dict[str, Any]]], menu: str, outcome: str, level: float = 0.95
) -> tuple[float, float, float, int]:
    """(estimate, low, high, scenarios): per base scenario the mean over files of
    (menu - base); the estimate their mean; the interval estimate -+ t_{U-1} sd / sqrt(U),
    cut to [-1, 1] for a score, to the observed range's span for turns."""
    diffs: dict[str, list[float]] = defaultdict(list)
    used: list[float] = []
    for rows in files:
        cells: dict[tuple[str, str], float] = {}
        for row in rows:
            key = _base_and_menu(row)
            if key is not None:
                cells[key] = float(row[outcome])
        for (base, m), value in cells.items():
            if m == menu and (base, "none") in cells:
                diffs[base].append(value - cells[(base, "none")])
                used += [value, cells[(base, "none")]]
    d = np.array([np.mean(v) for v in diffs.values()])
    u = d.size
    est = float(d.mean())
    half = float(sps.t.ppf((1 + level) / 2, u - 1) * d.std(ddof=1) / np.sqrt(u))
    lo, hi = est - half, est + half
    span = (1.0, 1.0) if outcome == "similarity" else (max(used) - min(used),) * 2
    return est, max(lo, -span[0]), min(hi, span[1]), u


# ---- the contrasts ---------------------------------------------------------------------


def test_contrasts_match_an_independent_recomputation(runs: dict[str, Any]) -> None:
    check = toolsandbox_check(read_result_summaries([runs["a"], runs["b"]]))
    pooled = {(c.menu, c.outcome): c for c in check.contrasts if c.scope == "all files"}
    assert len(pooled) == 6  # 3 menus x (similarity, turn count); no success without a threshold
    for (menu, outcome), c in pooled.items():
        est, lo, hi, units = reference([runs["rows_a"], runs["rows_b"]], menu, outcome)
        assert c.scenarios == units == BASES
        assert c.estimate == pytest.approx(est, abs=1e-12)
        assert c.interval is not None and c.interval.reason is None
        assert c.interval.low == pytest.approx(lo, abs=1e-9)
        assert c.interval.high == pytest.approx(hi, abs=1e-9)
        assert c.menu_mean is not None and c.base_mean is not None
        assert c.menu_mean - c.base_mean == pytest.approx(est, abs=1e-12)
    # the 10-tool contrast pairs 23 scenario-runs: run A lacks one
    assert pooled[("10", "similarity")].pairs == 2 * BASES - 1
    assert pooled[("3", "similarity")].pairs == 2 * BASES
    # the per-run contrasts: run A alone lacks scenario_03 at 10 tools (11 scenarios)
    only_a = {(c.menu, c.outcome): c for c in check.contrasts if c.scope == str(runs["a"])}
    est, lo, hi, units = reference([runs["rows_a"]], "10", "turn_count")
    assert only_a[("10", "turn_count")].scenarios == units == BASES - 1
    assert only_a[("10", "turn_count")].estimate == pytest.approx(est, abs=1e-12)
    # the raised scenario counts as ToolSandbox scores it: similarity 0, 30 turns
    est, _, _, _ = reference([runs["rows_a"]], "all", "similarity")
    assert only_a[("all", "similarity")].estimate == pytest.approx(est, abs=1e-12)


def test_every_printed_interval_holds_its_estimate_inside_its_support(
    runs: dict[str, Any],
) -> None:
    check = toolsandbox_check(read_result_summaries([runs["a"], runs["b"]]), success_at=0.7)
    shown = [c for c in check.contrasts if c.interval is not None and c.interval.low is not None]
    assert len(shown) >= 9
    for c in shown:
        assert c.interval is not None and c.interval.low is not None
        assert c.interval.high is not None and c.estimate is not None
        assert c.interval.low <= c.estimate <= c.interval.high
        assert c.interval.low < c.interval.high
        if c.outcome != "turn_count":
            assert -1.0 <= c.interval.low and c.interval.high <= 1.0


def test_a_registered_success_threshold_adds_the_success_contrast(runs: dict[str, Any]) -> None:
    check = toolsandbox_check(read_result_summaries([runs["a"], runs["b"]]), success_at=0.7)
    success = [c for c in check.contrasts if c.outcome == "success" and c.scope == "all files"]
    assert [c.menu for c in success] == ["3", "10", "all"]
    rows = [
        [{**r, "success": float(r["similarity"] >= 0.7)} for r in runs[k]]
        for k in ("rows_a", "rows_b")
    ]
    for c in success:
        est, lo, hi, _ = reference(rows, c.menu, "success")
        assert c.estimate == pytest.approx(est, abs=1e-12)
        if c.interval is not None and c.interval.low is not None:
            assert (c.interval.low, c.interval.high) == pytest.approx((lo, hi), abs=1e-9)


def test_unpaired_scenarios_are_listed_and_tokens_are_not_measured(runs: dict[str, Any]) -> None:
    check = toolsandbox_check(read_result_summaries([runs["a"], runs["b"]]))
    assert [(u.file, u.base, u.missing) for u in check.unpaired] == [
        (str(runs["a"]), DROPPED[0], ["10"])
    ]
    assert check.tokens.measured is False and check.tokens.estimate is None
    assert "no token counts" in check.tokens.reason
    assert check.evidence_class == "toolsandbox-import"
    a = check.files[0]
    assert (a.scenarios, a.scrambled, a.raised) == (4 * BASES - 1 + BASES, BASES, 1)
    assert a.by_menu == {"none": BASES, "3": BASES, "10": BASES - 1, "all": BASES}


def test_a_tiny_input_withholds_every_interval(runs: dict[str, Any]) -> None:
    check = toolsandbox_check(read_result_summaries([runs["tiny"]]))
    assert check.contrasts
    for c in check.contrasts:
        assert c.scenarios == 3 and c.estimate is not None
        assert c.interval is not None
        assert c.interval.low is None and c.interval.high is None
        assert c.interval.reason is not None and "too few scenarios (3 < 10)" in c.interval.reason
    text = markdown(check)
    assert text.count("too few scenarios (3 &lt; 10): no interval") == len(check.contrasts) + 1


def test_one_scenario_and_a_flat_difference(tmp_path: Path) -> None:
    one = [
        played("solo", ["SINGLE_TOOL_CALL", "NO_DISTRACTION_TOOLS"], 0.9, 0.0, 5),
        played(
            "solo_3_distraction_tools", ["SINGLE_TOOL_CALL", "THREE_DISTRACTION_TOOLS"], 0.6, 0.0, 7
        ),
    ]
    check = toolsandbox_check(read_result_summaries([write(tmp_path / "r.json", document(one))]))
    by = {(c.menu, c.outcome): c for c in check.contrasts}
    assert by[("3", "similarity")].estimate == pytest.approx(0.6 - 0.9)
    iv = by[("3", "similarity")].interval
    assert iv is not None and iv.low is None and "too few scenarios (1 < 10)" in str(iv.reason)
    assert by[("10", "similarity")].estimate is None and by[("10", "similarity")].pairs == 0
    # 12 scenarios, each 2 turns longer with 3 distraction tools: degenerate, withheld
    flat = []
    for b in range(12):
        tags = ["SINGLE_TOOL_CALL"]
        flat.append(played(f"s{b}", [*tags, "NO_DISTRACTION_TOOLS"], 0.5, 0.0, 4 + b))
        flat.append(
            played(f"s{b}_3_distraction_tools", [*tags, "THREE_DISTRACTION_TOOLS"], 0.5, 0.0, 6 + b)
        )
    check = toolsandbox_check(read_result_summaries([write(tmp_path / "f.json", document(flat))]))
    turns = next(c for c in check.contrasts if c.menu == "3" and c.outcome == "turn_count")
    assert turns.estimate == pytest.approx(2.0)
    assert turns.interval is not None and turns.interval.low is None
    assert "degenerate" in str(turns.interval.reason)


# ---- refused input ---------------------------------------------------------------------


def _good(n: int = 2) -> dict[str, Any]:
    return document(scenarios(n, seed=9, scrambled=True))


def _edit(doc: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    fn(out)
    return out


def _first(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in doc["per_scenario_results"] if r["name"] == name)


BASE0 = "scenario_00_send_message"

MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("missing field", lambda d: d.pop("git_sha"), "git_sha", "missing"),
    (
        "score as text",
        lambda d: _first(d, BASE0).update(similarity="high"),
        "per_scenario_results[",
        "scenario_00",
    ),
    (
        "score above 1",
        lambda d: _first(d, BASE0).update(milestone_similarity=1.5, similarity=1.5),
        ".milestone_similarity",
        "less than or equal to 1",
    ),
    (
        "score as a numeric string",
        lambda d: _first(d, BASE0).update(minefield_similarity="0"),
        ".minefield_similarity",
        "a JSON number",
    ),
    (
        "turns as a bool",
        lambda d: _first(d, BASE0).update(turn_count=True),
        ".turn_count",
        "integer",
    ),
    (
        "unknown category",
        lambda d: _first(d, BASE0)["categories"].append("FIVE_DISTRACTION_TOOLS"),
        ".categories[",
        "",
    ),
    (
        "a field ToolSandbox does not write",
        lambda d: _first(d, BASE0).update(tokens=100),
        ".tokens",
        "not a field",
    ),
    (
        "a mapping that is not [index, score]",
        lambda d: _first(d, BASE0).update(milestone_mapping={"0": [1]}),
        ".milestone_mapping",
        "",
    ),
]


@pytest.mark.parametrize(
    ("case", "edit", "field", "words"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_summaries_are_refused_naming_the_field(
    tmp_path: Path,
    cli: Callable[..., CliResult],
    case: str,
    edit: Callable[[dict[str, Any]], None],
    field: str,
    words: str,
) -> None:
    path = write(tmp_path / "result_summary.json", _edit(_good(), edit))
    with pytest.raises(BadInput) as err:
        read_result_summaries([path])
    assert err.value.file == str(path)
    assert err.value.field is not None and field in err.value.field
    assert words in err.value.render()
    res = cli("study", "toolsandbox", path, "--json")
    error = res.json()
    assert res.code == 2 and isinstance(error, dict)
    assert (error["error"], error["file"], error["field"]) == (
        "BadInput",
        str(path),
        err.value.field,
    )


INCONSISTENT: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "similarity against milestone and minefield",
        lambda d: _first(d, BASE0).update(minefield_similarity=0.5),
        ".similarity",
        BASE0,
    ),
    (
        "a category mean",
        lambda d: d["category_aggregated_results"]["TEN_DISTRACTION_TOOLS"].update(
            similarity=0.123
        ),
        'category_aggregated_results["TEN_DISTRACTION_TOOLS"].similarity',
        "disagrees",
    ),
    (
        "a category missing",
        lambda d: d["category_aggregated_results"].pop("ALL_CATEGORIES"),
        'category_aggregated_results["ALL_CATEGORIES"]',
        "missing",
    ),
    (
        "a name against its menu category",
        lambda d: _first(d, BASE0 + "_10_distraction_tools").update(
            name=BASE0 + "_ten_distraction_tools"
        ),
        ".categories",
        BASE0 + "_ten_distraction_tools",
    ),
    (
        "a scenario saved twice",
        lambda d: d["per_scenario_results"].append(_first(d, BASE0)),
        ".name",
        "saved twice",
    ),
    (
        "a raised scenario with a score",
        lambda d: _first(d, BASE0).update(exception_type="RuntimeError", traceback="t"),
        ".traceback",
        BASE0,
    ),
]


@pytest.mark.parametrize(
    ("case", "edit", "field", "words"), INCONSISTENT, ids=[m[0] for m in INCONSISTENT]
)
def test_a_summary_that_disagrees_with_itself_is_refused(
    tmp_path: Path,
    case: str,
    edit: Callable[[dict[str, Any]], None],
    field: str,
    words: str,
) -> None:
    doc = _good()
    edited = _edit(doc, edit)
    if case == "a category mean":  # the edit must not leave the document consistent
        assert edited != doc
    path = write(tmp_path / "result_summary.json", edited)
    with pytest.raises(BadInput) as err:
        read_result_summaries([path])
    assert err.value.file == str(path)
    assert err.value.field is not None and field in err.value.field, err.value.render()
    assert words in err.value.render()


def test_unreadable_input_and_the_same_run_twice(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = cli("study", "toolsandbox", bad)
    assert res.code == 2 and "not JSON" in res.stdout + res.stderr
    lst = tmp_path / "list.json"
    lst.write_text("[]")
    assert cli("study", "toolsandbox", lst).code == 2
    assert cli("study", "toolsandbox", tmp_path / "absent.json").code == 2
    good = write(tmp_path / "a" / "result_summary.json", _good())
    twice = write(tmp_path / "b" / "result_summary.json", _good())
    res = cli("study", "toolsandbox", good, twice, "--json")
    assert res.code == 2 and "same summary" in res.stdout + res.stderr


# ---- the command -----------------------------------------------------------------------


def test_the_command_prints_json_markdown_and_a_table(
    runs: dict[str, Any], cli: Callable[..., CliResult]
) -> None:
    res = cli("study", "toolsandbox", runs["a"], runs["b"], "--json", "--success-at", "0.7")
    assert res.code == 0, res.stdout + res.stderr
    doc = res.json()
    assert isinstance(doc, dict)
    assert doc["schema_id"] == "prereg.toolsandbox/1" and doc["success_at"] == 0.7
    assert doc["tokens"]["estimate"] is None
    # 3 scopes (pooled, each run) x 3 menus x 3 outcomes
    assert len(doc["contrasts"]) == 27
    json.dumps(doc, allow_nan=False)
    md = cli("study", "toolsandbox", runs["a"], "--markdown")
    assert md.code == 0 and md.stdout.startswith("# The ToolSandbox check")
    assert "not run by prereg" in md.stdout and "Unpaired: scenario" in md.stdout.replace(
        "\\_", "_"
    )
    term = cli("study", "toolsandbox", runs["tiny"])
    assert term.code == 0 and "too few scenarios" in term.stdout
    both = cli("study", "toolsandbox", runs["a"], "--json", "--markdown")
    assert both.code == 2
