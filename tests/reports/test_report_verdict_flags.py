"""No CLI flag changes the verdict of a confirmatory registration.

The property, precisely: for a confirmatory registration and a fixed run set,
every combination of ``--explore`` and ``--allow-incomplete`` either refuses
(exit 4, and only for an incomplete set without ``--allow-incomplete``) or
reports the same ``verdict`` and the same primary numbers. ``--explore`` only
relabels the report (``mode``), and moves it to ``reports/ID/exploratory/`` so
the confirmatory report is never overwritten. On an incomplete set the verdict
is ``incomplete`` even when the partial runs would read ``supported``: a flag can
never upgrade a verdict. And no exploratory report announces a verdict as a
confirmatory claim, in any format.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.reports import append, make_lab, paired_records, register, registration, seed002_outcomes

FLAGS = [
    list(c)
    for n in range(3)
    for c in itertools.combinations(["--explore", "--allow-incomplete"], n)
]
PRIMARY_KEYS = ("test", "estimate", "interval", "pvalue", "discordant", "reading")


def _supported_lab(cli, ws: Path, reg_id: str = "lab-conf", keep: int | None = None):  # type: ignore[no-untyped-def]
    tasks = make_lab(ws, n_tasks=24)
    digest = register(cli, ws, registration(reg_id))
    ctl, trt = seed002_outcomes(24, 10, 17, 7)  # 7 discordant, all favouring semantic
    records = paired_records(reg_id, digest, tasks, ctl, trt)
    append(ws, records if keep is None else records[:keep])
    return tasks


def test_flags_never_change_a_confirmatory_verdict(cli, ws: Path) -> None:
    _supported_lab(cli, ws)
    base = cli("-w", ws, "analyse", "lab-conf", "--json")
    assert base.code == 0, base.stderr
    base_data = base.json()
    assert base_data["verdict"] == "supported" and base_data["mode"] == "confirmatory"
    confirmatory = ws / "reports" / "lab-conf" / "report.json"

    for flags in FLAGS[1:]:
        before = confirmatory.read_bytes()
        result = cli("-w", ws, "analyse", "lab-conf", *flags, "--json")
        assert result.code == 0, (flags, result.stderr)
        data = result.json()
        assert data["verdict"] == base_data["verdict"], flags
        assert data["verdict_detail"]["value"] == base_data["verdict_detail"]["value"]
        assert {k: data["primary"][k] for k in PRIMARY_KEYS} == {
            k: base_data["primary"][k] for k in PRIMARY_KEYS
        }, flags
        explored = "--explore" in flags
        assert data["mode"] == ("exploratory" if explored else "confirmatory"), flags
        if explored:
            assert "--explore was given" in data["exploratory_reasons"]
            assert Path(data["report_dir"]).name == "exploratory"
            # the confirmatory report is never overwritten by an exploratory one
            assert confirmatory.read_bytes() == before


def test_explore_never_announces_a_confirmatory_claim(cli, ws: Path) -> None:
    _supported_lab(cli, ws)
    human = cli("-w", ws, "analyse", "lab-conf", "--explore")
    assert human.code == 0, human.stderr
    assert "Verdict: supported" not in human.stdout
    assert "Exploratory reading" in human.stdout and "not a confirmatory claim" in human.stdout
    folder = ws / "reports" / "lab-conf" / "exploratory"
    for name in ("report.md", "report.html"):
        text = (folder / name).read_text()
        assert "Verdict: supported" not in text and "Verdict: </strong>supported" not in text
        assert "EXPLORATORY: not a confirmatory claim" in text

    confirmed = cli("-w", ws, "analyse", "lab-conf")
    assert "Verdict: supported" in confirmed.stdout


def test_incomplete_is_never_upgraded(cli, ws: Path) -> None:
    # drop the semantic run of the last task (both arms fail it): the partial set keeps
    # seven discordant pairs favouring semantic, so the rule alone would read "supported"
    _supported_lab(cli, ws, keep=24 + 23)
    for flags in FLAGS:
        result = cli("-w", ws, "analyse", "lab-conf", *flags, "--json")
        if "--allow-incomplete" not in flags:
            assert result.code == 4, flags
            continue
        data = result.json()
        assert result.code == 0
        assert data["verdict"] == "incomplete", flags
        assert data["verdict_detail"]["rule_reading"] == "supported"
        assert data["mode"] == "exploratory"


def test_not_runnable_is_reported_whatever_the_flags(cli, ws: Path) -> None:
    make_lab(ws, n_tasks=24)
    doc = registration("lab-hopeless", plan={"mde": 0.02, "power": 0.8, "sigma_d": 0.3})
    result = cli("-w", ws, "register", _write(ws, doc), "--json")
    assert result.code == 0 and result.json()["runnable"] is False

    for flags in FLAGS:
        out = cli("-w", ws, "analyse", "lab-hopeless", *flags, "--json")
        assert out.code == 0, (flags, out.stderr)
        data = out.json()
        assert data["verdict"] == "not_runnable", flags
        assert data["verdict_detail"]["decided_by"].startswith("registry")
        assert data["feasibility"]["runnable"] is False
        assert data["primary"] is None  # no run exists, none was estimated


def test_exploratory_registration_is_labelled_throughout(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=24, split="dev")
    digest = register(cli, ws, registration("lab-pilot", kind="exploratory"))
    ctl, trt = seed002_outcomes(24, 10, 17, 7)
    append(ws, paired_records("lab-pilot", digest, tasks, ctl, trt))

    data = cli("-w", ws, "analyse", "lab-pilot", "--json").json()
    assert data["mode"] == "exploratory" and data["kind"] == "exploratory"
    assert data["verdict"] == "supported"  # what the registered rule reads ...
    human = cli("-w", ws, "analyse", "lab-pilot")
    assert "Verdict: supported" not in human.stdout  # ... never announced as a claim
    html = (ws / "reports" / "lab-pilot" / "report.html").read_text()
    assert "EXPLORATORY: not a confirmatory claim" in html


def _write(ws: Path, doc: dict) -> Path:  # type: ignore[type-arg]
    import json

    path = ws / "drafts" / f"{doc['id']}.yaml"
    path.write_text(json.dumps(doc))
    return path
