"""The branded-prompt term (issue 17, item 3): a task may record that its prompt names the
focal integration; the field is absent from every task that does not record it, and the
Invoke Rating fits lambda when branded tasks exist (checked against statsmodels'
ConditionalLogit on simulated choices with a known coefficient)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from statsmodels.discrete.conditional_models import ConditionalLogit

from prereg.experiments.fingerprints import task_fingerprint
from prereg.experiments.models import CorpusFile, Task
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import Report
from prereg.reports.observations import Obs, from_record
from prereg.reports.render.text import invokerank_tables

ir = importlib.import_module("prereg.stats.invokerank")
POOL = [("focal", "focal"), ("rival", "competitor"), ("decoy", "decoy")]
BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


def test_a_task_without_the_flag_dumps_and_fingerprints_as_before() -> None:
    fields = {"id": "t1", "intent": "find", "cluster": "k1", "prompt": "Find a podcast."}
    plain = Task.model_validate(fields)
    assert "branded" not in plain.model_dump() and "branded" not in plain.model_dump(mode="json")
    assert plain.branded is None
    flagged = Task.model_validate({**fields, "branded": True})
    assert flagged.model_dump(mode="json")["branded"] is True
    # the locked split's fingerprint is the prompt's: the flag does not free or claim a task
    assert task_fingerprint(flagged) == task_fingerprint(plain)
    # the bundled corpora record no flag: their tasks dump as before the field existed
    for corpus in sorted(BUNDLED.glob("*/corpus.yaml")):
        tasks = CorpusFile.model_validate(yaml.safe_load(corpus.read_text())).tasks
        assert all("branded" not in t.model_dump(mode="json") for t in tasks)


J = 3
BETA = np.array([0.2, -0.1, -0.9])
GAMMA = -0.25
LAMBDA = 0.9  # the branded prompt's shift of its named alternative's utility


def _simulate(runs: int, seed: int) -> dict[str, Any]:
    """Alternative 0 is named by a third of the prompts (two runs per prompt)."""
    rng = np.random.default_rng(seed)
    available = rng.random((runs, J)) > 0.1
    position = np.array([rng.permutation(J) for _ in range(runs)], dtype=float)
    named = np.repeat(rng.random(runs // 2) < 1 / 3, 2)
    branded = np.zeros((runs, J))
    branded[:, 0] = named
    chosen = np.empty(runs, dtype=np.int64)
    for t in range(runs):
        u = BETA + GAMMA * position[t] + LAMBDA * branded[t]
        utility = np.r_[0.0, np.where(available[t], u, -np.inf)]
        p = np.exp(utility - utility.max())
        chosen[t] = rng.choice(J + 1, p=p / p.sum()) - 1
    return {"chosen": chosen, "available": available, "position": position, "branded": branded}


def _long(d: dict[str, Any]) -> tuple[Any, Any, Any]:
    """statsmodels' long format: a row per run and listed alternative (and no tool)."""
    rows, y, groups = [], [], []
    for t, c in enumerate(d["chosen"]):
        for a in range(-1, J):
            if a >= 0 and not d["available"][t, a]:
                continue
            x = np.zeros(J + 2)
            if a >= 0:
                x[a], x[J], x[J + 1] = 1.0, d["position"][t, a], d["branded"][t, a]
            rows.append(x)
            y.append(int(c == a))
            groups.append(t)
    return np.array(y), np.array(rows), np.array(groups)


def test_branded_term_equals_statsmodels_and_recovers_the_known_coefficient() -> None:
    d = _simulate(1200, seed=12)
    got = ir.invoke_rating(
        d["chosen"],
        d["available"],
        position=d["position"],
        branded=d["branded"],
        prompt=np.arange(1200) // 2,
        prior_sd=None,
        resamples=0,
    )
    y, x, g = _long(d)
    model = ConditionalLogit(y, x, groups=g)
    mine = np.r_[got.beta, got.position, got.branded]
    # statsmodels' own likelihood: the same value, a zero score and a negative definite
    # Hessian at our estimates, so they are its maximum likelihood estimates (the
    # conditional logit's likelihood is concave); its standard errors are ours
    assert model.loglike(mine) == pytest.approx(got.loglik, abs=1e-8)
    np.testing.assert_allclose(model.score(mine), 0.0, atol=1e-6)
    hessian = model.hessian(mine)
    assert np.all(np.linalg.eigvalsh(hessian) < 0)
    se = np.sqrt(np.diag(np.linalg.inv(-hessian)))
    np.testing.assert_allclose(np.r_[got.se, got.position_se, got.branded_se], se, rtol=1e-4)
    # the known coefficients are recovered
    assert abs((got.branded - LAMBDA) / got.branded_se) < 3.5
    assert abs((got.position - GAMMA) / got.position_se) < 3.5
    assert np.all(np.abs((got.beta - BETA) / got.se) < 3.5)
    # without the term the named alternative's beta absorbs the branded runs' shift
    plain = ir.invoke_rating(
        d["chosen"], d["available"], position=d["position"], prior_sd=None, resamples=0
    )
    assert plain.branded is None and plain.beta[0] > got.beta[0]


