"""The ToolBottleneckBench section of a registered study's report (issue 19).

A registration on an experiment of kind toolbottleneck gets, beside the registered
analysis (whose ``contrasts:`` give the eight contrasts with the registered unit and
Holm), the seed's other tables, computed from the verified run records:

- **Contrasts by resampling unit** (seed 4.2 and appendix D, "Resampling units"): every
  registered contrast again with families, intents and configurations as the resampling
  unit, each set of p values Holm-corrected on its own, and the exact sign-flip test over
  intents (:func:`prereg.stats.contrast_sign_flip`), Holm-corrected. A configuration is
  an arm's simulated policy (or local host profile, or model host: driver and model),
  menu mode and completion cap: its contrast is the registered
  weights restricted to its arms (times the number of configurations, so that their mean
  is the registered contrast), cell means weighting families equally; a contrast whose
  restricted weights do not sum to zero in every configuration is not separable and is
  said so. With few units the bootstrap distribution is enumerated exactly
  (:func:`prereg.stats.enumeration.resampled_contrast`: every multiset of the units with
  its multinomial probability, up to 11 units), so no p depends on a seed; with more it
  is drawn, with enough draws that the Monte Carlo standard error of a Holm p at the
  decision threshold is below 0.002, and every p shows its MC SE.
- **Per-configuration effects** with the organisation-equal reweighting (seed Table 4,
  Figure 7), **the V effect against truncation** (Figure 6) and **Discovery availability
  by retriever** (Figure 3c): :mod:`prereg.reports.toolbottleneck.configurations` and
  :mod:`prereg.reports.toolbottleneck.discovery`. The numbers the study's figures draw
  (:func:`study_figures`, and the decoder's gains) ride beside the tables in
  ``StudyReport.figures``.
- **Infrastructure failures** count as the registration says
  (:mod:`prereg.reports.toolbottleneck.episodes`, applied once for every table):
  ``count_as_failure`` counts a settled unit as a failure (class ``infrastructure``) in
  every table and denominator, ``retry`` leaves infra_error records out; a table of
  them, and a note under every table, say which.
- **Failure census** (:mod:`prereg.reports.toolbottleneck.census`): flags, obligation x flag,
  truncation, sentinel repeats and the truncation stratum of each arm one pressure from
  the baseline cell (the first arm) within its configuration.
- **Repairs against switches** (:mod:`prereg.reports.toolbottleneck.repairs`) for each
  registered ``repairs:`` entry, with wall time and cost in the decision matrix when the
  records measured them and "not measured" otherwise (invariant 7).
- **The completion-cap sweep** (appendix E.1) when arms give both menu ends under two caps.
- **The decoder** (:mod:`prereg.reports.toolbottleneck.decoder`, appendix H) over the
  packets of every configuration that holds the first arm's cell and its three
  single-stress endpoint cells: the ten feature sets and the five paired gains.

On the simulated policy every number describes the mechanism, never a model: the
section's label says SIMULATED POLICY first, in every rendering. On a model host
(:mod:`prereg.runners.toolbottleneck.harness`) the label says MODEL HOST and names the
drivers and models; on the local host's profiles (the same harness, the offline
:mod:`prereg.runners.drivers.local`) it says LOCAL HOST and names the profiles.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from prereg import stats
from prereg.experiments import Experiment
from prereg.experiments.toolbottleneck.registrable import family_of_task
from prereg.registry.resolve import study_player
from prereg.registry.schema import Registration
from prereg.reports.toolbottleneck.capsweep import SweepArm, cap_sweeps, sweep_figure, sweep_tables
from prereg.reports.toolbottleneck.census import (
    FLAGS,
    INFRASTRUCTURE,
    CensusRow,
    census_tables,
    contract_label,
    truncation,
    truncation_stratum,
    turn_limit_fires,
)
from prereg.reports.toolbottleneck.census import census as pooled_census
from prereg.reports.toolbottleneck.configurations import (
    configuration_figure,
    configuration_tables,
    menu_effects,
)
from prereg.reports.toolbottleneck.decoder import decode_pressure, decoder_tables, packets
from prereg.reports.toolbottleneck.discovery import availability_rows, discovery_tables
from prereg.reports.toolbottleneck.episodes import Episode, Episodes, episodes
from prereg.reports.toolbottleneck.example import example_table, family_example
from prereg.reports.toolbottleneck.frontier import (
    FrontierArm,
    frontier_contrasts,
    frontier_episodes_figure,
    frontier_figure,
    frontier_levels,
    frontier_tables,
)
from prereg.reports.toolbottleneck.holdout import (
    HoldoutRow,
    analyse_holdout,
    holdout_figure,
    holdout_tables,
)
from prereg.reports.toolbottleneck.interactions import decompose, decomposition_tables
from prereg.reports.toolbottleneck.lanes import (
    LaneArm,
    lane_tables,
    repair_figure,
    routed_versus_fixed,
    sentinel_gains,
)
from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint, StudyReport, StudyTable
from prereg.reports.toolbottleneck.repairs import (
    RepairResult,
    RepairRow,
    analyse_repairs,
    repair_tables,
)
from prereg.reports.toolbottleneck.truncated import first_response_tables
from prereg.runners.record import RunRecord
from prereg.runners.toolbottleneck.host import Contract
from prereg.runners.toolbottleneck.study import CONTROLLER_ISSUED
from prereg.stats.bootstrap import FEW_CLUSTERS
from prereg.stats.enumeration import (
    MC_SE_TARGET,
    draws_for_mc_se,
    holm_mc_se,
    mc_standard_error,
    resampled_contrast,
)
from prereg.stats.permutation import DEFAULT_DRAWS

LABEL = (
    "SIMULATED POLICY. Every arm of this study ran prereg's simulated pressure-sensitive "
    "policy (prereg.runners.toolbottleneck.host, profiles {profiles}), not a model: its "
    "numbers describe a documented mechanism with seeded error rates and show what the "
    "design computes, never what any model does. Tokens are the mechanism's own counts; "
    "wall time and cost are not measured (null)."
)
MODEL_LABEL = (
    "MODEL HOST. Every arm of this study ran a model through its provider ({hosts}), "
    "evidence class api, never pooled with runs of another evidence class. Tokens, "
    "wall time and cost "
    "are the provider's as reported (null where it reported none)."
)
LOCAL_LABEL = (
    "LOCAL HOST ({profiles}). Every arm of this study ran prereg's offline local host "
    "(prereg.runners.drivers.local: BM25 search over the shown menu, a seeded choice, "
    "arguments filled from the request and earlier results) under these profiles, "
    "through the same harness and grader as a model host. The profiles are simulated "
    "settings of one documented offline mechanism, not models and not imitations of any "
    "provider's host: its numbers describe that mechanism on the compiled variants, never "
    "what any model does. Tokens are counted in the host's own word tokenizer and wall "
    "time is measured on this machine; cost is not measured (null)."
)
UNITS = ("family", "intent", "configuration")


@dataclass(frozen=True)
class Cells:
    """Task x arm means over repeats, for the tasks measured in every weighted arm."""

    tasks: list[str]
    family: list[str]
    intent: list[str]
    arms: list[str]
    values: np.ndarray


def _cells(records: Sequence[Episode], arms: Sequence[str]) -> Cells:
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    family: dict[str, str] = {}
    intent: dict[str, str] = {}
    for r in records:
        if r.arm in arms and r.success is not None:
            runs[(r.task_id, r.arm)].append(float(r.success))
            family[r.task_id], intent[r.task_id] = family_of_task(r.task_id), r.intent
    tasks = [t for t in sorted(family) if all((t, a) in runs for a in arms)]
    values = np.array([[np.mean(runs[(t, a)]) for a in arms] for t in tasks], dtype=float).reshape(
        len(tasks), len(arms)
    )
    return Cells(tasks, [family[t] for t in tasks], [intent[t] for t in tasks], list(arms), values)


def host_of(registration: Registration, arm_id: str) -> str:
    """What plays an arm (:func:`~prereg.registry.resolve.study_player`): the simulated
    policy's profile, the local host's profile (with its ``host.params`` overrides), or
    the model host (driver and model) the arm registered."""
    arm = next(a for a in registration.arms if a.id == arm_id)
    host = registration.config_of(arm_id).host
    player = study_player(host.driver, host.model)
    if player == "simulated" and arm.toolbottleneck is not None:
        return arm.toolbottleneck.policy
    if player == "local":
        overrides = " ".join(f"{k}={v}" for k, v in sorted(host.params.items()))
        return f"{host.model} {overrides}".strip()
    return f"{host.driver} {host.model or ''}".strip()


def on_model_host(registration: Registration) -> bool:
    """Whether the study's arms ran on a model host (never pooled with the simulation)."""
    return any(registration.config_of(a.id).host.driver != "local" for a in registration.arms)


