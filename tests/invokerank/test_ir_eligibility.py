"""Per-intent eligibility (issue 41, item 2): the corpus's ``eligible`` field, its checks,
and the Selection Share, the Lever against the best competitor and the Lever's exclusion
of self-served runs, against hand counts from constructed runs (seed 3.4, 4.2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.experiments.loader import folder_reader, load_experiment
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import ArmInvokeRank
from prereg.reports.observations import Obs, from_record
from tests.conftest import tree_digest

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "podcast-selection"

# ---- the corpus field ---------------------------------------------------------------------


def _experiment(tmp_path: Path, block: str) -> Path:
    folder = tmp_path / "podcast-selection"
    shutil.copytree(BUNDLED, folder)
    corpus = folder / "corpus.yaml"
    corpus.write_text(corpus.read_text(encoding="utf-8") + "\n" + block, encoding="utf-8")
    return folder


def test_bundled_experiment_declares_nothing_and_keeps_every_competitor() -> None:
    experiment = load_experiment(folder_reader(BUNDLED), "podcast-selection")
    assert experiment.eligible == {}
    # the default: every competitor of the pool (the decoy never)
    assert experiment.eligible_competitors("episodes") == {"castaway", "earbud"}


def test_declared_sets_are_loaded_and_the_rest_keep_the_default(tmp_path: Path) -> None:
    folder = _experiment(tmp_path, "eligible:\n  episodes: [castaway]\n  podcast-chat: []\n")
    experiment = load_experiment(folder_reader(folder), "podcast-selection")
    assert experiment.eligible_competitors("episodes") == {"castaway"}
    assert experiment.eligible_competitors("podcast-chat") == frozenset()
    assert experiment.eligible_competitors("find-podcast") == {"castaway", "earbud"}


@pytest.mark.parametrize(
    ("block", "field", "says"),
    [
        ("eligible:\n  no-such-intent: [castaway]\n", "eligible.no-such-intent", "unknown intent"),
        ("eligible:\n  episodes: [castaway, nobody]\n", "eligible.episodes[1]", "not an integ"),
        ("eligible:\n  episodes: [weather]\n", "eligible.episodes[0]", "decoy"),
        ("eligible:\n  episodes: [focal]\n", "eligible.episodes[0]", "focal integration"),
        ("eligible:\n  episodes: [earbud, earbud]\n", "eligible.episodes[1]", "twice"),
    ],
)
def test_bad_declarations_are_exit_2_naming_the_file_and_field(
    tmp_path: Path, block: str, field: str, says: str
) -> None:
    folder = _experiment(tmp_path, block)
    with pytest.raises(BadInput) as err:
        load_experiment(folder_reader(folder), "podcast-selection")
    assert err.value.exit_code == 2
    assert err.value.field == field
    assert "corpus.yaml" in str(err.value.file)
    assert says in err.value.message


# ---- shares and Levers from constructed runs ----------------------------------------------

SERVERS = [("focal", "focal"), ("r1", "competitor"), ("r2", "competitor")]
CLASS = {"focal": "focal", "r1": "competitor", "r2": "competitor"}

# Two intents, 4 prompts x 2 repeats each; the first choice of every run (None: no tool).
# Repeat 0 without a tool ends unresolved, repeat 1 searched then declined.
#   x: focal 3, r1 2, r2 1, no tool 2
#   y: focal 2, r1 1, r2 3, no tool 2
FIRST: dict[str, list[str | None]] = {
    "x0": ["focal", "focal"],
    "x1": ["focal", "r1"],
    "x2": ["r1", "r2"],
    "x3": [None, None],
    "y0": ["focal", "focal"],
    "y1": ["r1", "r2"],
    "y2": ["r2", "r2"],
    "y3": [None, None],
}


def _run(task: str, repeat: int, first: str | None) -> Obs:
    cls = CLASS[first] if first else ("searched_then_declined" if repeat else "unresolved")
    return from_record(
        {
            "record_id": f"a/{task}/{repeat}",
            "registration_id": "r",
            "arm": "a",
            "task_id": task,
            "intent": task[0],
            "polarity": "positive",
            "repeat": repeat,
            "status": "ok",
            "evidence_class": "S",
            "terminal_class": cls,
            "funnel": {"surfaced": first == "focal" or repeat == 0, "selected": first == "focal"},
            "offer": {
                "servers": [{"key": k, "role": r} for k, r in SERVERS],
                "first_server": first,
            },
        }
    )


RUNS = [_run(t, r, first) for t, picks in FIRST.items() for r, first in enumerate(picks)]


def _arm(runs: list[Obs] = RUNS, **options: object) -> ArmInvokeRank:
    section = invokerank_section(runs, [ArmMeta("a", "focal")], seed=3, **options)  # type: ignore[arg-type]
    assert section is not None
    return section.arms[0]


def _shares(arm: ArmInvokeRank) -> dict[tuple[str, str], tuple[int, float | None]]:
    assert arm.shares is not None
    return {(r.intent, r.integration): (r.hits, r.share) for r in arm.shares.rows}


def test_shares_without_a_declaration_use_every_competitor() -> None:
    got = _shares(_arm())
    # IS_ic = hits_ic / sum over the eligible j of hits_jc (no tool never counts)
    assert got[("x", "focal")] == (3, pytest.approx(3 / 6))
    assert got[("x", "r1")] == (2, pytest.approx(2 / 6))
    assert got[("x", "r2")] == (1, pytest.approx(1 / 6))
    assert got[("y", "focal")] == (2, pytest.approx(2 / 6))
    assert got[("y", "r1")] == (1, pytest.approx(1 / 6))
    assert got[("y", "r2")] == (3, pytest.approx(3 / 6))


def test_an_ineligible_competitor_leaves_the_intents_denominator() -> None:
    arm = _arm(eligible={"y": ["r1"]})
    got = _shares(arm)
    # x: not declared, every competitor eligible (3, 2, 1 of 6)
    assert got[("x", "focal")] == (3, pytest.approx(3 / 6))
    assert got[("x", "r2")] == (1, pytest.approx(1 / 6))
    # y: E_y = {focal, r1}: r2's 3 first choices are in neither numerator nor
    # denominator, so focal 2 of 3 and r1 1 of 3, and r2 has no row for y
    assert got[("y", "focal")] == (2, pytest.approx(2 / 3))
    assert got[("y", "r1")] == (1, pytest.approx(1 / 3))
    assert ("y", "r2") not in got
    # the roll-up: the equal-weight mean over the contested intents where each is eligible
    assert got[("roll-up", "focal")][1] == pytest.approx((3 / 6 + 2 / 3) / 2)
    assert got[("roll-up", "r1")][1] == pytest.approx((2 / 6 + 1 / 3) / 2)
    assert got[("roll-up", "r2")] == (1, pytest.approx(1 / 6))  # x only
    assert arm.shares is not None
    assert "declared per intent in the corpus" in arm.shares.eligible
    assert "3 first choice(s) went to a competitor not eligible" in arm.shares.eligible


def test_an_intent_with_no_eligible_competitor_is_not_contested() -> None:
    arm = _arm(eligible={"y": []})
    assert arm.shares is not None
    assert arm.shares.contested_intents == ["x"]
    assert not any(r.intent == "y" for r in arm.shares.rows)
    # the roll-up is then x alone
    assert _shares(arm)[("roll-up", "focal")][1] == pytest.approx(3 / 6)


def _levers(arm: ArmInvokeRank) -> dict[str, tuple[str | None, float | None, float | None]]:
    return {
        lv.intent: (lv.best_competitor, lv.competitor_rate, lv.lever) for lv in arm.lever_competitor
    }


def _expected_lever(arm: ArmInvokeRank, intent: str, rate: float) -> float:
    """Lever = Q (r_best / r_focal - 1)^+ with the focal's r_D r_S and E[Q] of the intent."""
    row = next(lv for lv in arm.lever_competitor if lv.intent == intent)
    q = next(i.q for i in arm.intents if i.intent == intent)
    return q * max(rate / row.focal_rate - 1.0, 0.0)


