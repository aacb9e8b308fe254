"""The seed-shaped InvokeRank draft (issue 41, item 6 and its first Acceptance point).

The bundled ``drafts/podcast-invokerank.yaml`` runs offline through the CLI in a fresh
``prereg init`` workspace: ``register``, ``run`` (its execution arms start the bundled
Podcatch server through ``host.live``), ``judge``, ``judge --gold-template``, ``judge
--gold`` (the shipped unit-keyed gold labels joined to run ids here, from the exported
records), ``analyse`` and ``export``. Every table and figure of item 4 and the per-host
Figure 2 is then recomputed from the exported records and verdicts with numpy and scipy
written in this file (nothing of prereg's statistics is used for them) and compared with
report.json; every figure file and table heading is checked in report.md and report.html.
Figure 8 is drawn too: the corpus has ten dev prompts per intent, the fewest a rho
interval needs, and each cell's rho interval (or the kind of reason it has none) is
recomputed from the records by a one-resample-at-a-time bootstrap of the prompts
(``rho_reference``); no figure is listed as not drawn.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as st

from prereg.reports.invokerank.analyses import need_test
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import IntentScore, Report
from prereg.reports.observations import from_record
from prereg.reports.render import invokerank_figures as ir_figures
from prereg.reports.render.figures import FIGURES, caption
from prereg.runners.live import live_command
from tests.invokerank.rho_reference import anova_rho, prompt_bootstrap

REG = "podcast-invokerank"
#: the draft's design seed (``design.seed``), which seeds Figure 8's bootstrap
SEED = 3
POSITIVE_INTENTS = ["find-podcast", "follow-podcast", "recommend-podcast", "show-topics"]
EXTERNAL = {"focal", "competitor", "other_external"}
STAGES = ["surfaced", "selected", "invoked", "executed", "completed"]
HOSTS = [
    ("local local-careful", ["careful-sel", "careful-placebo", "careful-blinded"], ["careful-exe"]),
    ("local local-hasty", ["hasty-sel"], ["hasty-exe"]),
]
JUDGE_OF = {
    "careful-sel": "judge-careful",
    "careful-exe": "judge-careful",
    "careful-placebo": "judge-careful",
    "careful-blinded": "judge-careful",
    "hasty-sel": "judge-hasty",
    "hasty-exe": "judge-hasty",
}
TABLES = [
    "Score per intent (Figure 3)",
    "Figure 2 per host: selection (replayed) beside execution",
    "Need type per intent and the exact intent-level permutation test",
    "False-Invoke Rate per intent",
    "Intra-prompt correlation rho per intent (Figure 8",
    "Two-level choice, eq. (4)",
    "beside calls on negatives (Figure 5",
    "Replicate run rates (Figure 7)",
    "Terminal classes per intent (Figure 4",
]
DRAWN = [
    "ir_funnel_host_1",
    "ir_funnel_host_2",
    "ir_intents",
    "ir_metadata",
    "ir_replicates",
    "ir_rho",
    "terminal_breakdown",
]


# ---- independent reference computations (numpy / scipy only) --------------------------


def jeffreys(x: float, n: float, deff: float, level: float = 0.90) -> tuple[float, float]:
    """Jeffreys interval on counts deflated by ``deff``, boundary-corrected."""
    xe, ne = x / deff, n / deff
    tail = (1 - level) / 2
    low = 0.0 if x <= 0 else float(st.beta.ppf(tail, xe + 0.5, ne - xe + 0.5))
    high = 1.0 if x >= n else float(st.beta.ppf(1 - tail, xe + 0.5, ne - xe + 0.5))
    return low, high


def kish(sizes: list[int], rho: float) -> float:
    m = np.asarray(sizes, dtype=float)
    return float(1 + (np.sum(m * m) / np.sum(m) - 1) * rho)


def exact_perm_p(scores: dict[str, float], tool_need: set[str]) -> tuple[float, float, int]:
    """(difference, one-sided p, relabelings) by enumerating every choice of the
    tool-need intents among the coded ones."""
    names = sorted(scores)
    k = len(tool_need)

    def diff(chosen: set[str]) -> float:
        a = [scores[i] for i in names if i in chosen]
        b = [scores[i] for i in names if i not in chosen]
        return float(np.mean(a) - np.mean(b))

    observed = diff(tool_need)
    draws = [diff(set(c)) for c in itertools.combinations(names, k)]
    p = sum(d >= observed - 1e-12 for d in draws) / len(draws)
    return observed, p, len(draws)


def cohen_kappa(a: list[int], b: list[int]) -> float | None:
    x, y = np.asarray(a), np.asarray(b)
    po = float(np.mean(x == y))
    pe = float(np.mean(x) * np.mean(y) + (1 - np.mean(x)) * (1 - np.mean(y)))
    return None if pe >= 1 else (po - pe) / (1 - pe)


# ---- the flow through the CLI ------------------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _unit_gold(ws: Path, template: Path, runs: list[dict[str, Any]], out: Path) -> int:
    """The shipped unit-keyed gold labels joined to the run ids of the gold draw."""
    key = ws / "experiments" / REG / "gold" / "completion-gold.csv"
    by_unit = {
        (row["arm"], row["task_id"], int(row["repeat"])): (row["label"], row["annotator"])
        for row in csv.DictReader(key.open())
    }
    unit = {r["record_id"]: (r["arm"], r["task_id"], r["repeat"]) for r in runs}
    rows = [
        (rid, *by_unit[unit[rid]])
        for rid in (row["run_id"] for row in csv.DictReader(template.open()))
        if unit[rid] in by_unit
    ]
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run_id", "label", "annotator"])
        writer.writerows(rows)
    return len(rows)


@pytest.fixture
def flow(ws: Path, cli: Any, tmp_path: Path) -> dict[str, Any]:
    draft = ws / "drafts" / f"{REG}.yaml"
    assert draft.is_file(), "prereg init copies the bundled draft"
    assert cli("-w", ws, "register", draft).code == 0
    ran = cli("-w", ws, "run", REG, "--json")
    assert ran.code == 0, ran.stderr
    run = ran.json()
    assert isinstance(run, dict) and run["failed"] == 0 and run["remaining"] == 0
    judged = cli("-w", ws, "judge", REG, "--json")
    assert judged.code == 0, judged.stderr
    template = tmp_path / "gold-template.csv"
    made = cli("-w", ws, "judge", REG, "--gold-template", template, "--json")
    assert made.code == 0, made.stderr
    first = tmp_path / "first.jsonl"
    assert cli("-w", ws, "export", REG, "--format", "jsonl", "-o", first).code == 0
    gold = tmp_path / "gold.csv"
    labelled = _unit_gold(ws, template, _lines(first), gold)
    # the shipped labels cover the whole gold draw of the deterministic local runs
    drawn = sum(1 for _ in csv.DictReader(template.open()))
    assert labelled == drawn >= 30
    loaded = cli("-w", ws, "judge", REG, "--gold", gold, "--json")
    assert loaded.code == 0, loaded.stderr
    assert loaded.json()["added"] == labelled  # type: ignore[index]
    analysed = cli("-w", ws, "analyse", REG, "--json")
    assert analysed.code == 0, analysed.stderr
    out = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", REG, "--format", "jsonl", "-o", out).code == 0
    items = _lines(Path(f"{out}.verdicts.jsonl"))
    return {
        "ws": ws,
        "report": analysed.json(),
        "records": [r for r in _lines(out) if r["status"] == "ok"],
        "verdicts": [i["verdict"] for i in items if "verdict" in i],
        "gold": [i["gold"] for i in items if "gold" in i],
        "terminal": cli("-w", ws, "analyse", REG).stdout,
    }


# ---- per-run stage indicators, as the seed defines them -----------------------------------


def _completed(flow: dict[str, Any]) -> dict[str, bool]:
    """record id -> the arm's judge's parsed verdict on Completed."""
    return {
        v["record_id"]: bool(v["met"])
        for v in flow["verdicts"]
        if v["outcome"] == "completed" and v["parse"] == "ok"
    }


def _reached(r: dict[str, Any], stage: str, completed: dict[str, bool]) -> bool:
    f = r["funnel"]
    if stage == "completed":
        return bool(f.get("executed")) and completed.get(r["record_id"], False)
    return bool(f.get(stage))


def _arm_stages(arm: dict[str, Any]) -> list[str]:
    return [s["stage"] for s in arm["funnel"]]


Ctx = tuple[
    dict[str, Any],
    dict[str, Any],
    dict[str, dict[str, Any]],
    dict[str, bool],
    dict[str, list[dict[str, Any]]],
    dict[str, list[dict[str, Any]]],
    dict[str, Any],
]


def _check_funnel(c: Ctx) -> None:
    """Figure 2 per host: the grouping, the counts, one file per host."""
    report, ir, arms, completed, positive, negative, flow = c
    assert [(h["host"], h["selection"], h["execution"]) for h in ir["hosts"]] == HOSTS
    for arm, rs in positive.items():
        stages = _arm_stages(arms[arm])
        expected = STAGES[:3] if arms[arm]["stage"] == "selection" else STAGES
        assert stages == expected, arm
        for s in arms[arm]["funnel"]:
            hits = sum(_reached(r, s["stage"], completed) for r in rs)
            assert (s["successes"], s["trials"]) == (hits, len(rs)), (arm, s["stage"])
            iv = s["displayed"]
            assert iv["low"] - 1e-12 <= hits / len(rs) <= iv["high"] + 1e-12
    # Completed on an execution arm is its own host's judge's (the seed's judge per host)
    for arm in arms:
        assert f"arm {arm} from judge '{JUDGE_OF[arm]}'" in ir["completed_by"]


def _check_need_test(c: Ctx) -> None:
    """The need-type test (6.2), by exact enumeration."""
    report, ir, arms, completed, positive, negative, flow = c
    coding = {
        "find-podcast": "fresh_data",
        "follow-podcast": "action",
        "recommend-podcast": "knowledge",
        "show-topics": "knowledge",
    }
    tested = 0
    for arm, a in arms.items():
        nt = a["need_test"]
        assert nt["coding"] == coding
        scores = {i["intent"]: i["q"] for i in a["intents"]}
        if set(scores) != set(coding):
            continue
        tested += 1
        tool = {i for i, c in coding.items() if c != "knowledge"}
        diff, p, n = exact_perm_p(scores, tool)
        assert nt["relabelings"] == n == math.comb(4, 2), arm
        assert nt["smallest_p"] == pytest.approx(1 / n)
        assert nt["difference"] == pytest.approx(diff, abs=1e-12), arm
        assert nt["pvalue"] == pytest.approx(p, abs=1e-12), arm
    assert tested == len(arms)


def _check_false_invokes(c: Ctx) -> None:
    """Pooled rho_S and the False-Invoke Rate per intent (6.5)."""
    report, ir, arms, completed, positive, negative, flow = c
    intervals_checked = 0
    for arm, a in arms.items():
        surfaced = [r for r in positive[arm] if r["funnel"].get("surfaced")]
        groups: dict[str, list[int]] = defaultdict(list)
        for r in surfaced:
            groups[r["task_id"]].append(int(bool(r["funnel"].get("selected"))))
        rho_s = anova_rho(list(groups.values()))
        rows = {row["intent"]: row["false_invoke"] for row in a["false_invoke_by_intent"]}
        neg_intents = sorted({r["intent"] for r in negative[arm]})
        assert sorted(rows) == neg_intents
        for intent in neg_intents:
            rs = [r for r in negative[arm] if r["intent"] == intent]
            per_prompt: dict[str, list[int]] = defaultdict(list)
            for r in rs:
                per_prompt[r["task_id"]].append(int(r["terminal_class"] == "focal"))
            calls = sum(sum(v) for v in per_prompt.values())
            fir = rows[intent]
            assert (fir["calls"], fir["runs"], fir["prompts"]) == (
                calls,
                len(rs),
                len(per_prompt),
            )
            if not math.isnan(rho_s):
                assert fir["rho"] == pytest.approx(rho_s, abs=1e-12), arm
                deff = kish([len(v) for v in per_prompt.values()], rho_s)
                assert fir["design_effect"] == pytest.approx(deff, abs=1e-12)
                low, high = jeffreys(calls, len(rs), deff)
                assert fir["interval"]["low"] == pytest.approx(low, abs=1e-9)
                assert fir["interval"]["high"] == pytest.approx(high, abs=1e-9)
                intervals_checked += 1
        # the arm-level calls on negatives (Figure 5's labels) add up
        total = a["false_invoke"]
        assert (total["calls"], total["runs"]) == (
            sum(r["terminal_class"] == "focal" for r in negative[arm]),
            len(negative[arm]),
        )

    assert intervals_checked >= 4


def _rho_groups(
    rs: list[dict[str, Any]], stage: str, intent: str | None, completed: dict[str, bool]
) -> list[list[int]]:
    """Each prompt's outcomes at ``stage`` among its runs that reached the stage before
    (sequential counts), prompts in task-id order (the order Figure 8's resamples index,
    whatever order the runs were stored in); ``intent`` None: every intent."""
    before = STAGES[STAGES.index(stage) - 1] if stage != "surfaced" else None
    cell: dict[str, list[int]] = {}
    for r in rs:
        if intent is not None and r["intent"] != intent:
            continue
        outcomes = cell.setdefault(r["task_id"], [])
        if before is None or _reached(r, before, completed):
            outcomes.append(int(_reached(r, stage, completed)))
    return [cell[task] for task in sorted(cell)]


#: the start of each withheld reason the report prints (docs/invokerank.md, Figure 8)
RHO_REASONS = {
    "undefined": "rho undefined",
    "too few prompts": "too few prompts",
    "resamples": "too few resamples with a defined rho",
    "degenerate": "degenerate",
}


def _check_rho(c: Ctx) -> None:
    """Rho per intent (Figure 8): every cell's rho and its interval (or the kind of
    reason it has none) by a bootstrap of the prompts written in rho_reference, and the
    pooled rho."""
    report, ir, arms, completed, positive, negative, flow = c
    defined, drawn = 0, defaultdict(list)
    for arm, a in arms.items():
        for row in a["rho"]["rows"]:
            if row["kind"] == "within_intent":
                continue
            intent = row["intent"] if row["kind"] == "cell" else None
            groups = _rho_groups(positive[arm], row["stage"], intent, completed)
            rho = anova_rho(groups)
            assert row["groups"] == sum(1 for g in groups if g), (arm, row)
            if math.isnan(rho):
                assert row["rho"] is None, (arm, row)
            else:
                assert row["rho"] == pytest.approx(rho, abs=1e-9), (arm, row)
                defined += 1
            if row["kind"] != "cell":
                continue
            iv, want = row["interval"], prompt_bootstrap(groups, SEED)
            assert round(iv["level"], 2) == 0.9
            if want.withheld is None:
                assert iv["reason"] is None, (arm, row)
                assert iv["low"] == pytest.approx(want.low, abs=1e-12), (arm, row)
                assert iv["high"] == pytest.approx(want.high, abs=1e-12), (arm, row)
                drawn[row["intent"]].append((arm, row["stage"]))
            else:
                assert iv["low"] is None and iv["high"] is None, (arm, row)
                assert iv["reason"].startswith(RHO_REASONS[want.withheld]), (arm, row)
                if want.withheld == "too few prompts":
                    assert f"({row['groups']} < 10)" in iv["reason"]
                if want.withheld == "resamples":
                    assert f"({want.undefined} of 2000 undefined)" in iv["reason"]
    # ten dev prompts per intent: every positive intent has a rho interval at Selected
    # on some arm (which cells get one is fixed by the deterministic local host)
    assert sorted(drawn) == POSITIVE_INTENTS, dict(drawn)
    assert sum(map(len, drawn.values())) >= 8 and defined >= 20


def _check_choice(c: Ctx) -> None:
    """Eq. (4): the two-level choice."""
    report, ir, arms, completed, positive, negative, flow = c
    for arm, a in arms.items():
        rows = {row["intent"]: row for row in a["choice_factors"]}
        for intent in ["all intents", *sorted({r["intent"] for r in positive[arm]})]:
            rs = [r for r in positive[arm] if intent == "all intents" or r["intent"] == intent]
            ext = sum(r["terminal_class"] in EXTERNAL for r in rs)
            foc = sum(r["terminal_class"] == "focal" for r in rs)
            row = rows[intent]
            assert (row["runs"], row["external"], row["focal"]) == (len(rs), ext, foc)
            assert row["competitor"] == sum(r["terminal_class"] == "competitor" for r in rs)
            assert row["p_external"] == pytest.approx(ext / len(rs))
            assert row["p_focal"] == pytest.approx(foc / len(rs))
            if ext:
                assert row["p_focal_given_external"] == pytest.approx(foc / ext)
                assert row["p_external"] * row["p_focal_given_external"] == pytest.approx(
                    row["p_focal"]
                )


def _check_replicates(c: Ctx) -> None:
    """Figure 7: replicate sessions' rates and the within-run range."""
    report, ir, arms, completed, positive, negative, flow = c
    z = float(st.norm.ppf(0.95))
    for arm, a in arms.items():
        rr = a["replicate_runs"]
        assert rr["sessions"] == 3 and rr["repeats_per_session"] == 1
        trials: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for r in positive[arm]:
            trials[r["task_id"]][r["repeat"]].append(int(bool(r["funnel"].get("selected"))))
        common = sorted(p for p, s in trials.items() if all(len(s[k]) == 1 for k in range(3)))
        assert rr["prompts"] == len(common)
        y = np.array([[trials[p][k][0] for k in range(3)] for p in common], dtype=float)
        w = float(np.sum(np.var(y, axis=1, ddof=1)) / (len(common) ** 2 * 1))
        for row in rr["rows"]:
            rate = float(y[:, row["session"]].mean())
            assert row["rate"] == pytest.approx(rate, abs=1e-12)
            assert row["runs"] == len(common)
            rng = row["within_range"]
            assert rng["low"] == pytest.approx(max(0.0, rate - z * math.sqrt(w)), abs=1e-9)
            assert rng["high"] == pytest.approx(min(1.0, rate + z * math.sqrt(w)), abs=1e-9)


