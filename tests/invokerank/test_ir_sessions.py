"""Replicate sessions in one registration (issue 41, item 1): ``design.sessions`` splits
each prompt's repeats into S replicate sessions; the run units carry the session, the
calibrated interval resamples sessions (the run component enters the score's interval)
and Figure 7 (replicate run rates with the within-run range) is drawn. A registration
without the field digests as before it existed. References are computed here by hand or
by exact enumeration, not by the code under test."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from prereg.experiments.loader import folder_reader, load_experiment
from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from prereg.registry.units import expand_units, plan_from_registration, session_of
from prereg.reports.invokerank.analyses import replicate_runs, session_counts
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.observations import from_record
from prereg.stats.invokerank import bootstrap_score
from tests.conftest import tree_digest
from tests.invokerank.test_ir_weights import DIGEST_BEFORE, FILES, REGISTRATION

Z90 = NormalDist().inv_cdf(0.95)


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES))


# --- the schema: digests, refusals ------------------------------------------------------


def test_a_registration_without_sessions_digests_as_before() -> None:
    assert _digest(REGISTRATION) == DIGEST_BEFORE
    one = {**REGISTRATION, "design": {**REGISTRATION["design"], "sessions": 1}}
    assert _digest(one) == DIGEST_BEFORE  # one session is the default: not digested
    document = build_document(Registration.model_validate(REGISTRATION), FILES)
    assert "sessions" not in document["registration"]["design"]
    three = {
        **REGISTRATION,
        "design": {**REGISTRATION["design"], "sessions": 3},
        "invokerank": {"interval": "calibrated"},
    }
    assert _digest(three) != _digest({**three, "design": REGISTRATION["design"]})
    reloaded = Registration.model_validate(
        build_document(Registration.model_validate(three), FILES)["registration"]
    )
    assert reloaded.design.sessions == 3 and reloaded.design.per_session == 1


@pytest.mark.parametrize(
    ("design", "extra", "fragment"),
    [
        ("{repeats: 3, sessions: 2, seed: 1}", "invokerank: {interval: calibrated}\n", "multiple"),
        ("{repeats: 2, sessions: 0, seed: 1}", "invokerank: {interval: calibrated}\n", ""),
        ("{repeats: 3, sessions: 3, seed: 1}", "", "interval: calibrated"),
        ("{repeats: 3, sessions: 3, seed: 1}", "invokerank: {interval: published}\n", "calibrated"),
    ],
)
def test_bad_sessions_exit_2_naming_file_and_field(
    ws: Path, cli: Any, design: str, extra: str, fragment: str
) -> None:
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("design:")]
    path = ws / "drafts" / "sessions.yaml"
    path.write_text("\n".join(lines) + f"\ndesign: {design}\n{extra}")
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "sessions.yaml" in result.stderr and "design.sessions" in result.stderr
    assert fragment in result.stderr
    assert tree_digest(ws / "registry") == before


# --- units ---------------------------------------------------------------------------------


def test_session_of_by_hand() -> None:
    # 6 repeats in 3 sessions: K = 2
    assert [session_of(r, 6, 3) for r in range(6)] == [0, 0, 1, 1, 2, 2]
    assert [session_of(r, 3, 1) for r in range(3)] == [0, 0, 0]
    with pytest.raises(ValueError, match="equal sessions"):
        session_of(0, 5, 2)
    with pytest.raises(ValueError, match="outside"):
        session_of(6, 6, 3)


BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "music-library"


def test_units_carry_the_session_and_run_session_by_session() -> None:
    data = {
        **REGISTRATION,
        "design": {"repeats": 4, "sessions": 2, "seed": 5},
        "invokerank": {"interval": "calibrated"},
    }
    reg = Registration.model_validate(data)
    experiment = load_experiment(folder_reader(BUNDLED), "music-library")
    units = expand_units(plan_from_registration(reg, "sha256:" + "0" * 64), experiment)
    tasks = experiment.tasks_in_split("dev")
    assert len(units) == 2 * len(tasks) * 4  # repeats counts every run of a prompt
    assert len({u.key for u in units}) == len(units)  # unit keys stay unique
    assert all(u.session == u.repeat // 2 for u in units)
    sessions = [u.session for u in units]
    assert sessions == sorted(sessions)  # session 0 entirely before session 1
    # the same registration without sessions: the same units, session 0 throughout
    plain = Registration.model_validate({**data, "design": {"repeats": 4, "seed": 5}})
    plain_units = expand_units(plan_from_registration(plain, "sha256:" + "0" * 64), experiment)
    assert [(u.key, u.rotation, u.seed) for u in plain_units] == [
        (u.key, u.rotation, u.seed) for u in units
    ]
    assert {u.session for u in plain_units} == {0}


# --- the section: the calibrated interval's session part, Figure 7 ------------------------


def _obs(arm: str, task: str, intent: str, repeat: int, selected: bool) -> Any:
    return from_record(
        {
            "arm": arm,
            "task_id": task,
            "intent": intent,
            "repeat": repeat,
            "funnel": {"surfaced": True, "selected": selected},
            "evidence_class": "replay",
            "terminal_class": "focal" if selected else "answered_without_search",
        }
    )


def _design(
    sessions: int, per_session: int, prompts: int, rate: Any, intents: str = "ab"
) -> list[Any]:
    """Positive runs: ``prompts`` per intent; prompt j of a session selected when
    ``rate(intent, j, session, k)`` is true."""
    out = []
    for intent in intents:
        for j in range(prompts):
            for s in range(sessions):
                for k in range(per_session):
                    repeat = s * per_session + k
                    out.append(
                        _obs("a", f"{intent}{j}", intent, repeat, bool(rate(intent, j, s, k)))
                    )
    return out


def test_session_counts_by_hand() -> None:
    runs = [
        _obs("a", "p", "x", 0, True),
        _obs("a", "p", "x", 1, False),
        _obs("a", "p", "x", 2, True),
        _obs("a", "p", "x", 3, True),
        _obs("a", "q", "x", 2, False),
    ]
    n, y, p, s = session_counts(runs, ["p", "q"], "selected", per_session=2)
    # (p, session 0): 2 runs, 1 selected; (p, 1): 2, 2; (q, 1): 1, 0
    assert (n, y, p, s) == ([2, 2, 1], [1, 2, 0], [0, 0, 1], [0, 1, 1])


def test_figure_7_rates_range_and_between_run_sd_by_hand() -> None:
    # 3 prompts, 2 sessions, K = 2; the prompts' outcomes written out
    cube = {
        "p0": [[1, 1], [1, 0]],
        "p1": [[0, 0], [1, 1]],
        "p2": [[1, 0], [0, 0]],
    }
    runs = [
        _obs("a", t, "x", s * 2 + k, bool(v))
        for t, by_s in cube.items()
        for s, ks in enumerate(by_s)
        for k, v in enumerate(ks)
    ]
    runs.append(_obs("a", "p3", "x", 0, True))  # p3 ran in session 0 only: not common
    rr = replicate_runs(runs, sessions=2, per_session=2, seed=1)
    assert rr.reason is None and rr.prompts == 3 and rr.stage == "selected"
    rates = [(1 + 1 + 0 + 0 + 1 + 0) / 6, (1 + 0 + 1 + 1 + 0 + 0) / 6]
    assert [r.rate for r in rr.rows] == pytest.approx(rates)
    assert [r.runs for r in rr.rows] == [6, 6]
    # within-run variance: sum of each prompt's sample variance (ddof 1) of its 4 trials
    # over N^2 K; p0: 3 of 4 -> 0.25, p1: 2 of 4 -> 1/3, p2: 1 of 4 -> 0.25
    w = (0.25 + 1 / 3 + 0.25) / (9 * 2)
    assert rr.within_sd == pytest.approx(math.sqrt(w))
    s2 = (rates[0] - rates[1]) ** 2 / 2  # sample variance of two rates, ddof 1
    assert rr.observed_sd == pytest.approx(math.sqrt(s2))
    assert rr.sigma_run == pytest.approx(math.sqrt(max(0.0, (s2 - w) / (1 - 1 / 3))))
    for r, rate in zip(rr.rows, rates, strict=True):
        iv = r.within_range
        assert iv.low == pytest.approx(max(0.0, rate - Z90 * math.sqrt(w)))
        assert iv.high == pytest.approx(min(1.0, rate + Z90 * math.sqrt(w)))
        assert iv.level == 0.90
    # the permutation p by exact enumeration: each prompt's 4 trials over the 2 x 2 slots
    flat = {t: [v for ks in by_s for v in ks] for t, by_s in cube.items()}
    hits = total = 0
    for perms in itertools.product(*(itertools.permutations(v) for v in flat.values())):
        rate = [np.mean([p[s * 2 : s * 2 + 2] for p in perms]) for s in range(2)]
        hits += np.var(rate, ddof=1) >= s2 - 1e-12
        total += 1
    exact = hits / total
    assert rr.pvalue == pytest.approx(exact, abs=0.03)  # 4999 seeded permutations


def test_figure_7_withheld_with_too_few_common_prompts() -> None:
    runs = [_obs("a", "p0", "x", r, r % 2 == 0) for r in range(4)]
    runs += [_obs("a", "p1", "x", 0, True)]  # p1 missing in session 1
    rr = replicate_runs(runs, sessions=2, per_session=2, seed=0)
    assert rr.rows == [] and rr.reason is not None and "(1 < 2)" in rr.reason


def _planted(effect: float) -> Any:
    """Prompt j selected in repeat k when its position clears a session-shifted bar."""

    def rate(intent: str, j: int, s: int, k: int) -> bool:
        base = (j * 37 + k * 11 + (intent == "b") * 5) % 10 / 10
        return base < 0.5 + effect * (s - 1)

    return rate


def _section(runs: list[Any], sessions: int, per_session: int) -> Any:
    section = invokerank_section(
        runs,
        [ArmMeta("a", "focal")],
        seed=3,
        interval="calibrated",
        sessions=sessions,
        per_session=per_session,
    )
    assert section is not None
    return section


def test_the_run_component_enters_the_scores_interval() -> None:
    runs = _design(3, 2, 8, _planted(0.25))
    section = _section(runs, 3, 2)
    arm = section.arms[0]
    assert section.replicates is None and arm.interval_method == "calibrated"
    assert arm.provenance is not None and arm.provenance.parameters["sessions"] == 3
    # the section's calibrated interval is bootstrap_score on the (prompt, session) rows,
    # written out here from the design (prompt codes 0..15, sessions 0..2)
    rows_n, rows_y, rows_c, rows_p, rows_s = [], [], [], [], []
    rate = _planted(0.25)
    for c, intent in enumerate("ab"):
        for j in range(8):
            for s in range(3):
                rows_n.append(2)
                rows_y.append(sum(bool(rate(intent, j, s, k)) for k in range(2)))
                rows_c.append(c)
                rows_p.append(c * 8 + j)
                rows_s.append(s)
    shown = [i.q for i in arm.intents]
    ref = bootstrap_score(
        rows_n,
        rows_y,
        rows_c,
        prompt=rows_p,
        session=rows_s,
        weights=[0.5, 0.5],
        seed=3,
        levels=(0.90, 0.95),
        centre=shown,
        rollup_centre=arm.q,
    )
    assert ref.sessions == 3 and ref.rollup_session_sd > 0
    assert arm.intervals[0].low == pytest.approx(ref.rollup_low[0.90])
    assert arm.intervals[0].high == pytest.approx(ref.rollup_high[0.90])
    # the same runs read as one session: no run component, a narrower score interval
    one = _section(runs, 1, 6).arms[0]
    width = arm.intervals[0].high - arm.intervals[0].low
    assert width > one.intervals[0].high - one.intervals[0].low
    assert one.replicate_runs is None
    # Figure 7 of the arm: the session rates rise with the planted effect
    rr = arm.replicate_runs
    assert rr is not None and rr.reason is None and len(rr.rows) == 3
    hand = [
        np.mean([rate(i, j, s, k) for i in "ab" for j in range(8) for k in range(2)])
        for s in range(3)
    ]
    assert [r.rate for r in rr.rows] == pytest.approx(hand)
    assert rr.rows[0].rate < rr.rows[2].rate


def test_two_sessions_withhold_the_calibrated_interval_and_say_why() -> None:
    arm = _section(_design(2, 1, 6, _planted(0.1)), 2, 1).arms[0]
    assert arm.q is not None  # the score itself is always printed
    assert arm.intervals[0].low is None
    assert "too few sessions (2 < 3)" in (arm.intervals[0].reason or "")
    assert arm.tied_with == [] and arm.ties_note == "not decided: no 90% interval"
    assert arm.replicate_runs is not None and len(arm.replicate_runs.rows) == 2


# --- end to end on the local host ----------------------------------------------------------

DRAFT = """
id: ir-sessions
title: Replicate sessions in one registration (local host, small)
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
design: {repeats: 3, sessions: 3, rotations: 1, seed: 3}
invokerank: {interval: calibrated}
outcome: selected
primary:
  {test: paired_bootstrap, compare: [placebo, reference], alpha: 0.05, sides: two-sided,
   draws: 2000}
