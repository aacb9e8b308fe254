"""Issue 42's acceptance, the last figures (brief H4): Figure 5 (one family compiled under
V, W and D) drawn from the compiler, the structural holdout (Table 10, Figure 10) from
``prereg demo --study toolbottleneck`` itself, Table 10 in the offline ``prereg study
run`` report, and the harness contract as the census's label in the registered report.

The demo runs on a tiny study: the workspace is made first with two small families and
the capacity draft and its companions (the holdout, the cap sweep, the frontier and
Discovery) under the bundled drafts' names (``prereg demo`` never overwrites a file), so
the command's own wiring runs every registration in a few seconds. That the bundled
drafts together draw every seed figure is checked on the bundled demo itself, in
tests/toolbottleneck/test_tb_registered_demo.py. Figure 5's data are
checked against an independent recompilation through the public compile API, its record
against the encodings' own decoder, and its counts against the seed's rules by hand.
"""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rfc8785
import yaml
from rich.console import Console

from prereg.core.workspace import Workspace
from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.experiments.toolbottleneck.encoding import decode
from prereg.registry.registrations import Registry
from prereg.registry.schema.harness import Budgets
from prereg.reports.model import Report
from prereg.reports.render import figures
from prereg.reports.render import study_figures as tb
from prereg.reports.render import terminal as render_terminal
from prereg.reports.toolbottleneck.census import CONTRACT_TITLE
from prereg.reports.toolbottleneck.example import family_example
from prereg.reports.toolbottleneck.registered import arm_contracts
from tests.toolbottleneck.helpers import as_yaml, family, run_cli
from tests.toolbottleneck.test_tb_holdout import _study
from tests.toolbottleneck.test_tb_registered import STUDY, _families, _registration

#: The returned record's envelope, written out here (call, tool, source, hash, provenance:
#: the blocks every encoding shares, seed appendix A "Returned-state encodings").
ENVELOPE = {"call", "tool", "source", "hash", "provenance"}
NEVER = (
    "can never fire: every non-final turn is a call, so an episode ends at the call limit "
    "first; reading F3"
)
SEED_CONTRACT = (
    "completion cap 1,024 tokens per request; episode budget 128,000 tokens; call limit = "
    f"certified minimum + 2; turn limit = call limit + 2 ({NEVER})"
)


def _holdout_draft() -> dict[str, Any]:
    """The bundled holdout draft's shape on the tiny study: handoffs {0, 2} x delivery,
    and the controller at both levels."""
    cell = {"menu": 8, "policy": "sim-truncating"}
    return {
        "id": "tiny-holdout",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "factorial": {
            "base": {"surface": "variants", "toolbottleneck": {**cell, "delivery": "native"}},
            "factors": [
                {"id": "handoffs", "sets": "toolbottleneck.handoffs", "levels": [0, 2]},
                {
                    "id": "delivery",
                    "sets": "toolbottleneck.delivery",
                    "levels": ["native", "canonical"],
                },
            ],
            "extra_arms": [
                {
                    "id": f"controller-{h}",
                    "toolbottleneck": {
                        **cell,
                        "handoffs": h,
                        "controller": "public-handoff",
                        "delivery": "native",
                    },
                }
                for h in (0, 2)
            ],
        },
        "contrasts": [
            {
                "id": "gain",
                "unit": "cluster",
                "draws": 200,
                "weights": {"controller-2": 1, "handoffs-2--delivery-native": -1},
            }
        ],
        "host": {"driver": "local"},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "design": {"repeats": 1, "seed": 1},
        "primary": {"test": "paired_bootstrap", "contrast": "gain", "unit": "cluster"},
    }


#: the companions' registrations on the tiny study, in the order the demo runs them
COMPANIONS = ("tiny-holdout", "tiny-capsweep", "tiny-frontier", "tiny-discovery")


def _companion(reg_id: str, arms: list[dict[str, Any]]) -> dict[str, Any]:
    """A tiny companion draft: explicit arms, one repeat, an exact paired test of the first
    two arms (what the companion draws is its arms' tables and figures, not its test)."""
    doc = _registration(
        id=reg_id,
        arms=[{"surface": "variants", **a} for a in arms],
        design={"repeats": 1, "seed": 1},
        primary={"test": "mcnemar_exact", "compare": [arms[0]["id"], arms[1]["id"]]},
    )
    del doc["factorial"], doc["contrasts"]
    return doc


