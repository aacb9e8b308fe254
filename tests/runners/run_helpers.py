"""Helpers for the runner tests: a record factory and a bundled-experiment reader."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prereg.runners.record import RunRecord

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "experiments" / "bundled"
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def record(**over: Any) -> RunRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base: dict[str, Any] = dict(
        record_id=uuid.uuid4().hex, registration_id="reg-1", registration_digest=DIGEST_A,
        experiment="music-library", arm="baseline", surface="baseline", task_id="t001",
        intent="find-tracks", cluster="c01", split="dev", polarity="positive", repeat=0,
        rotation=0, driver="replay", evidence_class="replay", started_at=now, finished_at=now,
        success=True, status="ok")
    base.update(over)
    return RunRecord.model_validate(base)


def bundled_reader(name: str) -> Callable[[str], bytes]:
    root = BUNDLED / name

    def read(rel: str) -> bytes:
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(rel)
        return path.read_bytes()

    return read