def on_local_host(registration: Registration) -> bool:
    """Whether the study's arms ran on the local host's profiles (register refuses a
    study that mixes them with the simulated policy)."""
    return any(
        study_player(c.host.driver, c.host.model) == "local"
        for c in (registration.config_of(a.id) for a in registration.arms)
    )


def configuration_words(registration: Registration) -> str:
    """What plays a configuration, in the words of its host (issue 42, item 6): only a
    study on the simulated policy says "simulated"; a model host's configurations are
    a driver and model, the local host's a profile."""
    if on_model_host(registration):
        return "a model host (driver and model)"
    if on_local_host(registration):
        return "a local-host profile"
    return "a simulated policy"


def configuration_of(registration: Registration, arm_id: str) -> str:
    """An arm's configuration: its simulated policy or model host, menu mode and
    completion cap."""
    arm = next(a for a in registration.arms if a.id == arm_id)
    cell = arm.toolbottleneck
    cap = registration.config_of(arm_id).budgets.completion_cap
    if cell is None:
        return f"cap {cap}"
    return f"{host_of(registration, arm_id)} / {cell.menu_mode} / cap {cap}"


def per_configuration(
    cells: Cells, weights: Mapping[str, float], config: Mapping[str, str]
) -> dict[str, float] | None:
    """Each configuration's contrast (None: not separable by configuration). Cell means
    weight families equally (a family's tasks averaged first)."""
    by_family: dict[str, list[int]] = defaultdict(list)
    for i, f in enumerate(cells.family):
        by_family[f].append(i)
    means = np.mean([cells.values[rows].mean(axis=0) for rows in by_family.values()], axis=0)
    groups: dict[str, list[int]] = defaultdict(list)
    for j, arm in enumerate(cells.arms):
        groups[config[arm]].append(j)
    out: dict[str, float] = {}
    for name, cols in groups.items():
        w = np.array([weights.get(cells.arms[j], 0.0) for j in cols])
        if abs(float(w.sum())) > 1e-9:
            return None
        out[name] = float(len(groups) * np.dot(w, means[cols]))
    return out


@dataclass(frozen=True)
class Row:
    contrast: str
    unit: str
    units: int
    estimate: float | None
    low: float | None
    high: float | None
    p: float | None
    note: str = ""
    #: the p's distribution was enumerated (True) or drawn (False); None: no p
    exact: bool | None = None
    #: the Monte Carlo standard error of ``p`` (0 when exact)
    mc_se: float | None = None
    #: multisets or sign patterns enumerated, or random draws
    resamples: int | None = None


