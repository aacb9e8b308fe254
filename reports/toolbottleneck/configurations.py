"""Per-configuration effects and the V effect against truncation (seed appendix C-D).

- **Per-configuration effects** (seed Table 4 and Figure 7, "Heterogeneity across
  configurations"): each registered contrast within each configuration (its arms'
  registered weights, times the number of configurations, as
  :func:`~prereg.reports.toolbottleneck.registered.per_configuration`: cell means weight
  families equally), each configuration's baseline success (the first arm's cell) and
  its truncation rate at the largest menu; then the plain mean over configurations and
  the organisation-equal reweighting (each organisation's configurations averaged first,
  then the organisations: the seed's -15.3 pp for the visible menu). A contrast whose
  restricted weights do not sum to zero in a configuration is "not separable".
- **The V effect against truncation** (seed Figure 6, section 5.1: Pearson r = -0.95,
  Spearman rho = -0.82 across 21 configurations): each configuration's visible-menu
  effect (largest minus smallest menu, the mean over the workflow x encoding cells held
  at both menu ends, cell means weighting families equally) against the share of its
  largest-menu episodes in those cells truncated at the completion cap. Withheld, with
  the reason, below three configurations or when either variable is constant (the
  coefficient is then undefined or +-1 by construction); no interval is printed (the
  seed gives none, and below 10 configurations no resampling interval is defended).

An organisation (reading C2 of docs/toolbottleneck.md) is what made the model: a
provider driver's vendor (``anthropic``, ``openai``), the ``owner/`` prefix of a model
id served by an OpenAI-compatible server (``openai-chat``, the Hugging Face
convention; the whole id without one), and prereg itself for the simulated policy and
the local host's profiles (one organisation: the reweighting then equals the plain
mean, and the table says so).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from prereg.experiments.toolbottleneck.registrable import family_of_task
from prereg.registry.resolve import study_player
from prereg.registry.schema import Registration
from prereg.reports.toolbottleneck.census import truncation
from prereg.reports.toolbottleneck.episodes import Episode
from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint, StudyTable

#: fewest configurations for which a correlation across them is printed
MIN_CONFIGURATIONS = 3


def organisation_of(registration: Registration, arm_id: str) -> str:
    """The organisation that made an arm's model (see the module's docstring)."""
    host = registration.config_of(arm_id).host
    player = study_player(host.driver, host.model)
    if player == "simulated":
        return "prereg (simulated policy)"
    if player == "local":
        return "prereg (local host)"
    if host.driver == "openai-chat":
        model = host.model or "?"
        return model.split("/", 1)[0] if "/" in model else model
    return host.driver


def family_means(records: Sequence[Episode], arms: Sequence[str]) -> dict[str, float] | None:
    """Each arm's success, families weighted equally (a task's mean over repeats, a
    family's mean over its tasks, the mean over families), over the tasks measured in
    every one of ``arms`` (None: no such task)."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.arm in arms and r.success is not None:
            runs[(r.task_id, r.arm)].append(float(r.success))
    tasks = sorted({t for t, _ in runs})
    tasks = [t for t in tasks if all((t, a) in runs for a in arms)]
    if not tasks:
        return None
    by_family: dict[str, list[str]] = defaultdict(list)
    for t in tasks:
        by_family[family_of_task(t)].append(t)
    out: dict[str, float] = {}
    for a in arms:
        fam = [np.mean([np.mean(runs[(t, a)]) for t in ts]) for ts in by_family.values()]
        out[a] = float(np.mean(fam))
    return out


@dataclass(frozen=True)
class MenuEffect:
    """One configuration's visible-menu effect and its largest-menu truncation."""

    configuration: str
    organisation: str
    effect: float | None
    truncation: float | None
    cells: int  # workflow x encoding cells held at both menu ends


def menu_effects(
    registration: Registration,
    records: Sequence[Episode],
    configuration: Mapping[str, str],
) -> list[MenuEffect]:
    """Each configuration's V effect and truncation rate at its largest menu (seed 5.1)."""
    groups: dict[str, dict[tuple[str, str, int], str]] = defaultdict(dict)
    org: dict[str, str] = {}
    for arm in registration.arms:
        cell = arm.toolbottleneck
        if cell is None or cell.menu is None or cell.catalog is not None or cell.handoffs:
            continue
        name = configuration[arm.id]
        groups[name].setdefault((cell.workflow, cell.encoding, cell.menu), arm.id)
        org.setdefault(name, organisation_of(registration, arm.id))
    out: list[MenuEffect] = []
    for name in sorted(groups):
        arms = groups[name]
        menus = sorted({m for _, _, m in arms})
        pairs = sorted(
            (arms[(w, d, menus[0])], arms[(w, d, menus[-1])])
            for w, d, m in arms
            if m == menus[0] and (w, d, menus[-1]) in arms and len(menus) > 1
        )
        diffs: list[float] = []
        large: list[str] = []
        for small_arm, large_arm in pairs:
            means = family_means(records, [small_arm, large_arm])
            if means is not None:
                diffs.append(means[large_arm] - means[small_arm])
                large.append(large_arm)
        cut = truncation([r for r in records if r.arm in large]).rate if large else None
        effect = float(np.mean(diffs)) if diffs else None
        out.append(MenuEffect(name, org[name], effect, cut, len(diffs)))
    return out


