"""``prereg view ID`` (issue 43, item 1): Inspect's viewer on a registration's runs.

The logs go to a cache folder keyed by the run chain's head (reused while no run is
added); the viewer is Inspect's own server, stopped cleanly by SIGTERM; and a sample's
transcript, loaded in headless Chromium, shows the tool calls its run record holds (the
record read from the run store's table, not through prereg).
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import skip_unless_ci
from tests.exchange.conftest import REG_ID, prereg

inspect_log = pytest.importorskip(
    "inspect_ai.log", reason="needs prereg-agents[inspect] (dev extra)"
)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _export_only(ws: Path) -> dict[str, Any]:
    code, text = prereg("-w", ws, "view", REG_ID, "--export-only", "--json")
    assert code == 0, text
    done: dict[str, Any] = json.loads(text)
    return done


def test_the_cache_is_reused_until_a_run_is_added(ran: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(ran, ws)  # the module's workspace stays as it is
    first = _export_only(ws)
    folder = Path(first["out"])
    assert first["reused"] is False and first["serving"] is False
    assert folder.parent == ws / ".cache" / "inspect-view" / REG_ID
    files = sorted(p.name for p in folder.iterdir())
    assert files == [f"{REG_ID}_baseline.eval", f"{REG_ID}_semantic.eval"]
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = _export_only(ws)
    assert again["reused"] is True and again["out"] == first["out"]
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    assert [log["samples"] for log in again["logs"]] == [log["samples"] for log in first["logs"]]
    # two more units run: a new chain head, a new folder holding them
    assert prereg("-w", ws, "run", REG_ID, "--json", "--max-units", "2")[0] == 0
    moved = _export_only(ws)
    assert moved["reused"] is False and moved["out"] != first["out"]
    assert moved["chain"]["count"] == first["chain"]["count"] + 2
    samples = sum(
        len(inspect_log.read_eval_log(log["file"]).samples or []) for log in moved["logs"]
    )
    assert samples == first["chain"]["count"] + 2


def _sample_with_calls(ws: Path) -> dict[str, Any]:
    """A baseline record with at least two tool calls, from the store's table."""
    with sqlite3.connect(ws / "runs" / "runs.sqlite") as db:
        rows = db.execute(
            "SELECT body FROM records WHERE registration_id = ? AND arm = 'baseline'", (REG_ID,)
        ).fetchall()
    records = [json.loads(body) for (body,) in rows]
    chosen: dict[str, Any] = next(
        r for r in records if sum(e["kind"] == "tool_call" for e in r["trace"]) >= 2
    )
    return chosen


@pytest.fixture
def viewer(ran: Path) -> Any:
    """``prereg view`` serving the module's workspace on a free port."""
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        skip_unless_ci("needs Debian's chromium (bash .ci/run installs it)")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "prereg", "-w", str(ran), "view", REG_ID]
        + ["--port", str(port), "--no-open", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the command prints its one JSON document once the viewer answers
        assert process.stdout is not None
        lines: list[str] = []
        while not lines or lines[-1].rstrip() != "}":
            line = process.stdout.readline()
            if not line:  # the command ended before the viewer answered
                raise AssertionError(process.communicate()[1][-2000:])
            lines.append(line)
        document = json.loads("".join(lines))
        yield {"process": process, "url": document["url"], "ws": ran, "document": document}
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def test_the_viewer_shows_a_samples_tool_calls_in_chromium(
    viewer: dict[str, Any], tmp_path: Path
) -> None:
    from tests.cdp import Browser

    record = _sample_with_calls(viewer["ws"])
    called = [e["tool"] for e in record["trace"] if e["kind"] == "tool_call"]
    url = (
        f"{viewer['url']}#/logs/{urllib.parse.quote(f'{REG_ID}_baseline.eval')}"
        f"/samples/sample/{urllib.parse.quote(record['task_id'])}/{record['repeat'] + 1}/"
    )
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(url)
        text = browser.text_until(called)
    finally:
        browser.close()
    for name in called:
        assert name in text, text[-3000:]
    assert "MODEL CALL" in text.upper()  # the transcript's model events, not only messages
    assert "No events to display" not in text and "size limit" not in text


def test_sigterm_stops_the_viewer_and_prints_one_document(viewer: dict[str, Any]) -> None:
    process: subprocess.Popen[str] = viewer["process"]
    assert _answers(viewer["url"] + "api/log-files")
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 0 and rest == ""  # one document, printed when ready
    done = viewer["document"]
    assert done["url"] == viewer["url"] and done["serving"] is True
    assert Path(done["out"]).parent == viewer["ws"] / ".cache" / "inspect-view" / REG_ID
    assert not _answers(viewer["url"] + "api/log-files")  # Inspect's server stopped too


def test_without_the_extra_or_a_free_port_it_is_bad_input(
    ran: Path, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    ws = tmp_path / "ws"
    shutil.copytree(ran, ws)
    shutil.rmtree(ws / ".cache", ignore_errors=True)
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "inspect_ai.log", None)  # as if the extra were missing
        missing = cli("-w", ws, "view", REG_ID, "--export-only")
    assert missing.code == 2 and "prereg-agents[inspect]" in missing.stderr
    assert not (ws / ".cache").exists()
    with socket.socket() as taken:  # a port something else listens on
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = cli("-w", ws, "view", REG_ID, "--port", port, "--no-open")
    assert busy.code == 2 and "--port 0" in busy.stderr
