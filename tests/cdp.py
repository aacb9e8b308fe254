"""Headless Chromium driven over the DevTools protocol, through a pipe (no WebSocket client).

For pages that render with JavaScript after fetching data (Inspect's viewer), which
``--dump-dom`` with a virtual time budget does not wait for: Chromium started with
``--remote-debugging-pipe`` reads commands on fd 3 and writes answers on fd 4, each a JSON
message ended by a NUL byte. Uses the Debian chromium binary and the flags of
tests/reports/test_report_browser.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.reports.test_report_browser import CHROMIUM, FLAGS


class Browser:
    """One headless Chromium; :meth:`open` a page, :meth:`text_until` read it."""

    def __init__(self, profile: Path, width: int = 1280) -> None:
        assert CHROMIUM is not None
        to_child, ours_w = os.pipe()  # we write: the browser's fd 3
        ours_r, from_child = os.pipe()  # the browser's fd 4: we read

        def fds() -> None:  # in the child, before exec
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM,
                *FLAGS,
                f"--window-size={width},900",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            preexec_fn=fds,  # noqa: PLW1509 - the pipe's fds must be 3 and 4 in the child
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._write = os.fdopen(ours_w, "wb", buffering=0)
        self._read = os.fdopen(ours_r, "rb", buffering=0)
        self._buffer = b""
        self._id = 0
        self.session: str | None = None

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session is not None:
            message["sessionId"] = self.session
        self._write.write(json.dumps(message).encode() + b"\0")
        while True:
            answer = self._next()
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result

    def _next(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = self._read.read(1 << 16)
            if not chunk:
                raise EOFError("chromium closed the DevTools pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": url})
        attached = self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        self.session = attached["sessionId"]

    def text(self) -> str:
        done = self.send(
            "Runtime.evaluate",
            {"expression": "document.body ? document.body.innerText : ''", "returnByValue": True},
        )
        return str(done["result"].get("value", ""))

    def text_until(self, needles: list[str], attempts: int = 240) -> str:
        """The page's text once it holds every needle (polled; gives up after
        ``attempts`` polls a quarter second apart and returns what it has)."""
        text = ""
        for _ in range(attempts):
            text = self.text()
            if all(n in text for n in needles):
                break
            time.sleep(0.25)
        return text

    def close(self) -> None:
        self._write.close()
        self._read.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