def _bootstrap(
    name: str,
    unit: str,
    values: np.ndarray,
    weights: np.ndarray,
    labels: list[str],
    draws: tuple[int, int],
) -> Row:
    n = len(set(labels))
    if n < 2:
        return Row(name, unit, n, None, None, None, None, f"{n} {unit}: cannot resample")
    res = resampled_contrast(values, weights, units=labels, draws=draws[0], seed=draws[1])
    note = f"too few units ({n} < {FEW_CLUSTERS}): under-covers" if n < FEW_CLUSTERS else ""
    return Row(
        name,
        unit,
        n,
        res.estimate,
        res.low,
        res.high,
        res.pvalue,
        note,
        exact=res.exact,
        mc_se=res.mc_se,
        resamples=res.resamples,
    )


def resampling_draws(registration: Registration) -> int:
    """Random draws of a contrast whose distribution is not enumerated: the registered
    draws, raised so that the MC standard error of a Holm p over the registered contrasts
    is below :data:`~prereg.stats.enumeration.MC_SE_TARGET` at the largest registered
    alpha (:func:`~prereg.stats.enumeration.draws_for_mc_se`)."""
    contrasts = registration.contrasts
    if not contrasts:
        return 0
    alpha = max(c.alpha for c in contrasts)
    need = draws_for_mc_se(alpha, len(contrasts), MC_SE_TARGET)
    return max(need, *(c.draws for c in contrasts))


def contrast_rows(
    registration: Registration, records: Sequence[Episode]
) -> tuple[list[Row], list[Row]]:
    """(bootstrap rows by unit, exact sign-flip rows over intents) of every contrast, over
    the episodes the registered infrastructure policy counts (:func:`episodes`)."""
    config = {a.id: configuration_of(registration, a.id) for a in registration.arms}
    seed = registration.design.seed  # the registered contrasts' seed: the family rows agree
    draws = resampling_draws(registration)
    boot: list[Row] = []
    flips: list[Row] = []
    for contrast in registration.contrasts:
        weights = registration.contrast_weights(contrast.id)
        arms = list(weights)
        cells = _cells(records, arms)
        w = np.array([weights[a] for a in arms])
        if not cells.tasks:
            boot.append(Row(contrast.id, "family", 0, None, None, None, None, "no task"))
            continue
        boot.append(_bootstrap(contrast.id, "family", cells.values, w, cells.family, (draws, seed)))
        boot.append(_bootstrap(contrast.id, "intent", cells.values, w, cells.intent, (draws, seed)))
        by_config = per_configuration(cells, weights, config)
        if by_config is None:
            n = len({config[a] for a in arms})
            boot.append(
                Row(contrast.id, "configuration", n, None, None, None, None, "not separable")
            )
        else:
            d = np.array([[v, 0.0] for v in by_config.values()]).reshape(-1, 2)
            labels = list(by_config)
            boot.append(
                _bootstrap(
                    contrast.id, "configuration", d, np.array([1.0, -1.0]), labels, (draws, seed)
                )
            )
        flip = stats.contrast_sign_flip(
            cells.values,
            w,
            "two-sided",
            units=cells.intent,
            draws=max(DEFAULT_DRAWS, draws),
            seed=seed,
        )
        n = len(set(cells.intent))
        se = 0.0 if flip.exact else mc_standard_error(flip.pvalue, flip.n_resamples)
        flips.append(
            Row(
                contrast.id,
                "intent",
                n,
                flip.estimate,
                None,
                None,
                flip.pvalue,
                exact=flip.exact,
                mc_se=se,
                resamples=flip.n_resamples,
            )
        )
    return boot, flips


def _holm(rows: Sequence[Row]) -> list[tuple[float, float] | None]:
    """(Holm-adjusted p, its MC standard error) of each row, within the rows of its unit
    (None: not computed)."""
    out: list[tuple[float, float] | None] = [None] * len(rows)
    for unit in UNITS:
        index = [i for i, r in enumerate(rows) if r.unit == unit and r.p is not None]
        if index:
            ps = [float(rows[i].p or 0.0) for i in index]
            adjusted = stats.holm(ps).adjusted
            errors = holm_mc_se(ps, [rows[i].mc_se or 0.0 for i in index])
            for i, a, e in zip(index, adjusted, errors, strict=True):
                out[i] = (float(a), e)
    return out


def _pp(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}"


def _p(x: float | None) -> str:
    if x is None:
        return "-"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def _interval(row: Row) -> str:
    """A percentile interval as printed, or why there is none (issue 39, rule 4): below
    FEW_CLUSTERS units the bootstrap's level is not established, and an interval that
    would print without width (every resample gives the same contrast: the units'
    contrasts are equal) would claim a certainty the data do not give."""
    if row.low is None or row.high is None:
        return row.note
    if row.units < FEW_CLUSTERS:
        return f"too few {row.unit}s ({row.units} < {FEW_CLUSTERS}): no interval"
    if _pp(row.low) == _pp(row.high):
        return "no interval: every resample gives the same contrast (no spread)"
    return f"[{_pp(row.low)}, {_pp(row.high)}]"


def _se(x: float | None, exact: bool | None) -> str:
    """An MC standard error as shown: "0 (exact)" for an enumerated p."""
    if x is None:
        return "-"
    if exact:
        return "0 (exact)"
    return f"{x:.4f}"


