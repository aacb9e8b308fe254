"""``prereg study``: ToolBottleneckBench task families and their matched variants.

Wiring only: :mod:`prereg.experiments.toolbottleneck` does the work. A family is
compiled whole (and refused whole, exit 2, nothing written) before anything is printed
or written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from prereg.commands._common import FlagHelpGroup, JsonOpt
from prereg.commands.registry_cmds import input_path
from prereg.core.errors import BadInput
from prereg.core.files import refuse_evidence_folder, write_atomic
from prereg.core.output import console, dumps, emit, short_digests
from prereg.core.untrusted import display
from prereg.experiments.toolbottleneck.authoring import DEFAULT_RECORDS, scaffold
from prereg.experiments.toolbottleneck.compile import CompiledFamily, compile_family
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.lint import lint_files
from prereg.experiments.toolbottleneck.study import load_study
from prereg.reports.toolbottleneck.pilot import NOTE as PILOT_NOTE
from prereg.reports.toolbottleneck.pilot import (
    pilot_report,
    unavailable_lines,
    versus_line,
    write_pilot,
)
from prereg.reports.toolbottleneck.pilot import table_rows as pilot_rows
from prereg.reports.toolbottleneck.study import check_out, write_study
from prereg.reports.toolbottleneck.toolsandbox import HEADER as TOOLSANDBOX_HEADER
from prereg.reports.toolbottleneck.toolsandbox import markdown as toolsandbox_markdown
from prereg.reports.toolbottleneck.toolsandbox import notes as toolsandbox_notes
from prereg.reports.toolbottleneck.toolsandbox import table_rows as toolsandbox_rows
from prereg.reports.toolbottleneck.toolsandbox import toolsandbox_check
from prereg.runners.exchange.toolsandbox import read_result_summaries
from prereg.runners.toolbottleneck.host import Contract
from prereg.runners.toolbottleneck.pilot import run_pilot
from prereg.runners.toolbottleneck.study import run_study

app = typer.Typer(
    help="ToolBottleneckBench studies: scaffold, lint and compile task families into matched "
    "pressure variants.",
    no_args_is_help=True,
    cls=FlagHelpGroup,
)

COMPILE_HELP = """Compile a task family into matched variants that differ in one pressure.

The sets: R (catalog sizes x retrievers, the Discovery block), V (menu sizes), W
(workflow levels), D (encodings) and W-frontier (public handoffs). Each variant is
digested (sha256 over RFC 8785 canonical JSON). The same family and seed always give
the same digests. A family whose variants would differ in more than their pressure, a
workflow the checker cannot certify, a shortlist larger than a catalog or an encoding
that does not round-trip is refused (exit 2) and nothing is written.

FAMILY.yaml is read relative to the current folder, else to the workspace (as register
reads its file): experiments/toolbottleneck/families/<name>.yaml works anywhere in a
workspace. With --out DIR (relative to the current folder): one JSON file per variant
under DIR/<family>/ and an index.json with the sets and digests. Without it, --json
prints the whole compiled document.

  prereg study compile experiments/toolbottleneck/families/overdue-case-escalation.yaml"""


RUN_HELP = """Run a study's compiled variants offline on the SIMULATED policy and report.