"""


def test_sessions_end_to_end_from_exported_records(ws: Path, cli: Any, tmp_path: Path) -> None:
    draft = tmp_path / "ir-sessions.yaml"
    draft.write_text(DRAFT)
    assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "run", "ir-sessions", "--json").code == 0
    analysed = cli("-w", ws, "analyse", "ir-sessions", "--json")
    assert analysed.code == 0, analysed.stderr
    ir = analysed.json()["invokerank"]
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", "ir-sessions", "-o", out).code == 0
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert ir["replicates"] is None and ir["interval_method"] == "calibrated"
    for arm in ir["arms"]:
        rr = arm["replicate_runs"]
        assert rr["sessions"] == 3 and rr["repeats_per_session"] == 1
        pos = [
            r
            for r in records
            if r["arm"] == arm["arm"] and r["polarity"] == "positive" and r["status"] == "ok"
        ]
        tasks = sorted({r["task_id"] for r in pos})
        assert rr["prompts"] == len(tasks)
        for row in rr["rows"]:
            mine = [r for r in pos if r["repeat"] == row["session"]]  # K = 1
            assert row["runs"] == len(mine)
            assert row["rate"] == pytest.approx(
                sum(bool(r["funnel"]["selected"]) for r in mine) / len(mine)
            )
    md = (ws / "reports" / "ir-sessions" / "report.md").read_text()
    assert "Replicate run rates (Figure 7)" in md and "within-run 90% range" in md
    html = (ws / "reports" / "ir-sessions" / "report.html").read_text()
    assert "within-run 90% range" in html
    saved = json.loads((ws / "reports" / "ir-sessions" / "report.json").read_text())
    assert "ir_replicates" in saved["figures"]
    terminal = cli("-w", ws, "analyse", "ir-sessions")
    assert terminal.code == 0 and "replicate sessions" in terminal.stdout
