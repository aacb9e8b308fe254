"""``prereg mcp``: bad input exits 2 naming file and field, writes nothing; output is safe."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.test_mcp_snapshot_model import document

Cli = Callable[..., Any]


def flat(text: str) -> str:
    """The terminal wraps long lines; compare with whitespace collapsed."""
    return " ".join(text.split())


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.json"
    path.write_text(json.dumps(document()))
    return path


def test_serve_missing_file(cli: Cli, tmp_path: Path) -> None:
    for extra in ([], ["--http"]):
        result = cli("mcp", "serve", tmp_path / "missing.json", *extra)
        assert result.code == 2
        assert "missing.json: (file): no such file" in flat(result.stderr)


def test_serve_malformed_snapshot_json(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "prereg-mcp-snapshot/1",\n  "server": [}')
    result = cli("mcp", "serve", bad, "--http", "--json")
    assert result.code == 2
    error = result.json()
    assert error["file"] == str(bad) and error["field"] == "(line 2, column 14)"
    assert error["exit_code"] == 2


def test_serve_unknown_field(cli: Cli, tmp_path: Path) -> None:
    doc = document()
    doc["capture"]["bogus"] = 1
    bad = tmp_path / "unknown.json"
    bad.write_text(json.dumps(doc))
    result = cli("mcp", "serve", bad)
    assert result.code == 2
    assert f"{bad}: capture.bogus: unknown field" in flat(result.stderr)


def test_serve_usage_errors(cli: Cli, good: Path) -> None:
    two = cli("mcp", "serve", good, good)
    assert two.code == 2 and "stdio serves one snapshot" in flat(two.stderr)
    as_json = cli("mcp", "serve", good, "--json")
    assert as_json.code == 2 and as_json.json()["field"] == "--json"


def test_serve_on_a_busy_port_is_bad_input(cli: Cli, good: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = cli("mcp", "serve", good, "--http", "--port", str(port))
    assert result.code == 2 and "--port" in result.stderr


def test_snapshot_usage_errors_write_nothing(cli: Cli, tmp_path: Path, good: Path) -> None:
    out = tmp_path / "out.json"
    cases = [
        (["--out", out], "command"),
        (["--out", out, "--url", "http://127.0.0.1:9/mcp", "--", "server"], "--url"),
        (["--out", out, "--url", "file:///etc/passwd"], "--url"),
        (["--out", tmp_path / "no" / "dir.json", "--", "server"], "--out"),
        (["--out", out, "--env", "PREREG_TEST_SURELY_UNSET", "--", "server"], "--env"),
        (["--out", out, "--", str(tmp_path / "no-such-server")], "command"),
    ]
    for args, field in cases:
        result = cli("mcp", "snapshot", "--json", *args)
        assert result.code == 2, (args, result.stderr)
        assert result.json()["field"] == field
    assert not out.exists()
    before = good.read_bytes()
    result = cli("mcp", "snapshot", "--out", good, "--", sys.executable, "-c", "pass")
    assert result.code == 2 and "--force" in result.stderr
    assert good.read_bytes() == before


def test_snapshot_of_a_server_that_exits_at_start_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    """Its command starts no working server: exit 2, saying how it ended (issue 37)."""
    out = tmp_path / "out.json"
    result = cli(
        "mcp",
        "snapshot",
        "--out",
        out,
        "--timeout",
        "20",
        "--",
        sys.executable,
        "-c",
        "import sys; sys.exit(0)",
    )
    assert result.code == 2
    assert "exited with code 0 before answering initialize" in flat(result.stderr)
    assert not out.exists()


def test_show_escapes_untrusted_metadata(cli: Cli, tmp_path: Path) -> None:
    doc = document()
    tool = doc["server"]["lists"]["tools/list"]["pages"][0]["tools"][0]
    tool["description"] = "\x1b[2J\x1b]0;owned\x07 [bold red]shout[/bold red] \u202eevil"
    doc["server"]["initialize"]["serverInfo"]["name"] = "demo\x1b[31m"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    human = cli("mcp", "show", path)
    assert human.code == 0
    assert "\x1b" not in human.stdout and "\u202e" not in human.stdout
    assert "\\x1b[2J" in human.stdout and "[bold red]shout[/bold red]" in human.stdout
    as_json = cli("mcp", "show", path, "--json")
    shown = as_json.json()
    assert shown["tools"][0]["description"] == tool["description"]  # data kept, only escaped
    assert shown["digest"].startswith("sha256:")
    assert shown["server"]["name"] == "demo\x1b[31m"
