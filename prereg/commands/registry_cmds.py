"""``init``, ``register``, ``verify``, ``list``, ``show``: the registry commands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from prereg.commands._common import (
    JsonOpt,
    bundled_sources,
    complete_registration_id,
    target_root,
    workspace,
)
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput, IntegrityError, PreregError
from prereg.core.output import console, emit, print_json, short_digests
from prereg.core.safeio import MAX_REGISTRATION_BYTES, UnreadableFile, read_regular_file
from prereg.core.untrusted import display
from prereg.core.workspace import Workspace
from prereg.core.workspace import init_workspace as create_workspace
from prereg.core.yamlio import load_yaml
from prereg.experiments import Experiment, load_experiment
from prereg.experiments.models import LOCKED_SPLIT
from prereg.experiments.scaffold import list_experiments
from prereg.registry.registrations import Entry, Registry
from prereg.registry.units import expand_units, plan_from_registration
from prereg.registry.verify import verify as verify_registry
from prereg.runners.store.choose import open_store, resolve_store
from prereg.runners.store.interface import StoreUnavailable
from prereg.runners.store.verify import verify_runs

#: The bundled draft a new workspace starts with (the README's loop, ``prereg demo``):
#: exploratory, on the dev split, on the local host.
PILOT_DRAFT = "music-library-pilot.yaml"

REGISTER_HELP = """Freeze a registration under its digest in the append-only registry.

FILE is a YAML registration (see README, "The registration format"), read relative to
the current folder, else to the workspace (drafts/x.yaml works from anywhere in it).
Every field is validated (unknown fields are rejected), the experiment it names is
resolved from experiments/<name>/, every referenced file is stored in the registry's
object store, and the digest (sha256 over the RFC 8785 canonical JSON of the resolved
document) is printed. Registering identical content again is a no-op; different content under an
existing id is refused (exit 4): supersede it with a new id instead.

Example:

  id: local-surface-001
  title: Semantic surface vs one tool per operation (pilot)
  hypothesis: The semantic surface raises task success.
  falsification: The McNemar exact test does not reject at alpha 0.05.
  experiment: music-library
  kind: exploratory              # confirmatory requires split test
  split: dev                     # dev | validation | test (locked)
  arms: [{id: baseline, surface: baseline}, {id: semantic, surface: semantic}]
  host: {driver: local}          # replay | local | anthropic | openai (+ model)
  budgets: {completion_cap: 1024, episode_tokens: 32000, call_limit: 12, turn_limit: 16}
  design: {repeats: 2, rotations: 1, seed: 7}
  outcome: success
  primary: {test: mcnemar_exact, alpha: 0.05, sides: two-sided, favours: semantic}
