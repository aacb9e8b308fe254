"""Property: every report ``analyse`` builds of a small design keeps the rule for printed
intervals and the counting identities (issue 39, :mod:`prereg.reports.invariants`).

Hypothesis draws a design: 1-40 tasks of the bundled music-library corpus (one split
holding them all), 1-5 repeats, 2-4 arms (two surfaces and three local host profiles), a
registered analysis, and infrastructure failures (the local host raises for drawn units)
under both ``harness.infrastructure`` policies. Each is registered, run offline on the
local host and analysed in a fresh workspace; the checker must find nothing but the known
violations below.

Every violation class found is reported (with the first design that showed it). The
violations found while the checker was written (unlabelled zero-width bootstrap intervals,
a TOST t interval past -1) each keep a test on the design that showed them.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from prereg.cli import main
from prereg.core.workspace import Workspace
from prereg.reports import invariants
from prereg.reports.analysis import Options, analyse
from prereg.reports.invariants import Violation, check
from prereg.reports.model import Report
from prereg.runners.drivers.base import Episode, Exchange, InfraError, Turn
from prereg.runners.drivers.local import LocalHost
from prereg.runners.store.sqlite import RunStore
from tests.reports import make_lab, record, registration

ROOT = Path(__file__).resolve().parents[2]
MUSIC = ROOT / "experiments" / "bundled" / "music-library"
TASKS: list[str] = [t["id"] for t in yaml.safe_load((MUSIC / "corpus.yaml").read_text())["tasks"]]

ARMS: list[dict[str, Any]] = [
    {"id": "a1", "surface": "baseline"},
    {"id": "a2", "surface": "semantic"},
    {"id": "a3", "surface": "semantic", "host": {"model": "local-hasty"}},
    {"id": "a4", "surface": "baseline", "host": {"model": "local-careful"}},
]

#: The registered analyses a design may carry (primary, secondary, multiplicity).
ANALYSES: dict[str, dict[str, Any]] = {
    "mcnemar": {
        "primary": {"test": "mcnemar_exact", "aggregate": "majority"},
        "secondary": [{"test": "paired_bootstrap", "draws": 2000}],
        "multiplicity": {"method": "holm", "q": 0.1, "family": "per-intent"},
    },
    "bootstrap": {
        "primary": {"test": "paired_bootstrap", "draws": 2000},
        "secondary": [
            {"test": "sign_flip_test", "aggregate": "mean"},
            {"test": "tost_paired", "margin": 0.2, "aggregate": "mean"},
        ],
        "multiplicity": {"method": "bh", "q": 0.1, "family": "secondary"},
    },
    "evalue": {
        "primary": {"test": "beta_mixture", "aggregate": "majority"},
        "secondary": [{"test": "exact_permutation_test", "aggregate": "mean"}],
        "multiplicity": {"method": "e-bh", "q": 0.1, "family": "per-intent"},
    },
}

#: ``harness`` blocks: both infrastructure policies (None: the default, retry).
POLICIES: list[dict[str, Any] | None] = [
    None,
    {"infrastructure": "retry"},
    {"infrastructure": "count_as_failure", "attempts": 1},
    {"infrastructure": "count_as_failure", "attempts": 2},
]


def _class(v: Violation) -> tuple[str, str]:
    """A violation's class: its rule and its figure with every index as *."""
    return v.rule, re.sub(r"/\d+(?=/|$)", "/*", v.path)


# --- a design, registered, run and analysed ----------------------------------------------


def _cli(*args: str | Path) -> tuple[int, str]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            main([str(a) for a in args])
        return 0, out.getvalue()
    except SystemExit as exc:
        return (exc.code if isinstance(exc.code, int) else 1), out.getvalue()


@contextlib.contextmanager
def _workspace() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="prereg-invariants-"))
    try:
        ws = root / "ws"
        code, out = _cli("init", ws)
        assert code == 0, out
        yield ws
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class Design:
    tasks: tuple[int, ...]  # positions in the music-library corpus
    repeats: int
    arms: int
    analysis: str
    policy: int  # index into POLICIES
    failing: frozenset[tuple[int, int, int]]  # (arm, position in ``tasks``, repeat)
    rerun: bool  # run a second time (attempts left are spent)
    seed: int

    def labels(self) -> set[str]:
        return {
            f"{ARMS[a]['id']}/{TASKS[self.tasks[t]]}/{r}"
            for a, t, r in self.failing
            if a < self.arms and t < len(self.tasks) and r < self.repeats
        }


