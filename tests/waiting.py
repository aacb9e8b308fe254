"""Waiting in tests on progress, never on the machine's speed (issue 37).

A test that waits for a server to start or for a child process to make progress polls
its condition until it holds, and fails when what it waits on has died (its process
exited first), not when a clock runs out. :data:`HANG_S` only guards against a test that
would otherwise hang for ever (a deadlock, a child that never progresses): it is far
above what the slowest loaded machine takes, so reaching it means "hung", never "slow".
``PREREG_TEST_HANG_S`` lowers it where a hung test should fail sooner.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

#: seconds after which a wait is taken to be hung (see the module docstring)
HANG_S = float(os.environ.get("PREREG_TEST_HANG_S", "900"))


def _tail(proc: subprocess.Popen[Any]) -> str:
    stream = proc.stderr
    if stream is None:
        return ""
    data = stream.read()
    text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
    return text[-4000:]


def wait_until(
    condition: Callable[[], Any],
    what: str,
    *,
    proc: subprocess.Popen[Any] | None = None,
    poll_s: float = 0.01,
) -> Any:
    """Poll ``condition`` until it returns something true, and return that. Fails when
    ``proc`` (the process expected to bring it about) exits first, or after
    :data:`HANG_S` (a hung test)."""
    hung_at = time.monotonic() + HANG_S
    while not (found := condition()):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"{what}: the process exited ({proc.returncode}) first\n{_tail(proc)}"
            )
        if time.monotonic() > hung_at:
            raise AssertionError(f"{what}: still not after {HANG_S:.0f} s, taken as hung")
        time.sleep(poll_s)
    return found