"""


def _entry_json(ws: Workspace, entry: Entry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "digest": entry.digest,
        "title": entry.registration.title,
        "kind": entry.registration.kind,
        "experiment": entry.experiment,
        "split": entry.registration.split,
        "registered_at": entry.registered_at,
        "seq": entry.seq,
        "frozen_path": ws.relative(entry.frozen_path),
        "source_path": entry.source_path,
        "supersedes": entry.supersedes,
        "superseded_by": entry.superseded_by,
        "runnable": entry.runnable,
        "feasibility": entry.feasibility,
        "locked_split_claim": entry.claims[0] if entry.claims else None,
        "files": entry.files,
    }


def init_workspace(root: Path) -> dict[str, Any]:
    """``prereg init``: the workspace at ``root``, with the bundled experiments and drafts,
    the draft to start with (``next``) and the drafts that would spend a locked split."""
    result = create_workspace(root, bundled_sources())
    drafts = Path(result["workspace"]) / "drafts"
    locked = [name for name in result["drafts"] if _spends_locked_split(drafts / name)]
    others = [name for name in result["drafts"] if name not in locked]
    first = PILOT_DRAFT if PILOT_DRAFT in others else next(iter(others), None)
    result["next"] = None if first is None else f"drafts/{first}"
    result["spend_locked_split"] = [f"drafts/{name}" for name in locked]
    return result


def _spends_locked_split(draft: Path) -> bool:
    """Whether the draft is confirmatory or on the locked split, read from the draft
    itself (its first run claims the split, once per experiment). A draft that cannot
    be read is not judged here: ``register`` says what is wrong with it."""
    try:
        data = load_yaml(
            read_regular_file(draft, limit=MAX_REGISTRATION_BYTES, what="a registration file"),
            str(draft),
        )
    except (OSError, UnreadableFile, BadInput):
        return False
    if not isinstance(data, dict):
        return False
    return data.get("split") == LOCKED_SPLIT or data.get("kind") == "confirmatory"


def init_cmd(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Argument(help="Folder to create (default: the workspace).", show_default=False),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a workspace: experiments/, registry/, runs/, reports/, drafts/.

    The bundled example experiments are copied into experiments/ and ready-to-register
    drafts into drafts/; existing files are left untouched. Start with the exploratory
    pilot it names; the drafts it lists as spending the locked test split (confirmatory,
    split test) claim that split on their first run, once per experiment.
    """
    root = directory if directory is not None else target_root(ctx)
    result = init_workspace(Path(root))

    def human() -> None:
        console.print(Text.assemble("workspace ", display(result["workspace"], "bold")))
        console.print(display(f"  experiments: {', '.join(result['experiments']) or 'none'}"))
        console.print(display(f"  drafts:      {', '.join(result['drafts'])}"))
        console.print(
            f"  {len(result['written'])} file(s) written, "
            f"{len(result['skipped_existing'])} existing left untouched"
        )
        for draft in result["spend_locked_split"]:
            console.print(
                display(
                    f"  {draft} spends the locked {LOCKED_SPLIT} split on its first run "
                    "(once per experiment): register it when the design is final"
                )
            )
        first = result["next"] or "drafts/FILE.yaml"
        console.print(display(f"next: prereg -w {result['workspace']} register {first}"))

    emit(result, as_json, human)


def input_path(ctx: typer.Context, file: Path, ws: Workspace | None = None) -> Path:
    """A file argument: relative to the current folder first, then to the workspace
    (``ws``, else the one ``-w`` names or found upward), so a command names
    ``drafts/x.yaml`` or ``experiments/...`` the same way from a workspace's root, a
    folder inside it or outside it with ``-w``. As given when it is in neither place (the
    reader then names it), or when there is no workspace to look in."""
    if file.is_absolute() or file.exists():
        return file
    if ws is None:
        try:
            ws = workspace(ctx)
        except BadInput:  # no workspace: only the current folder counts
            return file
    there = ws.root / file
    return there if there.exists() else file


def register_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Registration YAML file.")],
    as_json: JsonOpt = False,
) -> None:
    ws = workspace(ctx)
    path = input_path(ctx, file, ws).absolute()
    registry = Registry(ws.registry)
    result = registry.register(path, ws.experiments, display=ws.relative(path))
    data = {**_entry_json(ws, result.entry), "created": result.created}
    if result.corpus_lint is not None:
        data["corpus_lint"] = result.corpus_lint

    def human() -> None:
        verb = "registered" if result.created else "already registered (identical content)"
        console.print(
            Text.assemble(
                f"{verb} ",
                display(data["id"], "bold"),
                display(f" ({data['kind']}, split {data['split']})"),
            )
        )
        console.print(display(f"  digest  {data['digest']}"))
        console.print(display(f"  frozen  {data['frozen_path']}"))
        if data["supersedes"]:
            console.print(display(f"  supersedes {data['supersedes']}"))
        if not data["runnable"]:
            reason = (data["feasibility"] or {}).get("reason", "")
            console.print(
                Text.assemble("  ", ("NOT RUNNABLE", "bold yellow"), ": ", display(reason))
            )
            console.print(
                "  recorded as registered; `prereg run` will refuse it and "
                "`prereg analyse` will report the verdict not_runnable"
            )
        for warning in (data["feasibility"] or {}).get("warnings", []):
            console.print(Text.assemble("  ", ("warning", "yellow"), ": ", display(warning)))
        for f in (result.corpus_lint or {}).get("open", []):  # exploratory: not gated
            where = f.get("task") or f.get("tool") or ""
            console.print(
                Text.assemble(
                    "  ",
                    ("warning", "yellow"),
                    display(f": corpus lint {f['rule']} {f['file']}: {where}: {f['matched']!r}"),
                )
            )

    emit(data, as_json, human)


