"""``prereg export --format inspect``: one Inspect AI eval log per arm (optional extra).

Users of Inspect AI read results in ``inspect view``; this writes each arm's runs as an
Inspect log through ``inspect_ai.log`` itself (its models and ``write_eval_log``), so the
file is what the viewer and ``read_eval_log`` expect, whatever the format's version.

The mapping (docs/inspect.md):

- one log per arm, ``<registration>_<arm>.eval``; the task is ``prereg/<registration>``;
- one sample per planned unit that has a record: id the task id, epoch the repeat + 1
  (Inspect counts epochs from 1); the unit's ok record, else its last infrastructure
  failure (as a sample error, unscored);
- the score is the registered outcome, read as the analysis reads it
  (:meth:`prereg.reports.observations.Obs.outcome`): ``C`` or ``I``, and no score where
  the outcome is not measured or does not count (never imputed, invariant 7);
- each sample's whole episode from the record's trace as messages and events (system
  prompt, prompt, assistant turns with their tool calls, tool results, model and tool
  events with the measured usage and latency, the tools the unit offered): see
  :mod:`prereg.reports.viewer.transcript`;
- tokens and cost as model usage (null stays absent); the registration digest, the
  chain head, the arm, driver and evidence class in the eval's metadata;
- the log's content marked untrusted (``EvalSpec.viewer``'s ``trust_content`` false):
  prompts, tool output and model text are untrusted data (invariant 10), and the viewer
  then shows them as plain text.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prereg import __version__
from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.experiments.offers import offered_items
from prereg.registry.units import RunUnit, build_offers
from prereg.reports.observations import from_record
from prereg.reports.viewer.transcript import OfferedTool, build_transcript, model_usage
from prereg.runners.exchange.export import (
    ExportSource,
    check_export_target,
    is_stdout,
    verified_source,
)
from prereg.runners.extras import missing_extra
from prereg.runners.record import RunRecord

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ModelUsage

#: the tools a unit offered (in its rotation's order)
ToolsOf = Callable[[RunUnit], Sequence[OfferedTool]]

#: The eval metadata key under which prereg's provenance is written (and read back).
METADATA_KEY = "prereg"
#: Inspect's score values for a binary outcome.
CORRECT, INCORRECT = "C", "I"
#: ``host.driver`` -> the Inspect model provider prefix (Inspect names models provider/model).
PROVIDER_PREFIX = {"anthropic": "anthropic", "openai": "openai", "openai-chat": "openai-api"}


@dataclass(frozen=True)
class ArmLog:
    """One arm's log as written: where, how many samples and how many were scored."""

    arm: str
    path: Path
    samples: int
    scored: int


def inspect_model(driver: str, model: str | None) -> str:
    """The model as Inspect names it: ``provider/model``; prereg's own hosts as
    ``prereg/<driver>[-<profile>]`` (they are not models)."""
    if driver == "inspect" and model:
        return model  # imported from Inspect: already its name
    if driver in PROVIDER_PREFIX and model:
        return f"{PROVIDER_PREFIX[driver]}/{model}"
    return f"prereg/{driver}" + (f"-{model}" if model else "")


def _final_text(record: RunRecord) -> str:
    finals = [e.text for e in record.trace if e.kind == "final" and e.text]
    return finals[-1] if finals else ""


def _sample_metadata(
    record: RunRecord, infra_attempts: int, tools: Sequence[OfferedTool]
) -> dict[str, Any]:
    return {
        "record_id": record.record_id,
        "arm": record.arm,
        "task_id": record.task_id,
        "repeat": record.repeat,
        "rotation": record.rotation,
        "intent": record.intent,
        "cluster": record.cluster,
        "polarity": record.polarity,
        "status": record.status,
        "success": record.success,
        "funnel": record.funnel.model_dump(),
        "oracles": record.oracles.model_dump(),
        "terminal_class": record.terminal_class,
        "terminal_flag": record.terminal_flag,
        "first_unmet_obligation": record.first_unmet_obligation,
        "calls": record.calls,
        "turns": record.turns,
        "infra_attempts": infra_attempts,
        "chain": None if record.chain is None else record.chain.model_dump(),
        "offered_tools": [
            {"name": t.name, "integration": t.integration, "role": t.role} for t in tools
        ],
        "trust_content": False,
    }