def _companions() -> dict[str, dict[str, Any]]:
    """The bundled companions' shapes on the tiny study, by bundled draft name: the menu
    ends at two completion caps, the frontier at 0 and 2 handoffs, and Discovery under
    both retrievers."""
    sim = {"policy": "sim-truncating"}
    caps = [
        {
            "id": f"v{v}-cap{c}",
            "toolbottleneck": {**sim, "menu": v},
            "budgets": {"completion_cap": c},
        }
        for c in (64, 16384)
        for v in (8, 12)
    ]
    frontier = [
        {"id": f"h{h}", "toolbottleneck": {**sim, "menu": 8, "handoffs": h}} for h in (0, 2)
    ]
    discovery = [
        {"id": r, "toolbottleneck": {**sim, "catalog": 16, "retriever": r}}
        for r in ("flat-lexical", "connector-first")
    ]
    return {
        "toolbottleneck-holdout.yaml": _holdout_draft(),
        "toolbottleneck-capsweep.yaml": _companion("tiny-capsweep", caps),
        "toolbottleneck-frontier.yaml": _companion("tiny-frontier", frontier),
        "toolbottleneck-discovery.yaml": _companion("tiny-discovery", discovery),
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("fig5") / "ws"
    folder = root / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    names = []
    for doc in _families():
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    entry = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": [0]}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    (root / "drafts").mkdir()
    capacity = _registration(design={"repeats": 1, "seed": 3})
    (root / "drafts" / "toolbottleneck-capacity.yaml").write_text(yaml.safe_dump(capacity))
    for name, doc in _companions().items():
        (root / "drafts" / name).write_text(yaml.safe_dump(doc))
    code, out = run_cli("demo", "--study", "toolbottleneck", "--dir", root, "--json")
    assert code == 0, out[-3000:]
    data: dict[str, Any] = json.loads(out)
    data["root"] = root
    return data


def _report(data: dict[str, Any]) -> Report:
    fields = set(Report.model_fields)
    return Report.model_validate({k: v for k, v in data.items() if k in fields})


def _registration_of(data: dict[str, Any], reg_id: str) -> Any:
    ws = Workspace(Path(data["root"]).resolve())
    return Registry(ws.registry).get(reg_id).registration


# ---- Figure 5 ---------------------------------------------------------------------------


def test_figure5_is_the_first_family_recompiled(demo: dict[str, Any]) -> None:
    example = demo["toolbottleneck"]["example"]
    doc = _families()[0]  # the experiment's first family, the split's first task
    fam = family(doc)
    assert (example["family"], example["seed"], example["withheld"]) == (doc["id"], 0, None)
    assert example["decision"] == doc["decision"]
    # the registration's capacity menus are 8 and 12; W low and high; the four encodings
    cells = [
        ("V", "8", Cell("capacity", 8, "low", 0, "raw")),
        ("V", "12", Cell("capacity", 12, "low", 0, "raw")),
        ("W", "low", Cell("capacity", 8, "low", 0, "raw")),
        ("W", "high", Cell("capacity", 8, "high", 0, "raw")),
        *[
            ("D", e, Cell("capacity", 8, "low", 0, e))
            for e in ("raw", "compact", "typed", "linked")
        ],
    ]
    panels = example["panels"]
    assert [(p["pressure"], p["level"]) for p in panels] == [(p, lv) for p, lv, _ in cells]
    # the record of the first read: the search, then the read (seed 3.3's chain)
    assert example["record_call"] == 2
    for panel, (_, _, cell) in zip(panels, cells, strict=True):
        v = compile_cell(fam, cell, seed=0)
        assert panel["variant"] == v.id and panel["digest"] == v.digest
        assert panel["menu"] == [f["name"] for f in v.component("menu")["functions"]]
        program = v.component("workflow")["program"]
        assert panel["program"] == [
            f"{c['function']}(" + ", ".join(f"{k}={a}" for k, a in sorted(c["args"].items())) + ")"
            for c in program
        ]
        assert panel["gold"] == sorted({c["function"] for c in program})
        assert panel["certified_minimum"] == v.component("workflow")["certified_minimum"]
        observation = v.document["observations"][1]
        blocks = {k: x for k, x in observation.items() if k not in ENVELOPE}
        assert panel["record"] == rfc8785.dumps(blocks).decode()
    # by hand (seed 3.2): the menu shows V tools with the gold among them; a search and
    # a read per source record and the action: 3 calls at low (one record), 7 at high
    for p in panels:
        assert set(p["gold"]) <= set(p["menu"])
        if p["pressure"] == "V":
            assert len(p["menu"]) == int(p["level"])
    by = {(p["pressure"], p["level"]): p for p in panels}
    assert by[("W", "low")]["certified_minimum"] == 3 == len(by[("W", "low")]["program"])
    assert by[("W", "high")]["certified_minimum"] == 7 == len(by[("W", "high")]["program"])
    prefixes = sorted(g.rsplit("_", 1)[0] for g in by[("W", "low")]["gold"])
    assert prefixes == ["flag_case", "read_case", "search_cases"]
    # D: the same record in every encoding (decoded by the encodings' own inverse)
    decoded = [decode(json.loads(by[("D", e)]["record"]), e) for e in ("raw", "compact")]
    decoded += [decode(json.loads(by[("D", e)]["record"]), e) for e in ("typed", "linked")]
    assert all(d == decoded[0] for d in decoded) and len(decoded[0]) == 1
    assert decoded[0][0]["fields"]["contact"] == "Dana Okafor"
    assert len({by[("D", e)]["record"] for e in ("raw", "compact", "typed", "linked")}) == 4


def test_figure5_is_drawn_in_every_rendering(demo: dict[str, Any]) -> None:
    out = Path(demo["report_dir"])
    assert "tb_family" in demo["figures"]
    png = out / "figures" / "tb_family.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "figures/tb_family.png" in md and "Example task family" in md
    assert "(seed Figure 5)" in (out / "report.html").read_text()  # the figure's caption
    report = _report(demo)
    lines = tb.tb_family_lines(report)
    example = demo["toolbottleneck"]["example"]
    for p in example["panels"]:
        if p["pressure"] == "V":  # every gold tool listed, marked, at its place
            for g in p["gold"]:
                assert (f"* {p['menu'].index(g) + 1:>3}. {g}", "gold") in lines
    fig = tb.tb_family_figure(report, figures._canvas)
    assert fig is not None
    drawn = [t.get_text() for t in fig.axes[0].texts]
    assert drawn == [text for text, _ in lines]
    console = Console(file=io.StringIO(), width=120, record=True)
    render_terminal.render(report, console)
    assert "Example task family" in console.export_text()


def test_figure5_is_withheld_without_the_experiment_or_a_capacity_arm(
    demo: dict[str, Any],
) -> None:
    registration = _registration_of(demo, "tiny")
    assert family_example(registration, None).withheld is not None
    companion = demo["demo"]["companions"][0]
    withheld = companion["toolbottleneck"]["example"]["withheld"]
    assert withheld.startswith("no capacity arm")
    assert "tb_family" not in companion["figures"]
    assert tb.tb_family_lines(_report(companion)) == []


# ---- the holdout from the one demo command ------------------------------------------------


def test_the_demo_also_reports_the_structural_holdout(demo: dict[str, Any]) -> None:
    companion = demo["demo"]["companions"][0]
    assert companion["registration"] == "tiny-holdout"
    assert companion["run"]["completed"] == companion["run"]["planned"] == 6 * 2
    assert "tb_holdout" in companion["figures"] and "tb_holdout" not in demo["figures"]
    assert (Path(companion["report_dir"]) / "figures" / "tb_holdout.png").is_file()
    titles = [t["title"] for t in companion["toolbottleneck"]["tables"]]
    assert "Structural holdout arms (Table 10)" in titles
    # the capacity registration is the one registered as before: its digest and arms
    assert demo["registration"] == "tiny" and demo["digest"] != companion["digest"]


def test_every_companion_is_registered_and_reported_on_its_own(demo: dict[str, Any]) -> None:
    companions = demo["demo"]["companions"]
    assert [c["registration"] for c in companions] == list(COMPANIONS)
    # every unit ran: arms x two tasks (two families, one seed) x one repeat
    assert [c["run"]["completed"] for c in companions] == [6 * 2, 4 * 2, 2 * 2, 2 * 2]
    assert all(c["run"]["planned"] == c["run"]["completed"] for c in companions)
    reports = [demo, *companions]
    assert len({c["digest"] for c in reports}) == len({c["report_dir"] for c in reports}) == 5
    for c in reports:
        assert (Path(c["report_dir"]) / "report.html").is_file()
    by = dict(zip(COMPANIONS, companions, strict=True))
    # the frontier and Discovery draw without intervals; two families withhold the sweep's
    assert {"tb_frontier", "tb_frontier_episodes"} <= set(by["tiny-frontier"]["figures"])
    assert "tb_availability" in by["tiny-discovery"]["figures"]
    sweep = next(
        t
        for t in by["tiny-capsweep"]["toolbottleneck"]["tables"]
        if t["title"].startswith("Completion-cap sweep in full")
    )
    assert "too few families (2 < 10)" in json.dumps(sweep["rows"])
    assert "tb_cap_sweep" not in by["tiny-capsweep"]["figures"]


def test_the_demo_prints_every_reports_path(demo: dict[str, Any]) -> None:
    """Run again in the same workspace (registered and run already: only analysed), the
    human output names the capacity report and then each companion's, in order."""
    code, out = run_cli("demo", "--study", "toolbottleneck", "--dir", demo["root"])
    assert code == 0, out[-2000:]
    # rich folds a long path at the console's width: read the output without whitespace
    printed = re.findall(r"report:(.+?report\.html)", "".join(out.split()))
    ws = Path(demo["root"]).resolve()
    assert printed == [str(ws / "reports" / r / "report.html") for r in ("tiny", *COMPANIONS)]


# ---- the contract as the census's label ----------------------------------------------------


def test_the_registered_census_carries_the_contract(demo: dict[str, Any]) -> None:
    for data in (demo, demo["demo"]["companions"][0]):  # the cap sweep varies its cap
        table = next(t for t in data["toolbottleneck"]["tables"] if t["title"] == CONTRACT_TITLE)
        assert table["rows"] == [[SEED_CONTRACT, "every arm"]]
        assert SEED_CONTRACT.replace("_", "\\_") in Path(data["files"]["report.md"]).read_text()
    console = Console(file=io.StringIO(), width=400, record=True)
    render_terminal.render(_report(demo), console)
    assert CONTRACT_TITLE in console.export_text()


def test_absolute_limits_say_whether_the_turn_limit_can_fire(demo: dict[str, Any]) -> None:
    registration = _registration_of(demo, "tiny")

    def labels(**budgets: Any) -> set[str]:
        changed = registration.model_copy(update={"budgets": Budgets(**budgets)})
        return set(arm_contracts(changed).values())

    # call limit 5, turn limit 5: the answer turn is the sixth, so the turn limit fires
    assert labels(call_limit=5, turn_limit=5) == {
        "completion cap 1,024 tokens per request; episode budget 128,000 tokens; call "
        "limit 5; turn limit 5 (can fire)"
    }
    assert labels(call_limit=5, turn_limit=6, completion_cap=512, episode_tokens=9000) == {
        "completion cap 512 tokens per request; episode budget 9,000 tokens; call limit 5; "
        f"turn limit 6 ({NEVER})"
    }
    assert labels(call_limit_over_certified=1, turn_limit_over_calls=0) == {
        "completion cap 1,024 tokens per request; episode budget 128,000 tokens; call "
        "limit = certified minimum + 1; turn limit = call limit + 0 (can fire)"
    }
    (mixed,) = labels(call_limit_over_certified=2, turn_limit=9)
    assert mixed.endswith("turn limit 9 (can fire only where a task's call limit reaches it)")


# ---- Table 10 in the offline study report -------------------------------------------------


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("offline")
    path = _study(tmp, held=2)
    out = tmp / "out"
    code, printed = run_cli("study", "run", path, "--out", out, "--draws", "200", "--json")
    assert code == 0, printed[-2000:]
    return path, out


def _md_table(text: str, title: str) -> list[list[str]]:
    block = text.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]