def verify_cmd(ctx: typer.Context, store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Recompute every digest, object hash, the ledger chain and every run chain; exit 3
    on any problem.

    The run store is checked too: each registration's chain of run records, the schema
    that keeps it append-only, and the heads the registry anchored. Also lists, as
    information, workspace experiment files changed since they were registered (runs
    are unaffected: they read the frozen copies).
    """
    ws = workspace(ctx)
    registry = Registry(ws.registry)
    report = verify_registry(registry, ws.experiments)
    runs = verify_runs(resolve_store(ws.runs, store), registry)
    problems = [*report.problems, *runs.problems]
    data = report.to_json()
    data.update(ok=not problems, problems=[p.to_json() for p in problems], runs=runs.to_json())

    def human() -> None:
        for problem in problems:
            console.print(
                Text.assemble(
                    ("PROBLEM", "red"),
                    display(f" {problem.entry}: {problem.message} "),
                    display(f"({problem.kind})", "dim"),
                )
            )
        for note in report.info:
            console.print(
                Text.assemble(("info", "yellow"), display(f" {note.entry}: {note.message}"))
            )
        state = ("intact", "green") if not problems else (f"{len(problems)} problem(s)", "red")
        console.print(
            Text.assemble(
                "registry and runs ",
                state,
                display(
                    f": {report.registrations} registration(s), "
                    f"{report.ledger_lines} ledger line(s), {report.objects} object(s), "
                    f"{runs.records} run record(s) in {len(runs.heads)} chain(s); "
                    f"head seq {report.head['seq']} {report.head['hash']}"
                ),
            )
        )

    emit(data, as_json, human)
    if problems:
        raise typer.Exit(IntegrityError.exit_code)


#: ``prereg list`` columns, and the order in which they give way on a narrow terminal
#: (id, digest and status always stay; id and digest are never cut).
LIST_COLUMNS = ("id", "kind", "experiment", "split", "digest", "registered", "status")
LIST_DROPPED_FIRST = ("registered", "experiment", "split", "kind")
#: what ``list`` and ``show`` print under their run status (see :class:`RunState`)
UNVERIFIED = "status as the run store and reports/ hold it, unchecked here: prereg verify"

#: the largest report.json ``list`` reads for a verdict (a report is prereg's own file)
MAX_REPORT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class RunState:
    """What ``list`` and ``show`` say about a registration's runs, from what exists: the
    run store (units with an ok record) and ``reports/<id>/report.json`` (its verdict).
    ``planned`` is None where it could not be worked out; ``ok`` None where the store
    could not be reached.

    A status line, not a result: the counts and the verdict are read as they stand, not
    checked against the run chains (that is ``verify``'s work, and every command that
    uses runs does it first: invariant 11), and say so (``verified: false``,
    :data:`UNVERIFIED`)."""

    ok: int | None
    planned: int | None
    verdict: str | None = None
    analysed_ok: int | None = None  # units the report counted (its completeness)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "planned": self.planned,
            "verdict": self.verdict,
            "analysed_units": self.analysed_ok,
            "verified": False,  # as the store and the report stand (see the docstring)
        }

    def text(self) -> str:
        """``84/168 ok``, ``no runs``, ``168/168 ok, verdict supported``."""
        if self.ok is None:
            return "runs unknown (store unreachable)"
        planned = "?" if self.planned is None else str(self.planned)
        out = "no runs" if self.ok == 0 else f"{self.ok}/{planned} ok"
        if self.verdict is not None:
            out += f", verdict {self.verdict}"
            if self.analysed_ok is not None and self.analysed_ok != self.ok:
                out += f" (at {self.analysed_ok})"
        return out


def _report_facts(ws: Workspace, entry: Entry) -> dict[str, Any] | None:
    """The verdict and unit counts of ``reports/<id>/report.json`` when it is this
    registration's (same id and digest); None when there is none or it cannot be read
    (``analyse`` rewrites it; nothing here depends on it)."""
    path = ws.reports / entry.id / "report.json"
    try:
        data = json.loads(read_regular_file(path, limit=MAX_REPORT_BYTES, what="a report"))
    except (OSError, UnreadableFile, ValueError):
        return None
    if not isinstance(data, dict) or data.get("digest") != entry.digest:
        return None
    completeness = data.get("completeness")
    completeness = completeness if isinstance(completeness, dict) else {}
    verdict, planned, done = (
        data.get("verdict"),
        completeness.get("planned"),
        completeness.get("completed"),
    )
    return {
        "verdict": verdict if isinstance(verdict, str) else None,
        "planned": planned if type(planned) is int else None,
        "completed": done if type(done) is int else None,
    }


class _Planned:
    """Planned units per registration, each experiment loaded once (registrations of one
    experiment share its frozen files); only for registrations with runs and no report."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.experiments: dict[frozenset[tuple[str, str]], Experiment | None] = {}

    def units(self, entry: Entry) -> int | None:
        key = frozenset(entry.files.items())
        if key not in self.experiments:
            try:
                reader = self.registry.experiment_reader(entry)
                self.experiments[key] = load_experiment(reader, entry.experiment)
            except (PreregError, OSError):  # `verify` says what is wrong
                self.experiments[key] = None
        experiment = self.experiments[key]
        if experiment is None:
            return None
        try:
            plan = plan_from_registration(entry.registration, entry.digest)
            return len(expand_units(plan, experiment))
        except PreregError:
            return None


def run_states(
    ws: Workspace, registry: Registry, entries: list[Entry], store: str | None
) -> dict[str, RunState]:
    """Each registration's :class:`RunState`, by id (cheap: one query per registration,
    a report read where one exists, an experiment loaded only where neither says)."""
    planned = _Planned(registry)
    states: dict[str, RunState] = {}
    try:
        with open_store(resolve_store(ws.runs, store)) as runs:
            ok = {e.id: len(runs.completed_keys(e.digest)) for e in entries}
    except StoreUnavailable:
        return {e.id: RunState(None, None) for e in entries}
    for e in entries:
        report = _report_facts(ws, e)
        if report is not None:
            units = report["planned"] if report["planned"] is not None else planned.units(e)
            states[e.id] = RunState(ok[e.id], units, report["verdict"], report["completed"])
        else:
            states[e.id] = RunState(ok[e.id], planned.units(e) if ok[e.id] else None)
    return states


def _list_rows(entries: list[Entry], states: dict[str, RunState]) -> list[dict[str, str]]:
    short = short_digests(e.digest for e in entries)
    rows = []
    for e in entries:
        status = [states[e.id].text()] if e.id in states else []
        if not e.runnable:
            status.append("not runnable")
        if e.superseded_by:
            status.append(f"superseded by {e.superseded_by}")
        if e.claims:
            status.append("claimed locked split")
        rows.append(
            {
                "id": e.id,
                "kind": e.registration.kind,
                "experiment": e.experiment,
                "split": e.registration.split,
                "digest": short[e.digest],
                "registered": e.registered_at[:16].replace("T", " "),
                "status": ", ".join(status),
            }
        )
    return rows


def _list_columns(rows: list[dict[str, str]], width: int) -> list[str]:
    """The columns that fit ``width`` (a table adds 3 characters a column, plus 1)."""
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in LIST_COLUMNS}
    widths["status"] = min(widths["status"], 14)  # folds onto more lines
    columns = list(LIST_COLUMNS)
    for dropped in LIST_DROPPED_FIRST:
        if sum(widths[c] for c in columns) + 3 * len(columns) + 1 <= width:
            break
        columns.remove(dropped)
    return columns


