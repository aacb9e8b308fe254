"""Replicate sessions run one at a time: ``prereg run ID --session K`` (issue 41, item 1).

A registration with ``design.sessions`` S >= 2 splits each prompt's ``repeats`` runs per
arm into S consecutive blocks of ``repeats / S`` (:func:`prereg.registry.units.session_of`);
the seed (InvokeRank 7.3) runs its replicate sessions on different days. ``--session K``
(1-based) keeps only session K's units of the plan (riding on the plan's
:class:`~prereg.registry.pilot.PilotOptions`, so every path that runs units sees the same
subset); the other sessions' units are neither run nor touched, and running session K
again resumes it like any run (settled units are skipped).

Readings (docs/invokerank.md, "Replicate sessions run on different days"):

1. **What may be selected.** Only a registered session: a registration without replicate
   sessions, or K outside 1..S, is bad input (exit 2, naming ``--session``). Selecting a
   session is not a pilot's selection: it runs registered units of the design unchanged
   (same seeds, rotations, repeat numbers), and the report counts the whole design.
2. **Not on the locked split.** The confirmatory registration (the only kind that runs
   on the locked test split) is one claim, run once (DESIGN.md invariant 4). Spread over
   days, its sessions would be collected with looks in between (``analyse
   --allow-incomplete`` reads the sessions already run) while the rest of the locked
   split's runs are still to be made. So
   ``--session`` is refused there (exit 4, before the split is claimed): the confirmatory
   run on the locked split runs every session in one ``prereg run`` (which, if stopped,
   resumes where it stopped). Replicate sessions on different days belong to the
   exploratory and validation registrations that come before it.
3. **Progress.** A session is complete when every one of its planned units has an ok
   record (:func:`session_progress`); ``prereg run`` prints each session's progress and the
   report's completeness carries it, so a registration with a session not yet run says so.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from prereg.core.errors import BadInput, ProtocolRefusal
from prereg.experiments.models import LOCKED_SPLIT

#: a unit's key: (arm, task id, repeat)
UnitKey = tuple[str, str, int]


def check_session(session: int, *, registration_id: str, sessions: int, split: str) -> None:
    """Refuse ``--session`` ``session`` (1-based) for this registration (readings 1, 2)."""
    if sessions < 2:
        raise BadInput(
            f"'{registration_id}' registers no replicate sessions (design.sessions is 1): "
            "--session selects one of them; run the registration without it",
            field="--session",
        )
    if not 1 <= session <= sessions:
        raise BadInput(
            f"--session {session} is not a session of '{registration_id}': it registers "
            f"{sessions} replicate sessions (1 to {sessions})",
            field="--session",
        )
    if split == LOCKED_SPLIT:
        raise ProtocolRefusal(
            f"'{registration_id}' is the confirmatory run on the locked {LOCKED_SPLIT} split, "
            "one claim run once: its replicate sessions run together in one `prereg run "
            f"{registration_id}` (which resumes where it stopped), not one session at a time "
            "with looks in between, so --session is refused (docs/invokerank.md, "
            '"Replicate sessions run on different days")',
            field="--session",
        )


def session_index(repeat: int, repeats: int, sessions: int) -> int:
    """The 0-based session of a repeat number (``repeats`` split into ``sessions`` blocks);
    the arithmetic of :func:`prereg.registry.units.session_of` without its checks, for
    keys already known to be planned."""
    return repeat // (repeats // sessions)


@dataclass(frozen=True)
class SessionProgress:
    """One replicate session's units: planned, with an ok record, and whether complete."""

    session: int  # 1-based, as ``--session`` takes it
    planned: int
    completed: int

    @property
    def complete(self) -> bool:
        return self.completed == self.planned

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}

    def text(self) -> str:
        state = "complete" if self.complete else "not run" if not self.completed else "partial"
        return f"session {self.session}: {self.completed}/{self.planned} units ({state})"


def session_progress(
    planned: Iterable[UnitKey], done: Collection[UnitKey], repeats: int, sessions: int
) -> list[SessionProgress]:
    """Each session's progress (reading 3): ``planned`` the plan's unit keys, ``done`` the
    keys with an ok record; [] without replicate sessions."""
    if sessions < 2:
        return []
    counts = [[0, 0] for _ in range(sessions)]
    for key in planned:
        cell = counts[session_index(key[2], repeats, sessions)]
        cell[0] += 1
        cell[1] += key in done
    return [SessionProgress(s + 1, n, ok) for s, (n, ok) in enumerate(counts)]


def sessions_run_text(seen: Collection[int], sessions: int) -> str | None:
    """Why an estimate that resamples sessions is withheld when some registered session has
    no run (``seen``: the 0-based sessions with runs), or None when every one has:
    "sessions run: 1 of 3 (sessions 2, 3 have no runs)"."""
    missing = [s + 1 for s in range(sessions) if s not in seen]
    if sessions < 2 or not missing:
        return None
    which = ", ".join(str(s) for s in missing)
    return (
        f"sessions run: {sessions - len(missing)} of {sessions} (session"
        f"{'s' if len(missing) > 1 else ''} {which} "
        f"{'have' if len(missing) > 1 else 'has'} no runs): the run-to-run component "
        "cannot be estimated from fewer sessions than registered"
    )
