"""Judges added after registration: post-hoc rubric revisions (issue 41, item 3).

The seed keeps its rubric revisions and reports completion under each (InvokeRank 5.5,
7.6). A revision written before any run is a second registered judge. One written after
the verdicts were read cannot be part of the frozen registration (its rubric would
change the digest and so orphan every run), so it is an **addendum**: a ledger line
(``judge-addendum``, mirrored in ``registry/addenda/``) that names the registration by
digest and holds the new judge, its rubric (stored as an object) and the reason. Its
verdicts are asked about the same runs (``prereg judge``), nothing is re-run, and
everything it decides is reported as post hoc and exploratory beside the registered
judges'. It never fills the Completed stage of a registered figure, never counts for a
registered test and never changes the verdict (:mod:`prereg.reports.judged.section`
reads only the registered judges for those).

The judge file is one judge entry as a registration writes it under ``judge:``, its
``rubric`` read relative to the judge file (a rubric outside the frozen experiment).
It is checked with every rule of a registered judge: a unique id among the
registration's judges (registered and added), ``arms`` that are registered arms, the
judge-family confound rule against the hosts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_EXPERIMENT_FILE_BYTES, escaped, read_input
from prereg.core.yamlio import FieldRuleError, format_loc, load_model
from prereg.registry.judges import Judge
from prereg.registry.registrations import Entry, Registry
from prereg.registry.schema import Registration

#: Largest judge file read (one judge entry).
MAX_JUDGE_FILE_BYTES = 1 << 20
#: Longest reason kept (one or two sentences; the ledger is read whole by every command).
MAX_REASON = 2000


def add_judge(registry: Registry, entry: Entry, path: Path, reason: str) -> dict[str, Any]:
    """Validate the judge file at ``path`` against ``entry`` and append it (module
    docstring); BadInput (exit 2, naming the file and field) on any problem, nothing
    written. Returns the ledger line."""
    shown = str(path)
    reason = reason.strip()
    if not reason:
        raise BadInput(
            "a judge added after registration needs a reason (--reason): why the rubric "
            "was revised, and whether the verdicts had been read",
            field="reason",
        )
    if len(reason) > MAX_REASON:
        raise BadInput(f"the reason is over {MAX_REASON} characters", field="reason")
    source = read_input(path, limit=MAX_JUDGE_FILE_BYTES, what="a judge file")
    judge = load_model(Judge, source, shown)
    rubric_path = (path.parent / judge.rubric).resolve()
    try:
        rubric = read_input(rubric_path, limit=MAX_EXPERIMENT_FILE_BYTES, what="a rubric file")
    except BadInput as exc:
        raise escaped(
            BadInput(f"rubric '{judge.rubric}' cannot be read: {exc.message}", file=shown)
        ) from None
    _check_against(entry, judge, shown)
    return registry.add_judge(entry, judge, rubric, judge.rubric, reason)


def _check_against(entry: Entry, judge: Judge, shown: str) -> None:
    """Every rule a registered judge meets, checked on the registration with the new
    judge added to its judges (registered and earlier addenda): a problem of the new
    judge is reported at its own field of ``shown``."""
    reg = entry.registration
    judges = [j.judge for j in entry.judges]
    taken = [j.key for j in judges]
    if judge.key in taken:
        raise BadInput(
            f"registration '{entry.id}' already has a judge '{judge.key}' (judges: "
            f"{', '.join(taken)}); give the revision its own id",
            file=shown,
            field="id",
        )
    document = reg.model_dump(mode="json")
    document["judge"] = [j.model_dump(mode="json") for j in (*judges, judge)]
    try:
        Registration.model_validate(document)
    except ValueError as exc:
        field, message = _own_problem(exc, len(judges))
        raise BadInput(message, file=shown, field=field) from None


def _own_problem(exc: ValueError, index: int) -> tuple[str | None, str]:
    """(field, message) of the validation problem as the judge file's: the registration's
    ``judge[index].x`` is the file's ``x``; a rule of the whole registration has no field."""
    errors = getattr(exc, "errors", None)
    for err in errors() if callable(errors) else []:
        rule = (err.get("ctx") or {}).get("error")
        if isinstance(rule, FieldRuleError):
            field = format_loc(rule.field_path)
            prefix = f"judge[{index}]"
            if field.startswith(prefix):
                return field.removeprefix(prefix).removeprefix(".") or None, str(rule)
            return None, f"{field}: {rule}"
        return None, str(err.get("msg", exc)).removeprefix("Value error, ")
    return None, str(exc)