def _contrast_tables(
    registration: Registration, records: Sequence[Episode], by_unit: tuple[list[Row], list[Row]]
) -> list[StudyTable]:
    boot, flips = by_unit
    if not boot:
        return []
    holm = _holm(boot)
    ordered = sorted(zip(boot, holm, strict=True), key=lambda rh: UNITS.index(rh[0].unit))
    # a Holm p is exact when every p of its unit's set is
    set_exact = {u: all(r.exact for r in boot if r.unit == u and r.p is not None) for u in UNITS}
    rows = [
        [
            r.contrast,
            f"{r.unit} ({r.units})",
            _pp(r.estimate),
            _interval(r),
            _p(r.p),
            _p(None if h is None else h[0]),
            _se(r.mc_se, r.exact),
            _se(None if h is None else h[1], set_exact[r.unit]),
        ]
        for r, h in ordered
    ]
    few = sorted(
        {f"{r.unit} ({r.units})" for r in boot if r.p is not None and r.units < FEW_CLUSTERS}
    )
    flip_holm = (
        [float(a) for a in stats.holm([float(r.p or 0.0) for r in flips]).adjusted] if flips else []
    )
    flip_se = holm_mc_se([float(r.p or 0.0) for r in flips], [r.mc_se or 0.0 for r in flips])
    every_flip_exact = all(r.exact for r in flips)
    flip_rows = [
        [
            r.contrast,
            str(r.units),
            _pp(r.estimate),
            _p(r.p),
            _p(h),
            _se(r.mc_se, r.exact),
            _se(e, every_flip_exact),
        ]
        for r, h, e in zip(flips, flip_holm, flip_se, strict=True)
    ]
    drawn = sorted({r.resamples or 0 for r in boot if r.exact is False})
    note = (
        "Estimates and intervals in percentage points. A family is the task's family (its "
        "tool cluster may hold several); a "
        f"configuration is {configuration_words(registration)}, menu mode and completion "
        "cap (its contrast uses its own arms' weights). Up to 11 units the bootstrap "
        "distribution is "
        "enumerated exactly (every multiset of the units with its multinomial "
        "probability): its p and interval do not depend on a seed, its MC SE is 0, and "
        "its p may be 0."
    )
    if drawn:
        note += (
            f" Rows with more units draw {', '.join(f'{d:,}' for d in drawn)} resamples "
            f"(seed {registration.design.seed}): p >= 1 / (draws + 1), MC SE = "
            "sqrt(p (1 - p) / draws), and the draws keep the MC SE of a Holm p near alpha "
            f"below {MC_SE_TARGET}."
        )
    if few:
        note += (
            f" Fewer than {FEW_CLUSTERS} units ({', '.join(few)}): the percentile bootstrap "
            "(the seed's method, kept to reproduce its figures) under-covers with few units "
            "(0.905 at 10 clusters, 0.933 at 20 for a nominal 0.95: bench/stats_calibration.py "
            f"7c), so below {FEW_CLUSTERS} no interval is printed; read its p values as a "
            "demonstration."
        )
    flip_note = (
        "With U intents the smallest two-sided p is 2 / 2^U (seed: 12 intents, p = .0098). "
        "Exact: all 2^U sign patterns (MC SE 0) up to 40 intents with a non-zero contrast; "
        "beyond, random sign patterns with their MC SE."
    )
    return [
        StudyTable(
            title="Contrasts by resampling unit (seed 4.2; 95% percentile cluster bootstrap, "
            "each unit's set Holm-corrected)",
            columns=[
                "contrast",
                "unit (n)",
                "estimate",
                "95% interval",
                "p",
                "Holm p",
                "MC SE",
                "Holm MC SE",
            ],
            rows=rows,
            note=note,
        ),
        StudyTable(
            title="Exact sign-flip test over intents (two-sided, Holm-corrected)",
            columns=[
                "contrast",
                "intents",
                "estimate",
                "p (exact)" if every_flip_exact else "p",
                "Holm p",
                "MC SE",
                "Holm MC SE",
            ],
            rows=flip_rows,
            note=flip_note,
        ),
    ]


def stress_pairs(registration: Registration) -> list[tuple[str, str]]:
    """(arm at the baseline cell, arm one pressure from it) within each configuration; the
    baseline cell is the first arm's (menu, workflow, encoding)."""
    arms = [a for a in registration.arms if a.toolbottleneck is not None]
    if not arms:
        return []
    base = arms[0].toolbottleneck
    assert base is not None

    def levels(arm_id: str) -> tuple[object, ...]:
        c = next(a for a in arms if a.id == arm_id).toolbottleneck
        assert c is not None
        return (c.menu, c.workflow, c.encoding, c.catalog, c.handoffs)

    target = (base.menu, base.workflow, base.encoding, base.catalog, base.handoffs)
    config = {a.id: configuration_of(registration, a.id) for a in arms}
    at_base = {config[a.id]: a.id for a in reversed(arms) if levels(a.id) == target}
    pairs = []
    for a in arms:
        apart = sum(x != y for x, y in zip(levels(a.id), target, strict=True))
        partner = at_base.get(config[a.id])
        if partner is not None and apart == 1 and a.toolbottleneck and not a.toolbottleneck.catalog:
            pairs.append((partner, a.id))
    return pairs


@dataclass(frozen=True)
class StudyRow:
    """A run record with its arm's cell, as the decoder reads an episode."""

    arm: str
    cell: Mapping[str, object]
    menu_mode: str
    profile: str
    completion_cap: int
    task_id: str
    repeat: int
    intent: str
    success: bool
    first_unmet_obligation: str | None
    terminal_flag: str | None
    calls: int
    turns: int = 0
    tokens_input: int | None = None
    verdicts: Mapping[str, bool | None] | None = None


