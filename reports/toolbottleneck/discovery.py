"""Discovery availability by retriever (seed 5.2 and Figure 3c).

A Discovery cell (catalog R behind a retriever) shows the model the retriever's
shortlist; availability (A) holds when every function of the task's reference program is
on it, and an episode without it stops before any request (success is A x S, intention
to treat). The seed: at R = 2,048 the required tools are in 19.4% of the flat lexical
retriever's shortlists and 77.8% of the connector-first router's, and 24.5% of all
Discovery episodes fail before any model call.

Per Discovery arm: the share of its graded episodes whose availability verdict holds
(from each ok run record's nine verdicts), success over the episodes the registered
infrastructure policy counts, and the share of those that failed before any call. A
unit counted as an infrastructure failure has no availability verdict (nothing was
measured: invariant 7), so it is left out of availability's denominator and counted in
success's. No interval: availability is a property of the task's variant (the retriever
does not depend on the model), so the episodes of one task are not independent draws,
and a resampling interval over families is not defended below 10 of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prereg.registry.schema import Registration
from prereg.reports.toolbottleneck.episodes import Episode
from prereg.reports.toolbottleneck.model import StudyTable
from prereg.runners.record import RunRecord


@dataclass(frozen=True)
class Availability:
    arm: str
    configuration: str
    retriever: str
    catalog: int
    measured: int  # graded episodes with an availability verdict
    available: int
    episodes: int  # episodes counted for success (with counted infrastructure failures)
    successes: int
    before_any_call: int  # failures with no call

    @property
    def share(self) -> float | None:
        return None if not self.measured else self.available / self.measured


def availability_rows(
    registration: Registration,
    scored: Sequence[Episode],
    run_records: Sequence[RunRecord],
    configuration: Mapping[str, str],
) -> list[Availability]:
    out = []
    for arm in registration.arms:
        cell = arm.toolbottleneck
        if cell is None or cell.catalog is None or cell.retriever is None:
            continue
        verdicts = [
            r.obligations.get("availability")
            for r in run_records
            if r.arm == arm.id and r.status == "ok" and r.obligations is not None
        ]
        measured = [v for v in verdicts if v is not None]
        mine = [e for e in scored if e.arm == arm.id]
        out.append(
            Availability(
                arm.id,
                configuration[arm.id],
                cell.retriever,
                cell.catalog,
                len(measured),
                sum(1 for v in measured if v),
                len(mine),
                sum(1 for e in mine if e.success),
                sum(1 for e in mine if not e.success and e.calls == 0 and not e.counted_failure),
            )
        )
    return sorted(out, key=lambda a: (a.configuration, a.catalog, a.retriever, a.arm))


def _pct(k: int, n: int) -> str:
    return "-" if not n else f"{100 * k / n:.1f}% ({k}/{n})"


def discovery_tables(
    registration: Registration,
    scored: Sequence[Episode],
    run_records: Sequence[RunRecord],
    configuration: Mapping[str, str],
) -> list[StudyTable]:
    rows = availability_rows(registration, scored, run_records, configuration)
    if not rows:
        return []
    body = [
        [
            a.arm,
            a.configuration,
            a.retriever,
            str(a.catalog),
            _pct(a.available, a.measured),
            _pct(a.successes, a.episodes),
            _pct(a.before_any_call, a.episodes),
        ]
        for a in rows
    ]
    total = sum(a.episodes for a in rows)
    before = sum(a.before_any_call for a in rows)
    body.append(["all Discovery arms", "-", "-", "-", "-", "-", _pct(before, total)])
    note = (
        "Availability: the share of graded episodes whose shortlist held every function of "
        "the reference program (seed 5.2, Figure 3c); an episode without it stops before "
        "any request, so success is availability x selection (intention to treat). A unit "
        "counted as an infrastructure failure has no availability verdict: it is left out "
        "of availability and counted, as a failure, in success. No interval: availability "
        "is fixed by the task's variant, and below 10 families no resampling interval is "
        "defended."
    )
    return [
        StudyTable(
            title="Discovery availability by retriever (seed Figure 3c)",
            columns=[
                "arm",
                "configuration",
                "retriever",
                "catalog R",
                "availability",
                "success",
                "failed before any call",
            ],
            rows=body,
            note=note,
        )
    ]
