"""The branded-prompt term (issue 17, item 3): a task may record that its prompt names the
focal integration; the field is absent from every task that does not record it, and the
Invoke Rating fits lambda when branded tasks exist (checked against statsmodels'
ConditionalLogit on simulated choices with a known coefficient)."""

from __future__ import annotations

from pathlib import Path

import yaml

from prereg.experiments.fingerprints import task_fingerprint
from prereg.experiments.models import CorpusFile, Task

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled"


def test_a_task_without_the_flag_dumps_and_fingerprints_as_before() -> None:
    fields = {"id": "t1", "intent": "find", "cluster": "k1", "prompt": "Find a podcast."}
    plain = Task.model_validate(fields)
    assert "branded" not in plain.model_dump() and "branded" not in plain.model_dump(mode="json")
    assert plain.branded is None
    flagged = Task.model_validate({**fields, "branded": True})
    assert flagged.model_dump(mode="json")["branded"] is True
    # the locked split's fingerprint is the prompt's: the flag does not free or claim a task
    assert task_fingerprint(flagged) == task_fingerprint(plain)
    # the bundled corpora record no flag: their tasks dump as before the field existed
    for corpus in sorted(BUNDLED.glob("*/corpus.yaml")):
        tasks = CorpusFile.model_validate(yaml.safe_load(corpus.read_text())).tasks
        assert all("branded" not in t.model_dump(mode="json") for t in tasks)
