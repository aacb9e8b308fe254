"""Resolution: a registration YAML plus the experiment files it references.

Everything that decides a result goes into the resolved document: the
validated registration (defaults filled in, so YAML formatting, key order and
comments do not matter) and the sha256 of every file the experiment references.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_REGISTRATION_BYTES, UnreadableFile, escaped, read_regular_file
from prereg.core.yamlio import load_model, parse_yaml
from prereg.experiments import Experiment, Task, load_experiment
from prereg.experiments.fingerprints import refuse_invisible
from prereg.experiments.loader import folder_reader
from prereg.experiments.offers import ArmSpec, offers_for
from prereg.experiments.toolbottleneck.cells import ArmCell, holdout_problem
from prereg.experiments.toolbottleneck.variants import variant_digests
from prereg.registry.digest import document_digest, file_digest
from prereg.registry.hosts import model_problem, params_problem
from prereg.registry.schema import Host, Registration

#: Who plays a study arm (docs/toolbottleneck.md, reading 34): the simulated policy, the
#: local host under a named profile, or a model host.
StudyPlayer = Literal["simulated", "local", "model"]


@dataclass(frozen=True)
class Resolved:
    registration: Registration
    source_path: str
    source_bytes: bytes
    files: dict[str, bytes]  # experiment-relative path -> content
    n_prompts: int  # tasks in the registered split
    document: dict[str, Any] = field(repr=False)
    digest: str = ""
    #: the experiment loaded from exactly ``files`` (so ``register`` loads it once)
    experiment: Experiment | None = field(default=None, repr=False, compare=False)


def build_document(
    registration: Registration,
    experiment_files: dict[str, bytes],
    variants: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The digested document: registration fields and the hash of every file; for a
    ToolBottleneckBench study also the digest of every compiled variant a unit runs
    (``<arm>/<task>``), absent otherwise (every other digest unchanged)."""
    experiment: dict[str, Any] = {
        "name": registration.experiment,
        "files": {path: file_digest(data) for path, data in sorted(experiment_files.items())},
    }
    if variants is not None:
        experiment["variants"] = dict(sorted(variants.items()))
    return {
        "format": "prereg.registration/1",
        "registration": registration.model_dump(mode="json"),
        "experiment": experiment,
    }


def study_variants(
    registration: Registration, experiment: Experiment, tasks: list[Task], shown: str
) -> dict[str, str] | None:
    """The variant digests of a study registration (issue 19), None for any other; every
    arm of a study gives its cell (``toolbottleneck:``), no arm of another experiment does."""
    study = experiment.toolbottleneck
    cells: dict[str, ArmCell] = {}
    for index, arm in enumerate(registration.arms):
        if (arm.toolbottleneck is None) != (study is None):
            why = (
                f"experiment '{registration.experiment}' is a ToolBottleneckBench study: "
                "each arm gives its cell (toolbottleneck: {menu, workflow, encoding, ...})"
                if study is not None
                else "'toolbottleneck' is for an experiment of kind toolbottleneck"
            )
            raise BadInput(why, file=shown, field=f"arms[{index}].toolbottleneck")
        if arm.toolbottleneck is not None:
            cells[arm.id] = arm.toolbottleneck
    if registration.repairs and study is None:
        raise BadInput(
            "'repairs' is for an experiment of kind toolbottleneck", file=shown, field="repairs"
        )
    if registration.holdout and study is None:
        raise BadInput(
            "'holdout' is for an experiment of kind toolbottleneck", file=shown, field="holdout"
        )
    if study is None:
        return None
    families = sorted({study.tasks[t.id][0] for t in tasks})
    problem = holdout_problem(
        registration.holdout,
        {f: study.family(f).intent for f in families},
        f"split '{registration.split}' of the study",
    )
    if problem is not None:
        raise BadInput(problem[1], file=shown, field=problem[0])
    _check_study_players(registration, shown)
    _check_study_prompts(registration, shown)
    return variant_digests(study, cells, [t.id for t in tasks])