def _print_list(entries: list[Entry], states: dict[str, RunState]) -> None:
    """A table as wide as the terminal allows: full ids, digests abbreviated like git's."""
    if not entries:
        console.print("no registrations yet")
        return
    rows = _list_rows(entries, states)
    columns = _list_columns(rows, console.width)
    needed = sum(max(len(c), *(len(r[c]) for r in rows)) + 3 for c in ("id", "digest")) + 1
    if needed + 8 > console.width:  # too narrow for a table: the id, then the rest
        for row in rows:
            console.print(display(row["id"], "bold"), soft_wrap=True)
            rest = "  ".join(row[c] for c in ("digest", "kind", "status") if row[c])
            console.print(display(f"  {rest}"), soft_wrap=True)
        console.print(display(UNVERIFIED, "dim"))
        return
    table = Table(caption=display(UNVERIFIED, "dim"), caption_justify="left")
    for column in columns:
        if column in ("id", "digest"):
            table.add_column(column, no_wrap=True, min_width=max(len(r[column]) for r in rows))
        else:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(display(row[c]) for c in columns))
    console.print(table)


def list_cmd(
    ctx: typer.Context,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    experiments: Annotated[
        bool,
        typer.Option(
            "--experiments",
            help="List the workspace's experiments instead: surfaces and tasks per split.",
        ),
    ] = False,
) -> None:
    """List registrations in ledger order.

    Ids are shown whole; digests are abbreviated like git's (the shortest prefix no
    other listed digest shares, at least 12 hex characters; --json gives them whole).
    The status says how many planned units have an ok run ("no runs" before the first),
    the verdict of the last `prereg analyse`, and whether a registration is not
    runnable, superseded or holds its experiment's locked split. On a narrow terminal
    the less needed columns are left out. --experiments lists the workspace's
    experiments (experiments/NAME/) instead: each one's surfaces and task counts per
    split, or the problem that keeps it from loading.
    """
    ws = workspace(ctx)
    if experiments:
        listed = {"experiments": list_experiments(ws)}
        emit(listed, as_json, lambda: print_experiments(listed["experiments"]))
        return
    registry = Registry(ws.registry)
    entries = registry.entries()
    states = run_states(ws, registry, entries, store)
    data = {
        "registrations": [{**_entry_json(ws, e), "runs": states[e.id].to_json()} for e in entries]
    }
    emit(data, as_json, lambda: _print_list(entries, states))