def study_rows(
    registration: Registration,
    records: Sequence[Episode],
    run_records: Sequence[RunRecord] = (),
) -> list[StudyRow]:
    """The scored episodes with their arms' cells (a unit counted as a failure fails,
    with the failure record ``infrastructure``); an episode's ok run record in
    ``run_records`` gives its turns, prompt tokens and nine verdicts (the decoder's)."""
    cells = {a.id: a.toolbottleneck for a in registration.arms if a.toolbottleneck is not None}
    ok = {(x.arm, x.task_id, x.repeat): x for x in run_records if x.status == "ok"}
    out = []
    for r in records:
        cell = cells.get(r.arm)
        if cell is None:
            continue
        cap = registration.config_of(r.arm).budgets.completion_cap
        run = None if r.counted_failure else ok.get(r.unit)
        out.append(
            StudyRow(
                r.arm,
                cell.levels(),
                cell.menu_mode,
                host_of(registration, r.arm),
                cap,
                r.task_id,
                r.repeat,
                r.intent,
                bool(r.success),
                r.first_unmet_obligation,
                r.terminal_flag,
                r.calls,
                r.calls if run is None else run.turns,
                None if run is None else run.tokens.input,
                None if run is None else run.obligations,
            )
        )
    return out


def _decoder(
    registration: Registration, records: Sequence[Episode], run_records: Sequence[RunRecord]
) -> tuple[list[StudyTable], list[StudyFigure]]:
    """The decoder's tables, and its five paired gains as Figure 11's numbers (an interval
    the table withholds is withheld there, with its reason)."""
    first = registration.arms[0]
    if first.toolbottleneck is None or first.toolbottleneck.catalog is not None:
        return [], []
    rows = study_rows(registration, records, run_records)
    result = decode_pressure(packets(rows, first.id), seed=registration.design.seed)
    if result is None:
        return [], []
    tables = [
        StudyTable(title=title, columns=header, rows=body, note=note)
        for title, header, body, note in decoder_tables(result)
    ]
    gains = [
        StudyPoint(
            label=f"{c.a} - {c.b}",
            value=c.gain,
            low=c.interval.low,
            high=c.interval.high,
            reason=c.interval.reason,
        )
        for c in result.comparisons
    ]
    if not gains:
        return tables, []
    return tables, [StudyFigure(name="tb_decoder_gains", points=gains, level=result.level)]


def _repair_rows(records: Sequence[Episode]) -> list[RepairRow]:
    return [
        RepairRow(
            r.arm,
            r.task_id,
            family_of_task(r.task_id),
            bool(r.success),
            r.tokens,
            None if r.latency_ms is None else r.latency_ms / 1000.0,
            r.cost_usd,
        )
        for r in records
    ]


def cap_sweep_table(registration: Registration, records: Sequence[Episode]) -> list[StudyTable]:
    """The completion-cap sweep (seed appendix E.1; reading 33): at each registered cap,
    the menu contrast (largest minus smallest menu, paired on task and repeat) at the first
    arm's workflow, encoding, host and menu mode, with the large menu's truncation rate
    and the interaction (largest cap minus smallest); nothing unless two caps have both
    menu ends."""
    first = registration.arms[0]
    base = first.toolbottleneck
    if base is None:
        return []
    home = (host_of(registration, first.id), base.menu_mode, base.workflow, base.encoding)
    arms: dict[tuple[int, int], str] = {}
    for arm in registration.arms:
        cell = arm.toolbottleneck
        if cell is None or cell.menu is None or cell.catalog is not None or cell.handoffs:
            continue
        if (host_of(registration, arm.id), cell.menu_mode, cell.workflow, cell.encoding) != home:
            continue
        cap = registration.config_of(arm.id).budgets.completion_cap
        if cap is not None:
            arms.setdefault((cap, cell.menu), arm.id)
    menus = sorted({v for _, v in arms})
    rows: list[tuple[int, str, str, float | None, float | None]] = []
    for cap in sorted({c for c, _ in arms}):
        small, large = arms.get((cap, menus[0])), arms.get((cap, menus[-1]))
        if small is None or large is None or small == large:
            continue
        effect = truncation_stratum(records, small, large).effect
        cut = truncation([r for r in records if r.arm == large]).rate
        rows.append((cap, small, large, effect, cut))
    if len(rows) < 2:
        return []
    body = [
        [
            str(cap),
            f"{large} - {small}",
            "-" if effect is None else f"{100 * effect:+.1f} pp",
            "-" if cut is None else f"{100 * cut:.1f}%",
        ]
        for cap, small, large, effect, cut in rows
    ]
    low, high = rows[0][3], rows[-1][3]
    note = None
    if low is not None and high is not None:
        note = f"Interaction (largest cap minus smallest): {100 * (high - low):+.1f} pp."
    return [
        StudyTable(
            title="Completion-cap sweep: the menu contrast at each cap (paired on task and repeat)",
            columns=["cap", "contrast", "menu effect", "large-menu truncation"],
            rows=body,
            note=note,
        )
    ]


def sweep_arms(registration: Registration, *, with_cap: bool = False) -> dict[str, SweepArm]:
    """The capacity arms as the completion-cap sweep reads them: the configuration
    without its cap (what plays the arm and its menu mode), the cap and the cell;
    ``with_cap``: the configuration is the whole of :func:`configuration_of`."""
    out: dict[str, SweepArm] = {}
    for arm in registration.arms:
        cell = arm.toolbottleneck
        if cell is None or cell.menu is None or cell.catalog is not None or cell.handoffs:
            continue
        cap = registration.config_of(arm.id).budgets.completion_cap
        if cap is None:
            continue
        out[arm.id] = SweepArm(
            configuration_of(registration, arm.id)
            if with_cap
            else f"{host_of(registration, arm.id)} / {cell.menu_mode}",
            cap,
            cell.menu,
            cell.workflow,
            cell.encoding,
        )
    return out