def study_player(driver: str, model: str | None) -> StudyPlayer:
    """Who plays a study arm whose host is ``driver`` / ``model`` (reading 34): a model
    driver plays the model; ``driver: local`` with ``model`` naming one of the local
    host's profiles (``local-default``, ``local-careful``, ``local-hasty``; checked at
    register) is the local host itself; ``driver: local`` without a model is the simulated
    policy that the cell's ``policy`` names."""
    if driver != "local":
        return "model"
    return "simulated" if model is None else "local"


def _check_study_players(registration: Registration, shown: str) -> None:
    """At register: every study arm has exactly one player, and all arms have the same
    kind. A local-profile arm whose cell also names a ``policy`` (both would apply), and
    a simulated-policy arm with ``host.params`` (neither mechanism reads them), are
    refused, as is a registration that mixes the simulated policy with the local host's
    profiles (two mechanisms in one evidence class, never pooled). BadInput naming the
    field."""
    first: tuple[int, StudyPlayer] | None = None
    for index, arm in enumerate(registration.arms):
        host = registration.config_of(arm.id).host
        where = "host" if arm.host is None else f"arms[{index}].host"
        player = study_player(host.driver, host.model)
        cell = arm.toolbottleneck
        if player == "local" and cell is not None and "policy" in cell.model_fields_set:
            raise BadInput(
                f"arm '{arm.id}' names both a local host profile (host.model "
                f"'{host.model}') and a simulated policy (toolbottleneck.policy "
                f"'{cell.policy}'): the local host plays an arm whose host.model names a "
                "profile, the simulated policy one without; give one",
                file=shown,
                field=f"arms[{index}].toolbottleneck.policy",
            )
        if player == "simulated" and host.params:
            raise BadInput(
                "host.params set settings of the local host, but this arm names no local "
                "host profile (host.model), so the simulated policy plays it and reads no "
                "params: name a profile (local-default, local-careful, local-hasty) or "
                "drop the params",
                file=shown,
                field=f"{where}.params",
            )
        if first is None:
            first = (index, player)
        elif {first[1], player} == {"simulated", "local"}:
            local = index if player == "local" else first[0]
            raise BadInput(
                f"arms '{registration.arms[first[0]].id}' and '{arm.id}' are played by "
                "the simulated policy and by the local host's profiles: two mechanisms "
                "whose runs are never pooled; register them apart",
                file=shown,
                field=f"arms[{local}].host.model"
                if registration.arms[local].host is not None
                else "host.model",
            )


def _check_study_prompts(registration: Registration, shown: str) -> None:
    """At register (issue 19, seed 4.3): a study's hosts take the menu as client tools
    (no tool search, connector or live integration); a study arm on the simulated policy
    or a local profile sends no system prompt (neither reads one, so a prompt repair
    cannot run on it); a repaired
    arm whose system prompt is not its control's differs from it in nothing else (cell,
    host, budgets), so the repair measures the prompt. BadInput naming the field."""
    for index, arm in enumerate(registration.arms):
        config = registration.config_of(arm.id)
        where = "host" if arm.host is None else f"arms[{index}].host"
        for name, on in (
            ("tool_search", config.host.tool_search),
            ("tool_access", config.host.tool_access != "client"),
            ("live", config.host.live is not None),
        ):
            if on:
                raise BadInput(
                    "a study's host is shown exactly the variant's menu as client tools "
                    "and every call runs on the variant's sandbox: no provider tool search, "
                    "connector or live integration",
                    file=shown,
                    field=f"{where}.{name}",
                )
        if config.system_prompt is not None and config.host.driver == "local":
            raise BadInput(
                "neither the simulated policy nor the local host's profiles (host driver "
                "local) read a system prompt, so a prompt repair cannot run on them: give "
                "the study a model host (anthropic, openai, openai-chat)",
                file=shown,
                field=f"arms[{index}].system_prompt"
                if arm.system_prompt is not None
                else "system_prompt",
            )
    cell = {arm.id: arm.toolbottleneck for arm in registration.arms}
    for index, repair in enumerate(registration.repairs or []):
        for side in ("stressed", "unstressed"):
            repaired, control = getattr(repair.repaired, side), getattr(repair.control, side)
            a, b = registration.config_of(repaired), registration.config_of(control)
            if a.system_prompt == b.system_prompt:
                continue
            if cell[repaired] != cell[control] or a.host != b.host or a.budgets != b.budgets:
                raise BadInput(
                    f"arm '{repaired}' has another system prompt than its control "
                    f"'{control}' and differs from it in more than that (cell, host or "
                    "budgets): a prompt repair changes the system prompt only",
                    file=shown,
                    field=f"repairs[{index}].repaired.{side}",
                )