@dataclass(frozen=True)
class Correlation:
    configurations: int
    #: configurations in the correlation: those whose V effect covers the most W x D
    #: cells (a configuration with fewer, e.g. a fixed-menu lane, is another estimand)
    pearson: float | None
    spearman: float | None
    reason: str | None  # why the coefficients are withheld


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank), 1-based."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    ranks[order] = np.arange(1, len(x) + 1, dtype=float)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    return float(np.dot(dx, dy) / np.sqrt(np.dot(dx, dx) * np.dot(dy, dy)))


def effect_truncation_correlation(effects: Sequence[MenuEffect]) -> Correlation:
    """Pearson r and Spearman rho of the V effect against the truncation rate across
    configurations, or the reason they are withheld."""
    full = max((e.cells for e in effects), default=0)
    kept = [
        (e.effect, e.truncation)
        for e in effects
        if e.effect is not None and e.truncation is not None and e.cells == full
    ]
    n = len(kept)
    if n < MIN_CONFIGURATIONS:
        return Correlation(
            n,
            None,
            None,
            f"too few configurations ({n} < {MIN_CONFIGURATIONS}) with a V effect over all "
            f"{full} workflow x encoding cells and a truncation rate: a correlation over "
            "two points is +-1 by construction",
        )
    v = np.array([p[0] for p in kept], dtype=float)
    t = np.array([p[1] for p in kept], dtype=float)
    if np.ptp(t) == 0 or np.ptp(v) == 0:
        which = "truncation rate" if np.ptp(t) == 0 else "V effect"
        return Correlation(n, None, None, f"the {which} is the same in every configuration")
    return Correlation(n, _pearson(v, t), _pearson(_ranks(v), _ranks(t)), None)