def _lanes(
    registration: Registration, scored: Sequence[Episode], records: Sequence[RunRecord]
) -> list[StudyTable]:
    """Routed- versus fixed-menu lanes and the repairs' sentinel gains
    (:mod:`prereg.reports.toolbottleneck.lanes`)."""
    arms = {
        arm: LaneArm(
            host_of(registration, arm),
            a.cap,
            (a.menu, a.workflow, a.encoding),
            a.menu,
            next(x for x in registration.arms if x.id == arm).toolbottleneck.menu_mode,  # type: ignore[union-attr]
        )
        for arm, a in sweep_arms(registration).items()
    }
    seed = registration.design.seed
    lanes = routed_versus_fixed(
        scored,
        arms,
        family_of_task,
        {e.unit: e.tokens for e in scored},
        {(r.arm, r.task_id, r.repeat): r.turns for r in records if r.status == "ok"},
        seed=seed,
    )
    repairs = [
        (x.id, x.pressure, x.repaired.stressed, x.control.stressed)
        for x in registration.repairs or []
    ]
    gains = sentinel_gains(scored, repairs, family_of_task, seed=seed)
    return lane_tables(lanes, gains)


def _frontier(
    registration: Registration, scored: Sequence[Episode]
) -> tuple[list[StudyTable], list[StudyFigure]]:
    """The workflow frontier by handoffs (:mod:`prereg.reports.toolbottleneck.frontier`)."""
    arms: dict[str, FrontierArm] = {}
    for arm in registration.arms:
        cell = arm.toolbottleneck
        if cell is None or cell.menu is None or cell.catalog is not None or cell.holdout_arm:
            continue  # the holdout arms are the structural holdout's (:func:`_holdout`)
        arms[arm.id] = FrontierArm(
            configuration_of(registration, arm.id),
            cell.menu,
            cell.workflow,
            cell.encoding,
            cell.handoffs or 0,
        )
    tokens = {e.unit: e.tokens for e in scored}
    levels = frontier_levels(scored, arms, family_of_task, tokens)
    contrasts = frontier_contrasts(scored, arms, family_of_task, seed=registration.design.seed)
    figures = frontier_figure(levels) + frontier_episodes_figure(scored, arms, tokens)
    return frontier_tables(levels, contrasts), figures


def largest_menu_arms(registration: Registration) -> dict[str, str]:
    """The capacity arms at the study's largest menu, with their configurations (seed
    Table 8 reads the first responses to the 128-schema requests)."""
    arms = sweep_arms(registration, with_cap=True)
    if not arms:
        return {}
    top = max(a.menu for a in arms.values())
    return {arm: a.configuration for arm, a in arms.items() if a.menu == top}


def _cap_sweeps(
    registration: Registration, records: Sequence[Episode], excluded: Sequence[Episode] = ()
) -> tuple[list[StudyTable], list[StudyFigure]]:
    """The completion-cap sweep in full and the crossover
    (:mod:`prereg.reports.toolbottleneck.capsweep`), with Figure 2b's numbers."""
    arms = sweep_arms(registration)
    config = {a.id: configuration_of(registration, a.id) for a in registration.arms}
    effect = {
        e.configuration: e.effect
        for e in menu_effects(registration, records, config)
        if e.effect is not None
    }
    released = {
        (a.configuration, a.cap): effect[config[arm]]
        for arm, a in arms.items()
        if config[arm] in effect
    }
    sweeps = cap_sweeps(
        records,
        arms,
        family_of_task,
        seed=registration.design.seed,
        released=released,
        excluded=excluded,
    )
    return sweep_tables(sweeps), sweep_figure(sweeps)


def _configuration_tables(
    registration: Registration, records: Sequence[Episode]
) -> tuple[list[StudyTable], list[StudyFigure]]:
    """Per-configuration effects with the organisation-equal reweighting and the V effect
    against truncation (:mod:`prereg.reports.toolbottleneck.configurations`)."""
    config, by_contrast = _by_configuration(registration, records)
    return (
        configuration_tables(registration, records, config, by_contrast),
        configuration_figure(registration, records, config, by_contrast),
    )


def _by_configuration(
    registration: Registration, records: Sequence[Episode]
) -> tuple[dict[str, str], dict[str, dict[str, float] | None]]:
    """Each arm's configuration, and each registered contrast's per-configuration values
    (None: not separable), as Table 4 and Figure 7 read them."""
    config = {a.id: configuration_of(registration, a.id) for a in registration.arms}
    by_contrast: dict[str, dict[str, float] | None] = {}
    for contrast in registration.contrasts:
        weights = registration.contrast_weights(contrast.id)
        cells = _cells(records, list(weights))
        by_contrast[contrast.id] = (
            per_configuration(cells, weights, config) if cells.tasks else None
        )
    return config, by_contrast