The policy (prereg.runners.toolbottleneck.host) is seeded and pressure-sensitive, not a
model: it shows what the study computes, not how any agent behaves. Every episode runs
under the seed's harness contract (call limit = certified minimum + 2, turn limit = call
limit + 2, the infeasibility stop, the routed menu where the study asks for it). Writes
OUT/records.jsonl and OUT/report.md (the capacity contrasts with Holm-adjusted p values,
the failure census under its harness contract, repairs against switches, and Table 10
when the study has holdout arms). A bad study, family or --out is refused
(exit 2) before anything runs. STUDY.yaml is read relative to the current folder, else
to the workspace (as register reads its file); its families relative to it; --out is
relative to the current folder.

  prereg study run experiments/toolbottleneck/study.yaml --out reports/toolbottleneck"""


@app.command("run", help=RUN_HELP)
def run_cmd(
    ctx: typer.Context,
    study: Annotated[Path, typer.Argument(help="The study YAML file.", metavar="STUDY.yaml")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Folder for records.jsonl and report.md.",
        ),
    ],
    draws: Annotated[int, typer.Option("--draws", min=100, help="Bootstrap draws.")] = 10_000,
    as_json: JsonOpt = False,
) -> None:
    refuse_evidence_folder(out, what="the study's records")
    check_out(out)
    study = input_path(ctx, study)
    loaded = load_study(study)
    result = run_study(loaded, str(study))
    b = loaded.spec.budgets
    contract = Contract(
        b.completion_cap, b.episode_tokens, b.call_limit_over_certified, b.turn_limit_over_calls
    )
    written = write_study(
        out,
        result,
        loaded.spec.baseline_arm,
        draws=draws,
        repairs=loaded.spec.repairs,
        contract=contract,
    )
    summary: dict[str, Any] = {
        "study": loaded.spec.id,
        "digest": result.digest,
        "episodes": len(result.records),
        "successes": sum(1 for r in result.records if r.success),
        "evidence_class": "simulated",
        "written": [str(p) for p in written],
    }

    def human() -> None:
        for key, value in summary.items():
            console.print(display(f"{key}: {value}"))

    emit(summary, as_json, human)


PILOT_HELP = """Run the development pilot (seed appendix J, Table 13) on the SIMULATED policy.

Each block (an incumbent arm on one task and repeat) plays a probe and the seven
restarts, each reset independently: an unchanged retry, a 4,096-token completion cap, the
public-description router, the public-handoff controller, canonical delivery, the
combined repairs (router, controller and canonical delivery with the larger cap) and the
fixed switch (--switch, another simulated profile). A trace selector (a depth-one tree over the
probe's public numeric features, fitted with each intent held out) chooses an action per
block. Writes OUT/records.jsonl, OUT/report.json and OUT/report.md (Table 13: success
pooled and by incumbent with counts, after a failed probe, mean tokens and calls, the
selector's and the oracle's choices). A bad study, arm or profile is refused (exit 2)
before anything runs. Readings P1-P6 in docs/toolbottleneck.md.

  prereg study pilot experiments/toolbottleneck/study.yaml --incumbent v128-low-raw \\
      --incumbent v8-low-raw --out reports/pilot"""


@app.command("pilot", help=PILOT_HELP)
def pilot_cmd(
    ctx: typer.Context,
    study: Annotated[Path, typer.Argument(help="The study YAML file.", metavar="STUDY.yaml")],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Folder for records.jsonl, report.json and report.md."),
    ],
    incumbent: Annotated[
        list[str] | None,
        typer.Option(
            "--incumbent",
            help="An incumbent arm (a capacity cell; repeatable; default the baseline).",
            show_default=False,
        ),
    ] = None,
    switch: Annotated[
        str, typer.Option("--switch", help="The fixed switch's simulated policy profile.")
    ] = "sim-steady",
    draws: Annotated[int, typer.Option("--draws", min=100, help="Bootstrap draws.")] = 10_000,
    as_json: JsonOpt = False,
) -> None:
    refuse_evidence_folder(out, what="the pilot's records")
    check_out(out)
    study = input_path(ctx, study)
    loaded = load_study(study)
    run = run_pilot(loaded, str(study), incumbents=incumbent or (), switch=switch)
    written = write_pilot(out, run, draws=draws)
    report = pilot_report(run, draws=draws)
    summary: dict[str, Any] = {**report, "written": [str(p) for p in written]}

    def human() -> None:
        header, rows = pilot_rows(report["table13"], unavailable=False)
        grid = Table(title=display(f"development pilot: {loaded.spec.id} (simulated policy)"))
        for column in header:
            grid.add_column(display(column))
        for r in rows:
            grid.add_row(*[display(c) for c in r])
        console.print(grid)
        for line in unavailable_lines(report["table13"]):
            console.print(display(line), soft_wrap=True)
        console.print(display(versus_line(report["table13"])), soft_wrap=True)
        console.print(display(PILOT_NOTE), soft_wrap=True)
        for path in written:
            console.print(display(f"wrote {path}"))

    emit(summary, as_json, human)


TOOLSANDBOX_HELP = """The ToolSandbox check (seed 001, appendix K) from ToolSandbox's saved output.

ToolSandbox itself is not run by prereg (it is not on a package registry): run it
yourself, then give the result_summary.json file(s) it saved (one per run). Each file is
read exactly in ToolSandbox's format and checked against itself (similarity against its
milestone and minefield similarities, category means against the scenarios' means,
names against menu categories); a malformed or self-contradicting file is refused (exit
2, naming the file, the JSON field and the scenario) before anything is printed. Each
file is read relative to the current folder, else to the workspace; nothing is written.

