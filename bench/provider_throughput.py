"""Throughput and CPU per unit of `prereg run` on the provider path (the real SDK drivers).

For each driver (anthropic Messages, openai Responses, openai-chat Chat Completions) the
bench registers the bundled music-library pilot with that driver as its host in a fresh
workspace and runs ``--units`` units through the same code as ``prereg run``
(:func:`prereg.runners.api.run_registration`: the driver built from the registration,
the real ``anthropic`` / ``openai`` SDK client, the run store; ``exits_after`` as the
``prereg`` program passes it), against a local fake server
that answers every request after ``--latency`` seconds. The fake runs in a child process
(an asyncio HTTP/1.1 server with the provider tests' agent, :mod:`tests.providers.fake_chat`),
so the process CPU time measured here is prereg's and the SDK's, not the server's.

Printed per driver: wall time, requests answered, CPU ms per unit (this process's CPU time
during the run / units: prereg and the SDK, not the fake; the SDK is imported before the
clock starts, with what it imports on building its first HTTP client, as in any run past its
first request, and that one-off is shown apart as its CPU in a fresh process), the
physical limit N x L / C (N requests) and limit / wall, the load average when the figure
was taken, and the host's plain-Python speed (:mod:`host_speed`): on a shared machine the
figures are indicative only, and comparable between sessions only beside that speed.

    python bench/provider_throughput.py [--units 1008] [--latency 0.2] [--concurrency 32]
        [--workers 1] [--drivers anthropic openai openai-chat] [--repeat 1] [--profile DIR]
        [--split] [--json]

``--workers N`` runs the units as ``prereg run --workers N`` does (N processes sharing the
units and the concurrency; the CPU figure then adds the workers' CPU to this process's).

``--split`` runs each driver a second time under cProfile and estimates the CPU per unit
outside the HTTP transport (the target's "outside the SDK's network I/O").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import importlib
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from host_speed import describe, python_loop_s  # bench/, this script's directory

from prereg.cli import main as cli_main
from prereg.core.workspace import Workspace
from prereg.runners.api import run_registration
from prereg.runners.store.sqlite import RunStore
from prereg.runners.workers import run_workers

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the fake's agent lives with the provider tests
    sys.path.insert(0, str(ROOT))

SDKS = {"anthropic": "anthropic", "openai": "openai", "openai-chat": "openai"}
MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-5-mini", "openai-chat": "served-model"}
PILOT = "music-library-pilot"
DEV_TASKS_TIMES_ARMS = 56  # the pilot's dev split: 28 tasks x 2 arms per repeat
KEY = "bench-key-0123456789"


# ---- the fake server (child process) -----------------------------------------------------------


async def _serve(latency: float) -> None:
    from tests.providers.fake_chat import ChatBrain  # lazy: only the child process serves

    brain = ChatBrain()
    counts: dict[str, float] = {"requests": 0, "held_s": 0.0}

    def answer(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/v1/messages":
            return brain.anthropic(body)
        if path == "/v1/responses":
            return brain.openai(body)
        return brain.chat(body)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = dict(
                    (k.strip().lower(), v.strip())
                    for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
                )
                raw = await reader.readexactly(int(headers.get("content-length") or 0))
                if method == "GET" and path == "/stats":
                    data = json.dumps({**counts, "cpu_s": time.process_time()}).encode()
                else:
                    counts["requests"] += 1
                    received = time.perf_counter()
                    await asyncio.sleep(latency)
                    data = json.dumps(answer(path.split("?", 1)[0], json.loads(raw))).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: " + str(len(data)).encode() + b"\r\n\r\n" + data
                )
                if path != "/stats":  # how long the fake held the request: L, or more if busy
                    counts["held_s"] += time.perf_counter() - received
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def fake_server(latency: float) -> Any:
    """The child process serving the fake; yields its origin."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        child.terminate()
        child.wait(timeout=10)


def server_stats(origin: str) -> dict[str, float]:
    """The fake's counters: requests answered, the seconds it held them (from reading a
    request to writing its reply) and its own CPU seconds so far."""
    with urllib.request.urlopen(origin + "/stats", timeout=10) as reply:  # noqa: S310 - local
        data: dict[str, float] = json.loads(reply.read())
        return data


# ---- the run ---------------------------------------------------------------------------------