def _check_offers(registration: Registration, experiment: Experiment, shown: str) -> None:
    """Every arm's control must apply to the experiment (refused now, not at run)."""

    specs = [
        ArmSpec(arm.id, arm.surface, arm.control, registration.reference_of(arm.id), arm.decoy)
        for arm in registration.arms
    ]
    try:
        offers_for(specs, experiment, registration.design.seed)
    except BadInput as exc:
        raise BadInput(
            exc.message, file=shown, field=exc.field or "arms", details=exc.details
        ) from None


def check_need_types(
    registration: Registration, experiment: Experiment, source: bytes, shown: str
) -> None:
    """Every intent ``invokerank.need_types`` names is one of the experiment's (its values
    are checked by the schema): BadInput at the key, exit 2."""
    spec = registration.invokerank
    for intent in (spec.need_types or {}) if spec is not None else {}:
        if intent not in experiment.intents:
            raise _refuse_at(
                source,
                shown,
                _written(source, shown, ("invokerank", "need_types", intent)),
                f"invokerank.need_types.{intent}",
                f"unknown intent '{intent}' of experiment '{registration.experiment}' "
                f"(intents: {', '.join(sorted(experiment.intents))})",
            )


def read_registration(path: Path, shown: str) -> bytes:
    """The bytes of a registration file: a regular file of at most 1 MiB, else BadInput.

    A FIFO, a device, a socket or a symlink loop is refused before it is opened
    (:func:`prereg.core.safeio.read_regular_file`), so nothing hangs or fills memory.
    """
    try:
        return read_regular_file(path, limit=MAX_REGISTRATION_BYTES, what="a registration file")
    except FileNotFoundError:
        raise BadInput("registration file not found", file=shown) from None
    except IsADirectoryError:
        raise BadInput("expected a registration YAML file, got a directory", file=shown) from None
    except UnreadableFile as exc:
        raise BadInput(f"{exc.reason}; expected a registration YAML file", file=shown) from None


def _hosts(registration: Registration) -> list[tuple[tuple[str | int, ...], Host]]:
    """(where the host is written, the resolved host): the registration's, then each arm's
    that overrides it (an arm's params or model come from its own ``host:`` block when it
    gives them, else from the registration's)."""
    out: list[tuple[tuple[str | int, ...], Host]] = [(("host",), registration.host)]
    for index, arm in enumerate(registration.arms):
        if arm.host is not None:
            out.append((("arms", index, "host"), registration.config_of(arm.id).host))
    return out


def _refuse_at(
    source: bytes, shown: str, path: tuple[str | int, ...], field: str, why: str
) -> BadInput:
    position = parse_yaml(source, shown).line_of(path)
    where = f"{shown}:{position[0]}:{position[1]}" if position else shown
    return BadInput(why, file=where, field=field)


