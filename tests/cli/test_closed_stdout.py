"""A reader that closes the pipe early (``prereg show ID | head -1``) ends every command
the same way (issue 37, item 2): quietly, no traceback, exit 141 (128 + SIGPIPE, as git
reports), and no summary claiming output nobody read.

The pipes here are closed by the test before the command could write (the reading end
is closed before the child starts, or the child's output cannot fit in the pipe and the
reader stops reading), so nothing depends on how fast the machine is.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prereg.core.output import CLOSED_STDOUT_EXIT
from tests.cli.test_cli_robust_encoding import UNI_ID, unicode_workspace


@pytest.fixture(scope="module")
def run_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unicode_workspace(tmp_path_factory.mktemp("closed") / "ws")


def _env(unbuffered: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "FORCE_TERMINAL")}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _with_closed_stdout(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """``prereg ARGS`` writing to a pipe whose reading end is closed before it starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "prereg", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
            env=env,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode(errors="replace")


def _quiet(code: int, stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert "Error" not in stderr and "error:" not in stderr, stderr
    assert code == CLOSED_STDOUT_EXIT, (code, stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--json"],
        ["list"],
        ["show", UNI_ID],
        ["show", UNI_ID, "--json"],
        ["analyse", UNI_ID],
        ["analyse", UNI_ID, "--json"],
        ["verify"],
        ["--help"],
        ["plan", "--help"],
        ["show", "--help"],
        ["split", "show", "--help"],
        ["--version"],
        ["--show-completion", "bash"],
    ],
    ids=lambda a: " ".join(a),
)
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_a_closed_stdout_exits_141_quietly(run_ws: Path, args: list[str], unbuffered: bool) -> None:
    _quiet(*_with_closed_stdout(["-w", str(run_ws), *args], _env(unbuffered)))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "no-such-registration", "--json"], "no-such-registration"),
        (["list", "--bogus", "--json"], "No such option: --bogus"),
    ],
)
def test_an_error_keeps_its_code_and_message_when_stdout_is_closed(
    run_ws: Path, args: list[str], message: str
) -> None:
    """The error's JSON document cannot go out, but the error is not the pipe's: its
    message still reaches stderr and its own exit code (2) is kept."""
    code, stderr = _with_closed_stdout(["-w", str(run_ws), *args], _env())
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert code == 2 and message in stderr, (code, stderr)


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_export_to_a_closed_stdout_claims_nothing(run_ws: Path, unbuffered: bool) -> None:
    code, stderr = _with_closed_stdout(
        ["-w", str(run_ws), "export", UNI_ID, "--out", "-"], _env(unbuffered)
    )
    assert "wrote" not in stderr and "record(s)" not in stderr, stderr
    _quiet(code, stderr)


@pytest.mark.parametrize(
    "args", [["export", UNI_ID, "--out", "-"], ["analyse", UNI_ID, "--json"]], ids=" ".join
)
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
def test_output_read_in_part_exits_141_without_a_summary(
    run_ws: Path, args: list[str], unbuffered: bool
) -> None:
    """``... | head -c 100``: the reader takes 100 bytes and leaves while the output
    (about 200 kB, more than any pipe holds: shrunk to a page where the system allows) is
    still being written. Under ``PYTHONUNBUFFERED`` the raw write stopped short there,
    silently: ``analyse --json`` exited 0 with its document cut, and the export reported
    every record written."""
    read_end, write_end = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen(
        [sys.executable, "-m", "prereg", "-w", str(run_ws), *args],
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=_env(unbuffered),
    )
    os.close(write_end)
    try:
        first = os.read(read_end, 100)
    finally:
        os.close(read_end)
    assert first.startswith(b"{")
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode(errors="replace")
    code = proc.wait(timeout=120)
    assert "wrote" not in stderr, stderr
    _quiet(code, stderr)


def test_the_export_summary_still_comes_when_the_records_are_read(
    run_ws: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "prereg", "-w", str(run_ws), "export", UNI_ID, "--out", "-"],
        capture_output=True,
        timeout=120,
        check=False,
        env=_env(unbuffered=True),
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 56
    assert b"wrote 56 record(s)" in done.stderr
