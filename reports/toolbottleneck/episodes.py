"""Which episodes a registered study's tables count: the registered infrastructure policy.

The registered analysis (:func:`prereg.reports.load.counted_failures`,
:mod:`prereg.reports.observations`) reads ``harness.infrastructure``
(:class:`prereg.registry.units.HarnessPolicy`), and every table of the study section
reads the same rule through :func:`episodes`, applied once:

- a unit (arm, task, repeat) with an ok record is that record, whatever came before;
- ``retry`` (the default): infra_error records are left out of every table (the unit is
  missing until a run completes) and are shown as excluded;
- ``count_as_failure``: a unit with no ok record whose infra_error records reached the
  registered ``attempts`` is settled and counts as a *failure* of its arm in every table
  (intention to treat): in the contrasts' cell means and denominators, the sign-flip
  test, the failure census (failure class ``infrastructure``: its terminal flag and its
  first unmet obligation, never a harness limit), truncation denominators (never
  truncated), sentinel repeats, the truncation strata, the decoder's packets and the
  repairs. A unit with fewer infra_error records than ``attempts`` is still missing and
  its records are excluded, as in the registered analysis.

A counted unit's terminal flag and first unmet obligation are both ``infrastructure``
(:data:`prereg.reports.toolbottleneck.census.INFRASTRUCTURE`). It is built from its last
infra_error record (as the registered analysis builds it); its tokens, wall time and
cost are the sums over its infra_error records (what the unit spent), null where a
record measured none (never read as zero).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from prereg.registry.schema import Registration
from prereg.registry.units import HarnessPolicy, harness_policy
from prereg.reports.toolbottleneck.census import INFRASTRUCTURE
from prereg.reports.toolbottleneck.model import StudyTable
from prereg.runners.record import RunRecord

Unit = tuple[str, str, int]


@dataclass(frozen=True)
class Episode:
    """A run record as the study's tables read it (see the module docstring)."""

    arm: str
    task_id: str
    intent: str
    repeat: int
    status: str
    success: bool | None
    terminal_flag: str | None
    first_unmet_obligation: str | None
    calls: int
    tokens: float
    latency_ms: float | None
    cost_usd: float | None
    #: a unit settled by count_as_failure: a failure of class ``infrastructure``
    counted_failure: bool = False

    @property
    def unit(self) -> Unit:
        return (self.arm, self.task_id, self.repeat)


def _episode(r: RunRecord) -> Episode:
    return Episode(
        r.arm,
        r.task_id,
        r.intent,
        r.repeat,
        r.status,
        r.success,
        r.terminal_flag,
        r.first_unmet_obligation,
        r.calls,
        float(r.tokens.total or 0),
        r.latency_ms,
        r.cost_usd,
    )


def _sum(values: Sequence[float | None]) -> float | None:
    """The sum, or None when a value was not measured."""
    return None if any(v is None for v in values) else float(sum(v or 0.0 for v in values))


def _counted(attempts: Sequence[RunRecord]) -> Episode:
    last = attempts[-1]
    return Episode(
        last.arm,
        last.task_id,
        last.intent,
        last.repeat,
        last.status,
        False,
        INFRASTRUCTURE,
        INFRASTRUCTURE,
        last.calls,
        float(sum(r.tokens.total or 0 for r in attempts)),
        _sum([r.latency_ms for r in attempts]),
        _sum([r.cost_usd for r in attempts]),
        counted_failure=True,
    )


@dataclass(frozen=True)
class Episodes:
    """The episodes every table counts (``scored``: ok records and, under
    count_as_failure, the settled units), the infra_error records left out
    (``excluded``), and every arm's count of infra_error records."""

    policy: HarnessPolicy
    scored: tuple[Episode, ...]
    excluded: tuple[Episode, ...]
    infra_records: tuple[tuple[str, int], ...] = ()

    @property
    def counted(self) -> tuple[Episode, ...]:
        return tuple(e for e in self.scored if e.counted_failure)

    @property
    def census_rows(self) -> tuple[Episode, ...]:
        """Scored and excluded episodes: the census counts the first and shows the
        second apart."""
        return self.scored + self.excluded

    def note(self) -> str:
        """One sentence: how this section counted infrastructure failures."""
        counted, excluded = len(self.counted), len(self.excluded)
        if self.policy.infrastructure == "count_as_failure":
            text = (
                "Infrastructure failures (harness.infrastructure: count_as_failure, attempts "
                f"{self.policy.attempts}): {counted} unit(s) with no ok record after "
                f"{self.policy.attempts} infra_error attempt(s) counted as failures of their "
                f"arm (failure class '{INFRASTRUCTURE}') in every table and denominator"
            )
            if excluded:
                text += (
                    f"; {excluded} other infra_error record(s) left out (their unit completed "
                    "or is not settled yet)"
                )
            return text + "."
        return (
            "Infrastructure failures (harness.infrastructure: retry): "
            f"{excluded} infra_error record(s) left out of every table; their units are "
            "missing until a run completes (never counted as failures)."
        )

    def table(self) -> StudyTable:
        """Per arm with an infra_error record: those records, the units counted as
        failures and the records left out."""
        records = dict(self.infra_records)
        counted = Counter(e.arm for e in self.counted)
        left = Counter(e.arm for e in self.excluded)
        rows = [
            [arm, str(records.get(arm, 0)), str(counted[arm]), str(left[arm])]
            for arm in sorted({*records, *counted, *left})
        ]
        return StudyTable(
            title=f"Infrastructure failures (harness.infrastructure: {self.policy.infrastructure})",
            columns=["arm", "infra_error records", "units counted as failures", "records left out"],
            rows=rows,
            note=self.note(),
        )


def episodes(registration: Registration, records: Sequence[RunRecord]) -> Episodes:
    """Apply the registration's infrastructure policy to its run records, once (see the
    module docstring), in the records' order."""
    policy = harness_policy(registration)
    ok: dict[Unit, RunRecord] = {}
    failed: dict[Unit, list[RunRecord]] = defaultdict(list)
    for r in records:
        key = (r.arm, r.task_id, r.repeat)
        if r.status == "ok":
            ok.setdefault(key, r)  # the loader refuses a unit with two ok records
        else:
            failed[key].append(r)
    scored = [_episode(r) for r in ok.values()]
    excluded: list[Episode] = []
    for key, attempts in failed.items():
        if key not in ok and policy.settles(len(attempts)):
            scored.append(_counted(attempts))
        else:
            excluded.extend(_episode(r) for r in attempts)
    per_arm = Counter(r.arm for r in records if r.status != "ok")
    return Episodes(policy, tuple(scored), tuple(excluded), tuple(sorted(per_arm.items())))