def test_the_best_competitor_is_the_best_eligible_one() -> None:
    free = _levers(_arm())
    # first-choice shares over all 8 runs of the intent: x r1 2/8, r2 1/8; y r1 1/8, r2 3/8
    assert free["x"][:2] == ("r1", pytest.approx(2 / 8))
    assert free["y"][:2] == ("r2", pytest.approx(3 / 8))
    arm = _arm(eligible={"y": ["r1"]})
    declared = _levers(arm)
    assert declared["x"][:2] == ("r1", pytest.approx(2 / 8))
    assert declared["y"][:2] == ("r1", pytest.approx(1 / 8))  # r2 is not eligible for y
    assert declared["y"][2] == pytest.approx(_expected_lever(arm, "y", 1 / 8))
    none = _levers(_arm(eligible={"y": []}))
    assert none["y"] == (None, None, None)  # no eligible competitor: no Lever


# The native judge found the searched-then-declined run of x3 and of y3 (repeat 1) met
# the need; the unresolved runs (repeat 0) are never self-served, whatever the verdict.
NATIVE = {"a/x3/1": True, "a/y3/1": True, "a/x3/0": True, "a/y3/0": False}


def test_self_served_runs_leave_the_competitors_first_choice_shares() -> None:
    arm = _arm(native=NATIVE, eligible={"y": ["r1"]})
    levers = _levers(arm)
    # each intent loses one run (x3/1, y3/1): the competitors' rates are over 7 runs
    assert levers["x"][:2] == ("r1", pytest.approx(2 / 7))
    assert levers["y"][:2] == ("r1", pytest.approx(1 / 7))
    assert [i.provenance.parameters["lever_excludes_self_served"] for i in arm.intents] == [1, 1]


