"""The registered spend cap across ``prereg run`` worker processes on one PostgreSQL store
(issue 15), through the real ``anthropic`` SDK against the local fake provider.

Prices are chosen so that every figure is a hand computation: input is free and output
costs $10 per million tokens, so a request's worst case (what a driver holds before
sending it) is the completion cap, 256 tokens: $0.00256; the fake answers every
request with 200 output tokens: $0.002, always below the hold. Each unit is one request
(the fake answers with text at once). The reference for the spend is the database,
read with plain SQL: ``SUM(cost_usd)`` of the records under the registration's digest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import CliResult
from tests.providers.fakes import (
    Brain,
    FakeProviders,
    anthropic_text,
    anthropic_usage,
    provider_env,
)
from tests.store_pg.conftest import wait_for_session_end
from tests.waiting import wait_until

PER_M = 10.0  # $ per million output tokens
HOLD_USD = 256 * PER_M / 1e6  # the worst case of one request: the completion cap
COST_USD = 200 * PER_M / 1e6  # what the fake's every answer costs
PRICES = f"""\
version: spend-test-1
date: '2026-12-01'
providers:
  anthropic:
    models:
      claude-haiku-4-5: {{input: 0, output: {PER_M}}}
"""
DRAFT = """\
id: {id}
title: The spend cap across workers
hypothesis: Descriptive metadata raises selection of the focal integration.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {{id: descriptive, surface: focal}}
  - {{id: neutral, surface: focal-neutral}}
host: {{driver: anthropic, model: claude-haiku-4-5}}
budgets: {{completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: 4,
          spend_usd: {cap}}}
design: {{repeats: 2, rotations: 2, seed: 3}}
outcome: success
primary: {{test: mcnemar_exact, alpha: 0.05, sides: two-sided}}
"""
UNITS = 24
_count = threading.Lock()


@dataclass
class Answers(Brain):
    """Every request answered with text and 200 output tokens. With ``gate``, answers
    wait for it (requests stay in flight): it opens when ``crowd`` requests are waiting
    together (0: only when the test opens it)."""

    gate: threading.Event | None = None
    crowd: int = 0
    waiting: int = 0

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.gate is not None:
            with _count:
                self.waiting += 1
                if self.waiting >= self.crowd > 0:
                    self.gate.set()
            self.gate.wait(timeout=300)
        model = str(body.get("model")) + self.suffix
        return anthropic_text("Here is what I found.", model=model, usage=anthropic_usage(90, 200))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    """The fake the workers' environment points at."""
    with FakeProviders(Answers()) as server:
        provider_env(monkeypatch, server)
        yield server


def register(ws: Path, cli: Callable[..., CliResult], reg_id: str, cap: float) -> Path:
    """Register the draft; returns the price file the workers run with."""
    draft = ws / "drafts" / f"{reg_id}.yaml"
    draft.write_text(DRAFT.format(id=reg_id, cap=cap))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 0, result.stderr
    prices = ws.parent / "prices.yaml"
    prices.write_text(PRICES)
    return prices