def test_the_offline_report_prints_table10_from_its_records(offline: tuple[Path, Path]) -> None:
    _, out = offline
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    text = (out / "report.md").read_text()
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("orchestration") is not None:
            groups[(r["orchestration"], r["delivery"], r["certified_minimum"])].append(r)
    rows = _md_table(text, "Structural holdout arms (Table 10)")
    assert len(rows) == len(groups) == 6
    for row in rows:
        rs = groups[(row[0].lower(), row[1], int(row[2]))]
        assert int(row[3]) == len(rs) == 2  # two held-out families, one seed
        assert row[4] == f"{100 * np.mean([r['success'] for r in rs]):.1f}"
        assert row[8] == f"{np.mean([r['calls'] for r in rs]):.1f}"
        assert row[6] == f"{np.mean([r['controller_calls'] for r in rs]):.1f}"
    # two families: the quantities' intervals are withheld with the reason, never printed
    quantities = _md_table(text, "Structural holdout: L, Gamma, Sigma and Delta of the controller")
    assert quantities and all("too few" in cell for _, cell in quantities)
    assert not any(re.search(r"\[[-+\d.]+ ?(pp)?, [-+\d.]+", cell) for _, cell in quantities)
    assert f"### {CONTRACT_TITLE}" in text and SEED_CONTRACT.split(";")[0] in text


def test_a_study_without_holdout_arms_prints_no_holdout(offline: tuple[Path, Path]) -> None:
    path, out = offline
    doc = yaml.safe_load(path.read_text())
    doc["arms"] = [a for a in doc["arms"] if "delivery" not in a]
    del doc["holdout"]
    plain = path.with_name("plain.yaml")
    plain.write_text(yaml.safe_dump(doc))
    code, printed = run_cli(
        "study", "run", plain, "--out", out.with_name("plain"), "--draws", "200"
    )
    assert code == 0, printed[-2000:]
    text = (out.with_name("plain") / "report.md").read_text()
    assert "Structural holdout" not in text and CONTRACT_TITLE in text