def build_sample(
    record: RunRecord,
    prompt: str,
    outcome: str,
    model: str,
    infra_attempts: int,
    *,
    system: str | None = None,
    tools: Sequence[OfferedTool] = (),
) -> EvalSample:
    """The unit's Inspect sample (see the module docstring for the mapping)."""
    from inspect_ai.log import EvalError, EvalSample  # lazy: optional extra prereg-agents[inspect]
    from inspect_ai.model import ModelOutput  # lazy: optional extra prereg-agents[inspect]
    from inspect_ai.scorer import Score  # lazy: optional extra prereg-agents[inspect]

    value = from_record(record).outcome(outcome)
    scores = (
        None
        if value is None
        else {outcome: Score(value=CORRECT if value else INCORRECT, answer=None)}
    )
    final = _final_text(record)
    transcript = build_transcript(record, prompt, system, tools, model)
    returned = record.model_returned or model
    usage = model_usage(record.tokens, record.cost_usd)
    error = (
        EvalError(message=record.error or "", traceback="", traceback_ansi="")
        if record.status == "infra_error"
        else None
    )
    return EvalSample(
        id=record.task_id,
        epoch=record.repeat + 1,
        input=prompt,
        target="",
        messages=transcript.messages,
        output=ModelOutput.from_content(returned, final) if final else ModelOutput(model=returned),
        scores=scores,
        metadata=_sample_metadata(record, infra_attempts, tools),
        events=transcript.events,
        model_usage={} if usage is None else {returned: usage},
        started_at=record.started_at.isoformat(),
        completed_at=record.finished_at.isoformat(),
        total_time=(record.finished_at - record.started_at).total_seconds(),
        error=error,
    )


def _chosen(records: Sequence[RunRecord]) -> dict[tuple[str, str, int], tuple[RunRecord, int]]:
    """Per unit: its ok record, else its last infra_error record; with the infra count."""
    by_unit: dict[tuple[str, str, int], list[RunRecord]] = defaultdict(list)
    for record in records:
        by_unit[record.unit_key].append(record)
    chosen = {}
    for key, runs in by_unit.items():
        ok = [r for r in runs if r.status == "ok"]
        infra = len(runs) - len(ok)
        chosen[key] = (ok[0] if ok else runs[-1], infra)
    return chosen


def _sum_usage(samples: Sequence[EvalSample]) -> dict[str, ModelUsage]:
    total: dict[str, ModelUsage] = {}
    for sample in samples:
        for name, usage in sample.model_usage.items():
            total[name] = total[name] + usage if name in total else usage
    return total


