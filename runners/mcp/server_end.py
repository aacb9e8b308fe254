"""Run an MCP server's command and note how it ended (a script; standard library only).

The ``mcp`` SDK's stdio client starts the server and shows its caller neither the
process nor its exit code: a server that dies before answering is only a "Connection
closed" error. So :mod:`prereg.runners.mcp.capture` has the SDK start this file (by
path, with the same interpreter) instead, with the command after ``--``: the command
gets the SDK's stdin and stdout pipes unchanged, its stderr passes through to ours as
it comes, and when it ends its exit code and the end of its stderr (at most
:data:`TAIL_BYTES`; ``stderr_cut`` when there was more) are written as JSON to the file
named first, for the error message.

Usage: ``python server_end.py STATUS_FILE -- COMMAND [ARGS...]``
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys

#: How much of the end of the server's stderr is kept for the message.
TAIL_BYTES = 2048

#: While stderr is silent, how often to look whether the command has exited (it may have
#: left a descendant holding the pipe open). Only a pause: what the command wrote is in
#: the pipe when it exits, so no output is lost by when the look comes.
POLL_S = 0.05


def _write(path: str, status: dict[str, object]) -> None:
    """Whole or not at all: the reader never sees half a file."""
    with open(path + ".tmp", "w", encoding="utf-8") as out:
        json.dump(status, out)
    os.replace(path + ".tmp", path)


def _pass_on(chunk: bytes) -> None:
    try:
        os.write(2, chunk)
    except OSError:  # nobody reads our stderr any more: keep the tail all the same
        pass


class _Tail:
    """The end of what was read: the last :data:`TAIL_BYTES`, and whether more came."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.seen = 0

    def take(self, chunk: bytes) -> None:
        _pass_on(chunk)
        self.seen += len(chunk)
        self.kept += chunk
        del self.kept[: max(0, len(self.kept) - TAIL_BYTES)]


def _read_until_end(child: subprocess.Popen[bytes], tail: _Tail) -> None:
    """Pass the command's stderr on until it ends: to end of file, or, once the command
    has exited, to the end of what is in the pipe (all it wrote is there; a descendant
    still holding the pipe open is not waited for: the client waits for us to exit)."""
    assert child.stderr is not None
    fd = child.stderr.fileno()
    if sys.platform == "win32":  # no select on pipes: read to end of file
        while chunk := os.read(fd, 65536):
            tail.take(chunk)
        return
    exited = False
    while True:
        if not exited:
            readable, _, _ = select.select([fd], [], [], POLL_S)
            exited = child.poll() is not None
            if exited:
                os.set_blocking(fd, False)
            elif not readable:
                continue
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:  # the pipe is empty, yet held open by a descendant
            return
        if not chunk:
            return
        tail.take(chunk)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: server_end.py STATUS_FILE -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    status, command = argv[1], argv[3:]
    if sys.platform == "win32":  # the SDK resolves .cmd shims (npx) for what it starts
        command = [shutil.which(command[0]) or command[0], *command[1:]]
    try:
        child = subprocess.Popen(command, stderr=subprocess.PIPE)
    except OSError as exc:
        _write(status, {"cannot_start": exc.strerror or str(exc)})
        return 127
    # The command holds the pipes now; with our copies closed, the client sees end of
    # file and a closed stdin exactly when the command does.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    tail = _Tail()
    _read_until_end(child, tail)
    code = child.wait()
    text = tail.kept.decode("utf-8", "replace")
    cut = tail.seen > len(tail.kept)
    _write(status, {"returncode": code, "stderr": text, "stderr_cut": cut})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
