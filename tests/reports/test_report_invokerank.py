"""The InvokeRank section from per-run records: the seed's published figures from records
built to match its counts, the labelling rules, and the bundled drafts end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.observations import Obs, from_record

INTENTS = ("check-mtd", "record-transaction", "estimate-tax")


def _run(arm: str, task: str, repeat: int, **fields: Any) -> Obs:
    polarity = fields.pop("polarity", "positive")
    record = {
        "record_id": f"{arm}/{task}/{repeat}",
        "registration_id": "seed",
        "arm": arm,
        "task_id": task,
        "intent": INTENTS[int(task.split("-")[1]) % 3],
        "polarity": polarity,
        "repeat": repeat,
        "status": "ok",
        "evidence_class": fields.pop("evidence_class", "S"),
        "terminal_class": fields.pop("terminal_class", None),
        "funnel": fields,
    }
    return from_record(record)


def _prompts(arm: str, pattern: list[tuple[int, list[tuple[bool, bool]]]]) -> list[Obs]:
    """``count`` prompts for each list of (surfaced, selected) runs."""
    out: list[Obs] = []
    p = 0
    for count, runs in pattern:
        for _ in range(count):
            for r, (d, s) in enumerate(runs):
                out.append(
                    _run(
                        arm,
                        f"p-{p}",
                        r,
                        surfaced=d,
                        selected=s,
                        invoked=s,
                        executed=None,
                        completed=None,
                        terminal_class="focal" if s else "searched_then_declined",
                    )
                )
            p += 1
    return out


def _negatives(arm: str, focal: int, other: int) -> list[Obs]:
    out = []
    for p in range(66):
        for r in range(2):
            cls = None
            if r == 0 and p < focal:
                cls = "focal"
            elif r == 0 and p < focal + other:
                cls = "competitor"
            out.append(
                _run(
                    arm,
                    f"n-{p}",
                    r,
                    polarity="negative",
                    surfaced=None,
                    selected=cls == "focal",
                    terminal_class=cls or "answered_without_search",
                )
            )
    return out


YES, NO = (True, True), (False, False)
SURF = (True, False)
#: Claude API baseline (6.1): 265 of 390 surfaced, 162 selected; 195 prompts x 2. The
#: split of prompts gives pooled rho_D .94 and rho_S .87 (one-way ANOVA).
CLAUDE = [(76, [YES, YES]), (8, [YES, SURF]), (46, [SURF, SURF]), (2, [YES, NO]), (3, [SURF, NO])]
CLAUDE += [(60, [NO, NO])]
#: ChatGPT API baseline: 260 of 390 surfaced, 149 selected (pooled rho_S .87).
CHATGPT = [(69, [YES, YES]), (8, [YES, SURF]), (50, [SURF, SURF]), (3, [YES, NO]), (3, [SURF, NO])]
CHATGPT += [(62, [NO, NO])]


@pytest.fixture(scope="module")
def section() -> Any:
    runs = _prompts("claude", CLAUDE) + _negatives("claude", focal=0, other=0)
    runs += _prompts("chatgpt", CHATGPT) + _negatives("chatgpt", focal=5, other=6)
    metas = [ArmMeta("claude", "taptax"), ArmMeta("chatgpt", "taptax")]
    return invokerank_section(runs, metas, seed=11)


def test_counts_match_the_seed(section: Any) -> None:
    claude, chatgpt = section.arms
    assert [(s.successes, s.trials) for s in claude.funnel] == [(265, 390), (162, 390)]
    assert [(s.successes, s.trials) for s in chatgpt.funnel] == [(260, 390), (149, 390)]


def test_selection_level_labelling(section: Any) -> None:
    for arm in section.arms:
        assert arm.level == "selection" and arm.symbol == "IR_DS"
        assert arm.label == "Selection-level InvokeRank"
        assert arm.stages == ["surfaced", "selected"]
        assert "executed, completed not measured" in arm.reason


def test_figure_2_surfaced_interval(section: Any) -> None:
    surfaced = section.arms[0].funnel[0]
    assert round(surfaced.rho, 2) == 0.94
    iv = surfaced.displayed
    assert (round(100 * iv.low, 1), round(100 * iv.high, 1)) == (62.4, 73.2)
    iv = section.arms[1].funnel[0].displayed  # ChatGPT API: 260 of 390
    assert (round(100 * iv.low, 1), round(100 * iv.high, 1)) == (61.1, 71.9)


def test_loss_shares_from_pooled_rates(section: Any) -> None:
    claude, chatgpt = section.arms
    assert [round(100 * v, 1) for v in claude.loss_shares_pooled.values()] == [44.0, 56.0]
    assert [round(100 * v, 1) for v in chatgpt.loss_shares_pooled.values()] == [42.1, 57.9]


def test_false_invokes_two_definitions(section: Any) -> None:
    claude, chatgpt = section.arms
    assert (claude.false_invoke.calls, claude.false_invoke.runs) == (0, 132)
    fir = chatgpt.false_invoke
    assert (fir.calls, fir.runs, fir.prompts) == (5, 132, 66)
    assert round(100 * fir.rate, 1) == 3.8
    assert round(fir.rho, 2) == 0.87 and fir.rho_source.startswith("pooled rho_S")
    assert round(100 * fir.interval.high, 1) == 9.0
    assert (chatgpt.any_external.calls, chatgpt.any_external.runs) == (11, 132)


def test_scores_rollup_and_ties(section: Any) -> None:
    for arm in section.arms:
        assert len(arm.intents) == 3 and all(i.weight == pytest.approx(1 / 3) for i in arm.intents)
        assert arm.q == pytest.approx(sum(i.q for i in arm.intents) / 3, rel=1e-9)
        for iv in arm.intervals:
            assert iv.low < arm.q < iv.high
        assert [iv.level for iv in arm.intervals] == [0.90, 0.95]
        for intent in arm.intents:
            means = [s.posterior_mean for s in intent.stages]
            assert intent.q == pytest.approx(means[0] * means[1], rel=0.03)
            assert sum(v for v in intent.loss_shares.values() if v is not None) == pytest.approx(1)
            assert intent.pass_k is None  # pass^3 cannot be estimated from two repeats
        assert arm.provenance is not None and arm.provenance.function == "prereg.stats.invokerank"
    claude, chatgpt = section.arms
    # the seed: 41.5 (37.1 to 46.1) against 38.3 (34.5 to 42.1): intervals overlap, tied
    assert claude.tied_with == ["chatgpt"] and chatgpt.tied_with == ["claude"]


def test_full_score_mixed_evidence_and_nesting() -> None:
    full = [
        _run("a", f"p-{p}", r, surfaced=True, selected=s, invoked=s, executed=s, completed=c)
        for p in range(6)
        for r, (s, c) in enumerate([(True, True), (True, p % 2 == 0), (p > 2, False)])
    ]
    mixed = [
        _run("b", "p-0", 0, surfaced=True, selected=True, evidence_class="S"),
        _run("b", "p-0", 1, surfaced=True, selected=True, evidence_class="A"),
    ]
    broken = [_run("c", "p-0", 0, surfaced=False, selected=True, invoked=None)]
    metas = [ArmMeta("a", "x"), ArmMeta("b", "x"), ArmMeta("c", "x")]
    a, b, c = invokerank_section(full + mixed + broken, metas, seed=1).arms
    assert a.level == "full" and a.symbol == "IR" and len(a.stages) == 5
    assert a.intents[0].pass_k is not None  # three repeats: pass^3 per prompt
    assert b.level == "not_computed" and "never pooled" in b.reason and b.q is None
    assert c.level == "not_computed" and "recording error" in c.reason


# --- end to end on the local host -----------------------------------------------------

SMALL_DRAFT = """
id: podcast-invokerank
title: InvokeRank on the podcast selection pool (local host, small)
hypothesis: The placebo arm selects the focal integration as often as the reference arm.
falsification: The paired bootstrap's 95% interval excludes 0.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {id: reference, surface: focal}
  - {id: placebo, surface: focal, control: placebo}
