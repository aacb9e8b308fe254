"""Paired data of two arms: per-task outcomes by repeat, aggregation, provenance.

A comparison pairs the two arms on the same task (prompt). Repeats of a task are
aggregated to one value per task *as registered* (``aggregate``) for the tests
that compare per-task values; the paired bootstrap instead keeps every run and
resamples prompts and each arm's replicate runs (a repeat index is a replicate
run of the arm over the split, as the feasibility gate also counts it).

Aggregation rules (fixed before any data):

- ``majority``: the task succeeds when strictly more than half of its measured
  repeats succeed. With an even number of repeats a tie counts as failure, the
  conservative reading of "a majority".
- ``all`` / ``any``: every / at least one measured repeat succeeded.
- ``first``: the lowest-numbered measured repeat.
- ``mean``: the share of measured repeats that succeeded. A test that needs
  binary per-task outcomes (McNemar, the beta-mixture e-value) reads ``mean`` as
  ``majority`` and says so in its note.

Only tasks where both arms have at least one measured repeat are paired.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from prereg.reports.model import RunSet
from prereg.reports.observations import Obs, unit_label

BINARY_AGGREGATES = ("majority", "all", "any", "first")


def aggregate(by_repeat: dict[int, bool], how: str) -> float:
    """One value for a task from its measured repeats (see the module docstring)."""
    if not by_repeat:
        raise ValueError("no measured repeat to aggregate")
    values = [by_repeat[r] for r in sorted(by_repeat)]
    if how == "majority":
        return 1.0 if sum(values) * 2 > len(values) else 0.0
    if how == "all":
        return 1.0 if all(values) else 0.0
    if how == "any":
        return 1.0 if any(values) else 0.0
    if how == "first":
        return 1.0 if values[0] else 0.0
    if how == "mean":
        return float(np.mean(values))
    raise ValueError(f"unknown aggregate '{how}'")


def units_digest(units: Iterable[tuple[str, str, int]]) -> str:
    """The digest of a set of units: of their sorted labels, one a line."""
    key = tuple(units)
    try:
        return _units_digest(key)
    except TypeError:  # an unhashable unit (a list): computed without the memory
        return _units_digest.__wrapped__(key)


@functools.lru_cache(maxsize=32)
def _units_digest(units: tuple[tuple[str, str, int], ...]) -> str:
    """:func:`units_digest`, remembered for the last few unit sets: the sections of a report
    state the same run set again and again (an arm's positive runs in each InvokeRank
    block, a pair of arms in each test of it), and labelling and sorting tens of thousands
    of units costs far more than hashing the tuple that looks them up."""
    text = "\n".join(sorted(unit_label(u) for u in units))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def runset(units: Sequence[tuple[str, str, int]], filter_text: str) -> RunSet:
    return RunSet(
        count=len(units),
        tasks=len({u[1] for u in units}),
        arms=sorted({u[0] for u in units}),
        units_digest=units_digest(units),
        filter=filter_text,
    )


@dataclass(frozen=True)
class PairData:
    """Two arms' measured outcomes on the tasks both have, in the planned task order."""

    control: str
    treatment: str
    outcome: str
    tasks: tuple[str, ...]
    intents: dict[str, str]
    control_runs: dict[str, dict[int, bool]]
    treatment_runs: dict[str, dict[int, bool]]
    filter_text: str
    units: tuple[tuple[str, str, int], ...] = field(default=())
    clusters: dict[str, str] = field(default_factory=dict)
    #: repeats per replicate session (``design.sessions``): the bootstrap's run label of a
    #: repeat is its session (``repeat // per_session``); 1 (no sessions): each repeat
    per_session: int = 1

    @property
    def n(self) -> int:
        return len(self.tasks)

    @property
    def run_label(self) -> str:
        """What the bootstrap's replicate run of a row is, as the provenance says it."""
        if self.per_session == 1:
            return "repeat index of each arm"
        return f"replicate session of each arm (design.sessions; {self.per_session} repeats each)"

    def subset(self, tasks: Iterable[str]) -> PairData:
        keep = set(tasks)
        chosen = tuple(t for t in self.tasks if t in keep)
        units = tuple(u for u in self.units if u[1] in keep)
        return PairData(
            self.control,
            self.treatment,
            self.outcome,
            chosen,
            {t: self.intents[t] for t in chosen},
            {t: self.control_runs[t] for t in chosen},
            {t: self.treatment_runs[t] for t in chosen},
            self.filter_text,
            units,
            {t: self.clusters[t] for t in chosen if t in self.clusters},
            self.per_session,
        )

    def labels(self, unit: str) -> list[str]:
        """Each paired task's resampling unit (issue 13, item 5): the task itself, its
        paraphrase cluster or its intent, in task order."""
        if unit == "task":
            return list(self.tasks)
        table = self.clusters if unit == "cluster" else self.intents
        missing = [t for t in self.tasks if t not in table]
        if missing:
            raise ValueError(f"no {unit} known for task(s) {', '.join(missing[:5])}")
        return [table[t] for t in self.tasks]

    def n_units(self, unit: str) -> int:
        return len(set(self.labels(unit)))

    def per_unit(self, how: str, unit: str) -> tuple[np.ndarray, np.ndarray]:
        """(control, treatment) per unit: the mean of its tasks' aggregated values.

        Every unit counts once and every task once within its unit (the reading of a
        cluster bootstrap where a family's paraphrases are one observation).
        """
        c, t = self.per_task(how)
        if unit == "task":
            return c, t
        labels = self.labels(unit)
        order = list(dict.fromkeys(labels))
        codes = np.array([order.index(label) for label in labels], dtype=int)
        sizes = np.bincount(codes, minlength=len(order)).astype(float)
        return (
            np.bincount(codes, weights=c, minlength=len(order)) / sizes,
            np.bincount(codes, weights=t, minlength=len(order)) / sizes,
        )

    def per_task(self, how: str) -> tuple[np.ndarray, np.ndarray]:
        """(control, treatment) per-task aggregated values, in task order."""
        c = np.array([aggregate(self.control_runs[t], how) for t in self.tasks], dtype=float)
        t = np.array([aggregate(self.treatment_runs[t], how) for t in self.tasks], dtype=float)
        return c, t

    def discordant(self, how: str) -> tuple[int, int]:
        """(b, c): tasks where only the control / only the treatment succeeded."""
        c, t = self.per_task(how if how in BINARY_AGGREGATES else "majority")
        return int(np.sum((c == 1) & (t == 0))), int(np.sum((c == 0) & (t == 1)))

    def long_form(
        self, unit: str = "task"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(control, treatment, unit, run) rows for every repeat both arms measured.

        Rows pair the two arms' runs with the same repeat index on the same task; the
        fourth column is the replicate run the bootstrap resamples: the repeat's session
        when the registration has replicate sessions (its repeats inside one session
        share the session's run effect, so they are one run, not several), else the
        repeat itself. The third column codes the task's resampling unit
        (:meth:`labels`), so the bootstrap resamples whole clusters or intents when the
        registration says so.
        """
        yc: list[float] = []
        yt: list[float] = []
        prompts: list[int] = []
        runs: list[int] = []
        labels = self.labels(unit)
        first: dict[str, int] = {}
        for label in labels:
            first.setdefault(label, len(first))  # each label's code: its first-seen rank
        for task, label in zip(self.tasks, labels, strict=True):
            control, treatment = self.control_runs[task], self.treatment_runs[task]
            both = sorted(control.keys() & treatment.keys())
            yc.extend([float(control[r]) for r in both])
            yt.extend([float(treatment[r]) for r in both])
            prompts.extend([first[label]] * len(both))
            runs.extend(r // self.per_session for r in both)
        return (np.array(yc), np.array(yt), np.array(prompts, dtype=int), np.array(runs, dtype=int))

    def runset(self) -> RunSet:
        return runset(self.units, self.filter_text)


def arm_outcomes(observations: Iterable[Obs], arm: str, outcome: str) -> ArmOutcomes:
    """Arm ``arm``'s measured ``outcome`` by task and repeat, in the observations' order (a
    later run of the same unit replaces an earlier one), read once per arm: every pair of
    arms it belongs to reuses it instead of reading each run's outcome again."""
    runs: dict[str, dict[int, bool]] = {}
    counted = False
    for obs in observations:
        if obs.arm != arm:
            continue
        counted = counted or obs.counted_failure
        value = obs.outcome(outcome)
        if value is None:
            continue
        runs.setdefault(obs.task_id, {})[obs.repeat] = value
    return ArmOutcomes(runs, counted)


@dataclass(frozen=True)
class ArmOutcomes:
    """One arm's measured outcomes (task -> repeat -> value) and whether any of its units
    was counted as a failure (:func:`arm_outcomes`); read-only once built."""

    runs: dict[str, dict[int, bool]]
    counted: bool


def build_pairs(
    observations: Sequence[Obs],
    control: str,
    treatment: str,
    outcome: str,
    task_order: Sequence[str],
    intents: dict[str, str],
    clusters: dict[str, str] | None = None,
    per_session: int = 1,
) -> PairData:
    """Pair two arms' measured outcomes by task and repeat (``per_session``: repeats per
    replicate session, :attr:`PairData.per_session`)."""
    first = arm_outcomes(observations, control, outcome)
    second = first if treatment == control else arm_outcomes(observations, treatment, outcome)
    return pair_outcomes(
        first, second, control, treatment, outcome, task_order, intents, clusters, per_session
    )


def pair_outcomes(
    control_outcomes: ArmOutcomes,
    treatment_outcomes: ArmOutcomes,
    control: str,
    treatment: str,
    outcome: str,
    task_order: Sequence[str],
    intents: dict[str, str],
    clusters: dict[str, str] | None = None,
    per_session: int = 1,
) -> PairData:
    """:func:`build_pairs` from the two arms' :func:`arm_outcomes` (the inner per-task
    dicts are shared with them, never copied: nothing writes to them)."""
    runs = {control: control_outcomes.runs, treatment: treatment_outcomes.runs}
    tasks = tuple(t for t in task_order if runs[control].get(t) and runs[treatment].get(t))
    used: dict[tuple[str, str, int], None] = {}
    for task in tasks:
        for arm in (control, treatment):
            for r in runs[arm][task]:
                used[(arm, task, r)] = None
    counted = control_outcomes.counted or treatment_outcomes.counted
    filter_text = (
        f"status ok{'; units counted as failures (infrastructure)' if counted else ''}; "
        f"arms {control}, {treatment}; outcome '{outcome}' measured"
        + ("; positive tasks only" if outcome != "success" else "")
        + "; tasks measured in both arms"
    )
    return PairData(
        control=control,
        treatment=treatment,
        outcome=outcome,
        tasks=tasks,
        intents={t: intents.get(t, "") for t in tasks},
        control_runs={t: runs[control][t] for t in tasks},
        treatment_runs={t: runs[treatment][t] for t in tasks},
        filter_text=filter_text,
        units=tuple(used),
        clusters={t: clusters[t] for t in tasks if clusters and t in clusters},
        per_session=per_session,
    )