def _holdout(
    registration: Registration, scored: Sequence[Episode], records: Sequence[RunRecord]
) -> tuple[list[StudyTable], list[StudyFigure]]:
    """The structural holdout (:mod:`prereg.reports.toolbottleneck.holdout`): Table 10,
    L, Gamma, Sigma, Delta and Figure 10 over the arms naming ``controller`` or
    ``delivery``; nothing without them. A cell's call level is the read-only frontier's
    certified minimum, 2 + 2 x handoffs (the low layout is one record, reading 4); the
    calls the controller issued are the ``tool_call`` trace events marked so."""
    cells = {
        a.id: a.toolbottleneck
        for a in registration.arms
        if a.toolbottleneck is not None and a.toolbottleneck.holdout_arm
    }
    if not cells:
        return [], []
    last = {(r.arm, r.task_id, r.repeat): r for r in records}
    rows = []
    for e in scored:
        cell = cells.get(e.arm)
        record = last.get(e.unit)
        if cell is None or record is None:
            continue
        by_controller = sum(
            1 for t in record.trace if t.kind == "tool_call" and t.text == CONTROLLER_ISSUED
        )
        rows.append(
            HoldoutRow(
                arm=e.arm,
                task_id=e.task_id,
                family=family_of_task(e.task_id),
                success=bool(e.success),
                orchestration="controller" if cell.controller is not None else "model",
                delivery=cell.delivery or "native",
                level=2 + 2 * cell.handoffs,
                encoding=cell.encoding,
                calls=e.calls,
                controller_calls=by_controller,
                model_calls=e.calls - by_controller,
                requests=record.turns,
                tokens=e.tokens,
                over_budget=e.terminal_flag == "episode_budget"
                or any(
                    t.kind == "stop" and "episode_budget" in (t.text or "") for t in record.trace
                ),
            )
        )
    result = analyse_holdout(rows, seed=registration.design.seed)
    tables = [
        StudyTable(title=title, columns=columns, rows=body, note=note)
        for title, columns, body, note in holdout_tables(result)
    ]
    figure = holdout_figure(result)
    return tables, [] if figure is None else [figure]


def study_figures(
    registration: Registration,
    scored: Sequence[Episode],
    run_records: Sequence[RunRecord],
    boot: Sequence[Row],
) -> list[StudyFigure]:
    """The numbers the study's figures draw (:mod:`prereg.reports.render.study_figures`),
    each the same as a table's: the contrasts with their family-cluster intervals (Figure
    2a; an interval the table withholds is withheld here, with its reason), each
    configuration's V effect against its largest-menu truncation (Figures 6 and 7), and
    Discovery availability by retriever (Figure 3c)."""
    out: list[StudyFigure] = []
    points = []
    for r in boot:
        if r.unit != "family" or r.estimate is None:
            continue
        shown = _interval(r)
        drawn = shown.startswith("[")
        points.append(
            StudyPoint(
                label=r.contrast,
                value=r.estimate,
                low=r.low if drawn else None,
                high=r.high if drawn else None,
                reason=None if drawn else shown,
            )
        )
    if points:
        out.append(StudyFigure(name="tb_contrasts", points=points, level=0.95))
    config = {a.id: configuration_of(registration, a.id) for a in registration.arms}
    effects = [
        StudyPoint(label=e.configuration, value=e.effect, x=e.truncation)
        for e in menu_effects(registration, scored, config)
        if e.effect is not None and e.truncation is not None
    ]
    if effects:
        out.append(StudyFigure(name="tb_v_truncation", points=effects))
    several = (
        len({a.configuration for a in availability_rows(registration, scored, run_records, config)})
        > 1
    )
    shares = [
        StudyPoint(
            label=f"{a.retriever}, R={a.catalog}" + (f" ({a.configuration})" if several else ""),
            value=a.available / a.measured,
            reason="no interval: availability is fixed by the task's variant",
        )
        for a in availability_rows(registration, scored, run_records, config)
        if a.measured
    ]
    if shares:
        out.append(StudyFigure(name="tb_availability", points=shares))
    return out


def arm_contracts(registration: Registration) -> dict[str, str]:
    """Each arm's harness contract in words (the census's label,
    :func:`~prereg.reports.toolbottleneck.census.contract_label`), from its registered
    budgets: a limit rule reads "= certified minimum + k" / "= call limit + k", an absolute
    limit its number, and whether the turn limit can fire (reading F3: at a turn slack of
    0 or below; with an absolute turn limit against a per-task call limit, it depends on
    the task). The census's ``turn_limit`` column keeps its name here (the label says
    whether it can fire)."""
    labels: dict[str, str] = {}
    for arm in registration.arms:
        b = registration.config_of(arm.id).budgets
        if b.turn_limit_over_calls is not None:
            fires: bool | None = turn_limit_fires(Contract(turn_slack=b.turn_limit_over_calls))
        elif b.call_limit is not None and b.turn_limit is not None:
            fires = b.turn_limit <= b.call_limit
        else:  # an absolute turn limit against a per-task call limit
            fires = None
        call = (
            f"= certified minimum + {b.call_limit_over_certified}"
            if b.call_limit_over_certified is not None
            else str(b.call_limit)
        )
        turn = (
            f"= call limit + {b.turn_limit_over_calls}"
            if b.turn_limit_over_calls is not None
            else str(b.turn_limit)
        )
        labels[arm.id] = contract_label(b.completion_cap, b.episode_tokens, call, turn, fires)
    return labels


def decision_figure(results: Sequence[RepairResult]) -> list[StudyFigure]:
    """Figure 4b (seed 4.3, "Against every configuration switch"): each repair's repaired
    lane minus every switch at the stressed cell, the success difference with the
    decision matrix's 95% family-cluster interval (the rows of "Decision matrix at the
    stressed cell", in its order); an interval the matrix withholds is withheld here with
    its reason (an open marker). The x-of-N counts stay in their table."""
    points = [
        StudyPoint(
            label=f"{r.repair} vs {v.switch} (incumbent {v.incumbent})",
            value=v.success.value,
            low=v.success.low,
            high=v.success.high,
            reason=None if v.success.low is not None else (v.success.reason or "no interval"),
        )
        for r in results
        for verdict in r.verdicts
        for v in r.versus
        if v.incumbent == verdict.incumbent
    ]
    return [StudyFigure(name="tb_decision", points=points, level=0.95)] if points else []