# Three intents of 6 prompts x 2 repeats: x always the focal; y the focal on 4 of 12 runs
# at repeat 0 and on none at repeat 1; z the focal only on its last prompt. The native
# judge found z's five declined runs (repeat 1 of z0..z4) self-served.
SPREAD: dict[str, list[str | None]] = {
    **{f"x{i}": ["focal", "focal"] for i in range(6)},
    **{f"y{i}": ["focal", None] if i < 4 else [None, None] for i in range(6)},
    **{f"z{i}": [None, None] if i < 5 else ["focal", "focal"] for i in range(6)},
}
SPREAD_RUNS = [_run(t, r, first) for t, picks in SPREAD.items() for r, first in enumerate(picks)]
SERVED = {f"a/z{i}/1" for i in range(5)}


def test_the_lever_leaves_out_self_served_runs() -> None:
    arm = _arm(SPREAD_RUNS, native=dict.fromkeys(SERVED, True))
    without = _arm([o for o in SPREAD_RUNS if o.record_id not in SERVED])
    plain = _arm(SPREAD_RUNS)
    # Lever_k = Q (median_c r_ck / r_k - 1)^+ from the posterior means of the fit
    # without the self-served runs (written out from that fit's stages)
    rates = {i.intent: [s.posterior_mean for s in i.stages] for i in without.intents}
    for intent in arm.intents:
        r = rates[intent.intent]
        q = r[0] * r[1]
        for k, stage in enumerate(("surfaced", "selected")):
            median = sorted(v[k] for v in rates.values())[1]  # three intents
            assert intent.lever[stage] == pytest.approx(q * max(median / r[k] - 1.0, 0.0))
    z = next(i for i in arm.intents if i.intent == "z")
    z_plain = next(i for i in plain.intents if i.intent == "z")
    assert z.lever["selected"] != pytest.approx(z_plain.lever["selected"])
    assert z.provenance.parameters["lever_excludes_self_served"] == 5
    # the score itself still counts every positive run (self-service is not in Q, and
    # the runs stay in its denominator)
    assert arm.q == pytest.approx(plain.q)
    assert [i.runs for i in arm.intents] == [12, 12, 12]
    # without a native verdict nothing is left out, and nothing is said
    assert "lever_excludes_self_served" not in plain.intents[0].provenance.parameters


