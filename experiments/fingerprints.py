"""Task fingerprints: the locked split is locked by the tasks' content, not by names.

A claim on the locked split names the fingerprints of the test tasks, so copying an
experiment under another name, renaming its tasks or reassigning its splits does not
free them (DESIGN.md invariant 12). The fingerprint covers the task's request text with
runs of white space collapsed: what a host is asked is what must stay unseen. Changing
the words of a prompt makes another task, which no content check can tell from a new
one; that limit is documented in docs/integrity.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from prereg.experiments.loader import Experiment
from prereg.experiments.models import LOCKED_SPLIT, SplitName, Task

FORMAT = "prereg.task-fingerprint/1"


def task_fingerprint(task: Task) -> str:
    """``sha256:<hex>`` of the task's prompt, white space normalised."""
    text = " ".join(task.prompt.split())
    return "sha256:" + hashlib.sha256(f"{FORMAT}\n{text}".encode()).hexdigest()


def split_map(experiment: Experiment) -> dict[str, SplitName]:
    """Fingerprint -> split of every task of ``experiment``.

    Two tasks with the same prompt in different splits: the locked split wins, so the
    map never understates what is locked.
    """
    out: dict[str, SplitName] = {}
    for task in experiment.tasks:
        fingerprint = task_fingerprint(task)
        split: SplitName = experiment.split_of(task)  # type: ignore[assignment]
        if out.get(fingerprint) != LOCKED_SPLIT:
            out[fingerprint] = split
    return out


def locked_fingerprints(splits: Mapping[str, SplitName]) -> frozenset[str]:
    """The fingerprints a split map puts in the locked split."""
    return frozenset(fp for fp, split in splits.items() if split == LOCKED_SPLIT)