def _check_figure5(c: Ctx) -> None:
    """Figure 5: the metadata arms' paired changes beside calls on negatives."""
    report, ir, arms, completed, positive, negative, flow = c

    def paired(base: str, cand: str) -> tuple[float, int]:
        rate: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for arm in (base, cand):
            for r in positive[arm]:
                rate[arm][r["task_id"]].append(int(bool(r["funnel"].get("selected"))))
        prompts = sorted(set(rate[base]) & set(rate[cand]))
        d = [np.mean(rate[cand][p]) - np.mean(rate[base][p]) for p in prompts]
        return float(np.mean(d)), len(prompts)

    controls = {c["arm"]: c for c in report["controls"]}
    for arm in ("careful-placebo", "careful-blinded"):
        estimate, prompts = paired("careful-sel", arm)
        assert controls[arm]["reference"] == "careful-sel"
        assert controls[arm]["estimate"] == pytest.approx(estimate, abs=1e-12)
        assert controls[arm]["details"]["prompts"] == prompts
        assert controls[arm]["interval"]["low"] is not None
    for p in report["pairwise"]:
        estimate, prompts = paired(p["control"], p["treatment"])
        assert p["estimate"] == pytest.approx(estimate, abs=1e-12)
        assert p["tasks"] == prompts


def _check_judges(c: Ctx) -> None:
    """The judges: one per host, gold labels, the trust rule."""
    report, ir, arms, completed, positive, negative, flow = c
    gold = {g["record_id"]: int(bool(g["label"])) for g in flow["gold"]}
    trust = {j["judge"]: j["trust"] for j in report["judged"]["judges"]}
    for judge in ("judge-careful", "judge-hasty"):
        pairs = [
            (gold[v["record_id"]], int(bool(v["met"])))
            for v in flow["verdicts"]
            if v["judge"] == judge and v["record_id"] in gold and v["parse"] == "ok"
        ]
        labels, verdicts = [p[0] for p in pairs], [p[1] for p in pairs]
        kappa = cohen_kappa(labels, verdicts)
        assert trust[judge]["runs"] <= len(pairs)
        if kappa is None:
            assert trust[judge]["status"] == "not_assessed" and trust[judge]["kappa"] is None
        else:
            assert trust[judge]["kappa"] == pytest.approx(kappa, abs=1e-12)
            assert trust[judge]["status"] == ("trusted" if kappa >= 0.70 else "untrusted")
    # each host's gold runs hold both labels (the careful host's two unrequested follows
    # on r31 among them), so kappa is defined for both judges and both are trusted
    for judge in ("judge-careful", "judge-hasty"):
        both = {
            gold[v["record_id"]]
            for v in flow["verdicts"]
            if v["judge"] == judge and v["record_id"] in gold
        }
        assert both == {0, 1}, judge
        assert trust[judge]["status"] == "trusted", judge


