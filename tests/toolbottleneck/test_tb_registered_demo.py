"""``prereg demo --study toolbottleneck`` end to end through the command line (issue 19).

The bundled draft is registered, run offline on the simulated policy and analysed once
(the module's fixture); the tests then check the report against an independent
computation from the exported records with numpy: the eight contrasts with appendix D's
weights and Holm, the bootstrap p values, the exact sign-flip over intents, the
configuration-level contrasts and the failure census, and that every rendering says the
policy is simulated.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from rich.console import Console
from scipy import stats as sps

from prereg.reports.model import Report
from prereg.reports.render import terminal as render_terminal
from tests.toolbottleneck.helpers import run_cli as _run

REG = "toolbottleneck-capacity"
#: the bundled study experiment's families, seeds and intents, read from its files (issue
#: 42 grew the families; the counts below derive from them rather than being typed in)
_BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "toolbottleneck"
_SPEC = yaml.safe_load((_BUNDLED / "experiment.yaml").read_text())
N_FAMILIES, N_SEEDS = len(_SPEC["families"]), len(_SPEC["seeds"])
N_INTENTS = len({yaml.safe_load((_BUNDLED / f).read_text())["intent"] for f in _SPEC["families"]})
FACTORS = ("menu", "workflow", "encoding", "policy")
LEVELS = {
    "menu": (8, 128),
    "workflow": ("low", "high"),
    "encoding": ("raw", "linked"),
    "policy": ("sim-truncating", "sim-steady"),
}
FLAGS = (
    "completion_cap",
    "episode_budget",
    "call_limit",
    "turn_limit",
    "infeasible",
    "wrong_conclusion",
    "contract_break",
)


def run_demo(root: Path) -> dict[str, Any]:
    """``prereg demo --study toolbottleneck`` in ``root`` and its exported records: the
    session's ``demo`` fixture (tests/toolbottleneck/conftest.py), run once per worker."""
    code, out = _run("demo", "--study", "toolbottleneck", "--dir", root, "--json")
    assert code == 0, out[-2000:]
    data: dict[str, Any] = json.loads(out)
    exported = root / "records.jsonl"
    code, out = _run("-w", root, "export", REG, "--out", exported)
    assert code == 0, out
    data["records"] = [json.loads(line) for line in exported.read_text().splitlines()]
    data["root"] = root
    return data


def _table(demo: dict[str, Any], prefix: str) -> dict[str, Any]:
    tables = demo["toolbottleneck"]["tables"]
    found: dict[str, Any] = next(t for t in tables if t["title"].startswith(prefix))
    return found


def _arm(levels: dict[str, object]) -> str:
    return "--".join(f"{f}-{levels[f]}" for f in FACTORS)


def _means(records: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], float], dict[str, str]]:
    runs: dict[tuple[str, str], list[int]] = defaultdict(list)
    cluster: dict[str, str] = {}
    for r in records:
        runs[(r["task_id"], r["arm"])].append(int(r["success"]))
        cluster[r["task_id"]] = r["cluster"]
    return {k: sum(v) / len(v) for k, v in runs.items()}, cluster