Each base scenario is paired with its 3-, 10- and all-tools variants; for each larger
menu the paired difference (menu minus base) in ToolSandbox's similarity score, in
success (with --success-at only: ToolSandbox defines no threshold) and in turn count is
reported with a scenario-cluster bootstrap interval, withheld ("too few scenarios")
below 10 base scenarios. Tokens are not measured: ToolSandbox saves no token counts.
Evidence class toolsandbox-import, never pooled with prereg's runs. Readings T1-T8 in
docs/toolbottleneck.md.

  prereg study toolsandbox data/agent_gpt-4o_user_gpt-4o_*/result_summary.json"""


@app.command("toolsandbox", help=TOOLSANDBOX_HELP)
def toolsandbox_cmd(
    ctx: typer.Context,
    summaries: Annotated[
        list[Path],
        typer.Argument(
            help="ToolSandbox result_summary.json files (one per run).",
            metavar="RESULT_SUMMARY_JSON",
        ),
    ],
    success_at: Annotated[
        float | None,
        typer.Option(
            "--success-at",
            min=0.0,
            max=1.0,
            help="Also report success, registered as similarity >= this value "
            "(ToolSandbox defines no success threshold; none by default).",
            show_default=False,
        ),
    ] = None,
    level: Annotated[
        float, typer.Option("--level", min=0.5, max=0.999, help="Interval level.")
    ] = 0.95,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Bootstrap seed.")] = 0,
    draws: Annotated[int, typer.Option("--draws", min=100, help="Bootstrap draws.")] = 10_000,
    as_json: JsonOpt = False,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the check as Markdown.")
    ] = False,
) -> None:
    if as_json and as_markdown:
        raise BadInput("give --json or --markdown, not both", field="--markdown")
    files = read_result_summaries([input_path(ctx, p) for p in summaries])
    check = toolsandbox_check(files, success_at=success_at, level=level, seed=seed, draws=draws)

    def human() -> None:
        if as_markdown:
            console.print(
                display(toolsandbox_markdown(check), multiline=True), end="", soft_wrap=True
            )
            return
        grid = Table(title=display("The ToolSandbox check (seed 001, appendix K)"))
        for column in TOOLSANDBOX_HEADER:
            grid.add_column(display(column))
        for r in toolsandbox_rows(check):
            grid.add_row(*[display(c) for c in r])
        console.print(grid)
        for line in toolsandbox_notes(check):
            console.print(display(line), soft_wrap=True)

    emit(check.model_dump(mode="json"), as_json, human)


def register(root: typer.Typer) -> None:
    """Add the ``study`` group to the app."""
    root.add_typer(app, name="study")


def _summary(compiled: CompiledFamily, written: list[str] | None) -> dict[str, Any]:
    document = compiled.document()
    rows = []
    for variant in compiled.variants:
        catalog = variant.component("catalog")
        rows.append(
            {
                "id": variant.id,
                "digest": variant.digest,
                "certified_minimum": variant.component("workflow")["certified_minimum"],
                "available": None if catalog is None else catalog["availability"]["available"],
            }
        )
    summary: dict[str, Any] = {
        "format": document["format"],
        "family": document["family"],
        "family_digest": document["family_digest"],
        "seed": document["seed"],
        "sets": document["sets"],
        "variants": rows,
    }
    if written is not None:
        summary["written"] = written
    return summary


def _refuse_other_compilation(compiled: CompiledFamily, folder: Path) -> None:
    """A folder holding another compilation of the family (other sizes, seed or content)
    is never mixed with this one: its stale variants would pass for current ones."""
    if not folder.exists():
        return
    index = folder / "index.json"
    current = compiled.document()
    try:
        previous = json.loads(index.read_text(encoding="utf-8"))
        same = all(previous.get(k) == current[k] for k in ("family_digest", "seed", "sets"))
    except (OSError, ValueError, AttributeError):
        same = False
    if not same:
        raise BadInput(
            "holds another compilation of this family (or other files); "
            "choose another --out or remove it",
            file=str(folder),
            field="--out",
        )


def _write(compiled: CompiledFamily, out: Path) -> list[str]:
    if out.exists() and not out.is_dir():
        raise BadInput("exists and is not a folder", file=str(out), field="--out")
    folder = out / compiled.family.id
    _refuse_other_compilation(compiled, folder)
    written = []
    for variant in compiled.variants:
        path = folder / f"{variant.cell.code}.json"
        write_atomic(path, (dumps(dict(variant.document)) + "\n").encode(), what="a variant")
        written.append(str(path))
    index = _summary(compiled, None)
    write_atomic(folder / "index.json", (dumps(index) + "\n").encode(), what="the index")
    return [*written, str(folder / "index.json")]


def _show(summary: dict[str, Any]) -> None:
    short = short_digests(v["digest"] for v in summary["variants"])
    sets_of: dict[str, list[str]] = {}
    for name, ids in summary["sets"].items():
        for vid in ids:
            sets_of.setdefault(vid, []).append(name)
    table = Table(title=f"family {display(summary['family'])} (seed {summary['seed']})")
    for column in ("variant", "sets", "digest", "calls", "available"):
        table.add_column(column)
    for row in summary["variants"]:
        available = row["available"]
        table.add_row(
            display(row["id"].split("/", 1)[-1]),
            " ".join(sets_of.get(row["id"], [])),
            short[row["digest"]],
            str(row["certified_minimum"]),
            "" if available is None else ("yes" if available else "no"),
        )
    console.print(table)
    console.print(
        "calls: certified minimum; available: the retriever shortlisted every required tool"
    )
    for path in summary.get("written", []):
        console.print(display(f"wrote {path}"))


@app.command("compile", help=COMPILE_HELP)
def compile_cmd(
    ctx: typer.Context,
    family: Annotated[Path, typer.Argument(help="The family YAML file.", metavar="FAMILY.yaml")],
    as_json: JsonOpt = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the variants under this folder.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of ids and orderings.", min=0)] = 0,
) -> None:
    if out is not None:
        refuse_evidence_folder(out, what="compiled variants")
    family = input_path(ctx, family)
    compiled = compile_family(load_family(family), seed=seed, filename=str(family))
    if out is None and as_json:
        emit(compiled.document(), True)
        return
    written = _write(compiled, out) if out is not None else None
    summary = _summary(compiled, written)
    emit(summary, as_json, lambda: _show(summary))


NEW_FAMILY_HELP = """Scaffold a task family from a short description (the authoring kit).