def _check_files(c: Ctx) -> None:
    """Every figure is drawn, Figure 8 with the rest; nothing is listed as not drawn."""
    report, ir, arms, completed, positive, negative, flow = c
    out = flow["ws"] / "reports" / REG
    assert set(DRAWN) <= set(report["figures"])
    assert "ir_funnel" not in report["figures"]  # one Figure 2 per host instead
    for name in DRAWN:
        assert (out / "figures" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for table in TABLES:
        assert table in md, table
        assert table.replace("&", "&amp;") in html or table in html.replace("&#x27;", "'"), table
    for host, _, _ in HOSTS:
        assert f"InvokeRank funnel, host {host}: selection beside execution" in md
        assert f"Figure 2, host {host}" in flow["terminal"]
    # Figure 8 is drawn in every rendering, and no figure is withheld
    rho_caption = "Intra-prompt rho per intent with intervals (Figure 8)"
    assert f"![{rho_caption}](figures/ir_rho.png)" in md
    assert 'data-figure="ir_rho"' in html and rho_caption in html
    for text in (md, html, flow["terminal"]):
        assert "InvokeRank figures not drawn" not in text
        assert "Figure 8 (rho per intent)" not in text  # the withheld figure's label
        assert "too few prompts (5 < 10)" not in text
    # each printed rho interval is in the Markdown table as report.json has it
    for arm, a in arms.items():
        for row in a["rho"]["rows"]:
            iv = row["interval"]
            if row["kind"] == "cell" and iv["low"] is not None:
                cells = [arm, row["stage"], row["intent"], f"{row['rho']:.2f}"]
                shown = f"| {' | '.join(cells)} | {iv['low']:.3f} to {iv['high']:.3f} (90%) |"
                assert shown in md, shown
    # the terminal's Figure 8 line counts the cells with an interval as report.json has them
    terminal = " ".join(flow["terminal"].split())
    for arm, a in arms.items():
        cells = [row for row in a["rho"]["rows"] if row["kind"] == "cell"]
        with_iv = sum(1 for row in cells if row["interval"]["low"] is not None)
        line = f"{arm}: rho per intent (Figure 8): {with_iv} of {len(cells)} cell(s) with an"
        assert line in terminal, line
    # every score has its 90% interval (10 prompts per intent >= the minimum of 4)
    for a in arms.values():
        for i in a["intents"]:
            first = next(iv for iv in i["intervals"] if round(iv["level"], 2) == 0.9)
            assert first["low"] is not None and first["high"] is not None, (a["arm"], i)


def test_the_seed_shaped_draft_recomputed_from_the_exported_records(
    flow: dict[str, Any],
) -> None:
    report, records = flow["report"], flow["records"]
    ir = report["invokerank"]
    arms = {a["arm"]: a for a in ir["arms"]}
    completed = _completed(flow)
    by_arm: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_arm[r["arm"]].append(r)
    positive = {a: [r for r in rs if r["polarity"] == "positive"] for a, rs in by_arm.items()}
    negative = {a: [r for r in rs if r["polarity"] == "negative"] for a, rs in by_arm.items()}

    # the execution arms ran Podcatch live (the bundled server), the selection arms did not
    for r in records:
        live = [s["key"] for s in r["offer"]["servers"] if s.get("live")]
        assert live == (["podcatch"] if r["arm"].endswith("-exe") else [])
    assert any(bool(r["funnel"].get("executed")) for r in positive["hasty-exe"])
    c: Ctx = (report, ir, arms, completed, positive, negative, flow)
    _check_funnel(c)
    _check_need_test(c)
    _check_false_invokes(c)
    _check_rho(c)
    _check_choice(c)
    _check_replicates(c)
    _check_figure5(c)
    _check_judges(c)
    _check_files(c)


def test_demo_example_invokerank_runs_the_whole_flow(cli: Any, tmp_path: Path) -> None:
    root = tmp_path / "demo"
    result = cli("demo", "--example", "invokerank", "--dir", root, "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    assert isinstance(data, dict)
    demo = data["demo"]
    assert demo["run"]["failed"] == 0 and demo["judge"]["judged"] > 0
    assert demo["judge"]["gold"]["added"] > 0
    assert {"ir_funnel_host_1", "ir_funnel_host_2", "ir_rho"} <= set(data["figures"])
    assert (root / "reports" / REG / "report.html").is_file()
    human = cli("demo", "--example", "invokerank", "--dir", root)  # re-run: resumes
    assert human.code == 0, human.stderr
    assert (
        f"report: {(root / 'reports' / REG / 'report.html').resolve()}"
        in " ".join(human.stdout.split())
        or "report.html" in human.stdout
    )


def test_scores_equal_but_for_float_noise_are_ties_in_the_need_test() -> None:
    """Four intents with the same counts get the same score up to the last bit of the
    arithmetic (as on this draft's hasty selection arm); those are ties, so every one of
    the C(4, 2) = 6 relabelings is at least as extreme: p = 1 (by hand), not 1/2."""
    q = {"a": 0.3581081081081081, "b": 0.3581081081081081, "c": 0.3581081081081081}
    q["d"] = 0.358108108108108  # one ulp below
    intents = [IntentScore.model_construct(intent=k, q=v) for k, v in q.items()]
    coding = {"a": "action", "b": "fresh_data", "c": "knowledge", "d": "knowledge"}
    result = need_test(intents, coding)
    assert result.relabelings == 6 and result.pvalue == 1.0
    # a real difference is not merged: a, b above c, d is the one most extreme split
    q2 = {"a": 0.5, "b": 0.5 + 1e-9, "c": 0.3, "d": 0.3}
    intents = [IntentScore.model_construct(intent=k, q=v) for k, v in q2.items()]
    assert need_test(intents, coding).pvalue == pytest.approx(1 / 6)


def test_the_live_command_is_resolved_portably(tmp_path: Path, monkeypatch: Any) -> None:
    """``python`` is the interpreter running prereg and ``bundled:PATH`` a file of the
    installed bundled experiments, from any current directory; the rest is as written."""
    monkeypatch.chdir(tmp_path)
    command = live_command(["python", "bundled:podcast-invokerank/servers/podcatch.py", "-v"])
    assert command[0] == sys.executable
    assert Path(command[1]).is_file() and Path(command[1]).name == "podcatch.py"
    assert command[2] == "-v"
    assert live_command(("node", "server.js")) == ["node", "server.js"]
    assert live_command(["python3", "x.py"]) == ["python3", "x.py"]


def _staged_report(hosts: int, staged: bool = True) -> Report:
    runs = [
        from_record(
            {
                "arm": f"h{h}-{kind}",
                "task_id": f"t{j}",
                "intent": "x",
                "funnel": {"surfaced": True, "selected": j % 2 == 0},
                "evidence_class": "local",
                "terminal_class": "focal" if j % 2 == 0 else "answered_without_search",
            }
        )
        for h in range(hosts)
        for kind in ("sel", "exe")
        for j in range(6)
    ]
    metas = [
        ArmMeta(
            f"h{h}-{kind}",
            "f",
            stage=("selection" if kind == "sel" else "execution") if staged else None,
            host=f"host {h}",
        )
        for h in range(hosts)
        for kind in ("sel", "exe")
    ]
    section = invokerank_section(runs, metas, seed=0)
    assert section is not None
    return Report.model_construct(invokerank=section)


def test_figure_2_is_one_file_per_host_and_unchanged_without_stages() -> None:
    def drawn(report: Report) -> set[str]:
        return {n for n, (draw, _) in FIGURES.items() if n.startswith("ir_funnel") and draw(report)}

    two = _staged_report(2)
    assert drawn(two) == {"ir_funnel_host_1", "ir_funnel_host_2"}
    assert caption("ir_funnel_host_2", two).startswith("InvokeRank funnel, host host 1:")
    labels = [label for label, _, _ in ir_figures.host_funnel_rows(two, 1)]
    assert labels[:2] == ["surfaced: selection (h1-sel)", "surfaced: execution (h1-exe)"]
    # without stages: the one chart per arm, as before
    assert drawn(_staged_report(2, staged=False)) == {"ir_funnel"}
    # more hosts than slots: the one chart grouped by host
    many = _staged_report(ir_figures.HOST_SLOTS + 1)
    assert drawn(many) == {"ir_funnel"}