def _cli(*args: str) -> None:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli_main(list(args))
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise RuntimeError(f"prereg {' '.join(args)} exited {exc.code}") from None


def prepare(root: Path, driver: str, units: int) -> str:
    """A workspace with the pilot registered on ``driver``; returns the registration id."""
    _cli("init", str(root), "--json")
    text = (root / "drafts" / f"{PILOT}.yaml").read_text()
    repeats = max(3, -(-units // DEV_TASKS_TIMES_ARMS))
    reg_id = f"bench-{driver}"
    text = text.replace("repeats: 3", f"repeats: {repeats}")
    text = text.replace(f"id: {PILOT}", f"id: {reg_id}")
    text = text.replace(
        "host: {driver: local}", f"host: {{driver: {driver}, model: {MODELS[driver]}}}"
    )
    draft = root / "drafts" / "bench.yaml"
    draft.write_text(text)
    _cli("-w", str(root), "register", str(draft), "--json")
    return reg_id


def provider_env(origin: str) -> None:
    os.environ.update(
        {
            "ANTHROPIC_API_KEY": KEY,
            "OPENAI_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": origin,
            "OPENAI_BASE_URL": origin + "/v1",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    )
    for name in ("PREREG_RPM", "PREREG_TPM", "PREREG_PRICES", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        os.environ.pop(name, None)


def load_sdk(module: str) -> None:
    """Import the SDK ``module`` and what it imports when it builds its first HTTP client
    (its aiohttp transport imports the TLS stack then: about 0.1-0.3 s): what a run pays
    once, before its first request, measured apart by :func:`import_cpu_ms`."""
    importlib.import_module(module).DefaultAioHttpClient()


def import_cpu_ms(module: str) -> float:
    """CPU ms of :func:`load_sdk` in a fresh interpreter (what a run pays once)."""
    code = (
        "import time; t = time.process_time(); import "
        + module
        + f"; {module}.DefaultAioHttpClient()"
        + "; print((time.process_time() - t) * 1000)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


def http_share(profile: Path) -> float:
    """Share of a profiled run's time spent in the HTTP transport (httpx's ``send``, under the
    SDK's request wrappers: connection pool, HTTP/1.1, sockets): the SDK's network I/O."""
    stats: dict[Any, Any] = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in stats.values())
    send = sum(
        row[3]
        for (path, _, name), row in stats.items()
        if name == "send" and "httpx" in path and path.endswith("_client.py")
    )
    return send / total if total else 0.0


def _cpu() -> float:
    """CPU seconds of this process and of its ended children (the ``--workers`` processes;
    the fake is reaped only after the run, so it is not counted)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(driver: str, args: argparse.Namespace, profile: Path | None = None) -> dict[str, Any]:
    with fake_server(args.latency) as origin, tempfile.TemporaryDirectory() as tmp:
        provider_env(origin)
        root = Path(tmp) / "ws"
        reg_id = prepare(root, driver, args.units)
        ws = Workspace(root)
        load_sdk(SDKS[driver])  # a one-off, measured apart (import_cpu_ms)
        profiler = cProfile.Profile(time.process_time) if profile is not None else None
        load_before = os.getloadavg()
        fake_before = server_stats(origin)
        cpu0, wall0 = _cpu(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        if args.workers > 1:
            summary = run_workers(
                ws,
                reg_id,
                workers=args.workers,
                concurrency=args.concurrency,
                max_units=args.units,
            )
        else:
            summary = run_registration(  # as the prereg program runs it (it then exits)
                ws, reg_id, concurrency=args.concurrency, max_units=args.units, exits_after=True
            )
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
        load_after = os.getloadavg()
        fake = server_stats(origin)
        requests = int(fake["requests"])
        failed = [r.error for r in RunStore(ws.runs).records(status="infra_error")][:3]
    if profiler is not None and profile is not None:
        profile.parent.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(profile))
    limit = requests * args.latency / args.concurrency
    return {
        "driver": driver,
        "units": summary.completed,
        "failed": summary.failed,
        "first_errors": failed,
        "requests": requests,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "latency_s": args.latency,
        "wall_s": round(wall, 2),
        "cpu_ms_per_unit": round(cpu * 1000 / max(summary.completed, 1), 2),
        "sdk_import_cpu_ms": round(import_cpu_ms(SDKS[driver])),
        "limit_s": round(limit, 2),
        "limit_over_wall": round(limit / wall, 3),
        # the fake's own figures: CPU per request, and the mean time it held a request
        # (L if it is never the bottleneck; more means the limit was the fake's, not ours)
        "fake_cpu_ms_per_request": round(
            (fake["cpu_s"] - fake_before["cpu_s"]) * 1000 / max(requests, 1), 2
        ),
        "fake_held_ms_mean": round(fake["held_s"] * 1000 / max(requests, 1), 1),
        "loadavg_1m_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "cores": os.cpu_count(),
        "profiled": bool(profiler),
        "profile": profile,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, default=1008)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes (prereg run --workers N; --concurrency is their total)",
    )
    parser.add_argument(
        "--drivers", nargs="+", default=["anthropic", "openai", "openai-chat"], choices=MODELS
    )
    parser.add_argument("--profile", metavar="DIR", help="write a cProfile per driver to DIR")
    parser.add_argument(
        "--split",
        action="store_true",
        help="run each driver again under cProfile and estimate the CPU per unit outside the "
        "HTTP transport (the unprofiled figure times the profiled share outside httpx's send)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each driver K times (rounds over the drivers) and print each run and the "
        "median of limit/wall: one run on a shared machine moves by +-0.03",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(args.latency))
        return 0
    rows = [
        measure(driver, args, Path(args.profile) / f"{driver}.prof" if args.profile else None)
        for _ in range(max(1, args.repeat))
        for driver in args.drivers
    ]
    if args.split:
        with tempfile.TemporaryDirectory() as tmp:
            for row in rows:
                share = http_share(measure(row["driver"], args, Path(tmp) / "p.prof")["profile"])
                row["http_share_profiled"] = round(share, 3)
                row["cpu_ms_per_unit_outside_http_est"] = round(
                    row["cpu_ms_per_unit"] * (1 - share), 2
                )
    for row in rows:
        row["profile"] = None if row["profile"] is None else str(row["profile"])
    speed = python_loop_s()
    medians = {
        driver: round(
            statistics.median(r["limit_over_wall"] for r in rows if r["driver"] == driver), 3
        )
        for driver in args.drivers
    }
    if args.json:
        out = {"rows": rows, "median_limit_over_wall": medians, "python_loop_s": round(speed, 3)}
        print(json.dumps(out, indent=2))
        return 0
    print(describe(speed))
    print(
        f"C={args.concurrency}, L={args.latency:g} s, workers={args.workers}, "
        f"{os.cpu_count()} cores; "
        "load average (1 min) before/after each run: figures are indicative on a shared machine"
    )
    print(
        f"{'driver':<12} {'units':>6} {'requests':>8} {'wall s':>7} {'N*L/C s':>8} "
        f"{'limit/wall':>10} {'CPU ms/unit':>11} {'SDK import ms':>13} {'load':>11}"
    )
    for r in rows:
        load = "/".join(f"{x:.1f}" for x in r["loadavg_1m_before_after"])
        print(
            f"{r['driver']:<12} {r['units']:>6} {r['requests']:>8} {r['wall_s']:>7.2f} "
            f"{r['limit_s']:>8.2f} {r['limit_over_wall']:>10.3f} {r['cpu_ms_per_unit']:>11.2f} "
            f"{r['sdk_import_cpu_ms']:>13.0f} {load:>11}" + (" (profiled)" if r["profiled"] else "")
        )
        if "http_share_profiled" in r:
            print(
                f"  {r['driver']}: {r['http_share_profiled']:.0%} of the profiled run in the HTTP "
                f"transport; CPU outside it about {r['cpu_ms_per_unit_outside_http_est']:.1f} "
                "ms per unit (SDK imported beforehand)"
            )
        print(
            f"  the fake: {r['fake_cpu_ms_per_request']:.2f} ms CPU per request, held each "
            f"{r['fake_held_ms_mean']:.1f} ms on average (L = {args.latency * 1000:.0f} ms)"
        )
        if r["failed"]:
            print(f"  {r['failed']} units failed, e.g. {r['first_errors']}")
    if args.repeat > 1:
        print(
            f"median limit/wall of {args.repeat} runs: "
            + ", ".join(f"{driver} {m:.3f}" for driver, m in medians.items())
        )
    print("target: limit/wall >= 0.9 and < 5 ms CPU per unit outside the SDK's network I/O")
    return 0


if __name__ == "__main__":
    sys.exit(main())
