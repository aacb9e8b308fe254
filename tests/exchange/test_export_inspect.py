"""``prereg export --format inspect`` (issue 16, item 4): the logs Inspect AI reads.

The logs are read back with ``inspect_ai.log.read_eval_log`` (Inspect's own reader), and
what they hold is checked against the JSON Lines export of the same run store, reduced
here by the outcome definition written down in reports/observations.py's docstring (a
funnel stage counts over positive tasks only; a null stage after a false one is not
reached, otherwise not measured), not by prereg's code.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import skip_unless_ci, tree_digest
from tests.exchange.conftest import REG_ID, prereg

inspect_log = pytest.importorskip(
    "inspect_ai.log", reason="needs prereg-agents[inspect] (dev extra)"
)

STAGES = ("surfaced", "selected", "invoked", "executed", "completed")


def expected_completed(record: dict[str, Any]) -> str | None:
    """C / I / None (no score) for outcome ``completed``, from the docstring's rule."""
    if record["status"] != "ok" or record["polarity"] != "positive":
        return None
    funnel = record["funnel"]
    value = funnel["completed"]
    if value is None:
        earlier = [funnel[s] for s in STAGES[:-1]]
        if False in earlier:
            return "I"
        return None
    return "C" if value else "I"


@pytest.fixture(scope="module")
def exported(ran: Path) -> dict[str, Any]:
    out = ran.parent / "inspect-logs"
    code, text = prereg("-w", ran, "export", REG_ID, "--format", "inspect", "--out", out, "--json")
    assert code == 0, text
    return {"folder": out, "summary": json.loads(text)}


def test_one_log_per_arm_that_inspect_reads(exported: dict[str, Any]) -> None:
    folder = exported["folder"]
    assert sorted(p.name for p in folder.iterdir()) == [
        f"{REG_ID}_baseline.eval",
        f"{REG_ID}_semantic.eval",
    ]
    listed = inspect_log.list_eval_logs(str(folder))  # how inspect view finds logs
    assert len(listed) == 2
    for path in folder.iterdir():
        log = inspect_log.read_eval_log(str(path))
        assert log.eval.task == f"prereg/{REG_ID}"
        assert log.samples is not None


def test_samples_and_scores_match_the_run_store(
    exported: dict[str, Any], jsonl_export: list[dict[str, Any]]
) -> None:
    by_arm: dict[str, dict[tuple[str, int], dict[str, Any]]] = defaultdict(dict)
    for record in jsonl_export:
        assert record["status"] == "ok"  # the local host has no infrastructure to fail
        by_arm[record["arm"]][(record["task_id"], record["repeat"] + 1)] = record
    assert sum(len(units) for units in by_arm.values()) == len(jsonl_export) == 100
    for arm, units in by_arm.items():
        log = inspect_log.read_eval_log(str(exported["folder"] / f"{REG_ID}_{arm}.eval"))
        assert log.samples is not None
        got = {(s.id, s.epoch): s for s in log.samples}
        assert len(log.samples) == len(got) == len(units)
        assert set(got) == set(units)
        scores = {key: (s.scores or {}).get("completed") for key, s in got.items()}
        expected = {key: expected_completed(r) for key, r in units.items()}
        assert {k: None if v is None else v.value for k, v in scores.items()} == expected
        assert None in expected.values() and "C" in expected.values()  # both kinds present
        [score] = log.results.scores if log.results else []
        scored = [v for v in expected.values() if v is not None]
        assert score.name == "completed"
        assert score.scored_samples == len(scored)
        assert score.unscored_samples == len(units) - len(scored)
        assert score.metrics["accuracy"].value == pytest.approx(scored.count("C") / len(scored))
        for key, sample in got.items():
            record = units[key]
            assert sample.metadata["record_id"] == record["record_id"]
            [usage] = sample.model_usage.values()
            assert usage.input_tokens == record["tokens"]["input"]
            assert usage.output_tokens == record["tokens"]["output"]


def test_the_eval_metadata_names_the_registration_and_its_chain_head(
    exported: dict[str, Any], jsonl_export: list[dict[str, Any]]
) -> None:
    digest = {r["registration_digest"] for r in jsonl_export}
    last = max(jsonl_export, key=lambda r: r["chain"]["index"])
    for arm in ("baseline", "semantic"):
        log = inspect_log.read_eval_log(
            str(exported["folder"] / f"{REG_ID}_{arm}.eval"), header_only=True
        )
        meta = log.eval.metadata["prereg"]
        assert {meta["registration_digest"]} == digest
        assert meta["chain"] == {"count": len(jsonl_export), "head": last["chain"]["hash"]}
        assert meta["arm"] == arm and meta["registration_id"] == REG_ID
        assert meta["evidence_class"] == ["local"]
        assert log.status == "started"  # 100 of 112 units run: not a finished eval
        assert log.eval.config.epochs == 2


def test_refusals_write_nothing(
    ran: Path, exported: dict[str, Any], cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = exported["folder"]
    before = tree_digest(folder)
    again = cli("-w", ran, "export", REG_ID, "--format", "inspect", "--out", folder)
    assert again.code == 2 and "--force" in again.stderr
    to_stdout = cli("-w", ran, "export", REG_ID, "--format", "inspect", "--out", "-")
    assert to_stdout.code == 2 and "folder" in to_stdout.stderr
    inside = cli("-w", ran, "export", REG_ID, "--format", "inspect", "--out", ran / "runs" / "x")
    assert inside.code == 2 and not (ran / "runs" / "x").exists()
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if the extra were missing
    missing = cli("-w", ran, "export", REG_ID, "--format", "inspect", "--out", folder / "new")
    assert missing.code == 2 and "prereg-agents[inspect]" in missing.stderr
    assert not (folder / "new").exists()
    assert tree_digest(folder) == before


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.read()
    except (urllib.error.URLError, ConnectionError):
        return 0, b""


def test_inspect_view_serves_the_exported_logs(exported: dict[str, Any]) -> None:
    """``inspect view`` (its server, which the viewer page reads) lists and opens them."""
    command = Path(sys.executable).with_name("inspect")
    if not command.exists():
        skip_unless_ci(
            "the inspect command (prereg-agents[inspect]) is not installed beside this Python"
        )
    port = _free_port()
    folder = exported["folder"]
    view = subprocess.Popen(
        [str(command), "view", "--log-dir", str(folder), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 120
        status, body = 0, b""
        while time.monotonic() < deadline and view.poll() is None:
            status, body = _get(f"{base}/log-files")
            if status == 200:
                break
            time.sleep(0.5)
        assert status == 200, "inspect view did not start"
        listed = sorted(f["name"].rsplit("/", 1)[-1] for f in json.loads(body)["files"])
        assert listed == [f"{REG_ID}_baseline.eval", f"{REG_ID}_semantic.eval"]
        uri = (folder / f"{REG_ID}_baseline.eval").resolve().as_uri()
        status, body = _get(f"{base}/logs/{urllib.parse.quote(uri, safe='')}")
        assert status == 200
        log = json.loads(body)
        assert log["eval"]["metadata"]["prereg"]["arm"] == "baseline"
        assert len(log["samples"]) == exported["summary"]["logs"][0]["samples"]
    finally:
        view.terminate()
        try:
            view.wait(10)
        except subprocess.TimeoutExpired:
            view.kill()
            view.wait(5)