host: {driver: local}
budgets: {completion_cap: 1024, episode_tokens: 32000, call_limit: 8, turn_limit: 10}
design: {repeats: 3, rotations: 1, seed: 3}
outcome: selected
primary:
  {test: paired_bootstrap, compare: [placebo, reference], alpha: 0.05, sides: two-sided,
   draws: 2000}
"""


def _analyse(cli: Any, ws: Path, draft: Path, reg_id: str) -> dict[str, Any]:
    assert cli("-w", ws, "register", draft).code == 0
    ran = cli("-w", ws, "run", reg_id, "--json", "--concurrency", "4")
    assert ran.code == 0, ran.stderr
    analysed = cli("-w", ws, "analyse", reg_id, "--json")
    assert analysed.code == 0, analysed.stderr
    report: dict[str, Any] = analysed.json()
    saved = json.loads((ws / "reports" / reg_id / "report.json").read_text())
    assert saved["invokerank"] == report["invokerank"]
    markdown = (ws / "reports" / reg_id / "report.md").read_text()
    assert "## InvokeRank score" in markdown and "Score per intent (Figure 3)" in markdown
    html = (ws / "reports" / reg_id / "report.html").read_text()
    assert "InvokeRank score (descriptive, not registered)" in html
    return report


def test_podcast_draft_end_to_end(ws: Path, cli: Any, tmp_path: Path) -> None:
    draft = tmp_path / "podcast-invokerank.yaml"
    draft.write_text(SMALL_DRAFT)
    ir = _analyse(cli, ws, draft, "podcast-invokerank")["invokerank"]
    assert [a["arm"] for a in ir["arms"]] == ["reference", "placebo"]
    for arm in ir["arms"]:
        assert arm["level"] in ("full", "selection") and arm["evidence_class"] == "local"
        assert arm["q"] is not None and arm["provenance"]["parameters"]["draws"] == 4000
        assert {i["intent"] for i in arm["intents"]} and arm["false_invoke"] is not None
        assert arm["intents"][0]["provenance"]["function"].startswith("prereg.stats.invokerank")
    for arm in ir["arms"]:  # first choices, Figure 4 and the resolution split (item 4)
        positive = [t for t in arm["terminal"] if t["polarity"] == "positive"]
        assert positive[0]["intent"] == "all intents"
        assert positive[0]["runs"] == sum(t["runs"] for t in positive[1:])
        assert arm["resolution"]["runs"] == positive[0]["runs"]
        assert arm["resolution"]["degenerate"] == (arm["resolution"]["unjudged"] > 0)
        assert arm["rating"]["rows"] and arm["shares"]["label"] == "Selection Share"
        assert [iv["level"] for iv in arm["calibrated"]] == [0.9, 0.95]
    markdown = (ws / "reports" / "podcast-invokerank" / "report.md").read_text()
    for title in ("Invoke Rating per listed integration", "Agent Resolution Split"):
        assert title in markdown
    saved = json.loads((ws / "reports" / "podcast-invokerank" / "report.json").read_text())
    assert "terminal_breakdown" in saved["figures"]
    terminal = cli("-w", ws, "analyse", "podcast-invokerank")
    assert "InvokeRank score per arm" in terminal.stdout
    assert "resolution of" in terminal.stdout


def test_music_library_hosts_draft_end_to_end(ws: Path, cli: Any) -> None:
    report = _analyse(cli, ws, ws / "drafts" / "music-library-hosts.yaml", "music-library-hosts")
    arms = {a["arm"]: a for a in report["invokerank"]["arms"]}
    assert set(arms) == {"careful", "hasty"}
    assert arms["careful"]["model"] == "local-careful" and arms["hasty"]["model"] == "local-hasty"
    assert arms["careful"]["configuration_digest"] != arms["hasty"]["configuration_digest"]
    for arm in arms.values():
        assert arm["level"] != "not_computed", arm["reason"]
        assert arm["label"] in ("InvokeRank", "Selection-level InvokeRank")
