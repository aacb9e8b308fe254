"""Cost of ``prereg register`` on a large corpus (issue 40, item 7).

Builds, in a temporary workspace made by ``prereg init``, a copy of the bundled
music-library experiment whose corpus holds N synthetic tasks (two paraphrases per
cluster, spread over the music-library intents, each prompt distinct), an exploratory
registration on its dev split, and times ``prereg register`` in a child process (so the
peak resident set size is that command's alone).

Optionally (``--claimed``) a confirmatory registration of the bundled experiment is
registered and its locked split claimed first, so the near-duplicate check of new
prompts against claimed test prompts does its work too.

Prints, per N: seconds (wall clock of the child, and its CPU time: the wall clock on an
idle core), peak RSS in MB and the exit code.
``--profile`` writes a cProfile of the registration to ``--profile-out`` instead.
No assertions: figures only.

    python bench/register_scale.py [--sizes 1000,10000,100000] [--claimed] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

INTENTS = (
    "find-tracks",
    "track-details",
    "album-info",
    "playlist-view",
    "music-chat",
)
WORDS = (
    "amber harbor velvet orbit lantern copper meadow cinder violet tundra quartz willow "
    "ember falcon prism juniper cobalt saffron marble thistle"
).split()


def _prompt(i: int) -> str:
    """A distinct prompt per task: a few varying words and the task number."""
    a, b, c = WORDS[i % 20], WORDS[(i // 20) % 20], WORDS[(i // 400) % 20]
    return f"Which songs called {a} {b} {c} {i} do I have?"


def build(root: Path, n: int) -> tuple[Path, Path]:
    """A workspace with experiment ``big`` of ``n`` tasks; returns (workspace, draft)."""
    ws = root / "ws"
    _prereg("init", str(ws))
    src = ws / "experiments" / "music-library"
    big = ws / "experiments" / "big"
    shutil.copytree(src, big)
    spec = (big / "experiment.yaml").read_text()
    (big / "experiment.yaml").write_text(spec.replace("name: music-library", "name: big"))
    head = (src / "corpus.yaml").read_text().split("\ntasks:")[0]
    lines = [head, "tasks:"]
    for i in range(n):
        intent = INTENTS[(i // 2) % len(INTENTS)]
        polarity = "negative" if intent == "music-chat" else "positive"
        permits = "[]" if polarity == "negative" else "[search_tracks]"
        lines.append(
            f"- {{id: t{i:06d}, intent: {intent}, cluster: c{i // 2:06d}, "
            f"polarity: {polarity}, prompt: '{_prompt(i)}', permits: {permits}}}"
        )
    (big / "corpus.yaml").write_text("\n".join(lines) + "\n")
    draft = ws / "drafts" / "big-pilot.yaml"
    pilot = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    draft.write_text(
        pilot.replace("id: music-library-pilot", "id: big-pilot").replace(
            "experiment: music-library", "experiment: big"
        )
    )
    return ws, draft


def _prereg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "prereg", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )


def _claim(ws: Path) -> None:
    """Register and claim the bundled confirmatory (its test prompts become claimed)."""
    draft = ws / "drafts" / "music-library-confirmatory.yaml"
    for args in (
        ("-w", str(ws), "register", str(draft)),
        ("-w", str(ws), "run", "music-library-confirmatory", "--max-units", "1"),
    ):
        done = _prereg(*args)
        if done.returncode != 0:
            raise RuntimeError(f"prereg {' '.join(args)}: {done.stderr}")


#: ``prereg ARGS`` under cProfile, the profile written to argv[1] whatever the exit code
_PROFILED = """
import cProfile, sys
from prereg.cli import main
profile = cProfile.Profile()
profile.enable()
try:
    main(sys.argv[2:])
except SystemExit:
    pass
profile.disable()
profile.dump_stats(sys.argv[1])
"""


def _run(cmd: list[str], cwd: str) -> tuple[int, float, int, str]:
    """(exit code, CPU seconds, peak RSS in KiB, last output) of ``cmd`` alone (wait4)."""
    with tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT, cwd=cwd)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read()[-800:]
    return child.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, text


def measure(n: int, claimed: bool, profile: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ws, draft = build(Path(tmp), n)
        if claimed:
            _claim(ws)
        args = ["-w", str(ws), "register", str(draft), "--json"]
        if profile is None:
            cmd = [sys.executable, "-m", "prereg", *args]
        else:
            cmd = [sys.executable, "-c", _PROFILED, str(profile), *args]
        start = time.perf_counter()
        # cwd: the temporary folder, so `-m prereg` imports the installed package (or the
        # one PYTHONPATH names), not a source tree the bench was started in
        code, cpu, rss, out = _run(cmd, tmp)
        seconds = time.perf_counter() - start
        corpus_mb = (ws / "experiments" / "big" / "corpus.yaml").stat().st_size / 1e6
    return {
        "tasks": n,
        "corpus_mb": round(corpus_mb, 1),
        "seconds": round(seconds, 2),
        # CPU seconds of the child: what the wall clock would be on an idle core (the
        # machine is shared: with other work running the wall clock is longer)
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mb": round(rss / 1024, 1),  # ru_maxrss: KiB on Linux
        "exit": code,
        "error": None if code == 0 else out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--claimed", action="store_true", help="claim a locked split first")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size")
    parser.add_argument("--profile-out", type=Path, default=Path("register.prof"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rows = []
    for n in sizes:
        profile = args.profile_out if args.profile and n == sizes[-1] else None
        rows.append(measure(n, args.claimed, profile))
        if not args.json:
            r = rows[-1]
            print(
                f"{r['tasks']:>8} tasks ({r['corpus_mb']} MB corpus): {r['seconds']:>7.2f} s "
                f"({r['cpu_seconds']:.2f} s CPU), "
                f"peak RSS {r['peak_rss_mb']:>7.1f} MB, exit {r['exit']}"
                + (f"  {r['error']}" if r["error"] else ""),
                flush=True,
            )
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