def _branded_runs(seed: int, prompts: int) -> tuple[list[Any], set[str]]:
    """Runs choosing among focal, rival and decoy (positions rotated); the focal
    integration's utility rises by LAMBDA on the prompts that name it (every third)."""
    rng = np.random.default_rng(seed)
    beta = {"focal": 0.1, "rival": -0.2, "decoy": -1.2}
    names = {f"p-{p}" for p in range(0, prompts, 3)}
    runs = []
    for p in range(prompts):
        for r in range(2):
            order = list(rng.permutation(3))
            keys = [POOL[i][0] for i in order]
            named = f"p-{p}" in names
            utility = [0.0] + [
                beta[k] - 0.3 * i + LAMBDA * (named and k == "focal") for i, k in enumerate(keys)
            ]
            prob = np.exp(utility) / np.sum(np.exp(utility))
            pick = rng.choice(4, p=prob)
            runs.append(_run(f"p-{p}", r, order, None if pick == 0 else keys[pick - 1]))
    return runs, names


def test_the_report_fits_the_branded_term_when_branded_tasks_exist() -> None:
    runs, names = _branded_runs(3, 300)
    metas = [ArmMeta("a", "s")]
    flagged = invokerank_section(runs, metas, seed=1, branded=names)
    plain = invokerank_section(runs, metas, seed=1)
    assert flagged is not None and plain is not None
    rating, without = flagged.arms[0].rating, plain.arms[0].rating
    assert rating is not None and without is not None
    assert without.branded is None and "not fitted" in str(without.provenance.parameters)
    assert rating.branded is not None and rating.branded_se is not None
    assert "focal servers" in str(rating.provenance.parameters["branded"])
    # the same as the conditional logit on the runs' own matrices: branded is 1 for the
    # focal server of a branded task's runs, 0 elsewhere
    keys = [r.integration for r in rating.rows]
    chosen = [-1 if o.first_server is None else keys.index(o.first_server) for o in runs]
    listed = [[s["key"] for s in o.offer["servers"]] for o in runs]  # type: ignore[index]
    position = [[float(row.index(k)) for k in keys] for row in listed]
    branded = [[float(o.task_id in names and k == "focal") for k in keys] for o in runs]
    ref = ir.invoke_rating(
        chosen,
        np.ones((len(runs), 3), bool),
        prompt=[int(o.task_id[2:]) for o in runs],
        position=position,
        branded=branded,
        prior_sd=None,
        resamples=0,
    )
    assert rating.branded == pytest.approx(ref.branded, abs=1e-6)
    assert abs((rating.branded - LAMBDA) / rating.branded_se) < 3.5
    # the rating table shows lambda (and gamma) beside the ratings, only when fitted
    for section, shown in ((flagged, True), (plain, False)):
        tables = invokerank_tables(Report.model_construct(invokerank=section))
        rows = next(t[2] for t in tables if t[0].startswith("Invoke Rating"))
        terms = {r[1]: r[4] for r in rows if r[2] == "term"}
        assert ("branded-prompt term (lambda)" in terms) is shown
        assert "position term (gamma, per place down the list)" in terms


def _run(task: str, repeat: int, order: list[int], first: str | None) -> Obs:
    external = {"focal": "focal", "rival": "competitor", "decoy": "other_external"}
    return from_record(
        {
            "record_id": f"a/{task}/{repeat}",
            "registration_id": "r",
            "arm": "a",
            "task_id": task,
            "intent": "only",
            "polarity": "positive",
            "repeat": repeat,
            "status": "ok",
            "evidence_class": "S",
            "terminal_class": external[first] if first else "searched_then_declined",
            "funnel": {"surfaced": True, "selected": first == "focal"},
            "offer": {
                "servers": [{"key": POOL[i][0], "role": POOL[i][1]} for i in order],
                "first_server": first,
            },
        }
    )
