"""Run a script in a fresh single-threaded interpreter that counts its forks.

The fork paths of prereg.core.forked never run inside a pytest-xdist worker (it has
threads, where forking is refused), so their tests run here; the script sees ``FORKS``
(the children forked so far), ``PARENT`` and ``in_child()``, and prints one JSON line last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

PREAMBLE = """
import json, os, signal, sys, time
FORKS = []
_fork = os.fork
def _counted():
    pid = _fork()
    if pid:
        FORKS.append(pid)
    return pid
os.fork = _counted
PARENT = os.getpid()
def in_child():
    return os.getpid() != PARENT
import tempfile
_MARK = os.path.join(tempfile.mkdtemp(), "a-child-worked")
def child_worked():
    # called in a child: tells the parent a child has claimed and run a part
    open(_MARK, "w").close()
def until_a_child_worked():
    # waits (on progress, not time) until a child has called child_worked()
    while not os.path.exists(_MARK):
        time.sleep(0.005)
_WORKERS = tempfile.mkdtemp()
def until_two_processes_work():
    # each process that runs a part says so, then waits (on progress, not time) until a
    # second one has: the parts are shared out however the processes are scheduled
    open(os.path.join(_WORKERS, str(os.getpid())), "w").close()
    while len(os.listdir(_WORKERS)) < 2:
        time.sleep(0.005)
"""


def run_script(body: str, jobs: int, *args: str | Path, timeout: float = 300) -> Any:
    """``body`` after :data:`PREAMBLE` with ``PREREG_JOBS=jobs`` and ``args`` as argv[1:];
    the last line it prints, as JSON."""
    env = {**os.environ, "PREREG_JOBS": str(jobs), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", PREAMBLE + textwrap.dedent(body), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
