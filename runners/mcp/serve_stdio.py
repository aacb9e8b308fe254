"""The replay server over stdio: newline-delimited JSON-RPC on stdin/stdout.

A plain blocking loop: every answer is immediate (nothing is ever executed), so there
is nothing to run concurrently. Stdout carries protocol messages only; the loop ends
when the host closes stdin. One process is one connection: the handshake revision it
negotiates answers the requests that follow (:class:`~.replay.ReplayConnection`).
"""

from __future__ import annotations

import sys
from typing import BinaryIO

from prereg.runners.mcp.replay import ReplayServer


def serve_stdio(
    server: ReplayServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Answer each line on ``stdin`` until end of input."""
    reader = stdin if stdin is not None else sys.stdin.buffer
    writer = stdout if stdout is not None else sys.stdout.buffer
    connection = server.connection()
    for line in reader:
        if not line.strip():
            continue
        answer = connection.handle_bytes(line)
        if answer is None:
            continue
        try:
            writer.write(answer + b"\n")
            writer.flush()
        except BrokenPipeError:
            return
