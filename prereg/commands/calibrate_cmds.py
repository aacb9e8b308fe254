"""``calibrate``: a registration's own analysis simulated under the null and the plan.

Wiring only: the calibration is computed by
:func:`prereg.registry.calibration.calibrate_registration` (the simulation engine is
:mod:`prereg.stats.calibration`). This module validates the options (exit 2 naming the
option), resolves the target (a registered id or a draft file), shows a progress bar on a
terminal and renders the table.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from prereg.commands._common import JsonOpt, complete_registration_id, workspace
from prereg.core.errors import BadInput
from prereg.core.output import console, emit
from prereg.core.untrusted import display
from prereg.registry.calibration import (
    DEFAULT_DRAWS,
    DEFAULT_SIMS,
    PER_INTENT,
    Figures,
    calibrate_registration,
)
from prereg.registry.calibration_target import load_target
from prereg.reports.calibration.from_runs import pilot_figures
from prereg.reports.calibration.stored import store_calibration
from prereg.reports.render.table import print_table
from prereg.stats.calibration import Progress as ProgressCallback

#: the largest --sims and --draws accepted (beyond them a run takes minutes)
MAX_SIMS = 100_000
MAX_DRAWS = 20_000

CALIBRATE_HELP = """Simulate a registration's own analysis: type I error, power and coverage.

TARGET is a registered id or a draft registration file (validated as `register` would,
nothing is written). The registered analysis is applied to --sims simulated data sets
with no effect (type I error of each test, coverage of each interval the report prints)
and --sims with the planned effect (power, coverage), on the registration's own design:
the split's tasks, design.repeats replicate runs per arm, each test's alpha, sides,
aggregate, margin, level and resampling unit, the stopping rule, and the planning figures
of `plan:` (sigma_d, sigma_run, mde, power) including the between-run component.

[bold]Population[/]: per-prompt success rates from a beta distribution (mean --base-rate,
intraclass correlation of repeats --icc) whose paired differences have SD sigma_d over
the registered repeats, and a shift per arm and run with SD sigma_run. Without `plan:`,
sigma_d 0.35 and no run component, and the planned effect is the design's own minimum
detectable effect. Options override the plan; --from-runs ID takes sigma_d, sigma_run,
the ICC and the base rate from a pilot's runs (options still win). docs/statistics.md,
"prereg calibrate", gives every method choice.

[bold]Verdicts[/] are judged against the Monte Carlo error: `inflated` / `under-covers`
when the estimate is more than two standard errors (at the nominal rate) worse than
nominal, `conservative` / `over-covers` the other way, `below target` for power.

Examples:

  prereg calibrate drafts/music-library-confirmatory.yaml
  prereg calibrate music-library-pilot --sims 2000 --seed 7
  prereg calibrate drafts/music-library-pilot.yaml --sigma-run 0.05 --json
  prereg calibrate drafts/music-library-confirmatory.yaml --from-runs music-library-pilot

