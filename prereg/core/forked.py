"""Pure computations in forked children, so a long read uses every core of the machine.

``analyse`` at the seed's programme size (27,000 runs) spends seconds of plain-Python
CPU on work that splits cleanly: verifying ranges of a hash chain, independent report
sections. Threads cannot run that in parallel (the GIL), and a process pool would
pickle the inputs and import everything again; ``os.fork`` hands a child the parent's
memory as it is (copy on write) and costs about a millisecond. A child computes its
part, sends the result back pickled through a pipe, and exits with ``os._exit`` (no
atexit handler, no buffered output flushed twice, no connection of the parent closed).

The results are exactly what the parent would have computed: the work must be a pure
function of what the parent holds at the fork. Whenever a child cannot deliver (it
raised, it was killed, its result cannot be pickled) the parent computes that part
itself, so an error surfaces in the parent as it would without forking, with its own
traceback. Forking is used only where it is safe: a POSIX ``fork`` on Linux, in a
process with a single thread (a thread holding a lock at the fork would leave the
child's copy locked forever), and more than one job allowed (``PREREG_JOBS``, default
the cores this process may use, at most :data:`MAX_JOBS`). Everywhere else the same
calls run in the parent, one after another.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

P = TypeVar("P")
R = TypeVar("R")

#: More processes than this gain nothing on a read of tens of thousands of runs.
MAX_JOBS = 4
#: The environment variable setting how many processes a read may use (1: no fork).
JOBS_ENV = "PREREG_JOBS"


def jobs() -> int:
    """How many processes a computation may use: ``PREREG_JOBS`` if set (a positive
    integer; anything else counts as 1), else the cores this process may run on, at most
    :data:`MAX_JOBS`; 1 where forking is not safe here (see the module docstring)."""
    if not _can_fork():
        return 1
    stated = os.environ.get(JOBS_ENV)
    if stated is not None:
        try:
            return max(1, int(stated))
        except ValueError:
            return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return max(1, min(cores, MAX_JOBS))


def _can_fork() -> bool:
    return sys.platform == "linux" and hasattr(os, "fork") and threading.active_count() == 1


class Forked(Generic[R]):
    """``work()`` computing in a forked child from now on; :meth:`result` is its value.

    With ``fork=False``, a single job allowed (:func:`jobs`) or where forking is not
    safe, nothing starts now and :meth:`result` calls ``work`` in this process. A child
    whose result is never asked for (the parent raised meanwhile) is stopped when its
    handle is let go, or by :meth:`cancel`.
    """

    def __init__(self, work: Callable[[], R], *, fork: bool = True) -> None:
        self._work = work
        self._pid: int | None = None
        self._read = -1
        if fork and jobs() > 1:
            self._start()

    def _start(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()  # else the child's copy of a buffer could be written twice
            except (OSError, ValueError):  # a closed or broken stream: the child writes none
                pass
        read, write = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a limit): the work is done here, later
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: compute, send, leave without any clean-up of the parent's
            os.close(read)
            gc.disable()  # a collection would touch, so copy, every page of the parent's heap
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: the parent decides
            try:
                payload = pickle.dumps(self._work(), protocol=pickle.HIGHEST_PROTOCOL)
                _write_all(write, payload)
                code = 0
            except BaseException:  # noqa: BLE001 - the parent computes it again, and raises
                code = 1
            os._exit(code)
        os.close(write)
        self._pid, self._read = pid, read
        self._finalizer = weakref.finalize(self, _abandon, pid, read)

    def result(self) -> R:
        """The child's result, or (where it did not deliver one) ``work()`` computed here."""
        pid, read = self._pid, self._read
        if pid is None:
            return self._work()
        self._pid, self._read = None, -1
        self._finalizer.detach()
        try:
            payload = _read_all(read)
        except BaseException:
            _stop(pid)
            raise
        if _reap(pid) == 0 and payload:
            try:
                value: R = pickle.loads(payload)
                return value
            except Exception:  # noqa: BLE001 - a truncated result: compute it here
                pass
        return self._work()

    def cancel(self) -> None:
        """Stop the child (when the parent gave up on its result); nothing after
        :meth:`result`."""
        if self._pid is not None:
            self._finalizer()
            self._pid, self._read = None, -1


def fork_map(
    work: Callable[[P], R],
    parts: Sequence[P],
    *,
    jobs_: int | None = None,
    first: Callable[[], object] | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> list[R]:
    """``[work(p) for p in parts]``, by up to ``jobs_`` processes (default :func:`jobs`):
    this one and forked children, each claiming the next unclaimed part (in the order
    given: heaviest first balances best) until none is left. Same results, same order;
    an exception is raised as without forking (a part a child did not deliver is
    computed here). Where there are children: ``first`` is what this process does
    before it claims a part, while they start on the parts (work of its own for later,
    which they need not share: they claim more parts meanwhile); ``meanwhile`` what it
    does once no part is left to claim, while they finish theirs."""
    limit = min(jobs() if jobs_ is None else min(jobs_, jobs()), len(parts), MAX_PARTS)
    if limit <= 1 or len(parts) > MAX_PARTS:
        return [work(p) for p in parts]
    claims, fill = os.pipe()
    _write_all(fill, bytes(range(len(parts))))  # one byte per part: its number
    try:
        children = [
            Forked(lambda: _claimed(work, parts, claims, partial=True)) for _ in range(limit - 1)
        ]
        try:
            if first is not None:
                first()
            done = _claimed(work, parts, claims, partial=False)
            if meanwhile is not None:
                meanwhile()
            for child in children:
                done.update(child.result())
        finally:
            for child in children:
                child.cancel()
    finally:
        os.close(claims)
    return [done[i] if i in done else work(part) for i, part in enumerate(parts)]


#: :func:`fork_map` numbers its parts in one byte each.
MAX_PARTS = 255


def _claimed(
    work: Callable[[P], R], parts: Sequence[P], claims: int, *, partial: bool
) -> dict[int, R]:
    """The parts this process claims from the ``claims`` pipe (a one-byte read takes one
    part number, atomically), computed; ``partial``: a child stops at a part that
    raises and hands on the others (the parent computes that one, and raises)."""
    done: dict[int, R] = {}
    while token := os.read(claims, 1):
        try:
            done[token[0]] = work(parts[token[0]])
        except Exception:
            if not partial:
                raise
            break
    return done


def split(n: int, parts: int, smallest: int = 1) -> list[range]:
    """``range(n)`` cut into at most ``parts`` consecutive ranges of nearly equal size,
    none shorter than ``smallest`` (fewer ranges where ``n`` is small; none for 0)."""
    count = max(1, min(parts, n // max(1, smallest)))
    bounds = [n * k // count for k in range(count + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _abandon(pid: int, read: int) -> None:
    os.close(read)
    _stop(pid)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def _reap(pid: int) -> int:
    """Wait for the child; its exit code (negative: the signal that ended it)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