#: Why the census figure's shares carry no interval (reading C6).
CENSUS_NO_INTERVAL = "no interval: a census of the failures observed, not an estimate"


def census_figure(rows: Sequence[CensusRow], infrastructure: str | None) -> list[StudyFigure]:
    """Figure 3a (seed 5.3): how the failed episodes end, pooled over every arm: each
    terminal flag's share of the failures, the numbers of the census table's "(all)" row
    (and, under count_as_failure, the class ``infrastructure``). Reading C6: the seed
    reports these shares as a census of what happened, without intervals, so the figure
    draws them without one and says why; with no failure it is withheld (no points)."""
    pooled = pooled_census(rows)
    if not pooled.failures:
        return [StudyFigure(name="tb_census", points=[], withheld="no failed episode to classify")]
    classes = [*FLAGS, INFRASTRUCTURE] if infrastructure == "count_as_failure" else list(FLAGS)
    points = [
        StudyPoint(
            label=f"{f} ({pooled.counted if f == INFRASTRUCTURE else pooled.flags[f]} of "
            f"{pooled.failures})",
            value=float(pooled.share(f) or 0.0),
            reason=CENSUS_NO_INTERVAL,
        )
        for f in classes
    ]
    return [StudyFigure(name="tb_census", points=points)]


def _say_how_infrastructure_counted(
    counted: Episodes, tables: list[StudyTable]
) -> list[StudyTable]:
    """Under count_as_failure, or when any infra_error record was made: the table of
    infrastructure failures first, and under every other table the sentence saying how
    they were counted (:meth:`Episodes.note`)."""
    if counted.policy.infrastructure != "count_as_failure" and not counted.infra_records:
        return tables
    note = counted.note()
    return [counted.table()] + [
        t.model_copy(update={"note": f"{t.note} {note}" if t.note else note}) for t in tables
    ]


def study_report(
    registration: Registration,
    records: Sequence[RunRecord],
    experiment: Experiment | None = None,
) -> StudyReport | None:
    """The section, or None for a registration that is not a study's. Every table counts
    the episodes the registered infrastructure policy counts (:func:`episodes`).
    ``experiment``: the registration's frozen experiment, whose first family Figure 5
    shows compiled (:mod:`prereg.reports.toolbottleneck.example`; None: no Figure 5)."""
    cells = [a.toolbottleneck for a in registration.arms if a.toolbottleneck is not None]
    if not cells:
        return None
    counted = episodes(registration, records)  # the registered infrastructure policy, once
    scored = list(counted.scored)
    by_unit = contrast_rows(registration, scored)
    tables = _contrast_tables(registration, scored, by_unit)
    config_tables, config_points = _configuration_tables(registration, scored)
    tables += config_tables
    tables += cap_sweep_table(registration, scored)
    swept, sweep_points = _cap_sweeps(registration, scored, counted.excluded)
    tables += swept
    tables += decomposition_tables(
        decompose(
            scored,
            sweep_arms(registration, with_cap=True),
            family_of_task,
            seed=registration.design.seed,
        )
    )
    tables += first_response_tables(records, largest_menu_arms(registration))
    tables += _lanes(registration, scored, records)
    frontier_tables_, frontier_points = _frontier(registration, scored)
    tables += frontier_tables_
    tables += discovery_tables(
        registration,
        scored,
        records,
        {a.id: configuration_of(registration, a.id) for a in registration.arms},
    )
    census = census_tables(
        counted.census_rows,
        stress_pairs(registration),
        infrastructure=counted.policy.infrastructure,
        contracts=arm_contracts(registration),
    )
    for title, header, body in census:
        tables.append(
            StudyTable(title=title, columns=header, rows=[[str(c) for c in b] for b in body])
        )
    # repairs (issue 42): Holm across them; one failing (fewer than two families) says why
    results, failed = analyse_repairs(
        _repair_rows(scored), registration.repairs or [], seed=registration.design.seed
    )
    for title, header, body, note in repair_tables(results, failed):
        tables.append(StudyTable(title=title, columns=header, rows=body, note=note))
    repair_points = repair_figure(results) + decision_figure(results)
    decoded, gains = _decoder(registration, scored, records)
    tables += decoded
    held, holdout_points = _holdout(registration, scored, records)
    tables += held
    tables = _say_how_infrastructure_counted(counted, tables)
    example = None if experiment is None else family_example(registration, experiment)
    if example is not None:
        tables += example_table(example)  # the compiled variants, not episodes: no note
    figures = (
        study_figures(registration, scored, records, by_unit[0])
        + gains
        + sweep_points
        + frontier_points
        + repair_points
        + holdout_points
        + census_figure(counted.census_rows, counted.policy.infrastructure)
        + config_points
    )
    if on_model_host(registration):
        hosts = ", ".join(sorted({host_of(registration, a.id) for a in registration.arms}))
        return StudyReport(
            label=MODEL_LABEL.format(hosts=hosts), tables=tables, figures=figures, example=example
        )
    if on_local_host(registration):
        hosts = ", ".join(sorted({host_of(registration, a.id) for a in registration.arms}))
        return StudyReport(
            label=LOCAL_LABEL.format(profiles=hosts),
            tables=tables,
            figures=figures,
            example=example,
        )
    profiles = ", ".join(sorted({c.policy for c in cells}))
    return StudyReport(
        label=LABEL.format(profiles=profiles), tables=tables, figures=figures, example=example
    )