JSON keys: registration, kind, experiment, split, source, target, digest, pilot, sims, seed,
bootstrap_draws, design (the resolved figures and where each came from), rows (label,
test, quantity, scenario, nominal, estimate, mc_se, verdict, sims, truth, note),
per_intent_coverage, skipped, notes, method, elapsed_s, stored (the file written for a
registered id, shown by `analyse` while the digest matches; null for a draft).
"""


def _positive_int(value: int, option: str, most: int) -> None:
    if value < 1 or value > most:
        raise BadInput(f"must be an integer from 1 to {most}, got {value!r}", field=option)


def _figure(value: float | None, option: str, low: float, high: float, what: str) -> None:
    if value is None:
        return
    if not math.isfinite(value) or not low <= value <= high:
        raise BadInput(f"{what}, got {value!r}", field=option)


def validate(sims: int, draws: int, seed: int, figures: Figures) -> None:
    """Exit 2 (BadInput naming the option) on an option the calibration cannot use."""
    _positive_int(sims, "--sims", MAX_SIMS)
    _positive_int(draws, "--draws", MAX_DRAWS)
    if seed < 0:
        raise BadInput(f"must be a non-negative integer, got {seed!r}", field="--seed")
    _figure(
        figures.sigma_d, "--sigma-d", 1e-9, 1.0, "the SD of per-prompt differences is in (0, 1]"
    )
    _figure(figures.sigma_run, "--sigma-run", 0.0, 0.5, "the between-run SD is in [0, 0.5)")
    _figure(figures.icc, "--icc", 1e-9, 0.999, "the intraclass correlation is in (0, 0.999]")
    _figure(figures.base_rate, "--base-rate", 1e-9, 1 - 1e-9, "a base rate is in (0, 1)")
    _figure(figures.effect, "--effect", -1.0, 1.0, "an effect is a difference of rates in [-1, 1]")
    if figures.effect == 0.0:
        raise BadInput("the planned effect must not be 0 (power needs an effect)", field="--effect")


@contextmanager
def _progress(show: bool) -> Iterator[ProgressCallback | None]:
    """A rich progress bar on stderr when it is a terminal and ``show``; else nothing."""
    err = Console(stderr=True)
    if not show or not err.is_terminal:
        yield None
        return
    bar = Progress(
        TextColumn("[bold]calibrating"),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TextColumn("data sets"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task = bar.add_task("calibrate", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


_STYLE = {
    "ok": "green",
    "inflated": "bold red",
    "under-covers": "bold red",
    "below target": "yellow",
    "conservative": "cyan",
    "over-covers": "cyan",
}


_QUANTITY = {"type I error": "type I", "false discovery rate": "FDR", "family-wise error": "FWER"}
_SCENARIO = {"planned effect": "effect", "equivalence": "equiv.", "global null": "null (all)"}


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "—" if value is None or not math.isfinite(value) else format(value, fmt)


def render(doc: dict[str, Any]) -> None:
    """The calibration as a person reads it: what was simulated, then the table."""
    design = doc["design"]
    console.print(
        Text.assemble(
            ("Calibration of ", "bold"),
            display(doc["registration"], "bold"),
            display(f" ({doc['kind']}, split {doc['split']}, {doc['source']})"),
        )
    )
    sources = design["sources"]
    icc_from = sources["icc"] if sources["icc"] != "model" else design["icc_source"]
    console.print(
        display(
            f"  {design['prompts']} tasks x {design['runs_per_arm']} run(s) per arm; "
            f"sigma_d {design['sigma_d']:.3g} ({sources['sigma_d']}), sigma_run "
            f"{design['sigma_run']:.3g} ({sources['sigma_run']}), base rate "
            f"{design['base_rate']:.3g} ({sources['base_rate']}), ICC {design['icc']:.3g} "
            f"({icc_from}); planned effect {design['effect']:+.3f} ({sources['effect']}), "
            f"power target {design['power_target']:g}"
        )
    )
    header = ("test", "quantity", "scenario", "nominal", "estimate", "MC SE", "verdict")
    rows: list[list[str | Text]] = []
    previous = None
    sizes = Counter((row["label"], row["test"]) for row in doc["rows"])
    for row in doc["rows"]:
        group = (row["label"], row["test"])
        if group != previous:
            names = [display(row["label"], "bold"), display(row["test"], "dim")]
            if row["label"] == PER_INTENT:
                names = [display("per-intent", "bold"), display("intervals", "dim")]
            if sizes[group] < len(names):  # a one-row group: its label and test together
                names = [Text("\n").join(names)]
        previous = group
        rows.append(
            [
                names.pop(0) if names else Text(""),
                _QUANTITY.get(row["quantity"], row["quantity"]),
                _SCENARIO.get(row["scenario"], row["scenario"]),
                _num(row["nominal"]),
                _num(row["estimate"]),
                _num(row["mc_se"]),
                Text(row["verdict"], style=_STYLE.get(row["verdict"], "")),
            ]
        )
    # every id and number whole at any width (issue 37): columns give way, then paragraphs
    print_table(console, "", header, rows, drop=("MC SE", "nominal"), shown_in="--json")
    console.print(
        display(
            f"{doc['sims']} simulated data sets per scenario, seed {doc['seed']}, "
            f"{doc['bootstrap_draws']} bootstrap resamples; {doc['elapsed_s']:.1f} s",
            "dim",
        )
    )
    for row in doc["rows"]:
        if row["note"] and row["label"] == PER_INTENT:
            console.print(display(f"per-intent ({row['scenario']}): {row['note']}", "dim"))
    for item in doc["skipped"]:
        console.print(
            display(f"not simulated: {item['label']} ({item['test']}): {item['reason']}", "yellow")
        )
    for note in doc["notes"]:
        console.print(display(f"note: {note}", "dim"))
    if doc.get("stored"):
        console.print(display(f"stored: {doc['stored']} (shown in this registration's report)"))


def register(app: typer.Typer) -> None:
    """Add ``calibrate`` to the app."""

    @app.command("calibrate", help=CALIBRATE_HELP)
    def calibrate_cmd(
        ctx: typer.Context,
        target: Annotated[
            str,
            typer.Argument(
                metavar="ID|DRAFT",
                help="A registered id or a draft YAML file.",
                autocompletion=complete_registration_id,
            ),
        ],
        sims: Annotated[
            int, typer.Option("--sims", help="Simulated data sets per scenario.")
        ] = DEFAULT_SIMS,
        seed: Annotated[int, typer.Option("--seed", help="Seed of the simulation.")] = 0,
        draws: Annotated[
            int,
            typer.Option(
                "--draws",
                help="Bootstrap resamples per data set (at most the registered draws).",
            ),
        ] = DEFAULT_DRAWS,
        sigma_d: Annotated[
            float | None,
            typer.Option(
                "--sigma-d",
                help="SD over prompts of the per-prompt paired difference (overrides plan).",
                show_default=False,
            ),
        ] = None,
        sigma_run: Annotated[
            float | None,
            typer.Option(
                "--sigma-run",
                help="Between-run SD of a run's rate (overrides plan).",
                show_default=False,
            ),
        ] = None,
        effect: Annotated[
            float | None,
            typer.Option(
                "--effect",
                help="Planned effect, a difference of rates (overrides plan.mde; "
                "negative: the control ahead).",
                show_default=False,
            ),
        ] = None,
        icc: Annotated[
            float | None,
            typer.Option(
                "--icc",
                help="Intraclass correlation of repeats of a prompt (default 0.5, raised "
                "as sigma_d needs).",
                show_default=False,
            ),
        ] = None,
        base_rate: Annotated[
            float | None,
            typer.Option(
                "--base-rate", help="Mean success rate (default 0.5).", show_default=False
            ),
        ] = None,
        from_runs: Annotated[
            str | None,
            typer.Option(
                "--from-runs",
                metavar="ID",
                help="Take sigma_d, sigma_run, the ICC and the base rate from this "
                "registration's runs (options still win).",
                show_default=False,
            ),
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        figures = Figures(
            sigma_d=sigma_d, sigma_run=sigma_run, effect=effect, icc=icc, base_rate=base_rate
        )
        validate(sims, draws, seed, figures)
        ws = workspace(ctx)
        found = load_target(ws, target)
        pilot = None
        if from_runs is not None:
            pilot = pilot_figures(
                ws,
                from_runs,
                found.registration.design.repeats,
                len(found.split.ids),
                figures,
                seed=seed,
            )
            figures = pilot.figures
        started = time.perf_counter()
        with _progress(not as_json) as progress:
            doc = calibrate_registration(
                found.registration,
                found.split,
                figures=figures,
                sims=sims,
                seed=seed,
                draws=draws,
                progress=progress,
            )
        if pilot is not None:
            doc["notes"] = [*pilot.notes, *doc["notes"]]
        doc = {
            **doc,
            "pilot": None if pilot is None else pilot.pilot,
            "source": found.source,
            "target": found.shown,
            "digest": found.digest,
            "elapsed_s": time.perf_counter() - started,
        }
        stored = None
        if found.source == "registered":  # the report of this digest shows it
            stored = ws.relative(store_calibration(ws, found.registration.id, doc))
        doc["stored"] = stored
        emit(doc, as_json, lambda: render(doc))
