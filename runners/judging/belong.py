"""Whether stored verdicts and gold labels belong to their registration's runs (issue 40).

``import`` refuses a verdict or label of a run the registration does not hold, and a
verdict of a judge the registration does not register; ``judge`` never asks a judge
about a run that needs no verdict (:func:`prereg.runners.judging.ask.needs_verdict`), and
``--gold`` refuses a label of such a run. ``verify`` reports the same of what is stored
(:func:`belonging_problems`), so what it passes is what the readers accept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prereg.registry.registrations import Entry
from prereg.runners.judging.ask import needs_verdict
from prereg.runners.judging.gold import GoldLabel
from prereg.runners.judging.verdicts import Verdict
from prereg.runners.record import RunRecord


def belonging_problems(
    entry: Entry,
    verdicts: Sequence[Verdict],
    gold: Sequence[GoldLabel],
    runs: Mapping[str, RunRecord],
) -> list[str]:
    """Why each of ``entry``'s verdicts and labels does not belong (``runs``: its digest's
    run records by id): a run that is not there, a judge that is not registered, a run
    that needs no verdict of that judge (or no judged outcome at all, for a label)."""
    judges = {j.digest: j.judge for j in entry.judges}
    out = []
    for v in verdicts:
        where = f"verdict {v.verdict_id} on run {v.record_id}"
        judge = judges.get(v.judge_digest)
        record = runs.get(v.record_id)
        if record is None:
            out.append(f"{where}: no such run of '{entry.id}' in the run store")
        elif judge is None:
            out.append(f"{where}: judge '{v.judge}' is not a registered judge of '{entry.id}'")
        elif not needs_verdict(record, judge):
            out.append(f"{where}: the run needs no verdict of judge '{judge.key}'")
    for g in gold:
        where = f"gold label of run {g.record_id} by {g.annotator}"
        record = runs.get(g.record_id)
        if record is None:
            out.append(f"{where}: no such run of '{entry.id}' in the run store")
        elif not any(needs_verdict(record, j) for j in judges.values()):
            out.append(f"{where}: the run needs no judged outcome")
    return out