def worker(
    ws: Path, reg_id: str, url: str, prices: Path, *, concurrency: int = 2, **env: str
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "prereg", "-w", str(ws), "run", reg_id, "--store", url]
        + ["--prices", str(prices), "--concurrency", str(concurrency), "--json"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def summary_of(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def sql(url: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, args).fetchall()  # type: ignore[arg-type]


def spent(url: str, reg_id: str) -> float:
    ((total,),) = sql(
        url,
        "SELECT COALESCE(SUM(cost_usd), 0) FROM records WHERE registration_digest ="
        " (SELECT DISTINCT registration_digest FROM records WHERE registration_id = %s)",
        reg_id,
    )
    return float(total)


@pytest.mark.slow
def test_three_workers_together_stay_under_the_cap(
    ws: Path, cli: Callable[..., CliResult], fake: FakeProviders, pg_url: str
) -> None:
    """Alone, each worker would spend up to the cap (its own holds fit under it): the three
    together would spend about three caps. Shared holds keep all three under one."""
    cap = 0.02  # ten answers' worth, of 24 units
    # the first answers wait until five requests are in flight together, so all three
    # workers hold spend at once (each runs at most two requests at a time)
    fake.brain = Answers(gate=threading.Event(), crowd=5)
    prices = register(ws, cli, "capped", cap)
    workers = [worker(ws, "capped", pg_url, prices) for _ in range(3)]
    try:
        summaries = [summary_of(w) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    total = spent(pg_url, "capped")
    assert 0 < total <= cap
    ok, refused = sql(
        pg_url,
        "SELECT count(*) FILTER (WHERE status = 'ok'),"
        " count(*) FILTER (WHERE status = 'infra_error' AND body LIKE '%%spend cap%%')"
        " FROM records WHERE registration_id = 'capped'",
    )[0]
    assert total == pytest.approx(ok * COST_USD)  # every stored unit paid one answer
    assert ok < UNITS and refused > 0  # the cap, not the plan, ended the spending
    assert sum(s["completed"] for s in summaries) == ok
    assert all(s["completed"] >= 1 for s in summaries)  # each ran a request of the crowd
    assert sql(pg_url, "SELECT count(*) FROM spend_holds") == [(0,)]  # all ended


@pytest.mark.slow
def test_a_killed_workers_holds_lapse_and_the_others_go_on(
    ws: Path, cli: Callable[..., CliResult], fake: FakeProviders, pg_url: str
) -> None:
    """Cap $0.004: one request's hold ($0.00256) fits, two do not. A worker whose request
    stays in flight blocks every other worker's request; once it is killed and its
    session has ended, its hold no longer counts and the next worker spends."""
    cap = 0.004
    prices = register(ws, cli, "killed", cap)
    gate = threading.Event()
    with FakeProviders(Answers(gate=gate)) as slow:
        victim = worker(
            ws, "killed", pg_url, prices, concurrency=1,
            ANTHROPIC_BASE_URL=slow.anthropic_url, PREREG_TIMEOUT_S="600",
        )  # fmt: skip
        try:
            held = _open_hold(pg_url, victim)
            assert held[1] == pytest.approx(HOLD_USD)
            blocked = summary_of(worker(ws, "killed", pg_url, prices))
            # refused by the cap, the worker stops starting units: only the units it had
            # in flight (two at --concurrency 2) are recorded as refused, not every unit
            assert blocked["completed"] == 0 and 1 <= blocked["failed"] <= 2
            assert blocked["stopped"] == "spend_cap" and blocked["remaining"] == UNITS
            assert spent(pg_url, "killed") == 0  # the victim's hold kept every request out
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=60)
        finally:
            gate.set()
            if victim.poll() is None:
                victim.kill()
                victim.wait()
    assert victim.returncode == -signal.SIGKILL
    wait_for_session_end(pg_url, held[2])
    resumed = cli("-w", ws, "run", "killed", "--store", pg_url, "--prices", prices, "--json")
    assert resumed.code == 0, resumed.stderr
    assert resumed.json()["completed"] == 1  # type: ignore[index]
    assert spent(pg_url, "killed") == pytest.approx(COST_USD)  # one answer, then the cap
    assert spent(pg_url, "killed") <= cap
    assert sql(pg_url, "SELECT count(*) FROM spend_holds WHERE hold_id = %s", held[0]) == [(0,)]


def _open_hold(url: str, proc: subprocess.Popen[bytes]) -> tuple[int, float, int]:
    """(hold id, amount, holder's server process) of ``proc``'s request in flight."""

    def held() -> list[Any]:
        try:
            return sql(
                url,
                "SELECT hold_id, amount, holder_pid FROM spend_holds"
                " WHERE NOT settled AND worker LIKE %s",
                f"%:{proc.pid}",
            )
        except psycopg.errors.UndefinedTable:  # the worker has not created the schema yet
            return []

    hold_id, amount, pid = wait_until(held, "a request held in flight", proc=proc, poll_s=0.02)[0]
    return int(hold_id), float(amount), int(pid)
