"""The report's first-choice, terminal and resolution blocks from constructed runs:
the Invoke Rating against statsmodels on the same choices, shares and terminal classes
against hand counts, the seed's Figure 4 counts and its degenerate split (6.3)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from statsmodels.discrete.conditional_models import ConditionalLogit

from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import InvokeRankReport
from prereg.reports.observations import Obs, from_record
from prereg.reports.render.figures import terminal_breakdown

POOL = [("focal", "focal"), ("rival", "competitor"), ("decoy", "decoy")]


def _run(task: str, repeat: int, order: list[int], first: str | None, intent: str) -> Obs:
    external = {"focal": "focal", "rival": "competitor", "decoy": "other_external"}
    cls = external[first] if first else ("searched_then_declined" if repeat else "unresolved")
    return from_record(
        {
            "record_id": f"a/{task}/{repeat}",
            "registration_id": "r",
            "arm": "a",
            "task_id": task,
            "intent": intent,
            "polarity": "positive",
            "repeat": repeat,
            "status": "ok",
            "evidence_class": "S",
            "terminal_class": cls,
            "funnel": {"surfaced": first == "focal" or repeat == 0, "selected": first == "focal"},
            "offer": {
                "servers": [{"key": POOL[i][0], "role": POOL[i][1]} for i in order],
                "first_server": first,
            },
        }
    )


def _choices(seed: int, prompts: int, intents: tuple[str, ...]) -> list[Obs]:
    rng = np.random.default_rng(seed)
    beta = {"focal": 0.4, "rival": -0.3, "decoy": -1.5}
    runs = []
    for p in range(prompts):
        for r in range(2):
            order = list(rng.permutation(3))
            utility = [0.0] + [beta[POOL[i][0]] - 0.4 * k for k, i in enumerate(order)]
            prob = np.exp(utility) / np.sum(np.exp(utility))
            pick = rng.choice(4, p=prob)
            first = None if pick == 0 else POOL[order[pick - 1]][0]
            runs.append(_run(f"p-{p}", r, order, first, intents[p % len(intents)]))
    return runs


def _section(runs: list[Obs]) -> InvokeRankReport:
    section = invokerank_section(runs, [ArmMeta("a", "s")], seed=2)
    assert section is not None
    return section


def test_rating_equals_statsmodels_on_the_recorded_choices() -> None:
    runs = _choices(1, 150, ("only",))
    arm = _section(runs).arms[0]
    rating = arm.rating
    assert rating is not None and rating.reason.startswith("fitted")
    rows, y, groups = [], [], []
    keys = [k for k, _ in POOL]
    for t, o in enumerate(runs):
        listed = [s["key"] for s in o.offer["servers"]]  # type: ignore[index]
        for alt in [None, *listed]:
            x = np.zeros(4)
            if alt is not None:
                x[keys.index(alt)], x[3] = 1.0, listed.index(alt)
            rows.append(x)
            y.append(int(alt == o.first_server))
            groups.append(t)
    model = ConditionalLogit(np.array(y), np.array(rows), groups=np.array(groups))
    ref = model.fit(disp=0)
    by = {r.integration: r for r in rating.rows}
    mine = np.array([by[k].beta for k in keys] + [rating.position], dtype=float)
    # statsmodels' own likelihood is maximal at the report's estimates (its BFGS stops
    # about 1e-4 short), and its standard errors agree
    np.testing.assert_allclose(model.score(mine), 0.0, atol=1e-5)
    assert model.loglike(mine) >= ref.llf - 1e-9
    for j, key in enumerate(keys):
        assert by[key].beta == pytest.approx(ref.params[j], abs=1e-3)
        assert by[key].se == pytest.approx(ref.bse[j], rel=1e-3)
        assert by[key].chosen == sum(o.first_server == key for o in runs)
        assert by[key].listed == len(runs)
        low, high = by[key].intervals[0].low, by[key].intervals[0].high
        assert low is not None and high is not None and low < by[key].rating < high
    assert rating.position == pytest.approx(ref.params[3], abs=1e-3)
    assert rating.no_tool == sum(o.first_server is None for o in runs)
    assert rating.branded is None  # no task records a branded prompt
    # the calibrated interval brackets the plug-in score: the share of runs selecting
    # the focal integration (one intent), by hand
    share = sum(o.first_server == "focal" for o in runs) / len(runs)
    low, high = arm.calibrated[0].low, arm.calibrated[0].high
    assert arm.calibrated[0].level == 0.9 and low is not None and high is not None
    assert low < share < high and "bootstrap" in arm.calibrated[0].method


def test_selection_shares_and_terminal_counts_by_hand() -> None:
    runs = _choices(4, 60, ("x", "y"))
    arm = _section(runs).arms[0]
    assert arm.shares is not None and arm.shares.label == "Selection Share"
    assert arm.shares.contested_intents == ["x", "y"]
    for row in arm.shares.rows:
        mine = [o for o in runs if row.intent in (o.intent, "roll-up")]
        focal = sum(o.first_server == "focal" for o in mine if o.intent == "x")
        rival = sum(o.first_server == "rival" for o in mine if o.intent == "x")
        if row.intent == "x":
            expected = (focal if row.integration == "focal" else rival) / (focal + rival)
            assert row.share == pytest.approx(expected)
        assert row.integration != "decoy"  # decoys are never eligible
    by_intent = {(t.polarity, t.intent): t for t in arm.terminal}
    for intent in ("x", "y"):
        mine = [o for o in runs if o.intent == intent]
        counts = by_intent[("positive", intent)].counts
        assert counts["focal"] == sum(o.terminal_class == "focal" for o in mine)
        assert counts["other_external"] == sum(o.first_server == "decoy" for o in mine)
        assert counts["unresolved"] == sum(o.terminal_class == "unresolved" for o in mine)
    assert by_intent[("positive", "all intents")].runs == len(runs)
    # the Lever against the best competitor: the only competitor is the rival
    assert [x.best_competitor for x in arm.lever_competitor] == ["rival", "rival"]
    png = terminal_breakdown_png(arm)
    assert png.startswith(b"\x89PNG")


def terminal_breakdown_png(arm: Any) -> bytes:
    report = type(
        "R",
        (),
        {
            "invokerank": InvokeRankReport(
                note="", display_rule="", levels=[0.9], draws=1, seed=1, pass_k=3, arms=[arm]
            )
        },
    )()
    png = terminal_breakdown(report)  # type: ignore[arg-type]
    assert png is not None
    return png


#: The seed's Figure 4, Claude API rows (intent: focal, competitor, answered without
#: search, searched then declined).
FIGURE_4 = {
    "prepare-quarterly-update": (37, 0, 0, 9),
    "mtd-deadlines": (27, 2, 6, 11),
    "record-transaction": (32, 1, 3, 24),
    "log-business-mileage": (22, 1, 10, 15),
    "check-mtd-obligation": (20, 0, 23, 1),
    "create-send-invoice": (15, 0, 2, 33),
    "estimate-sole-trader-tax": (9, 0, 43, 2),
    "check-tax-code": (0, 0, 32, 10),
}


def test_seed_figure_4_and_its_degenerate_split() -> None:
    names = ("focal", "competitor", "answered_without_search", "searched_then_declined")
    runs = []
    for intent, counts in FIGURE_4.items():
        t = 0
        for cls, count in zip(names, counts, strict=True):
            for _ in range(count):
                runs.append(
                    from_record(
                        {
                            "registration_id": "r",
                            "arm": "claude",
                            "task_id": f"{intent}-{t // 2}",
                            "intent": intent,
                            "repeat": t % 2,
                            "terminal_class": cls,
                            "funnel": {"surfaced": cls == "focal", "selected": cls == "focal"},
                        }
                    )
                )
                t += 1
    section = invokerank_section(runs, [ArmMeta("claude", "taptax")], seed=1)
    assert section is not None
    arm = section.arms[0]
    total = next(t for t in arm.terminal if t.intent == "all intents")
    assert total.runs == 390
    assert (total.counts["focal"], total.counts["competitor"]) == (162, 4)
    assert total.counts["answered_without_search"] == 119
    assert total.counts["searched_then_declined"] == 105
    split = arm.resolution
    assert split is not None and split.degenerate and split.unjudged == 224
    # every positive run stays in the denominator: focal is 162 of 390 (41.5%), not the
    # published split's share of the 166 runs with an external call
    assert split.shares["focal"] == pytest.approx(162 / 390)
    assert split.host_self_serve is None and split.no_tool_decline is None
    assert "224" in split.note and "degenerate" in split.note