def build_arm_log(
    source: ExportSource, arm: str, units: Sequence[RunUnit], tools_of: ToolsOf | None = None
) -> EvalLog:
    """One arm's EvalLog: its units with records, in plan order, scored by the outcome;
    ``tools_of`` gives the tools each unit offered (none listed without it)."""
    from inspect_ai.log import (  # lazy: optional extra prereg-agents[inspect]
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.viewer import ViewerConfig  # lazy: optional extra prereg-agents[inspect]

    entry = source.entry
    reg = entry.registration
    config = reg.config_of(arm)
    model = inspect_model(config.host.driver, config.host.model)
    chosen = _chosen([r for r in source.records if r.arm == arm])
    arm_units = [u for u in units if u.arm == arm]
    samples = [
        build_sample(
            chosen[u.key][0],
            u.task.prompt,
            reg.outcome,
            model,
            chosen[u.key][1],
            system=config.system_prompt,
            tools=() if tools_of is None else tools_of(u),
        )
        for u in arm_units
        if u.key in chosen
    ]
    scored = [s for s in samples if s.scores]
    correct = sum(1 for s in scored if s.scores and s.scores[reg.outcome].value == CORRECT)
    complete = len(samples) == len(arm_units) and not any(s.error for s in samples)
    ident = hashlib.sha256(f"{entry.digest}\x1f{arm}".encode()).hexdigest()[:22]
    times = [r.started_at for r, _ in chosen.values()] + [r.finished_at for r, _ in chosen.values()]
    provenance = {
        "registration_id": entry.id,
        "registration_digest": entry.digest,
        "chain": source.head,
        "arm": arm,
        "experiment": reg.experiment,
        "split": reg.split,
        "kind": reg.kind,
        "outcome": reg.outcome,
        "driver": config.host.driver,
        "evidence_class": sorted({r.evidence_class for r, _ in chosen.values()}),
        "planned_units": len(arm_units),
        "exported_units": len(samples),
        "trust_content": False,
    }
    tasks = sorted({u.task.id for u in arm_units})
    return EvalLog(
        status="success" if complete else "started",
        eval=EvalSpec(
            eval_id=ident,
            run_id=ident,
            created=min(times).isoformat() if times else entry.registered_at,
            task=f"prereg/{entry.id}",
            task_id=ident,
            task_display_name=f"{entry.id} / {arm}",
            task_args={"arm": arm},
            dataset=EvalDataset(name=reg.experiment, samples=len(tasks), sample_ids=tasks),
            model=model,
            config=EvalConfig(epochs=max((u.repeat for u in arm_units), default=0) + 1),
            packages={"prereg": __version__},
            metadata={METADATA_KEY: provenance},
            viewer=ViewerConfig(trust_content=False),  # untrusted content (invariant 10)
        ),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=sum(1 for s in samples if s.error is None),
            scores=[
                EvalScore(
                    name=reg.outcome,
                    scorer="prereg",
                    scored_samples=len(scored),
                    unscored_samples=len(samples) - len(scored),
                    metrics={
                        "accuracy": EvalMetric(
                            name="accuracy", value=correct / len(scored) if scored else 0.0
                        )
                    },
                )
            ],
        ),
        stats=EvalStats(
            started_at=min(times).isoformat() if times else "",
            completed_at=max(times).isoformat() if times else "",
            model_usage=_sum_usage(samples),
        ),
        samples=samples,
    )


def unit_tools(source: ExportSource) -> tuple[list[RunUnit], ToolsOf]:
    """The planned units and, per unit, the tools it offered (as the harness lists them)."""
    plan, experiment, units = source.plan()
    offers = build_offers(plan, experiment)

    def tools_of(unit: RunUnit) -> list[OfferedTool]:
        _, items = offered_items(offers[unit.arm], unit.rotation, plan.rotations, unit.cell)
        return [
            OfferedTool(t.name, t.description, t.input_schema, s.name, role) for t, role, s in items
        ]

    return units, tools_of


def build_logs(source: ExportSource) -> list[EvalLog]:
    """One EvalLog per arm of the registration, in arm order."""
    units, tools_of = unit_tools(source)
    return [
        build_arm_log(source, arm.id, units, tools_of) for arm in source.entry.registration.arms
    ]


def log_name(registration_id: str, arm: str) -> str:
    return f"{registration_id}_{arm}.eval"


def _require_inspect(what: str) -> None:
    """Exit 2 naming the extra when inspect_ai is missing (before anything is read)."""
    try:
        import inspect_ai.log  # noqa: F401  # lazy: optional extra prereg-agents[inspect]
    except ImportError as exc:
        raise missing_extra("inspect", what, exc) from None


def _write_logs(source: ExportSource, folder: Path) -> list[ArmLog]:
    """Each arm's log into ``folder`` (made if missing), each file replaced whole."""
    from inspect_ai.log import write_eval_log  # lazy: optional extra prereg-agents[inspect]

    registration_id = source.entry.id
    arms = [arm.id for arm in source.entry.registration.arms]
    logs = build_logs(source)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[ArmLog] = []
    for arm, log in zip(arms, logs, strict=True):
        path = folder / log_name(registration_id, arm)
        partial = path.with_name(f".{path.name}.partial")
        write_eval_log(log, str(partial), format="eval")
        partial.replace(path)  # a reader never sees a half-written log
        scored = sum(1 for s in log.samples or [] if s.scores)
        written.append(ArmLog(arm, path, len(log.samples or []), scored))
    return written