def _experiment(ws: Path, tasks: Sequence[int]) -> None:
    """music-library as ``music-small``: the tasks at ``tasks``, all in the dev split."""
    dst = ws / "experiments" / "music-small"
    shutil.copytree(ws / "experiments" / "music-library", dst)
    entry = yaml.safe_load((dst / "experiment.yaml").read_text())
    entry["name"] = "music-small"
    entry["splits"] = {"seed": 1, "fractions": {"dev": 1.0, "validation": 0.0, "test": 0.0}}
    (dst / "experiment.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    corpus = yaml.safe_load((dst / "corpus.yaml").read_text())
    corpus["tasks"] = [corpus["tasks"][i] for i in sorted(tasks)]
    (dst / "corpus.yaml").write_text(yaml.safe_dump(corpus, sort_keys=False))


def _failing_host(labels: set[str]) -> Any:
    """The local host, raising an infrastructure failure on the units ``labels``."""
    original = LocalHost.next_turn

    async def next_turn(self: LocalHost, episode: Episode, history: Sequence[Exchange]) -> Turn:
        if episode.label in labels:
            raise InfraError("injected: the host is unreachable")
        return await original(self, episode, history)

    return mock.patch.object(LocalHost, "next_turn", next_turn)


def _analysed(ws: Path, reg_id: str) -> Report:
    """The report ``analyse`` builds, the checker's switch off (the test checks it)."""
    with mock.patch.object(invariants, "ENFORCE", False):
        return analyse(Workspace(ws), reg_id, Options(allow_incomplete=True))


def run_design(d: Design) -> list[Violation]:
    with _workspace() as ws:
        _experiment(ws, d.tasks)
        doc: dict[str, Any] = {
            "id": "prop",
            "title": "A drawn design",
            "hypothesis": "h",
            "falsification": "f",
            "experiment": "music-small",
            "kind": "exploratory",
            "split": "dev",
            "arms": ARMS[: d.arms],
            "host": {"driver": "local"},
            "budgets": {
                "completion_cap": 512,
                "episode_tokens": 16000,
                "call_limit": 6,
                "turn_limit": 8,
            },
            "design": {"repeats": d.repeats, "rotations": 1, "seed": d.seed},
            "outcome": "success",
            **ANALYSES[d.analysis],
        }
        policy = POLICIES[d.policy]
        if policy is not None:
            doc["harness"] = policy
        path = ws / "drafts" / "prop.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        code, out = _cli("-w", ws, "register", path, "--json")
        assert code == 0, out
        with _failing_host(d.labels()):
            for _ in range(2 if d.rerun else 1):
                code, out = _cli("-w", ws, "run", "prop", "--no-progress", "--json")
                assert code == 0, out
        return check(_analysed(ws, "prop"))


@st.composite
def designs(draw: st.DrawFn) -> Design:
    tasks = draw(st.sets(st.integers(0, len(TASKS) - 1), min_size=1, max_size=40))
    repeats = draw(st.integers(1, 5))
    arms = draw(st.integers(2, 4))
    units = st.tuples(
        st.integers(0, arms - 1), st.integers(0, len(tasks) - 1), st.integers(0, repeats - 1)
    )
    return Design(
        tasks=tuple(sorted(tasks)),
        repeats=repeats,
        arms=arms,
        analysis=draw(st.sampled_from(sorted(ANALYSES))),
        policy=draw(st.integers(0, len(POLICIES) - 1)),
        failing=frozenset(draw(st.sets(units, max_size=4))),
        rerun=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
    )


def test_every_report_of_a_drawn_design_keeps_the_rules() -> None:
    """Every drawn design is analysed; every violation class is collected
    (with the first design that showed it) and all of them are reported at the end."""
    unknown: dict[tuple[str, str], str] = {}

    @settings(max_examples=4, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(designs())
    @example(  # one task, its only unit of a1 failing: retry leaves it missing
        Design((0,), 1, 2, "mcnemar", 1, frozenset({(0, 0, 0)}), False, 7)
    )
    @example(  # the largest design: 40 tasks (negatives among them), 4 arms, counted failures
        Design(
            tuple(range(21, 61)), 2, 4, "bootstrap", 2, frozenset({(1, 3, 1), (3, 39, 0)}), False, 3
        )
    )
    @example(  # five repeats, attempts spent over two runs, e-values
        Design(tuple(range(0, 60, 5)), 5, 3, "evalue", 3, frozenset({(2, 0, 4)}), True, 11)
    )
    def explore(design: Design) -> None:
        for v in run_design(design):
            unknown.setdefault(_class(v), f"{v}\n    in {design}")

    explore()
    assert not unknown, f"{len(unknown)} violation class(es):\n" + "\n".join(
        f"{rule} at {figure}: e.g. {first}" for (rule, figure), first in unknown.items()
    )


# --- the known violations, each on a design that shows it ---------------------------------


@cache
def _all_failing_three_arms() -> Report:
    """Three arms whose every run fails (constructed runs): every paired difference is 0
    on every task."""
    with _workspace() as ws:
        tasks = make_lab(ws, n_tasks=12, n_intents=2, split="dev")
        doc = registration(
            "agree",
            kind="exploratory",
            secondary=[{"test": "paired_bootstrap", "draws": 2000}],
            multiplicity={"method": "holm", "q": 0.1, "family": "per-intent"},
            contrasts=[{"id": "third-vs-baseline", "weights": {"baseline": -1, "third": 1}}],
        )
        doc["arms"].append({"id": "third", "surface": "b"})
        path = ws / "drafts" / "agree.yaml"
        path.write_text(yaml.safe_dump(doc))
        code, out = _cli("-w", ws, "register", path, "--json")
        assert code == 0, out
        digest = json.loads(out)["digest"]
        store = RunStore(ws / "runs")
        try:
            for arm in ("baseline", "semantic", "third"):
                for k, task in enumerate(tasks):
                    store.append(
                        record(
                            "agree",
                            digest,
                            arm,
                            task,
                            False,
                            intent=f"i{k % 2 + 1}",
                            split="dev",
                            surface="a" if arm == "baseline" else "b",
                        )
                    )
        finally:
            store.close()
        return _analysed(ws, "agree")


@cache
def _tost_on_three_tasks() -> tuple[Violation, ...]:
    """Three tasks, three repeats, the TOST secondary (found by the property test)."""
    failing = frozenset({(1, 1, 2), (0, 0, 1), (0, 1, 0), (1, 2, 0)})
    design = Design((15, 38, 52), 3, 2, "bootstrap", 3, failing, True, 65535)
    return tuple(run_design(design))


def test_arms_that_agree_on_every_task_print_no_point_interval() -> None:
    """Every paired difference is 0 (every run fails in three arms): the primary, the
    secondary, the per-intent rows, the pairwise table and the contrast withhold their
    interval and say why (too few tasks, or too few discordant tasks), never [0, 0]
    (these were zero-width intervals without a label before issue 39)."""
    report = _all_failing_three_arms()
    assert not check(report)
    primary = report.primary  # McNemar's: Tango's score interval has width at b = c = 0
    assert primary is not None and primary.interval is not None
    assert primary.interval.low is not None and primary.interval.high is not None
    assert primary.interval.low < 0.0 < primary.interval.high
    withheld = [t.interval for t in report.secondary]  # the bootstraps
    withheld += [c.interval for c in report.pairwise] + [c.interval for c in report.contrasts]
    assert len(withheld) == 1 + 3 + 1
    for iv in withheld:
        assert iv is not None and iv.low is None and iv.high is None
        assert iv.reason is not None and "too few discordant tasks" in iv.reason  # 12 tasks
    assert report.per_intent and all(
        r.interval is None and r.interval_note == "too few tasks (6 < 10)"
        for r in report.per_intent
    )


def test_a_tost_on_three_tasks_stays_inside_minus_one_one() -> None:
    """Three tasks, three repeats, the TOST secondary: its t interval reached -1.53 before
    it was cut to [-1, 1], the range of a difference of proportions (issue 39)."""
    assert not _tost_on_three_tasks()


# --- the bundled pool drafts: shares, ratings, controls and judges ------------------------


def _pool_report(name: str, judge: bool) -> list[Violation]:
    with _workspace() as ws:
        draft = ws / "drafts" / f"{name}.yaml"
        assert _cli("-w", ws, "register", draft, "--json")[0] == 0
        assert _cli("-w", ws, "run", name, "--no-progress")[0] == 0
        if judge:
            assert _cli("-w", ws, "judge", name)[0] == 0
        return check(_analysed(ws, name))


@pytest.mark.parametrize(
    ("name", "judge"),
    [("podcast-selection-judged", True), ("podcast-selection-controls", False)],
)
def test_the_bundled_pool_drafts_keep_the_rules(name: str, judge: bool) -> None:
    """Competitors and decoys (shares, the Invoke Rating, the per-server funnel), control
    arms and judges (kappa kept as keys): what the drawn designs do not offer."""
    found = _pool_report(name, judge)
    assert not found, "\n".join(str(v) for v in found[:20])


def test_one_prompt_per_intent_keeps_the_rules() -> None:
    """Six tasks of six intents, one repeat: every prompt bootstrap within intents
    resamples the data itself (zero-width shares and ratings must say so)."""
    design = Design((0, 19, 28, 41, 49, 60), 1, 2, "mcnemar", 0, frozenset(), False, 65536)
    found = run_design(design)
    assert not found, "\n".join(str(v) for v in found[:20])