def _written(source: bytes, shown: str, path: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """``path`` if the YAML writes it, else the nearest ancestor it writes (an arm that
    inherits its params is refused at its ``host:`` block)."""
    located = parse_yaml(source, shown)
    while len(path) > 1 and located.line_of(path) is None:
        path = path[:-1]
    return path


def check_host_params(registration: Registration, source: bytes, shown: str) -> None:
    """``params`` the driver would refuse at run are refused now (BadInput at the key), for
    the registration's host and every arm's resolved host."""
    for at, host in _hosts(registration):
        problem = params_problem(host.driver, host.params)
        if problem is None:
            continue
        key, why = problem
        path = _written(source, shown, (*at, "params", key))
        field = ".".join(f"[{p}]" if isinstance(p, int) else p for p in (*at, "params", key))
        raise _refuse_at(source, shown, path, field.replace(".[", "["), why)


def check_host_model(registration: Registration, source: bytes, shown: str) -> None:
    """A ``model`` the driver does not know (a local profile) is refused now, for the
    registration's host and every arm's resolved host."""
    for at, host in _hosts(registration):
        why = model_problem(host.driver, host.model)
        if why is None:
            continue
        path = _written(source, shown, (*at, "model"))
        field = ".".join(f"[{p}]" if isinstance(p, int) else p for p in (*at, "model"))
        raise _refuse_at(source, shown, path, field.replace(".[", "["), why)


def check_certified(
    registration: Registration, tasks: list[Task], source: bytes, shown: str
) -> None:
    """``call_limit_over_certified`` (the registration's or an arm's) needs every task of
    the split to declare a certified path (``solution: {certified: true}``, checked when
    the experiment loaded); refused now, naming the tasks, not at run."""
    rule = "call_limit_over_certified"
    uses = [
        a.id
        for a in registration.arms
        if registration.config_of(a.id).budgets.call_limit_over_certified is not None
    ]
    uncertified = [t.id for t in tasks if t.certified_minimum is None]
    if not uses or not uncertified:
        return
    site: tuple[int | str, ...] = ("budgets", rule)
    if registration.budgets.call_limit_over_certified is None:  # an arm's own rule
        index = next(i for i, a in enumerate(registration.arms) if a.id == uses[0])
        site = ("arms", index, "budgets", rule)
    position = parse_yaml(source, shown).line_of(site)
    where = f"{shown}:{position[0]}:{position[1]}" if position else shown
    listed = ", ".join(uncertified[:10]) + (" ..." if len(uncertified) > 10 else "")
    raise BadInput(
        f"'certified minimum + k' needs a certified path for every task of split "
        f"'{registration.split}' of experiment '{registration.experiment}'; "
        f"{len(uncertified)} of {len(tasks)} have none ({listed}): declare them in the "
        "corpus (solution: {certified: true, steps: [...]}) or register a call_limit",
        file=where,
        field=".".join(map(str, site)),
    )


def judge_rubrics(
    registration: Registration, read: Callable[[str], bytes], shown: str
) -> dict[str, bytes]:
    """Each judge's rubric file (experiment-relative), digested with the experiment's files:
    one changed byte of a rubric changes the registration's digest. A missing rubric is
    refused at ``judge[i].rubric``."""
    out: dict[str, bytes] = {}
    for index, judge in enumerate(registration.judge or []):
        try:
            out[judge.rubric] = read(judge.rubric)
        except (FileNotFoundError, IsADirectoryError, UnreadableFile, BadInput) as exc:
            why = getattr(exc, "message", None) or getattr(exc, "reason", None) or "not found"
            raise BadInput(
                f"judge rubric '{judge.rubric}' cannot be read from experiment "
                f"'{registration.experiment}': {why}",
                file=shown,
                field=f"judge[{index}].rubric",
            ) from None
    return out


def check_stopping_reach(
    registration: Registration, n_tasks: int, source: bytes, shown: str
) -> None:
    """A stopping rule whose ``min_prompts`` exceeds the split's tasks could never stop:
    refused (BadInput at ``stopping.min_prompts``, exit 2)."""
    stopping = registration.stopping
    if stopping is None or stopping.min_prompts <= n_tasks:
        return
    raise _refuse_at(
        source,
        shown,
        _written(source, shown, ("stopping", "min_prompts")),
        "stopping.min_prompts",
        f"the stopping rule needs at least {stopping.min_prompts} prompts before it may "
        f"stop, but split '{registration.split}' holds {n_tasks} task(s): it could never "
        "stop (lower min_prompts or register a larger split)",
    )


def resolve(path: Path, experiments_dir: Path, display: str | None = None) -> Resolved:
    """Validate a registration file and resolve its experiment; BadInput on any problem.

    Every message is escaped (:func:`prereg.core.safeio.escaped`): the values it echoes
    come from the registration and the experiment's files.
    """
    shown = display or str(path)
    try:
        return _resolve(path, experiments_dir, shown)
    except BadInput as exc:
        raise escaped(exc) from None


def _resolve(path: Path, experiments_dir: Path, shown: str) -> Resolved:
    source = read_registration(path, shown)
    registration = load_model(Registration, source, shown)
    check_host_params(registration, source, shown)
    check_host_model(registration, source, shown)

    folder = experiments_dir / registration.experiment
    # lexists: an experiment.yaml that is a FIFO or a symlink loop is refused by the
    # reader with its reason, not called missing
    if not os.path.lexists(folder / "experiment.yaml"):
        known = (
            sorted(p.name for p in experiments_dir.iterdir() if p.is_dir())
            if experiments_dir.is_dir()
            else []
        )
        raise BadInput(
            f"experiment '{registration.experiment}' not found (expected "
            f"{folder / 'experiment.yaml'}); known experiments: "
            f"{', '.join(known) or 'none'}",
            file=shown,
            field="experiment",
        )
    read = _once(folder_reader(folder))
    experiment = load_experiment(read, registration.experiment)
    # the prompts as a reader sees them: no undeclared invisible character (issue 40)
    refuse_invisible(experiment, str(folder))
    files = {rel: read(rel) for rel in experiment.files}  # the very bytes loaded
    files.update(judge_rubrics(registration, read, shown))

    for index, arm in enumerate(registration.arms):
        if arm.surface not in experiment.surface_ids:
            raise BadInput(
                f"surface '{arm.surface}' is not defined by experiment "
                f"'{registration.experiment}' (known: "
                f"{', '.join(sorted(experiment.surface_ids))})",
                file=shown,
                field=f"arms[{index}].surface",
            )
        if arm.decoy is not None and arm.decoy not in experiment.surface_ids:
            raise BadInput(
                f"decoy '{arm.decoy}' is not a surface of experiment "
                f"'{registration.experiment}' (known: "
                f"{', '.join(sorted(experiment.surface_ids))})",
                file=shown,
                field=f"arms[{index}].decoy",
            )
    live = registration.host.live
    if live is not None and live.surface not in experiment.surface_ids:
        raise BadInput(
            f"live surface '{live.surface}' is not a surface of experiment "
            f"'{registration.experiment}'",
            file=shown,
            field="host.live.surface",
        )
    _check_offers(registration, experiment, shown)
    check_need_types(registration, experiment, source, shown)
    if registration.split not in experiment.split_names:
        raise BadInput(
            f"experiment '{registration.experiment}' has no split '{registration.split}'",
            file=shown,
            field="split",
        )
    tasks = experiment.tasks_in_split(registration.split)
    if not tasks:
        raise BadInput(
            f"split '{registration.split}' of experiment "
            f"'{registration.experiment}' holds no tasks",
            file=shown,
            field="split",
        )
    check_certified(registration, tasks, source, shown)
    check_stopping_reach(registration, len(tasks), source, shown)

    variants = study_variants(registration, experiment, tasks, shown)
    document = build_document(registration, files, variants)
    return Resolved(
        registration=registration,
        source_path=shown,
        source_bytes=source,
        files=files,
        n_prompts=len(tasks),
        document=document,
        digest=document_digest(document),
        experiment=experiment,
    )


def _once(read: Callable[[str], bytes]) -> Callable[[str], bytes]:
    """``read`` that reads each file once: what is loaded is what is digested and frozen."""
    seen: dict[str, bytes] = {}

    def cached(relative: str) -> bytes:
        if relative not in seen:
            seen[relative] = read(relative)
        return seen[relative]

    return cached
