"""The counts per split that ``prereg split show`` reports: tasks and clusters per split,
intent and polarity of a loaded experiment, and with ``--tasks`` the tasks themselves.

Apart from :mod:`.splits`, which the loader uses to assign the splits: counting needs the
loaded :class:`~prereg.experiments.loader.Experiment`, and one module doing both made an
import circle with the loader (issue 38).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from prereg.experiments.loader import Experiment


def describe_splits(experiment: Experiment) -> dict[str, Any]:
    """Counts per split, intent and polarity of an experiment (tasks and clusters)."""
    splits: dict[str, Any] = {}
    for split in experiment.split_names:
        tasks = experiment.tasks_in_split(split)
        by_intent: dict[str, Counter[str]] = defaultdict(Counter)
        for task in tasks:
            by_intent[task.intent][task.polarity] += 1
        splits[split] = {
            "tasks": len(tasks),
            "clusters": len({t.cluster for t in tasks}),
            "polarity": dict(Counter(t.polarity for t in tasks)),
            "intents": {
                intent: dict(by_intent[intent])
                for intent in experiment.intents
                if intent in by_intent
            },
        }
    return {
        "experiment": experiment.name,
        "tasks": len(experiment.tasks),
        "clusters": len({t.cluster for t in experiment.tasks}),
        "intents": list(experiment.intents),
        "splits": splits,
    }


def task_rows(experiment: Experiment, split: str | None = None) -> list[dict[str, str]]:
    """Every task (of ``split``, else of every split in order): its id, split, intent,
    cluster and polarity, never its prompt. What an Inspect import or a debugging session
    needs to name tasks (issue 43); ValueError for a split the experiment lacks."""
    if split is not None and split not in experiment.split_names:
        known = ", ".join(experiment.split_names)
        raise ValueError(f"experiment '{experiment.name}' has no split '{split}' ({known})")
    names = [split] if split is not None else list(experiment.split_names)
    return [
        {
            "id": t.id,
            "split": name,
            "intent": t.intent,
            "cluster": t.cluster,
            "polarity": t.polarity,
        }
        for name in names
        for t in experiment.tasks_in_split(name)
    ]
