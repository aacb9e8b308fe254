"""``analyse``, ``compare``, ``demo``: the report commands (wiring only).

The work happens in :mod:`prereg.reports`; these functions parse options, call
it, write the files and print.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from prereg.commands._common import PROCESS, JsonOpt, complete_registration_id, workspace
from prereg.commands.store_opt import StoreOpt
from prereg.core.errors import BadInput
from prereg.core.output import console, dumps, emit, err_console
from prereg.core.untrusted import display, display_text
from prereg.core.workspace import Workspace
from prereg.reports.analysis import Options, analyse
from prereg.reports.compare import compare, describe, markdown
from prereg.reports.model import Report, Verdict
from prereg.reports.render import terminal as render_terminal
from prereg.reports.render.write import output_dir, write_report

#: Exit code of ``analyse --fail-unless`` when the verdict is not one it accepts (the
#: CLI contract's 0-4 mean other things: a CI step tells "the claim failed" from
#: "the analysis could not run").
VERDICT_GATE_EXIT = 5

#: The verdicts a report can carry, as report.json spells them.
VERDICTS: tuple[str, ...] = get_args(Verdict)


def accepted_verdicts(names: list[str]) -> frozenset[str]:
    """``--fail-unless`` values as report.json's verdicts: ``not supported``,
    ``not-supported`` and ``NOT_SUPPORTED`` all mean ``not_supported``. An unknown
    name is a usage error (exit 2) naming the valid ones, raised before any work."""
    accepted = set()
    for name in names:
        verdict = "_".join(name.strip().lower().replace("-", " ").replace("_", " ").split())
        if verdict not in VERDICTS:
            raise BadInput(
                f"unknown verdict {display_text(name, 80)!r}; choose from " + ", ".join(VERDICTS),
                field="--fail-unless",
            )
        accepted.add(verdict)
    return frozenset(accepted)


def gate(verdict: str, accepted: frozenset[str]) -> None:
    """Exit :data:`VERDICT_GATE_EXIT` when ``verdict`` is not accepted (the report is
    already written and printed); the reason goes to stderr, so ``--json`` keeps its
    one document on stdout."""
    if not accepted or verdict in accepted:
        return
    err_console.print(
        f"verdict gate not met: the verdict is {verdict!r}; --fail-unless accepts "
        + ", ".join(sorted(accepted)),
        style="red",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    raise typer.Exit(VERDICT_GATE_EXIT)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused (then restored as it was) while one analysis
    runs. Loading a large store allocates millions of objects that all stay alive, so
    every collection walks them again and finds nothing: on 27,000 runs about a quarter
    of the command's CPU time. Reference counting still frees everything acyclic; the
    few cycles made meanwhile (figures, say) wait for the next collection.

    In the ``prereg`` program, which exits when the command returns, what is alive at
    the end is frozen (``gc.freeze``) before the collector resumes: else its first
    collection walks the hundreds of thousands of objects the analysis left young (the
    imported libraries, the report as data), half a second at 27,000 runs, to free
    nothing the exit does not. Elsewhere (a test, a notebook) nothing is frozen."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if PROCESS.program:
                gc.freeze()
            gc.enable()


@dataclass(frozen=True)
class Analysed:
    """An analysis written to its folder, and what the command prints of it."""

    data: dict[str, Any]  # the report as JSON, with its folder and files
    document: str  # ``data`` as the one JSON document ``--json`` prints
    report: Report
    out: Path


def analyse_and_write(ws: Workspace, reg_id: str, options: Options) -> Analysed:
    """Analyse, write the report, and make the printed document while the largest
    figure is drawn (:func:`prereg.reports.render.write.write_report`'s ``meanwhile``)."""
    data: dict[str, Any] = {}
    document: list[str] = []

    def printed(report_json: dict[str, Any]) -> None:
        data.update(report_json)
        data["report_dir"] = str(out)
        data["files"] = {
            name: str(out / name) for name in ("report.json", "report.md", "report.html")
        }
        document.append(dumps(data))

    with _no_cycle_collection():
        report = analyse(ws, reg_id, options)
        out = output_dir(ws, report)
        write_report(ws, report, meanwhile=printed)
    return Analysed(data, document[0], report, out)


def register(app: typer.Typer) -> None:
    @app.command("analyse")
    def analyse_cmd(
        ctx: typer.Context,
        reg_id: Annotated[
            str,
            typer.Argument(
                metavar="ID", help="Registration id.", autocompletion=complete_registration_id
            ),
        ],
        allow_incomplete: Annotated[
            bool,
            typer.Option(
                "--allow-incomplete",
                help="Analyse an incomplete run set; the report is then "
                "exploratory and the verdict 'incomplete'.",
            ),
        ] = False,
        explore: Annotated[
            bool,
            typer.Option(
                "--explore",
                help="Label the whole report exploratory. The verdict field is "
                "computed exactly as without it; it is not a confirmatory claim.",
            ),
        ] = False,
        fail_unless: Annotated[
            list[str] | None,
            typer.Option(
                "--fail-unless",
                metavar="VERDICT",
                help="Exit 5 unless the mechanical verdict is VERDICT (repeat to accept "
                "several): " + ", ".join(VERDICTS) + ". The report is written and printed "
                "either way.",
                show_default=False,
            ),
        ] = None,
        as_json: JsonOpt = False,
        store: StoreOpt = None,
    ) -> None:
        """The registered analysis and its mechanical verdict, written to reports/ID/.

        Refuses (exit 3) runs that carry another digest or mix evidence classes, and
        (exit 4) an incomplete run set unless --allow-incomplete. Writes report.json,
        report.md and report.html (with figures); an exploratory report of a
        confirmatory registration goes to reports/ID/exploratory/.

        For CI: --fail-unless supported exits 5 when the verdict is anything else
        (not_supported, inconclusive, not_runnable, incomplete), after the report is
        written and printed (with --json, its one document). The verdict is the
        report's verdict field, the same word in an exploratory report.
        """
        accepted = accepted_verdicts(fail_unless or [])
        ws = workspace(ctx)
        flags = [
            f for f, on in (("--allow-incomplete", allow_incomplete), ("--explore", explore)) if on
        ]
        options = Options(
            allow_incomplete=allow_incomplete,
            explore=explore,
            command=" ".join(["prereg analyse", reg_id, *flags]),
            store=store,
        )
        done = analyse_and_write(ws, reg_id, options)
        emit(
            done.data,
            as_json,
            lambda: render_terminal.render(
                done.report, console, ws.relative(done.out / "report.html")
            ),
            document=done.document,
        )
        gate(done.report.verdict, accepted)

    @app.command("compare")
    def compare_cmd(
        ctx: typer.Context,
        a: Annotated[
            str,
            typer.Argument(
                metavar="A", help="First registration id.", autocompletion=complete_registration_id
            ),
        ],
        b: Annotated[
            list[str],
            typer.Argument(
                metavar="B",
                help="Registration ids compared with A (the reference): one or more.",
                autocompletion=complete_registration_id,
            ),
        ],
        as_json: JsonOpt = False,
        as_markdown: Annotated[
            bool,
            typer.Option(
                "--markdown",
                help="Print the comparison as Markdown (with the InvokeRank table when both "
                "registrations have an InvokeRank section).",
            ),
        ] = False,
    ) -> None:
        """Compare two or more registrations' runs: each one's own result, and the paired change.

        When both carry an InvokeRank section, both registrations' scores per shared arm,
        intent and overall go in one table with the seed's stability rule (6.6: the 90%
        intervals overlap; the 90% paired prompt bootstrap of the change beside it).
        With three or more (compare A B C ...), each is compared with A, the reference,
        and one table holds every registration's scores, each read against A's.
        Refuses (exit 4, saying which) when the corpora, evidence classes, models or
        outcomes differ; (exit 3) when either's runs carry a foreign digest.
        """
        if as_json and as_markdown:
            raise BadInput("give --json or --markdown, not both", field="--markdown")
        ws = workspace(ctx)
        result = compare(ws, a, *b)

        def human() -> None:
            if as_markdown:
                console.print(display(markdown(result), multiline=True), end="", soft_wrap=True)
                return
            for line in describe(result):
                console.print(display(line))

        emit(result.to_json(), as_json, human)
