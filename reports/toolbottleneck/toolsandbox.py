"""The ToolSandbox check (seed 001, section 5.1 and appendix K), from ToolSandbox's output.

"In ToolSandbox, a larger menu costs tokens more clearly than success." ToolSandbox adds
3, 10 or all of its other tools to each base scenario as distraction tools; this check
pairs each base scenario with its larger menus in the ``result_summary.json`` files
ToolSandbox saved (read and checked by :mod:`prereg.runners.exchange.toolsandbox`; prereg
never runs ToolSandbox) and reports, for each larger menu against the base menu, the
paired difference in success and in cost:

- success: ToolSandbox's own score, ``similarity`` in [0, 1]; ToolSandbox defines no
  success indicator (no threshold in its evaluator, CLI or analysis code), so a 0/1
  success is reported only when the user registers one (``success_at``: success is
  ``similarity >= success_at``; reading T3);
- cost: ``turn_count`` (ToolSandbox's effective turn count; a scenario that raised is
  saved at the scenario's message limit). Tokens: not measured, since no file ToolSandbox
  saves carries a token count (reading T4); the check prints that, never an estimate.

Each pair is one base scenario in one file (one run); the resampling unit is the base
scenario, its pairs from every file resampled together (reading T5). The estimate is
the mean over scenarios of the scenario's mean difference; the interval is the project's
cluster bootstrap of that contrast (:func:`prereg.stats.contrast_bootstrap`, the interval
every registered contrast prints) shown through :meth:`Interval.resampled`: withheld,
with "too few scenarios", below :data:`prereg.stats.bootstrap.FEW_CLUSTERS` scenarios,
and when every scenario shows the same difference. A base scenario missing at one menu
size leaves only that contrast and is listed as unpaired (reading T6). Scrambled
variants vary the tool text, not the menu, and are left out of the contrasts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import numpy as np

from prereg.reports.model import Interval, Model
from prereg.reports.render.markdown import esc, table
from prereg.reports.toolbottleneck.estimates import Estimate, estimate_cell
from prereg.runners.exchange.toolsandbox import (
    EVIDENCE_CLASS,
    MENU_LABELS,
    MENUS,
    Menu,
    Scenario,
    SummaryFile,
)
from prereg.stats import contrast_bootstrap
from prereg.stats.bootstrap import FEW_CLUSTERS

SCHEMA = "prereg.toolsandbox/1"
Outcome = Literal["similarity", "success", "turn_count"]
#: Printed in percentage points (a score or a rate) or in turns.
SCALES: dict[Outcome, tuple[float, str, int]] = {
    "similarity": (100.0, " pp", 1),
    "success": (100.0, " pp", 1),
    "turn_count": (1.0, " turns", 2),
}
NO_TOKENS = (
    "not measured: ToolSandbox saves no token counts (result_summary.json holds "
    "similarities and turn counts; a scenario's trajectories/<name>/conversation.json, "
    "execution_context.json and pretty_print.txt hold messages and state, no usage), so "
    "the token half of the seed's sentence cannot be checked from its saved output"
)
ALL_FILES = "all files"


class MenuContrast(Model):
    """A larger menu against the base menu on one outcome: the paired difference
    (menu minus base), its interval or the reason it is withheld."""

    scope: str = "all files"
    menu: Menu
    outcome: Outcome
    pairs: int
    scenarios: int
    base_mean: float | None
    menu_mean: float | None
    estimate: float | None
    interval: Interval | None
    note: str | None = None


class FileRow(Model):
    path: str
    sha256: str
    git_sha: str | None
    scenarios: int
    by_menu: dict[str, int]
    scrambled: int
    raised: int


class Unpaired(Model):
    file: str
    base: str
    missing: list[Menu]


class Tokens(Model):
    measured: bool
    estimate: float | None
    reason: str


class ToolSandboxCheck(Model):
    schema_id: str = SCHEMA
    evidence_class: str = EVIDENCE_CLASS
    note: str = (
        "ToolSandbox itself is not run by prereg (it is not on a package registry): this "
        "check reads the result_summary.json files a ToolSandbox run saved"
    )
    files: list[FileRow]
    level: float
    seed: int
    draws: int
    success_at: float | None
    minimum_scenarios: int
    contrasts: list[MenuContrast]
    unpaired: list[Unpaired]
    tokens: Tokens


def _value(s: Scenario, outcome: Outcome, success_at: float | None) -> float:
    if outcome == "similarity":
        return s.similarity
    if outcome == "turn_count":
        return float(s.turn_count)
    assert success_at is not None
    return float(s.similarity >= success_at)


def _contrast(
    pairs: Sequence[tuple[str, Scenario, Scenario]],
    *,
    scope: str,
    menu: Menu,
    outcome: Outcome,
    success_at: float | None,
    level: float,
    seed: int,
    draws: int,
) -> MenuContrast:
    labels = [base for base, _, _ in pairs]
    units = len(set(labels))
    if units == 0:
        return MenuContrast(
            scope=scope,
            menu=menu,
            outcome=outcome,
            pairs=0,
            scenarios=0,
            base_mean=None,
            menu_mean=None,
            estimate=None,
            interval=None,
            note=f"no base scenario saved both with {MENU_LABELS['none']} and {MENU_LABELS[menu]}",
        )
    values = np.array(
        [[_value(b, outcome, success_at), _value(m, outcome, success_at)] for _, b, m in pairs]
    )
    # the unit-weighted cell means (scenarios count equally, as in the contrast)
    by_unit: dict[str, list[int]] = defaultdict(list)
    for i, label in enumerate(labels):
        by_unit[label].append(i)
    cells = np.array([values[rows].mean(axis=0) for rows in by_unit.values()]).mean(axis=0)
    method = "cluster bootstrap of the paired difference resampling base scenarios"
    if units >= 2:
        res = contrast_bootstrap(
            values, [-1.0, 1.0], units=labels, draws=draws, level=level, seed=seed
        )
        estimate = float(res.estimate)
        interval = Interval.resampled(
            res.low,
            res.high,
            res.level,
            res.method,
            unit="scenario",
            units=units,
            minimum=FEW_CLUSTERS,
        )
    else:
        estimate = float(cells[1] - cells[0])
        interval = Interval.resampled(
            None, None, level, method, unit="scenario", units=units, minimum=FEW_CLUSTERS
        )
    return MenuContrast(
        scope=scope,
        menu=menu,
        outcome=outcome,
        pairs=len(pairs),
        scenarios=units,
        base_mean=float(cells[0]),
        menu_mean=float(cells[1]),
        estimate=estimate,
        interval=interval,
    )


def _grouped(f: SummaryFile) -> dict[str, dict[Menu, Scenario]]:
    out: dict[str, dict[Menu, Scenario]] = defaultdict(dict)
    for s in f.scenarios:
        if s.menu is not None and s.base is not None:
            out[s.base][s.menu] = s
    return out


def toolsandbox_check(
    files: Sequence[SummaryFile],
    *,
    success_at: float | None = None,
    level: float = 0.95,
    seed: int = 0,
    draws: int = 10_000,
) -> ToolSandboxCheck:
    """The menu contrasts of checked ToolSandbox summaries (see the module docstring)."""
    outcomes: list[Outcome] = ["similarity"]
    if success_at is not None:
        outcomes.append("success")
    outcomes.append("turn_count")
    grouped = [_grouped(f) for f in files]
    scopes: list[tuple[str, list[int]]] = [(ALL_FILES, list(range(len(files))))]
    if len(files) > 1:
        scopes += [(f.path, [i]) for i, f in enumerate(files)]
    contrasts: list[MenuContrast] = []
    for scope, chosen in scopes:
        for menu, _, _ in MENUS[1:]:
            pairs = [
                (base, by_menu["none"], by_menu[menu])
                for i in chosen
                for base, by_menu in sorted(grouped[i].items())
                if "none" in by_menu and menu in by_menu
            ]
            for outcome in outcomes:
                contrasts.append(
                    _contrast(
                        pairs,
                        scope=scope,
                        menu=menu,
                        outcome=outcome,
                        success_at=success_at,
                        level=level,
                        seed=seed,
                        draws=draws,
                    )
                )
    menus = [m for m, _, _ in MENUS]
    unpaired = [
        Unpaired(file=f.path, base=base, missing=[m for m in menus if m not in by_menu])
        for f, g in zip(files, grouped, strict=True)
        for base, by_menu in sorted(g.items())
        if len(by_menu) < len(menus)
    ]
    rows = [
        FileRow(
            path=f.path,
            sha256=f.digest,
            git_sha=f.git_sha,
            scenarios=len(f.scenarios),
            by_menu={m: sum(1 for s in f.scenarios if s.menu == m) for m in menus},
            scrambled=sum(1 for s in f.scenarios if s.menu is None),
            raised=sum(1 for s in f.scenarios if s.raised),
        )
        for f in files
    ]
    return ToolSandboxCheck(
        files=rows,
        level=level,
        seed=seed,
        draws=draws,
        success_at=success_at,
        minimum_scenarios=FEW_CLUSTERS,
        contrasts=contrasts,
        unpaired=unpaired,
        tokens=Tokens(measured=False, estimate=None, reason=NO_TOKENS),
    )


HEADER = [
    "scope",
    "menu",
    "outcome",
    "pairs",
    "scenarios",
    "base menu",
    "larger menu",
    "difference",
]
SHORT_MENU: dict[Menu, str] = {"none": "+0", "3": "+3 tools", "10": "+10 tools", "all": "all tools"}


def _mean(value: float | None, outcome: Outcome) -> str:
    if value is None:
        return "-"
    scale, unit, digits = SCALES[outcome]
    return f"{round(scale * value, digits) + 0.0:.{digits}f}{unit}"


def cell(c: MenuContrast) -> str:
    """The difference with its interval, or why the interval is withheld."""
    if c.estimate is None:
        return f"-; {c.note}" if c.note else "-"
    iv = c.interval
    scale, unit, digits = SCALES[c.outcome]
    est = Estimate(
        c.estimate,
        None if iv is None else iv.low,
        None if iv is None else iv.high,
        None if iv is None else _short(iv.reason),
    )
    return estimate_cell(est, unit=unit, scale=scale, digits=digits)


def _short(reason: str | None) -> str | None:
    """``Interval.resampled``'s reason without its "no interval" (the cell adds it)."""
    if reason is None:
        return None
    if reason.startswith("no interval: "):
        return reason.removeprefix("no interval: ")
    return reason.split(": no interval", 1)[0]