def print_experiments(experiments: list[dict[str, Any]]) -> None:
    """``list --experiments``: one row per experiment."""
    if not experiments:
        console.print("no experiments (experiments/NAME/experiment.yaml)")
        return
    table = Table("experiment", "surfaces", "tasks per split")
    for item in experiments:
        if "problem" in item:
            table.add_row(display(item["experiment"]), display(item["problem"], "red"), "")
            continue
        surfaces = ", ".join(
            s["id"] if s["role"] == "surface" else f"{s['id']} ({s['role']})"
            for s in item["surfaces"]
        )
        splits = ", ".join(f"{k} {n}" for k, n in item["tasks_per_split"].items())
        table.add_row(display(item["experiment"]), display(surfaces), splits)
    console.print(table)


def _word(value: object) -> str:
    """A shown value in words: none for null, yes / no for a flag."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def show_cmd(
    ctx: typer.Context,
    reg_id: Annotated[
        str,
        typer.Argument(
            metavar="ID", help="Registration id.", autocompletion=complete_registration_id
        ),
    ],
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one registration: digest, time, supersession, frozen document.

    Also its runs (units with an ok record out of those planned) and the verdict of its
    last `prereg analyse`.
    """
    ws = workspace(ctx)
    registry = Registry(ws.registry)
    entry = registry.get(reg_id)
    state = run_states(ws, registry, [entry], store)[entry.id]
    data = _entry_json(ws, entry)
    data["runs"] = state.to_json()
    data["registration"] = entry.registration.model_dump(mode="json")

    def human() -> None:
        console.print(
            Text.assemble(display(entry.id, "bold"), ": ", display(entry.registration.title))
        )
        if entry.superseded_by:
            console.print(display(f"superseded by {entry.superseded_by}", "yellow"))
        for key in (
            "digest",
            "kind",
            "experiment",
            "split",
            "registered_at",
            "frozen_path",
            "supersedes",
            "runnable",
        ):
            value = _word(data[key])
            if key == "runnable" and not entry.runnable:
                value += f" ({(entry.feasibility or {}).get('reason') or 'feasibility gate'})"
            console.print(display(f"  {key:<14}{value}"))
        unchecked = f" ({UNVERIFIED})" if state.ok else ""
        console.print(display(f"  {'runs':<14}{state.text()}{unchecked}"))
        for label, text in (
            ("hypothesis", entry.registration.hypothesis),
            ("falsification", entry.registration.falsification),
        ):
            console.print(Text(f"  {label:<14} ").append_text(display(text, multiline=True)))
        print_json(data["registration"])

    emit(data, as_json, human)


def register(app: typer.Typer) -> None:
    """Add ``init``, ``register``, ``verify``, ``list`` and ``show`` to the app."""
    app.command("init")(init_cmd)
    app.command("register", help=REGISTER_HELP)(register_cmd)
    app.command("verify")(verify_cmd)
    app.command("list")(list_cmd)
    app.command("show")(show_cmd)
