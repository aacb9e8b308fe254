"""``prereg analyse --fail-unless VERDICT``: a CI gate on the mechanical verdict (issue 37).

Exit 5 when the verdict is not one of those accepted, after the report is written and
printed (``--json``: its one document); an unknown verdict name is a usage error (exit
2) that lists the valid names and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.commands.analyse_cmds import VERDICT_GATE_EXIT, VERDICTS, accepted_verdicts
from prereg.core.errors import BadInput
from tests.reports import append, make_lab, paired_records, register, registration, seed002_outcomes

FILES = ("report.json", "report.md", "report.html")


def _lab(cli: Any, ws: Path, reg_id: str, discordant_for: int, discordant_against: int) -> Path:
    """A confirmatory registration whose runs read as chosen: 7 discordant pairs all one
    way is supported (McNemar, alpha 0.05); 4 against 3 is not_supported."""
    tasks = make_lab(ws, n_tasks=24)
    digest = register(cli, ws, registration(reg_id))
    ctl, trt = seed002_outcomes(
        24, 10, 10 + discordant_for - discordant_against, discordant_for + discordant_against
    )
    append(ws, paired_records(reg_id, digest, tasks, ctl, trt))
    return ws / "reports" / reg_id


@pytest.fixture
def supported(cli: Any, ws: Path) -> Path:
    return _lab(cli, ws, "lab-yes", 7, 0)


@pytest.fixture
def not_supported(cli: Any, ws: Path) -> Path:
    return _lab(cli, ws, "lab-no", 4, 3)


def test_a_supported_verdict_passes_the_gate(cli: Any, ws: Path, supported: Path) -> None:
    result = cli("-w", ws, "analyse", "lab-yes", "--fail-unless", "supported", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["verdict"] == "supported"  # type: ignore[index]
    assert all((supported / name).is_file() for name in FILES)


def test_any_other_verdict_exits_5_with_the_report_written(
    cli: Any, ws: Path, not_supported: Path
) -> None:
    assert VERDICT_GATE_EXIT == 5
    human = cli("-w", ws, "analyse", "lab-no", "--fail-unless", "supported")
    assert human.code == 5
    assert all((not_supported / name).is_file() for name in FILES)
    assert "Verdict: not_supported" in human.stdout  # the report is still printed
    assert "verdict gate not met" in human.stderr and "'not_supported'" in human.stderr

    for name in FILES:
        (not_supported / name).unlink()
    as_json = cli("-w", ws, "analyse", "lab-no", "--fail-unless", "supported", "--json")
    assert as_json.code == 5
    document = json.loads(as_json.stdout)  # exactly one document, the report
    assert document["verdict"] == "not_supported"
    assert json.loads((not_supported / "report.json").read_text())["verdict"] == "not_supported"
    assert all((not_supported / name).is_file() for name in FILES)


def test_repeated_and_respelled_verdicts_are_accepted(
    cli: Any, ws: Path, not_supported: Path
) -> None:
    for spelling in ("not_supported", "not supported", "not-supported", "NOT_SUPPORTED"):
        result = cli(
            "-w", ws, "analyse", "lab-no", "--fail-unless", "supported", "--fail-unless", spelling
        )
        assert result.code == 0, (spelling, result.stderr)
    gated = cli(
        "-w", ws, "analyse", "lab-no", "--fail-unless", "supported", "--fail-unless", "inconclusive"
    )
    assert gated.code == 5


def test_without_the_option_the_verdict_never_changes_the_exit_code(
    cli: Any, ws: Path, not_supported: Path
) -> None:
    assert cli("-w", ws, "analyse", "lab-no").code == 0


def test_an_unknown_verdict_is_a_usage_error_that_writes_nothing(
    cli: Any, ws: Path, not_supported: Path
) -> None:
    result = cli("-w", ws, "analyse", "lab-no", "--fail-unless", "suported")
    assert result.code == 2
    message = " ".join(result.stderr.split())
    assert "'suported'" in message and "--fail-unless" in message
    for verdict in VERDICTS:
        assert verdict in message
    assert not not_supported.exists()
    as_json = cli("-w", ws, "analyse", "lab-no", "--fail-unless", "maybe", "--json")
    assert as_json.code == 2
    assert as_json.json()["field"] == "--fail-unless"  # type: ignore[index]
    assert not not_supported.exists()


def test_the_valid_names_are_the_report_verdicts() -> None:
    assert set(VERDICTS) == {
        "supported",
        "not_supported",
        "inconclusive",
        "not_runnable",
        "incomplete",
    }
    assert accepted_verdicts(["Not Runnable", "incomplete"]) == {"not_runnable", "incomplete"}
    with pytest.raises(BadInput):
        accepted_verdicts([""])


def test_the_gate_is_in_the_help(cli: Any) -> None:
    result = cli("analyse", "--help")
    assert result.code == 0
    text = " ".join(result.stdout.split())
    assert "--fail-unless" in text and "Exit 5" in text
