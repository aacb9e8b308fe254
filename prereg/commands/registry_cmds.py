"""``init``, ``register``, ``verify``, ``list``, ``show``: the registry commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from prereg.commands._common import JsonOpt, bundled_sources, target_root, workspace
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import IntegrityError
from prereg.core.output import console, emit, print_json, short_digests
from prereg.core.untrusted import display
from prereg.core.workspace import Workspace
from prereg.core.workspace import init_workspace as create_workspace
from prereg.registry.registry import Entry, Registry
from prereg.registry.verify import verify as verify_registry
from prereg.runners.stores import resolve_store
from prereg.runners.verify_runs import verify_runs

REGISTER_HELP = """Freeze a registration under its digest in the append-only registry.

FILE is a YAML registration (see README, "The registration format"). Every field is
validated (unknown fields are rejected), the experiment it names is resolved from
experiments/<name>/, every referenced file is stored in the registry's object store, and
the digest (sha256 over the RFC 8785 canonical JSON of the resolved document) is
printed. Registering identical content again is a no-op; different content under an
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
    """``prereg init``: the workspace at ``root``, with the bundled experiments and drafts."""
    return create_workspace(root, bundled_sources())


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
    drafts (one exploratory, one confirmatory, both on hosts needing no API key) into
    drafts/. Existing files are left untouched.
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
        first = result["drafts"][0] if result["drafts"] else "FILE.yaml"
        console.print(display(f"next: prereg -w {result['workspace']} register drafts/{first}"))

    emit(result, as_json, human)


def register_cmd(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="Registration YAML file.")],
    as_json: JsonOpt = False,
) -> None:
    ws = workspace(ctx)
    path = file if file.is_absolute() else Path.cwd() / file
    if not path.exists() and (ws.root / file).exists():
        path = ws.root / file
    registry = Registry(ws.registry)
    result = registry.register(path, ws.experiments, display=ws.relative(path))
    data = {**_entry_json(ws, result.entry), "created": result.created}

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


def _list_rows(entries: list[Entry]) -> list[dict[str, str]]:
    short = short_digests(e.digest for e in entries)
    rows = []
    for e in entries:
        status = []
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


def _print_list(entries: list[Entry]) -> None:
    """A table as wide as the terminal allows: full ids, digests abbreviated like git's."""
    if not entries:
        console.print("no registrations yet")
        return
    rows = _list_rows(entries)
    columns = _list_columns(rows, console.width)
    needed = sum(max(len(c), *(len(r[c]) for r in rows)) + 3 for c in ("id", "digest")) + 1
    if needed + 8 > console.width:  # too narrow for a table: the id, then the rest
        for row in rows:
            console.print(display(row["id"], "bold"), soft_wrap=True)
            rest = "  ".join(row[c] for c in ("digest", "kind", "status") if row[c])
            console.print(display(f"  {rest}"), soft_wrap=True)
        return
    table = Table()
    for column in columns:
        if column in ("id", "digest"):
            table.add_column(column, no_wrap=True, min_width=max(len(r[column]) for r in rows))
        else:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(display(row[c]) for c in columns))
    console.print(table)


def list_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List registrations in ledger order.

    Ids are shown whole; digests are abbreviated like git's (the shortest prefix no
    other listed digest shares, at least 12 hex characters; --json gives them whole).
    On a narrow terminal the less needed columns are left out.
    """
    ws = workspace(ctx)
    entries = Registry(ws.registry).entries()
    data = {"registrations": [_entry_json(ws, e) for e in entries]}
    emit(data, as_json, lambda: _print_list(entries))


def show_cmd(
    ctx: typer.Context,
    reg_id: Annotated[str, typer.Argument(metavar="ID", help="Registration id.")],
    as_json: JsonOpt = False,
) -> None:
    """Show one registration: digest, time, supersession, frozen document."""
    ws = workspace(ctx)
    registry = Registry(ws.registry)
    entry = registry.get(reg_id)
    data = _entry_json(ws, entry)
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
            console.print(display(f"  {key:<14}{data[key]}"))
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