def _pp(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _reweighted(values: Mapping[str, float], organisation: Mapping[str, str]) -> float:
    by_org: dict[str, list[float]] = defaultdict(list)
    for name, v in values.items():
        by_org[organisation[name]].append(v)
    return float(np.mean([np.mean(vs) for vs in by_org.values()]))


def configuration_tables(
    registration: Registration,
    records: Sequence[Episode],
    configuration: Mapping[str, str],
    by_contrast: Mapping[str, Mapping[str, float] | None],
) -> list[StudyTable]:
    """Table 4 / Figure 7 (per-configuration effects with the organisation-equal
    reweighting) and Figure 6 (the V effect against truncation). ``by_contrast``: each
    registered contrast's per-configuration values (None: not separable)."""
    effects = menu_effects(registration, records, configuration)
    names = sorted({configuration[a.id] for a in registration.arms if a.toolbottleneck})
    if len(names) < 1 or not effects:
        return []
    org = {
        configuration[a.id]: organisation_of(registration, a.id)
        for a in registration.arms
        if a.toolbottleneck is not None
    }
    first = registration.arms[0]
    baseline: dict[str, float] = {}
    if first.toolbottleneck is not None:
        home = first.toolbottleneck
        for a in registration.arms:
            cell = a.toolbottleneck
            if cell is not None and cell.levels() == home.levels():
                means = family_means(records, [a.id])
                if means is not None:
                    baseline.setdefault(configuration[a.id], means[a.id])
    cut = {e.configuration: e.truncation for e in effects}
    contrasts = list(by_contrast)
    header = [
        "configuration",
        "organisation",
        "baseline success",
        "largest-menu truncation",
        *contrasts,
    ]
    rows = []
    for name in names:
        rows.append(
            [
                name,
                org.get(name, "?"),
                _pct(baseline.get(name)),
                _pct(cut.get(name)),
                *[
                    "not separable" if by_contrast[c] is None else _pp(by_contrast[c].get(name))  # type: ignore[union-attr]
                    for c in contrasts
                ],
            ]
        )
    separable = {c: v for c, v in by_contrast.items() if v is not None}
    mean_row = ["mean over configurations", "-", "-", "-"]
    org_row = [
        "organisation-equal reweighting",
        f"{len(set(org.values()))} organisation(s)",
        "-",
        "-",
    ]
    for c in contrasts:
        values = separable.get(c)
        if values is None or not values:
            mean_row.append("not separable")
            org_row.append("not separable")
            continue
        mean_row.append(_pp(float(np.mean(list(values.values())))))
        org_row.append(_pp(_reweighted(values, org)))
    rows += [mean_row, org_row]
    single = len(set(org.values())) == 1
    note = (
        "Each configuration's effect (percentage points) is the registered contrast over its "
        "own arms, cell means weighting families equally (seed Table 4, Figure 7); baseline "
        "success is the first arm's cell in that configuration; truncation is the share of "
        "its largest-menu capacity episodes ending at the completion cap. Point estimates "
        "only: a configuration's interval would resample its "
        f"{len({family_of_task(r.task_id) for r in records})} families, and the intervals "
        "of the pooled contrasts are in the table by resampling unit. The "
        "organisation-equal row averages each organisation's configurations first (seed "
        "appendix D, 'Heterogeneity across configurations')."
    )
    if single:
        note += (
            " Every configuration here has one organisation, so the reweighting equals the "
            "plain mean."
        )
    tables = [
        StudyTable(
            title="Per-configuration effects with organisation-equal reweighting (seed "
            "Table 4, Figure 7)",
            columns=header,
            rows=rows,
            note=note,
        )
    ]
    corr = effect_truncation_correlation(effects)
    corr_rows = [
        [e.configuration, _pp(e.effect), _pct(e.truncation), str(e.cells)] for e in effects
    ]
    if corr.reason is None:
        corr_rows.append(
            [
                f"Pearson r ({corr.configurations} configurations)",
                f"{corr.pearson:+.2f}",
                "-",
                "-",
            ]
        )
        corr_rows.append(
            [
                f"Spearman rho ({corr.configurations} configurations)",
                f"{corr.spearman:+.2f}",
                "-",
                "-",
            ]
        )
        corr_note = (
            "The V effect (largest minus smallest menu, mean over the workflow x encoding "
            "cells held at both ends; the correlation reads the configurations holding all "
            "of them) against the share of those largest-menu episodes "
            "truncated at the completion cap (seed 5.1 and Figure 6). No interval (the seed "
            "gives none; below 10 configurations no resampling interval is defended). Every "
            "truncated episode fails, so the correlation cannot isolate the cap: the "
            "completion-cap sweep does."
        )
    else:
        corr_note = f"Correlations withheld: {corr.reason}."
    tables.append(
        StudyTable(
            title="The V effect against truncation at the largest menu (seed Figure 6)",
            columns=["configuration", "V effect", "largest-menu truncation", "W x D cells"],
            rows=corr_rows,
            note=corr_note,
        )
    )
    return tables


#: Why Figure 7's points carry no interval (reading C1: the table's point estimates).
CONFIGURATION_NO_INTERVAL = (
    "no interval: a configuration's effect is a point estimate (its interval would "
    "resample only its own families; the pooled contrasts carry the intervals)"
)
#: The label of each contrast's organisation-equal point in Figure 7.
REWEIGHTED = "organisation-equal reweighting"


def configuration_figure(
    registration: Registration,
    records: Sequence[Episode],
    configuration: Mapping[str, str],
    by_contrast: Mapping[str, Mapping[str, float] | None],
) -> list[StudyFigure]:
    """Figure 7 (seed appendix D): the numbers of Table 4's rows, drawn. For each
    separable contrast, each configuration's effect (``x``: its largest-menu truncation
    rate, None when it has no largest-menu episode) and then the contrast's
    organisation-equal reweighting, all without an interval (the table prints point
    estimates only; the reason rides on each point). A contrast that is not separable is
    left out, as its table cell says; nothing when no contrast is."""
    effects = menu_effects(registration, records, configuration)
    if not effects:
        return []
    org = {
        configuration[a.id]: organisation_of(registration, a.id)
        for a in registration.arms
        if a.toolbottleneck is not None
    }
    names = sorted(org)
    cut = {e.configuration: e.truncation for e in effects}
    points: list[StudyPoint] = []
    for contrast, values in by_contrast.items():
        if not values:
            continue
        points += [
            StudyPoint(
                label=f"{contrast}: {name}",
                value=values[name],
                x=cut.get(name),
                reason=CONFIGURATION_NO_INTERVAL,
            )
            for name in names
            if name in values
        ]
        points.append(
            StudyPoint(
                label=f"{contrast}: {REWEIGHTED}",
                value=_reweighted(values, org),
                reason=CONFIGURATION_NO_INTERVAL,
            )
        )
    return [StudyFigure(name="tb_configurations", points=points)] if points else []
