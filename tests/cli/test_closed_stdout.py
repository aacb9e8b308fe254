"""A reader that closes the pipe early (``prereg export --out - | head``) gets no traceback.

Click catches the broken pipe (EPIPE) and exits 1 quietly; this pins that behaviour
for a command that prints JSON and one that streams records, since a traceback on
stderr for ``| head`` is the usual complaint against command-line tools.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("args", [["list", "--json"], ["list"], ["plan", "--help"]])
def test_a_closed_stdout_exits_quietly(ws: Path, args: list[str]) -> None:
    command = [sys.executable, "-m", "prereg", "-w", str(ws), *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte
    stderr = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert code in (0, 1), (code, stderr)
