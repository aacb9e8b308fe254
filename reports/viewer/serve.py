"""``prereg view``: Inspect AI's log viewer on a registration's runs (optional extra).

The logs are :func:`prereg.reports.inspect_export.cached_export`'s; the viewer is Inspect's
own server, ``python -m inspect_ai view start`` run by the same Python (Inspect's public
command line, so whatever the installed Inspect serves), bound to 127.0.0.1 and told
``--no-trust-content`` (every log is marked untrusted as well: the content is untrusted
data, invariant 10). :func:`serve` starts it, waits until it answers, hands over the URL,
and stops it on Ctrl-C, SIGTERM or SIGHUP (and when it returns for any other reason).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from prereg.core.errors import BadInput

#: Inspect's own default port for ``inspect view``
DEFAULT_PORT = 7575
HOST = "127.0.0.1"
#: how long the viewer may take to answer before the command gives up
START_SECONDS = 120.0
STOP_SECONDS = 10.0


class Stopped(Exception):
    """SIGTERM or SIGHUP arrived: stop the viewer as Ctrl-C would."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def viewer_url(port: int) -> str:
    return f"http://{HOST}:{port}/"


def viewer_command(folder: Path, port: int) -> list[str]:
    """Inspect's viewer on ``folder``, with this Python (so the installed inspect_ai)."""
    return [
        sys.executable,
        "-m",
        "inspect_ai",
        "view",
        "start",
        "--log-dir",
        str(folder),
        "--host",
        HOST,
        "--port",
        str(port),
        "--no-trust-content",
    ]


def _answers(port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{HOST}:{port}/api/log-files", timeout=5) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


#: the signals that stop the viewer as Ctrl-C does (SIGHUP: the terminal closed)
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def _signals_as_stop() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Stopped` while the viewer runs (main thread only)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Stopped

    previous = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: nothing to install
        pass
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, signal.SIG_DFL if before is None else before)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_SECONDS)


def serve(folder: Path, port: int, ready: Callable[[str], None]) -> int:
    """Run the viewer on ``folder`` until Ctrl-C, SIGTERM or SIGHUP; ``ready(url)`` once it
    answers. Returns the viewer's exit code (0 when stopped by a signal). BadInput (exit
    2) when it ends before answering (a port in use, say)."""
    # its own session: Ctrl-C reaches this command only, which then stops the viewer
    process = subprocess.Popen(
        viewer_command(folder, port), stdout=subprocess.DEVNULL, start_new_session=True
    )
    with _signals_as_stop():
        try:
            deadline = time.monotonic() + START_SECONDS
            while not _answers(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise BadInput(
                        f"Inspect's viewer did not start on port {port} (exit code "
                        f"{process.poll()}): is the port in use? --port 0 picks a free one",
                        field="--port",
                    )
                time.sleep(0.25)
            ready(viewer_url(port))
            return process.wait()
        except (KeyboardInterrupt, Stopped):
            return 0
        finally:
            _stop(process)
