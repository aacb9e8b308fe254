"""``prereg mcp snapshot`` of a stdio server that dies: say how it ended (issue 37).

Before, a server that exited at start gave "the server answered with an error: -32000
Connection closed". Now the message names its exit code and shows the end of its stderr
(the last 20 lines, at most 2 KB), escaped as untrusted text; a server that exits before
answering ``initialize`` is bad input (exit 2: its command starts no working server),
one that dies in the middle of the capture a capture error (exit 1). Real servers:
small scripts run as subprocesses through the real command.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.mcp import PREREG
from tests.waiting import HANG_S

#: Writes 30 numbered lines to stderr (one with a clear-screen sequence), then exits 3.
DIES_AT_START = """
import sys
for k in range(30):
    print(f"boot line {k:02d}: cannot open the database", file=sys.stderr)
print("last words \\x1b[2J\\x1b]0;owned\\x07 [bold]not markup[/bold]", file=sys.stderr)
sys.exit(3)
"""

#: 5 KB of stderr on one long line and a few short ones, then exit 7.
LOUD = """
import sys
sys.stderr.write("x" * 5000 + "\\n" + "".join(f"tail {k}\\n" for k in range(3)))
sys.exit(7)
"""

#: Answers initialize as MCP asks, then exits 4 when asked for its tools.
DIES_ON_TOOLS_LIST = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fragile", "version": "1"},
        }
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    elif message.get("method") == "tools/list":
        print("tools/list: out of memory", file=sys.stderr, flush=True)
        sys.exit(4)
"""


#: Leaves a child behind that holds its stderr open (and writes its pid), then exits 5.
LEAVES_A_CHILD = """
import subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
)
open(sys.argv[1], "w").write(str(child.pid))
print("started a helper", file=sys.stderr, flush=True)
sys.exit(5)
"""


def _snapshot(
    tmp_path: Path, source: str, *extra: str, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    server = tmp_path / "server.py"
    server.write_text(textwrap.dedent(source))
    return subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(tmp_path / "snap.json"), *extra]
        + ["--timeout", str(HANG_S), "--", sys.executable, str(server), *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,  # a hang guard, never a speed expectation
    )


def _error_lines(stderr: str) -> list[str]:
    """The error message prereg printed: from its ``error:`` line on."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("error:"))
    return lines[start:]


def test_a_server_that_exits_at_start_names_its_code_and_stderr(tmp_path: Path) -> None:
    done = _snapshot(tmp_path, DIES_AT_START)
    assert done.returncode == 2, done.stderr
    error = _error_lines(done.stderr)
    head = " ".join(error[0].split())
    assert head.startswith("error: command: the server exited with code 3")
    assert "before answering initialize" in head and "Connection closed" not in done.stderr
    tail = [line.removeprefix("  | ") for line in error[1:]]
    # the last 20 lines, in order: boot lines 11 to 29, then the last words, escaped
    assert tail[:-1] == [f"boot line {k:02d}: cannot open the database" for k in range(11, 30)]
    assert tail[-1] == "last words \\x1b[2J\\x1b]0;owned\\x07 [bold]not markup[/bold]"
    assert "boot line 10" not in "\n".join(error)
    assert "\x1b" not in "\n".join(error) and "\x07" not in "\n".join(error)
    # the server's own stderr still reaches ours as it comes, before the error
    assert done.stderr.index("boot line 00") < done.stderr.index("error:")
    assert not (tmp_path / "snap.json").exists()


def test_the_json_error_carries_the_code_and_the_tail(tmp_path: Path) -> None:
    done = _snapshot(tmp_path, DIES_AT_START, "--json")
    assert done.returncode == 2
    error: dict[str, Any] = json.loads(done.stdout)
    assert error["error"] == "ServerExited" and error["exit_code"] == 2
    assert error["field"] == "command" and "exited with code 3" in error["message"]
    assert len(error["details"]) == 20 and error["details"][0].startswith("boot line 11")
    assert "\\x1b[2J" in error["details"][-1] and "\x1b" not in error["details"][-1]


def test_only_the_last_2_kb_of_stderr_are_kept(tmp_path: Path) -> None:
    done = _snapshot(tmp_path, LOUD, "--json")
    assert done.returncode == 2
    error: dict[str, Any] = json.loads(done.stdout)
    assert "exited with code 7" in error["message"]
    # the 5,000-character line is cut by the 2 KB limit: its kept end is not shown
    # as if it were a whole line
    assert error["details"] == ["tail 0", "tail 1", "tail 2"]


def test_a_server_that_dies_during_the_capture_is_a_capture_error(tmp_path: Path) -> None:
    done = _snapshot(tmp_path, DIES_ON_TOOLS_LIST, "--no-negotiate")
    assert done.returncode == 1, done.stderr
    error = _error_lines(done.stderr)
    head = " ".join(error[0].split())
    assert "the server exited with code 4 during the capture" in head
    assert error[1:] == ["  | tools/list: out of memory"]
    assert not (tmp_path / "snap.json").exists()


def test_a_child_left_holding_stderr_does_not_hide_the_exit(tmp_path: Path) -> None:
    """The server's exit is reported although a process it started still holds its
    stderr open (the end of stderr is not waited for once the server has exited)."""
    pid_file = tmp_path / "helper.pid"
    try:
        done = _snapshot(tmp_path, LEAVES_A_CHILD, args=(str(pid_file),))
        assert done.returncode == 2, done.stderr
        error = _error_lines(done.stderr)
        assert "the server exited with code 5 before answering initialize" in error[0]
        assert error[1:] == ["  | started a helper"]
    finally:
        if pid_file.is_file():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