# ---- frozen with the registration ---------------------------------------------------------


def test_register_refuses_a_bad_declaration_and_freezes_a_good_one(ws: Path, cli: Any) -> None:
    corpus = ws / "experiments" / "podcast-selection" / "corpus.yaml"
    original = corpus.read_text(encoding="utf-8")
    draft = ws / "drafts" / "podcast-selection-controls.yaml"
    corpus.write_text(original + "\neligible:\n  episodes: [weather]\n", encoding="utf-8")
    before = tree_digest(ws / "registry")
    bad = cli("-w", ws, "register", draft, "--json")
    assert bad.code == 2, (bad.stdout, bad.stderr)
    assert "corpus.yaml" in bad.stderr and "eligible.episodes[0]" in bad.stderr
    assert tree_digest(ws / "registry") == before  # nothing written
    corpus.write_text(original + "\neligible:\n  episodes: [castaway]\n", encoding="utf-8")
    good = cli("-w", ws, "register", draft, "--json")
    assert good.code == 0, (good.stdout, good.stderr)
    # the declaration is frozen with the corpus the registration pins
    frozen = [p for p in (ws / "registry").rglob("*") if p.is_file()]
    assert any(b"episodes: [castaway]" in p.read_bytes() for p in frozen)


# ---- through prereg analyse ---------------------------------------------------------------


def _analysed_shares(ws: Path, cli: Any) -> dict[str, Any]:
    reg_id = "podcast-selection-controls"
    assert cli("-w", ws, "register", ws / "drafts" / f"{reg_id}.yaml").code == 0
    assert cli("-w", ws, "run", reg_id).code == 0
    assert cli("-w", ws, "analyse", reg_id, "--json").code == 0
    report = json.loads((ws / "reports" / reg_id / "report.json").read_text())
    return dict(report["invokerank"]["arms"][0]["shares"])


def test_analyse_uses_the_declared_eligibility(tmp_path: Path, cli: Any) -> None:
    """The same local-host runs analysed with and without a declaration: with it, the
    ineligible competitor leaves its intent's shares, which are the other integrations'
    hits over their own total (hits read from the report made without it)."""
    plain, declared = tmp_path / "plain", tmp_path / "declared"
    assert cli("init", plain).code == 0
    before = _analysed_shares(plain, cli)
    hits: dict[str, dict[str, int]] = {}
    for row in before["rows"]:
        hits.setdefault(row["intent"], {})[row["integration"]] = row["hits"]
    intent, dropped = next(
        (i, c)
        for i, by in sorted(hits.items())
        for c, n in sorted(by.items())
        if n and c != "focal"
    )
    kept = sorted(c for c in hits[intent] if c not in ("focal", dropped))
    assert cli("init", declared).code == 0
    corpus = declared / "experiments" / "podcast-selection" / "corpus.yaml"
    block = f"\neligible:\n  {intent}: [{', '.join(kept)}]\n"
    corpus.write_text(corpus.read_text(encoding="utf-8") + block, encoding="utf-8")
    after = _analysed_shares(declared, cli)
    rows = {r["integration"]: r for r in after["rows"] if r["intent"] == intent}
    assert dropped not in rows
    total = sum(hits[intent][c] for c in rows)
    for name, row in rows.items():
        assert row["hits"] == hits[intent][name]
        assert row["share"] == pytest.approx(hits[intent][name] / total)
    assert (
        f"{hits[intent][dropped]} first choice(s) went to a competitor not eligible"
        in (after["eligible"])
    )
    # the other intents are as before (the roll-up over intents changes with this one)
    unchanged = (intent, "roll-up")
    others = [r for r in after["rows"] if r["intent"] not in unchanged]
    assert others == [r for r in before["rows"] if r["intent"] not in unchanged]
