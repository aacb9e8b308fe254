"""Task fingerprints: the locked split is locked by the tasks' content, not by names.

A claim on the locked split names the fingerprints of the test tasks, so copying an
experiment under another name, renaming its tasks or reassigning its splits does not
free them (DESIGN.md invariant 12). The fingerprint covers what a reader sees of the
task's request (invariant 14): the prompt's reader's form
(:func:`prereg.experiments.unicode.fold.fold`: NFKC, invisible characters removed, TR39
confusables and case folded, white space collapsed), so a zero-width space, a Cyrillic
look-alike letter, a full-width form or upper case does not make another task.

Versions. :data:`FORMAT` (``prereg.task-fingerprint/2``) is the reader's form; version 1
(:data:`FORMAT_V1`, white space collapsed only) is what claim lines written before issue
40 hold. Those lines are never rewritten (the ledger is append-only); the registry
compares new prompts with a claim by recomputing the version-2 fingerprints from the
claimant's frozen experiment (its objects are pinned by digest) and keeps the stored
version-1 list as well, so an old workspace stays locked and gains the new folding.

Changing the words of a prompt makes another task, which no exact fingerprint can tell
from a new one: :mod:`.near_duplicates` compares new prompts with the claimed test
prompts by character shingles (docs/experiments.md, "Fingerprints").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from prereg.core.errors import BadInput
from prereg.experiments.loader import Experiment
from prereg.experiments.models import LOCKED_SPLIT, SplitName, Task
from prereg.experiments.unicode.fold import describe, fold, invisible_in

FORMAT = "prereg.task-fingerprint/2"
FORMAT_V1 = "prereg.task-fingerprint/1"


def task_fingerprint(task: Task) -> str:
    """``sha256:<hex>`` of the reader's form of the task's prompt (version 2)."""
    return prompt_fingerprint(task.prompt)


def prompt_fingerprint(prompt: str) -> str:
    """``sha256:<hex>`` of the reader's form of ``prompt`` (version 2)."""
    return "sha256:" + hashlib.sha256(f"{FORMAT}\n{fold(prompt)}".encode()).hexdigest()


def task_fingerprint_v1(task: Task) -> str:
    """The version-1 fingerprint (white space collapsed only), as old claim lines hold."""
    text = " ".join(task.prompt.split())
    return "sha256:" + hashlib.sha256(f"{FORMAT_V1}\n{text}".encode()).hexdigest()


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


def locked_prompts(experiment: Experiment) -> dict[str, tuple[str, str]]:
    """Fingerprint -> (task id, prompt) of every task in the experiment's locked split,
    for the near-duplicate check; none for a ToolBottleneckBench study, whose prompts are
    generated from (family, seed) and differ by design only in their ids."""
    if experiment.toolbottleneck is not None:
        return {}
    return {
        task_fingerprint(task): (task.id, task.prompt)
        for task in experiment.tasks
        if experiment.split_of(task) == LOCKED_SPLIT
    }


def refuse_invisible(experiment: Experiment, folder: str) -> None:
    """BadInput (exit 2) for a prompt holding an invisible character the experiment does
    not declare in ``format_characters`` (experiment.yaml), naming the file, the task and
    the character. Checked at ``register``; frozen copies load as they were registered."""
    allowed = experiment.format_characters
    for index, task in enumerate(experiment.tasks):
        hidden = [c for c in invisible_in(task.prompt) if c not in allowed]
        if hidden:
            raise BadInput(
                f"the prompt of task '{task.id}' holds the invisible character "
                f"{describe(hidden[0])}"
                + (f" (and {len(hidden) - 1} more)" if len(hidden) > 1 else "")
                + ": a reader cannot see it, and the locked split is matched by what a "
                "reader sees. Remove it, or declare it in experiment.yaml as "
                f"format_characters: [U+{ord(hidden[0]):04X}]",
                file=f"{folder}/{experiment.corpus_file}",
                field=f"tasks[{index}].prompt",
            )