def _by_hand(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each contrast's value per task: appendix D's E_a = 1/2^(k-1) sum s_a m and
    E_ab = 1/2^(k-2) sum s_a s_b m over the 2^k design cells (k = 4: the seed's three
    pressures and the configuration), the checkpoints as cell differences averaged over
    the configurations."""
    means, _ = _means(records)
    tasks = sorted({t for t, _ in means})
    corners = [dict(zip(FACTORS, c, strict=True)) for c in itertools.product(*LEVELS.values())]

    def sign(cell: dict[str, object], factor: str) -> int:
        return -1 if cell[factor] == LEVELS[factor][0] else 1

    out: dict[str, dict[str, float]] = {}
    effects = {
        "v": ("menu",),
        "w": ("workflow",),
        "d-linked": ("encoding",),
        "v-by-w": ("menu", "workflow"),
        "v-by-d": ("menu", "encoding"),
        "w-by-d": ("workflow", "encoding"),
    }
    for name, factors in effects.items():
        scale = 1 / 8 if len(factors) == 1 else 1 / 4
        out[name] = {
            t: scale
            * sum(np.prod([sign(c, f) for f in factors]) * means[(t, _arm(c))] for c in corners)
            for t in tasks
        }
    for name, encoding in (("compact-raw", "compact"), ("typed-raw", "typed")):
        out[name] = {
            t: float(
                np.mean(
                    [
                        means[(t, _arm(dict(menu=8, workflow="low", encoding=encoding, policy=p)))]
                        - means[(t, _arm(dict(menu=8, workflow="low", encoding="raw", policy=p)))]
                        for p in LEVELS["policy"]
                    ]
                )
            )
            for t in tasks
        }
    return out


def _holm(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def _per_unit(values: dict[str, float], unit_of: dict[str, str]) -> np.ndarray:
    groups: dict[str, list[float]] = defaultdict(list)
    for task, value in values.items():
        groups[unit_of[task]].append(value)
    return np.array([np.mean(groups[u]) for u in sorted(groups)])


def test_the_demo_runs_every_unit_offline(demo: dict[str, Any]) -> None:
    # its speed is a figure of bench/, not a timed assertion: the demo prints its seconds
    assert demo["demo"]["seconds"] > 0
    run = demo["demo"]["run"]
    assert run["planned"] == 28 * N_FAMILIES * N_SEEDS * 2 and run["remaining"] == 0
    assert len(demo["records"]) == run["planned"]
    assert demo["toolbottleneck"]["label"].startswith("SIMULATED POLICY")
    assert {r["evidence_class"] for r in demo["records"]} == {"local"}


def test_the_eight_contrasts_and_holm_agree_with_numpy_by_hand(demo: dict[str, Any]) -> None:
    records = demo["records"]
    _, cluster = _means(records)
    by_hand = _by_hand(records)
    contrasts = {c["id"]: c for c in demo["contrasts"]}
    assert list(contrasts) == list(by_hand)  # the eight, in the registered order
    assert demo["multiplicity"]["method"] == "holm"
    p = []
    for name, values in by_hand.items():
        d = _per_unit(values, cluster)  # one value per family
        assert contrasts[name]["estimate"] == pytest.approx(d.mean(), abs=1e-12)
        assert contrasts[name]["units"] == N_FAMILIES
        # contrast_bootstrap's default p (issue 39), the inversion of its interval: the
        # one-sample t test of the family contrasts (families - 1 df); without spread, 1 at a
        # zero estimate and 0 otherwise (a point interval)
        if np.ptp(d) > 0:
            expected = float(sps.ttest_1samp(d, 0.0).pvalue)
        else:
            expected = 1.0 if d.mean() == 0 else 0.0
        assert contrasts[name]["pvalue"] == pytest.approx(expected, rel=1e-9, abs=1e-15)
        p.append(contrasts[name]["pvalue"])
    adjusted = [m["adjusted"] for m in demo["multiplicity"]["members"]]
    assert adjusted == pytest.approx(_holm(p))
    assert any(abs(c["estimate"]) > 0 for c in contrasts.values())


def test_the_sign_flip_over_intents_is_exact_and_holm_corrected(demo: dict[str, Any]) -> None:
    records = demo["records"]
    intent = {r["task_id"]: r["intent"] for r in records}
    flips = _table(demo, "Exact sign-flip")
    p = []
    for values in _by_hand(records).values():
        d = _per_unit(values, intent)
        observed = abs(d.mean())
        patterns = itertools.product([-1, 1], repeat=d.size)
        hits = [abs(np.mean(np.array(s) * d)) >= observed - 1e-12 for s in patterns]
        p.append(sum(hits) / 2**d.size)
    assert [row[0] for row in flips["rows"]] == list(_by_hand(records))
    assert [row[1] for row in flips["rows"]] == [str(N_INTENTS)] * 8
    assert [row[3] for row in flips["rows"]] == [_p(x) for x in p]
    assert [row[4] for row in flips["rows"]] == [_p(x) for x in _holm(p)]


def _p(x: float) -> str:
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def test_contrasts_resampling_configurations_average_to_the_registered(
    demo: dict[str, Any],
) -> None:
    records = demo["records"]
    means, cluster = _means(records)
    table = _table(demo, "Contrasts by resampling unit")
    rows = {(r[0], r[1]): r for r in table["rows"]}
    contrasts = {c["id"]: c for c in demo["contrasts"]}
    for name in contrasts:
        assert (
            rows[(name, f"family ({N_FAMILIES})")][2] == f"{100 * contrasts[name]['estimate']:+.1f}"
        )
        row = rows[(name, "configuration (2)")]
        # each configuration's own contrast (its arms' weights, doubled), families equal
        per_config = []
        for policy in LEVELS["policy"]:
            weights = {
                arm: w for arm, w in contrasts[name]["weights"].items() if arm.endswith(policy)
            }
            value = 2 * sum(
                w * _per_unit({t: means[(t, arm)] for t in cluster}, cluster).mean()
                for arm, w in weights.items()
            )
            per_config.append(value)
        assert row[2] == f"{100 * np.mean(per_config):+.1f}"
        assert np.mean(per_config) == pytest.approx(contrasts[name]["estimate"], abs=1e-12)


def test_the_failure_census_counts_the_exported_records(demo: dict[str, Any]) -> None:
    records = demo["records"]
    census = _table(demo, "Failure census")
    overall = next(r for r in census["rows"] if r[0] == "(all)")
    failed = [r for r in records if not r["success"]]
    assert overall[1:3] == [str(len(records)), str(len(failed))]
    for i, flag in enumerate(FLAGS):
        count = sum(1 for r in failed if r["terminal_flag"] == flag)
        assert overall[3 + i].startswith(f"{count} ")
    # the seed's precedence: nothing truncated at the cap is flagged otherwise
    assert all(r["terminal_flag"] is not None for r in failed)
    assert all(r["obligations"] is not None and len(r["obligations"]) == 9 for r in records)


def test_the_decision_matrix_says_what_was_not_measured(demo: dict[str, Any]) -> None:
    matrix = _table(demo, "Decision matrix")
    assert matrix["columns"][4:6] == ["wall time", "cost"]
    for row in matrix["rows"]:
        assert row[4] == row[5] == "not measured"
        assert row[7].endswith("(tokens)")  # cost-superiority judged on tokens, said so
    estimands = _table(demo, "Repairs against switches")
    assert estimands["rows"][0][:2] == ["routed-menu", "V"]


def test_every_rendering_labels_the_policy_simulated(demo: dict[str, Any]) -> None:
    folder = Path(demo["report_dir"])
    markdown = (folder / "report.md").read_text()
    for heading in (
        "## Registered contrasts",
        "## ToolBottleneckBench study",
        "### Failure census",
        "### Decision matrix",
    ):
        assert heading in markdown, heading
    assert markdown.index("SIMULATED POLICY") < markdown.index("## Registration")  # on top
    page = (folder / "report.html").read_text()
    assert "SIMULATED POLICY" in page and "Decision matrix" in page
    report = Report.model_validate_json((folder / "report.json").read_text())
    console = Console(record=True, width=200)
    render_terminal.render(report, console)
    text = console.export_text()
    assert "Failure census" in text
    assert text.index("SIMULATED POLICY") < text.index("Failure census")


def test_the_decoder_reads_the_single_failure_packets_counted_by_hand(
    demo: dict[str, Any],
) -> None:
    """Packets of every configuration (both policies on the routed menu; the fixed lanes
    have no W or D cell), pooled: the baseline cell succeeds and exactly one of its own
    configuration's single-stress endpoint cells fails."""
    by_unit = {(r["arm"], r["task_id"], r["repeat"]): r for r in demo["records"]}
    success = {unit: r["success"] for unit, r in by_unit.items()}
    classes = dict.fromkeys(("V", "W", "D"), 0)
    units = {(t, k) for _, t, k in success}
    single: list[tuple[str, dict[str, Any]]] = []  # (label, the failed record)
    for policy in ("sim-truncating", "sim-steady"):
        base = dict(menu=8, workflow="low", encoding="raw", policy=policy)
        stressed = {
            "V": _arm(base | {"menu": 128}),
            "W": _arm(base | {"workflow": "high"}),
            "D": _arm(base | {"encoding": "linked"}),
        }
        for task, repeat in sorted(units):
            if not success[(_arm(base), task, repeat)]:
                continue
            failed = [p for p, arm in stressed.items() if not success[(arm, task, repeat)]]
            if len(failed) == 1:
                classes[failed[0]] += 1
                single.append((failed[0], by_unit[(stressed[failed[0]], task, repeat)]))
    decoder = _table(demo, "Does the failure record reveal the pressure?")
    assert (
        f"({sum(classes.values())} single-failure packets from 2 configurations"
        in (decoder["title"])
    )
    assert ", ".join(f"{p} {n}" for p, n in classes.items()) in decoder["note"]
    assert [row[0] for row in decoder["rows"]] == [
        "constant",
        "flag",
        "obligation",
        "record",
        "record+trace",
        "calls",
        "trace",
        "verdicts",
        "termination",
        "menu-proxy",
    ]
    # every feature set recomputed from the exported records (docs: readings D2-D5), with
    # a plain leave-one-intent-out lookup
    order = ("availability", "selection", "protocol", "dependencies", "evidence")
    order += ("conclusion", "final_state", "budgets", "contract")
    limits = {"completion_cap", "episode_budget", "call_limit", "turn_limit", "infeasible"}

    def bins(calls: int) -> str:
        return "0" if calls == 0 else "1-2" if calls <= 2 else "3-5" if calls <= 5 else "6+"

    def features(r: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
        ob, flag = r["first_unmet_obligation"], r["terminal_flag"]
        shape = (bins(r["calls"]), flag if flag in limits else "answered")
        per = r["tokens"]["input"] / r["turns"] if r["turns"] else None
        proxy = "no request" if per is None else f"2^{int(np.floor(np.log2(per)))}"
        return {
            "constant": (),
            "flag": (flag,),
            "obligation": (ob,),
            "record": (ob, flag),
            "record+trace": (ob, flag, *shape),
            "calls": (shape[0],),
            "trace": shape,
            "verdicts": tuple((r["obligations"] or {}).get(o) for o in order),
            "termination": (flag if flag in limits else ob,),
            "menu-proxy": (proxy,),
        }

    rows = {row[0]: row for row in decoder["rows"]}
    for name in rows:
        keyed = [(r["intent"], label, features(r)[name]) for label, r in single]
        predicted = []
        for intent, _, key in keyed:
            fold = [(lab, k) for i, lab, k in keyed if i != intent]
            pool = [lab for lab, k in fold if k == key] or [lab for lab, _ in fold]
            best = max(pool.count(c) for c in "VWD")
            predicted.append(next(c for c in "VWD" if pool.count(c) == best))
        recalls = [
            np.mean([p == c for (_, lab, _), p in zip(keyed, predicted, strict=True) if lab == c])
            for c in "VWD"
            if classes[c]
        ]
        assert rows[name][2].startswith(f"{100 * np.mean(recalls):.1f}%"), name
    # below 10 intents every interval is withheld, with its reason; from 10 none is
    withheld = f"too few intents ({N_INTENTS} < 10): no interval"
    assert all((withheld in row[2]) == (N_INTENTS < 10) for row in decoder["rows"])
    assert not any("too few" in row[2] for row in decoder["rows"]) or N_INTENTS < 10
    gains = _table(demo, "Decoder comparisons")
    assert len(gains["rows"]) == 5 and "99% intervals" in gains["title"]
    # both tables in every rendering: report.json (above), Markdown, HTML, the terminal
    folder = Path(demo["report_dir"])
    console = Console(record=True, width=250)
    render_terminal.render(
        Report.model_validate_json((folder / "report.json").read_text()), console
    )
    for text in (
        (folder / "report.md").read_text(),
        (folder / "report.html").read_text(),
        console.export_text(),
    ):
        assert "Does the failure record reveal the pressure?" in text
        assert "Decoder comparisons" in text and "record+trace - calls" in text