NAME is the family id; --intent and --domain place it; --records names the chain of
source record kinds, primary first (the record the request names; three kinds: the
seed's 2, 4 and 6 reads spread the facts over 1, 2 and 3 records); --operation act adds
the one reversible action on the primary record (search and read are always there). The
scaffold compiles and lints as written; its comments say what to fill in (the facts, the
decision and its alternative, the request, the route, the tools' text).

Without --out the YAML is printed (--json: the description and the YAML). With --out
FILE (or an existing folder: FOLDER/NAME.yaml) it is written; an existing file is never
overwritten (exit 2).

  prereg study new-family vendor-onboarding --intent vendor-check --domain accounting \\
      --records vendor,tax-form,bank-account --operation act --out families/"""


@app.command("new-family", help=NEW_FAMILY_HELP)
def new_family_cmd(
    name: Annotated[str, typer.Argument(help="The family id (a lowercase slug).", metavar="NAME")],
    intent: Annotated[str, typer.Option("--intent", help="The intent the family belongs to.")],
    domain: Annotated[
        str, typer.Option("--domain", help="The domain of its records (email, files, ...).")
    ],
    records: Annotated[
        str,
        typer.Option(
            "--records",
            help="Comma-separated source record kinds, primary first (three).",
        ),
    ] = ",".join(DEFAULT_RECORDS),
    operation: Annotated[
        list[str] | None,
        typer.Option(
            "--operation",
            help="An operation beyond search and read: act (repeatable).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the YAML to this file (or folder); never overwrites.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    made = scaffold(
        name, intent, domain, [r for r in records.split(",") if r.strip()], operation or []
    )
    summary: dict[str, Any] = made.to_json()
    if out is not None:
        refuse_evidence_folder(out, what="a task family")
        target = out / f"{name}.yaml" if out.is_dir() else out
        if target.exists() or target.is_symlink():
            raise BadInput(
                "exists; a scaffold never overwrites a file (choose another --out)",
                file=str(target),
                field="--out",
            )
        if not target.parent.is_dir():
            raise BadInput("the folder does not exist", file=str(target), field="--out")
        write_atomic(target, made.text.encode(), what="the family")
        summary["written"] = str(target)

    def human() -> None:
        if out is None:
            console.print(display(made.text, multiline=True), end="", soft_wrap=True)
            return
        console.print(display(f"wrote {summary['written']}"))
        console.print(display(f"next: fill in the TODOs, then prereg study lint {target}"))

    emit(summary, as_json, human)


LINT_HELP = """Check task families against the seed's rules; findings name file and field.

Each FAMILY.yaml is compiled and its matched variants re-checked independently: every
variant keeps the family's answer and its certified minimum, each set differs from its
base in exactly its pressure; and the family's text: no fact value, decision label or
gold record id in the request or the tools' names and descriptions, a quoted choice of
decision labels in the request, tool signatures that say what they do, one connector per
record kind, facts at every workflow level, deterministic regeneration (rules:
docs/toolbottleneck.md, "Writing a family").

Exit 0 when every family is clean, 1 with findings (each a broken rule of the method,
not a style hint), 2 when a file cannot be read or is not a family (nothing linted).

  prereg study lint experiments/bundled/toolbottleneck/families/*.yaml"""


@app.command("lint", help=LINT_HELP)
def lint_cmd(
    ctx: typer.Context,
    families: Annotated[
        list[Path],
        typer.Argument(help="Family YAML files.", metavar="FAMILY.yaml..."),
    ],
    as_json: JsonOpt = False,
) -> None:
    result = lint_files([str(input_path(ctx, f)) for f in families])
    data = result.to_json()

    def human() -> None:
        for finding in result.findings:
            console.print(
                Text.assemble(
                    display(f"{finding.file}: {finding.field}: ", "bold"),
                    display(f"[{finding.rule}] {finding.message}"),
                ),
                soft_wrap=True,
            )
        counts = ", ".join(f"{rule} {n}" for rule, n in data["counts"].items())
        console.print(
            display(
                f"{len(result.files)} famil{'y' if len(result.files) == 1 else 'ies'}: "
                f"{len(result.findings)} finding(s)" + (f" ({counts})" if counts else "")
            )
        )

    emit(data, as_json, human)
    if not result.clean:
        raise typer.Exit(1)