def table_rows(check: ToolSandboxCheck) -> list[list[str]]:
    """One row per contrast (plain text; the renderer makes it safe)."""
    return [
        [
            c.scope,
            SHORT_MENU[c.menu],
            c.outcome,
            str(c.pairs),
            str(c.scenarios),
            _mean(c.base_mean, c.outcome),
            _mean(c.menu_mean, c.outcome),
            cell(c),
        ]
        for c in check.contrasts
    ]


def notes(check: ToolSandboxCheck) -> list[str]:
    """The lines printed under the table (plain text)."""
    level = f"{100 * check.level:g}%"
    out = [
        check.note + f"; evidence class {check.evidence_class}, never pooled with runs.",
        f"Intervals: {level}, scenario-cluster bootstrap (seed {check.seed}), withheld below "
        f"{check.minimum_scenarios} base scenarios.",
        "Success: ToolSandbox's similarity score"
        + (
            f"; success is similarity >= {check.success_at:g} (registered with --success-at)."
            if check.success_at is not None
            else " (ToolSandbox defines no success threshold; give --success-at for one)."
        ),
        "Difference: the larger menu minus the base menu (no distraction tools), paired "
        "by base scenario.",
        f"Tokens: {check.tokens.reason}.",
    ]
    withheld: dict[str, int] = defaultdict(int)
    for c in check.contrasts:
        if c.interval is not None and c.interval.reason is not None:
            withheld[c.interval.reason] += 1
    for reason, count in withheld.items():
        out.append(f"Withheld ({count} of {len(check.contrasts)} intervals): {reason}.")
    for u in check.unpaired:
        missing = ", ".join(MENU_LABELS[m] for m in u.missing)
        out.append(f"Unpaired: {u.base} in {u.file} has no scenario with {missing}.")
    return out


def markdown(check: ToolSandboxCheck) -> str:
    """The check as Markdown; every name from a file is escaped."""
    lines = ["# The ToolSandbox check (seed 001, appendix K)", ""]
    lines += table(
        ["file", "sha256", "ToolSandbox git SHA", "scenarios", "scrambled", "raised"],
        [
            [f.path, f.sha256, f.git_sha or "-", f.scenarios, f.scrambled, f.raised]
            for f in check.files
        ],
    )
    lines += [""]
    lines += table(HEADER, table_rows(check))
    lines += [""]
    lines += [f"- {esc(n)}" for n in notes(check)]
    return "\n".join(lines) + "\n"