def _summary(source: ExportSource, folder: Path, written: Sequence[ArmLog]) -> dict[str, Any]:
    return {
        "registration_id": source.entry.id,
        "registration_digest": source.entry.digest,
        "format": "inspect",
        "out": str(folder),
        "records": len(source.records),
        "logs": [
            {"arm": w.arm, "file": str(w.path), "samples": w.samples, "scored": w.scored}
            for w in written
        ],
        "chain": source.head,
    }


def export_inspect(
    ws: Workspace, registration_id: str, out: Path | str, *, force: bool, store: str | None
) -> dict[str, Any]:
    """Write one Inspect log per arm into folder ``out``; nothing is written on a refusal."""
    if is_stdout(out):
        raise BadInput(
            "--format inspect writes one log per arm into a folder: give --out FOLDER",
            field="--out",
        )
    _require_inspect("--format inspect")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"{folder} is a file; --format inspect writes a folder", field="--out")
    source = verified_source(ws, registration_id, store)
    for arm in source.entry.registration.arms:
        check_export_target(ws, folder / log_name(registration_id, arm.id), force)
    return _summary(source, folder, _write_logs(source, folder))


#: where ``prereg view`` keeps its exports, under the workspace (safe to delete)
VIEW_CACHE = Path(".cache") / "inspect-view"


def cache_key(source: ExportSource) -> str:
    """What the exported logs depend on: the registration's digest, its run chain's head
    (count and hash) and the versions of prereg and Inspect that write them."""
    from importlib.metadata import version  # lazy: only prereg view keys a cache

    key = "\x1f".join(
        [
            source.entry.digest,
            json.dumps(source.head, sort_keys=True),
            __version__,
            version("inspect_ai"),
        ]
    )
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _header_counts(arm: str, path: Path) -> ArmLog:
    """A written log's sample and scored counts, from its header."""
    from inspect_ai.log import read_eval_log  # lazy: optional extra prereg-agents[inspect]

    results = read_eval_log(str(path), header_only=True).results
    total = 0 if results is None else results.total_samples
    scored = results.scores[0].scored_samples if results and results.scores else 0
    return ArmLog(arm, path, total, scored or 0)


def cached_export(ws: Workspace, registration_id: str, store: str | None) -> dict[str, Any]:
    """The registration's logs in the view cache, ``<workspace>/.cache/inspect-view/<id>/
    <key>/``, keyed by :func:`cache_key`: written when missing, reused while the run set
    is unchanged (a new record moves the chain head, so the key). The registration and its
    chain are verified every time."""
    _require_inspect("prereg view")
    source = verified_source(ws, registration_id, store)
    folder = ws.root / VIEW_CACHE / registration_id / cache_key(source)
    arms = [arm.id for arm in source.entry.registration.arms]
    paths = [folder / log_name(registration_id, arm) for arm in arms]
    reused = all(path.is_file() for path in paths)
    if reused:
        written = [_header_counts(arm, path) for arm, path in zip(arms, paths, strict=True)]
    else:
        staging = folder.with_name(f".{folder.name}.{os.getpid()}.partial")
        shutil.rmtree(staging, ignore_errors=True)
        staged = _write_logs(source, staging)
        try:
            staging.rename(folder)  # the whole folder at once: a viewer never sees half
        except OSError:  # the folder exists (made by another process, or left partial)
            for log in staged:
                log.path.replace(folder / log.path.name)  # same key: same logs
            shutil.rmtree(staging, ignore_errors=True)
        written = [ArmLog(w.arm, folder / w.path.name, w.samples, w.scored) for w in staged]
    done = _summary(source, folder, written)
    done["reused"] = reused
    done["key"] = folder.name
    return done
