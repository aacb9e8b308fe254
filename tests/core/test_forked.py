"""prereg.core.forked: forked children compute exactly what this process would.

The fork paths run in a fresh single-threaded interpreter (a pytest-xdist worker has
threads, where :func:`prereg.core.forked.jobs` rightly refuses to fork); each script
counts the forks it made, so a test cannot pass by never forking.
"""

from __future__ import annotations

import textwrap
import threading
from typing import Any

import pytest

from prereg.core import forked
from tests.core.fork_script import run_script


def _script(body: str, jobs: int = 2) -> Any:
    return run_script("from prereg.core import forked\n" + textwrap.dedent(body), jobs)


def test_fork_map_gives_the_serial_results_in_order() -> None:
    out = _script(
        """
        def work(p):
            until_two_processes_work()  # so the parts are shared out on any machine
            return p * p, os.getpid()
        got = forked.fork_map(work, list(range(40)), jobs_=3)
        print(json.dumps({"values": [v for v, _ in got], "pids": len({p for _, p in got}),
                          "forks": len(FORKS)}))
        """,
        jobs=3,
    )
    assert out["values"] == [p * p for p in range(40)]
    assert out["forks"] == 2  # three processes: this one and two children
    assert out["pids"] >= 2  # the parts were shared out (claimed one at a time)


def test_first_and_meanwhile_run_here_around_the_claims() -> None:
    """``first`` runs in this process before it claims a part (the children claim the
    first parts meanwhile), ``meanwhile`` after its last claim; one job runs neither."""
    body = """
        order = []
        def work(p):
            if in_child():
                child_worked()
            order.append(("part", p))
            return p, os.getpid()
        def first():
            if FORKS:
                until_a_child_worked()  # the children claim parts meanwhile
            order.append(("first", os.getpid()))
        got = forked.fork_map(
            work, list(range(8)), first=first, meanwhile=lambda: order.append(("meanwhile",))
        )
        mine = [p for p, pid in got if pid == PARENT]
        print(json.dumps({"values": [p for p, _ in got], "order": order, "mine": mine,
                          "forks": len(FORKS)}))
        """
    two, one = _script(body, jobs=2), _script(body, jobs=1)
    assert two["values"] == one["values"] == list(range(8)) and two["forks"] == 1
    kinds = [step[0] for step in two["order"]]
    assert kinds[0] == "first" and kinds[-1] == "meanwhile" and two["order"][0][1] > 0
    assert 0 not in two["mine"] and len(two["mine"]) < 8  # the child took the first parts
    assert [step[0] for step in one["order"]] == ["part"] * 8  # neither: no children


def test_one_job_never_forks() -> None:
    out = _script(
        """
        got = forked.fork_map(lambda p: p + 1, [1, 2, 3])
        late = forked.Forked(lambda: 7).result()
        print(json.dumps({"got": got, "late": late, "forks": len(FORKS)}))
        """,
        jobs=1,
    )
    assert out == {"got": [2, 3, 4], "late": 7, "forks": 0}


def test_an_error_in_a_child_is_raised_here_as_without_forking() -> None:
    out = _script(
        """
        def work(p):
            if p == 5:
                raise KeyError(f"part {p} in {'child' if in_child() else 'parent'}")
            time.sleep(0.01)
            return p
        try:
            forked.fork_map(work, list(range(12)))
            raised = None
        except KeyError as exc:
            raised = str(exc)
        print(json.dumps({"raised": raised, "forks": len(FORKS)}))
        """
    )
    assert out["forks"] == 1
    assert out["raised"] == "'part 5 in parent'"  # computed again here, and raised


def test_a_killed_child_costs_time_not_results() -> None:
    out = _script(
        """
        def work(p):
            if in_child() and p >= 3:
                os.kill(os.getpid(), signal.SIGKILL)  # the child dies holding a claim
            time.sleep(0.01)
            return p * 10
        got = forked.fork_map(work, list(range(10)))
        single = forked.Forked(lambda: os.kill(os.getpid(), signal.SIGKILL) if in_child() else 9)
        print(json.dumps({"got": got, "single": single.result(), "forks": len(FORKS)}))
        """
    )
    assert out["got"] == [p * 10 for p in range(10)]
    assert out["single"] == 9
    assert out["forks"] == 2


def test_cancel_and_letting_go_stop_the_child() -> None:
    out = _script(
        """
        import gc
        # children that never finish: a cancel or a drop that waited for them would hang
        # this script (run_script's guard), with no clock in the test
        slow = forked.Forked(signal.pause)
        slow.cancel()
        dropped = forked.Forked(signal.pause)
        del dropped
        gc.collect()
        alive = []
        for pid in FORKS:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        print(json.dumps({"alive": alive, "forks": len(FORKS)}))
        """
    )
    assert out["forks"] == 2
    assert out["alive"] == []  # killed and reaped (a zombie would still answer signal 0)


def test_results_cross_the_pipe_whole() -> None:
    """A result far larger than a pipe's buffer (64 KiB) arrives intact."""
    out = _script(
        """
        big = forked.Forked(lambda: ["x" * 1000 + str(i) for i in range(5000)]).result()
        print(json.dumps({"ok": big == ["x" * 1000 + str(i) for i in range(5000)],
                          "forks": len(FORKS)}))
        """
    )
    assert out == {"ok": True, "forks": 1}


def test_jobs_reads_prereg_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "_can_fork", lambda: True)
    for stated, expected in (("3", 3), ("1", 1), ("0", 1), ("many", 1), ("-2", 1)):
        monkeypatch.setenv(forked.JOBS_ENV, stated)
        assert forked.jobs() == expected, stated
    monkeypatch.delenv(forked.JOBS_ENV)
    for cores, expected in ((1, 1), (2, 2), (3, 3), (16, forked.MAX_JOBS)):
        monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert forked.jobs() == expected, cores  # the usable cores, at most MAX_JOBS
    monkeypatch.setattr(forked, "_can_fork", lambda: False)
    monkeypatch.setenv(forked.JOBS_ENV, "3")
    assert forked.jobs() == 1  # where forking is not safe, whatever is asked


def test_no_fork_beside_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread could hold a lock at the fork; its copy in the child would stay locked."""
    monkeypatch.setenv(forked.JOBS_ENV, "4")
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert forked.jobs() == 1
        assert forked.fork_map(lambda p: p * 2, [1, 2, 3]) == [2, 4, 6]
    finally:
        release.set()
        other.join()


@pytest.mark.parametrize(
    ("n", "parts", "smallest", "sizes"),
    [
        (10, 2, 1, [5, 5]),
        (11, 3, 1, [3, 4, 4]),
        (10, 4, 4, [5, 5]),  # no part shorter than 4: two parts
        (3, 2, 2000, [3]),
        (0, 2, 1, []),
    ],
)
def test_split_cuts_consecutive_ranges(n: int, parts: int, smallest: int, sizes: list[int]) -> None:
    ranges = forked.split(n, parts, smallest)
    assert [len(r) for r in ranges] == sizes
    assert [i for r in ranges for i in r] == list(range(n))
