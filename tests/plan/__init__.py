"""Shared fixtures of the planning tests: pilot runs of the bundled music-library pilot."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore


def pilot_records(entry: dict[str, Any], outcomes: dict[str, np.ndarray]) -> list[RunRecord]:
    """One run record per (arm, task i, repeat r) of ``outcomes[arm][i, r]`` (1 success),
    under the registration ``entry`` (its ``id`` and ``digest``, as ``register --json``
    prints them): one intent, one cluster, tasks ``task-000``..., the arm as its surface."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        RunRecord(
            record_id=f"{arm}-{i:04d}-{r}-{entry['id'][:8]}",
            registration_id=entry["id"],
            registration_digest=entry["digest"],
            experiment="music-library",
            arm=arm,
            surface=arm,
            task_id=f"task-{i:03d}",
            intent="i",
            cluster="c",
            split="dev",
            polarity="positive",
            repeat=r,
            rotation=0,
            driver="local",
            evidence_class="local",
            started_at=now,
            finished_at=now,
            success=bool(value),
            terminal_flag=None if value else "wrong_conclusion",
            first_unmet_obligation=None if value else "final_state",
        )
        for arm, matrix in outcomes.items()
        for i, row in enumerate(matrix)
        for r, value in enumerate(row)
    ]


def store_pilot(ws: Path, entry: dict[str, Any], outcomes: dict[str, np.ndarray]) -> None:
    """:func:`pilot_records` appended to the workspace's run store."""
    with RunStore(ws / "runs") as store:
        store.extend(pilot_records(entry, outcomes))
