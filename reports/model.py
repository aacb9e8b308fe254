"""The report as a document: the pydantic model behind ``report.json`` and ``--json``.

Every number a report states sits next to its provenance: the runs it used
(count, unit digest, filter), the function of :mod:`prereg.stats` that computed
it with its parameters, and the registration field that asked for it (null for
anything computed without being registered, which only ever appears in the
``exploratory`` block and never feeds the verdict).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from prereg.reports.toolbottleneck.model import StudyReport

SCHEMA = "prereg.report/1"

Verdict = Literal["supported", "not_supported", "inconclusive", "not_runnable", "incomplete"]
Reading = Literal["supported", "not_supported", "inconclusive"]
Mode = Literal["confirmatory", "exploratory"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunSet(Model):
    """Which runs a number used: their count, a digest over their unit keys, the filter."""

    count: int
    tasks: int
    arms: list[str]
    units_digest: str = Field(description="sha256 over the sorted 'arm/task/rREPEAT' keys")
    filter: str


class Provenance(Model):
    function: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    registration_field: str | None
    runs: RunSet | None = None


class Interval(Model):
    """A printed interval. Null bounds print "not computed"; ``reason`` says why when the
    data cannot support one (issue 39, docs/statistics.md "The rule for every printed
    interval"): every renderer prints the reason where the bounds would be."""

    low: float | None
    high: float | None
    level: float
    method: str
    reason: str | None = Field(
        None,
        description="why the bounds are null (e.g. 'too few discordant tasks ...') or "
        "why the interval has no width; null: a plain interval",
    )

    @classmethod
    def resampled(
        cls,
        low: float | None,
        high: float | None,
        level: float,
        method: str,
        *,
        unit: str = "task",
        units: int | None = None,
        minimum: int = 0,
    ) -> Interval:
        """The interval of a resampling method over ``units`` ``unit``s, withheld (null
        bounds, ``reason``) where the data cannot support it (issue 39, rule 4): below the
        method's ``minimum`` of units (its calibration: docs/statistics.md), and when it
        has no width, which happens when every unit shows the same difference so every
        resampled value equals the estimate (a point [d, d] would claim a certainty the
        data do not give). NaN bounds are null ("not computed")."""
        lo = low if low is not None and math.isfinite(low) else None
        hi = high if high is not None and math.isfinite(high) else None
        reason = None
        if units is not None and units < minimum:
            reason = (
                f"too few {unit}s ({units} < {minimum}): no interval (the cluster bootstrap "
                f"keeps its level from {minimum} {unit}s)"
            )
        elif lo is not None and hi is not None and hi - lo <= 0.0:
            why = (
                f"too few discordant {unit}s (every {unit} shows no difference)"
                if lo == 0.0
                else f"degenerate: every {unit} shows the same difference ({lo:+.3f})"
            )
            reason = f"no interval: {why}, so resampling {unit}s has no spread"
        if reason is not None:
            return cls(low=None, high=None, level=level, method=method, reason=reason)
        return cls(low=lo, high=hi, level=level, method=method)


class ArmConfiguration(Model):
    """The arm's registered configuration (resolved: registration defaults, arm overrides)."""

    driver: str
    model: str | None
    params: dict[str, Any]
    tool_search: bool
    allow_sampling: bool
    budgets: dict[str, int | None]
    system_prompt_sha256: str | None
    #: how the host reached the tools (docs/providers.md: client tools or the connector)
    tool_access: str = "client"
    digest: str = Field(description="sha256 of the configuration; equal digests, equal hosts")


class ArmReport(Model):
    id: str
    surface: str
    control: str | None = None
    configuration: ArmConfiguration | None = None
    outcome: str
    planned_runs: int
    runs: int
    runs_ok: int
    infra_errors: int
    counted_as_failure: int = Field(
        0,
        description="units counted as failures (harness.infrastructure: count_as_failure): "
        "their registered attempts all failed on infrastructure; in measured, not in runs_ok",
    )
    measured: int = Field(description="ok runs whose outcome was measured (the trials)")
    successes: int
    rate: float | None
    interval: Interval
    icc: float | None
    icc_source: str
    design_effect: float
    effective_trials: float
    models_requested: list[str]
    models_returned: list[str]
    spend_usd: float | None
    provenance: Provenance


class Discordant(Model):
    b: int = Field(description="tasks where only the control (first compared arm) succeeded")
    c: int = Field(description="tasks where only the treatment (second compared arm) succeeded")
    n: int


class TestReport(Model):
    role: Literal["primary", "secondary", "descriptive"]
    registration_field: str
    test: str
    compare: list[str] = Field(description="[control, treatment]")
    favours: str | None
    sides: str
    alpha: float
    aggregate: str
    unit: str = Field("task", description="what the test pairs and resamples by")
    units: int | None = Field(None, description="how many such units the test used")
    contrast: str | None = Field(None, description="the registered contrast tested, if any")
    outcome: str
    estimate: float | None
    estimate_label: str
    interval: Interval | None
    statistic: float | None = None
    pvalue: float | None = None
    evalue: float | None = None
    n: int
    discordant: Discordant | None = None
    min_discordant: int | None = None
    margin: float | None = None
    decision: Literal["reject", "no_reject", "undefined"]
    reading: Reading | None = Field(
        None,
        description="the registered rule applied to this test; only the primary's "
        "(or the stopping rule's) reading can become the verdict",
    )
    reason: str
    method: str
    note: str = ""
    provenance: Provenance


class ContrastReport(Model):
    """A registered contrast: its weights, its test as registered, and the family's reading."""

    id: str
    description: str | None = None
    effect: list[str] | None = Field(None, description="the factors of an effect contrast")
    weights: dict[str, float] = Field(description="arm (cell) id -> weight, zeros left out")
    test: str
    sides: str
    alpha: float
    unit: str = Field(description="what was resampled: task, cluster or intent")
    outcome: str
    tasks: int = Field(description="tasks with every weighted cell measured")
    units: int
    estimate: float | None
    interval: Interval | None
    pvalue: float | None
    adjusted: float | None = Field(None, description="adjusted by the registered family rule")
    reject: bool | None = Field(None, description="rejected by the registered family rule")
    method: str
    note: str = ""
    provenance: Provenance


class PairwiseChange(Model):
    """The paired change between two registered arms (descriptive; see reports/pairwise.py)."""

    control: str
    treatment: str
    same_configuration: bool = Field(description="the two arms run on one configuration")
    tasks: int
    control_rate: float | None
    treatment_rate: float | None
    estimate: float | None = Field(description="treatment - control, mean outcome")
    interval: Interval | None


class FamilyMember(Model):
    hypothesis: str
    n: int
    estimate: float | None
    pvalue: float | None = None
    evalue: float | None = None
    adjusted: float | None
    reject: bool


class MultiplicityReport(Model):
    method: str
    q: float
    family: str
    members: list[FamilyMember]
    n_rejected: int
    note: str
    provenance: Provenance


class IntentRow(Model):
    intent: str
    tasks: int
    control_rate: float | None
    treatment_rate: float | None
    difference: float | None
    interval: Interval | None
    interval_note: str | None = Field(
        None, description="why the interval is null (e.g. 'too few tasks (3 < 5)')"
    )
    discordant: Discordant | None
    provenance: Provenance


class StoppingReport(Model):
    rule: str
    threshold: float
    min_prompts: int
    prior: list[float]
    order: str
    n_stream: int
    crossed: bool
    stop_at: int | None
    evalue: float
    max_evalue: float
    pvalue: float
    discordant: Discordant
    path: list[float]
    reading: Reading
    reason: str
    provenance: Provenance


class CalibrationRowReport(Model):
    """One row of a stored ``prereg calibrate`` table (see :class:`CalibrationReport`)."""

    label: str
    test: str
    quantity: str
    scenario: str
    nominal: float | None
    estimate: float | None
    mc_se: float | None
    verdict: str
    sims: int
    note: str = ""


class CalibrationReport(Model):
    """The registration's own calibration (``prereg calibrate ID``), shown as it was run:
    simulated, never an input to the verdict; carried only when its digest is the
    registration's."""

    digest: str
    seed: int | None
    sims: int
    bootstrap_draws: int
    computed_at: str
    prereg_version: str
    file: str
    design: dict[str, Any]
    rows: list[CalibrationRowReport]
    skipped: list[dict[str, str]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class ControlReport(Model):
    """One registered control arm judged by its fixed rule (InvokeRank, Figure 6).

    Controls check the instrument; their verdicts never change the registration's
    verdict. Rules, fixed before any data (:mod:`prereg.reports.invokerank.controls`).
    """

    arm: str
    control: Literal["placebo", "blinded", "decoy", "clone_swap"]
    reference: str | None
    check: str
    statistic: str
    outcome: str
    estimate: float | None
    summary: str
    interval: Interval | None
    rule: str
    verdict: Literal["pass", "fail", "not_measured"]
    reason: str
    details: dict[str, Any] = Field(default_factory=dict)
    surfaces: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict,
        description="the servers the control arm and its reference "
        "offer, with the digest of each surface as offered (after the transformation)",
    )
    provenance: Provenance


class SessionState(Model):
    """One replicate session's units (``design.sessions``; ``prereg run --session K``)."""

    session: int = Field(description="1-based, as prereg run --session takes it")
    planned: int
    completed: int = Field(description="planned units with an ok record")
    complete: bool


class Completeness(Model):
    complete: bool
    planned: int
    completed: int
    missing: int
    missing_units: list[str]
    infra_errors_open: int
    stopping_cut: int | None = Field(
        None, description="prompts required by a crossed stopping rule"
    )
    basis: str
    infrastructure: Literal["retry", "count_as_failure"] = Field(
        "retry", description="the registered infrastructure-failure policy"
    )
    attempts: int | None = Field(
        None, description="infra_error records after which a unit counts as a failure"
    )
    counted_as_failure: int = Field(
        0, description="units counted as failures under count_as_failure (completed, failed)"
    )
    denominators: str = Field(
        "", description="how infrastructure failures enter the denominators, in words"
    )
    sessions: list[SessionState] = Field(
        default_factory=list,
        description="each replicate session's units (design.sessions >= 2; empty without): "
        "a session run on another day (prereg run --session K) shows here until complete",
    )


class RunsSummary(Model):
    records: int
    used: int
    infra_errors: int
    evidence_class: str | None
    drivers: list[str]
    models_requested: list[str]
    models_returned: list[str]
    spend_usd: float | None
    spend_measured_runs: int
    tokens: dict[str, int] | None
    units: list[str] = Field(description="every run unit used, 'arm/task/rREPEAT'")


class VerdictReport(Model):
    value: Verdict
    decided_by: str
    reason: str
    rule_reading: Reading | None = Field(
        None,
        description="what the registered rule reads on the analysed runs (for an "
        "incomplete set this reading is exploratory only)",
    )


class ReportProvenance(Model):
    prereg_version: str
    analysed_at: str
    ledger_head: dict[str, Any]
    registered_at: str
    ledger_seq: int
    frozen_path: str
    superseded_by: str | None
    command: str
    run_chains: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="the run chains this analysis read, by registration digest: record "
        "count, head hash, and the ledger seq of the anchor that pins that head (null when "
        "the registry could not be written); publishing them pins the evidence",
    )


class Report(Model):
    schema_: str = Field(SCHEMA, alias="schema")
    registration: str
    title: str
    digest: str
    kind: Literal["confirmatory", "exploratory"]
    mode: Mode
    exploratory_reasons: list[str]
    complete: bool
    verdict: Verdict
    verdict_detail: VerdictReport
    hypothesis: str
    falsification: str
    experiment: str
    split: str
    outcome: str
    host: dict[str, Any]
    primary: TestReport | None
    secondary: list[TestReport]
    multiplicity: MultiplicityReport | None
    contrasts: list[ContrastReport] = Field(default_factory=list)
    pairwise: list[PairwiseChange] = Field(
        default_factory=list, description="every two plain arms, with three or more (descriptive)"
    )
    per_intent: list[IntentRow]
    per_intent_registered: bool
    stopping: StoppingReport | None
    arms: list[ArmReport]
    difference: TestReport | None = Field(
        None,
        description="the paired prompt-and-run bootstrap of the primary comparison "
        "(descriptive companion of the per-arm rates)",
    )
    feasibility: dict[str, Any] | None
    completeness: Completeness
    runs: RunsSummary
    surfaces: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    exploratory: dict[str, Any]
    registration_document: dict[str, Any]
    provenance: ReportProvenance
    controls: list[ControlReport] = Field(
        default_factory=list,
        description="the registered control arms, each with its rule "
        "and verdict; they check the instrument and never change the verdict",
    )
    figures: list[str] = Field(default_factory=list)
    invokerank: InvokeRankReport | None = Field(
        None, description="the InvokeRank score per arm (descriptive; never the verdict)"
    )
    judged: JudgedReport | None = Field(
        None, description="the registered judges' verdicts (issue 18; never the verdict)"
    )
    calibration: CalibrationReport | None = Field(
        None,
        description="the stored `prereg calibrate` table of this registration's digest "
        "(simulated error rates and coverage; never the verdict)",
    )
    calibration_note: str | None = Field(
        None, description="why a stored calibration is not shown (another digest, unreadable)"
    )
    toolbottleneck: StudyReport | None = Field(
        None,
        description="a ToolBottleneckBench study's tables (issue 19): contrasts by resampling "
        "unit, failure census, repairs against switches; simulated policy, labelled",
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --- The InvokeRank score (InvokeRank method v1.0, 4.1-4.2; issue 17) -------------------
# Scores, stage rates, Lever and rates are proportions in [0, 1] (InvokeRank = 100 x q);
# the renderers show points.


class LabelledInterval(Interval):
    """An interval of the InvokeRank section, with the reason beside it when it has no
    bounds (withheld by the small-sample rule) or no width (issue 39): every renderer
    shows the reason where the interval would be, or beside a zero-width one. The
    section's fields are typed ``LabelledInterval | Interval``: the section always builds
    this class; a plain Interval validates too (a hand-built fragment). Its ``reason``
    is :class:`Interval`'s."""


class StagePrior(Model):
    """One stage's shared Beta prior across the arm's intents (4.1, steps 4 and 5)."""

    stage: str
    method: str
    mu: float
    kappa: float
    converged: bool
    cells_with_trials: int
    capped_cells: list[str] = Field(description="intents where capPrior bound")
    pooled_rho: float | None = Field(description="ANOVA rho over all the arm's prompts")


class StageEstimate(Model):
    """One funnel stage of one intent: sequential counts, deflation and the posterior."""

    stage: str
    successes: int = Field(description="runs reaching the stage among those reaching its parent")
    trials: int
    rho: float
    rho_source: Literal["cell", "pooled", "default"]
    design_effect: float
    effective_successes: float
    effective_trials: float
    prior_alpha: float
    prior_beta: float
    capped: bool
    posterior_mean: float
    posterior: LabelledInterval | Interval = Field(
        description="equal-tailed interval of the stage posterior"
    )
    displayed: LabelledInterval | Interval | None = Field(
        description="Jeffreys interval on the deflated counts (4.1, step 8); null: no trials"
    )


class IntentScore(Model):
    intent: str
    prompts: int
    runs: int
    weight: float
    q: float = Field(
        description="the score: E[Q] exactly, the product of the stage posterior means "
        "(the seed's figure); the score is 100 q"
    )
    intervals: list[LabelledInterval | Interval] = Field(
        description="the score's intervals at 90% and 95% by the registered interval method "
        "(InvokeRankReport.interval_method; published by default)"
    )
    stages: list[StageEstimate]
    loss_shares: dict[str, float | None] = Field(description="from posterior means (4.2)")
    lever: dict[str, float | None] = Field(
        description="Q (r_median / r - 1)^+ per stage against the intent median (4.2)"
    )
    pass_k: float | None = Field(description="mean over prompts of the unbiased pass^k")
    pass_k_prompts: int
    provenance: Provenance
    calibrated: list[LabelledInterval | Interval] = Field(
        default_factory=list,
        description="the calibrated alternative (InvokeRank 7.5): Jeffreys on the "
        "effective counts of a prompt-and-session bootstrap of the plug-in score, made to "
        "contain the score, at 90% and 95%",
    )
    published: list[LabelledInterval | Interval] = Field(
        default_factory=list,
        description="the published path's equal-tailed intervals of the Q draws (4.1), "
        "at 90% and 95%, whichever method is registered",
    )
    q_mc: float | None = Field(
        None,
        description="the Monte Carlo mean of the published path's Q draws (a simulation "
        "of q, shown nowhere as the score)",
    )
    plug_in: float | None = Field(
        None,
        description="the plug-in score (runs reaching the last stage over positive runs) "
        "that the calibrated interval resamples; not the score",
    )


class NegativeRate(Model):
    """Calls on negative runs with a Jeffreys interval deflated at the pooled rho_S (4.2)."""

    definition: str
    calls: int
    runs: int
    prompts: int
    rate: float
    interval: LabelledInterval | Interval
    rho: float
    rho_source: str
    design_effect: float
    provenance: Provenance


class RatingRow(Model):
    """One integration's Invoke Rating (4.2): R = 1000 + 400 beta / ln 10."""

    integration: str = Field(description="the offered server's key")
    role: str
    listed: int = Field(description="positive runs that listed it")
    chosen: int = Field(description="positive runs whose first external call went to it")
    beta: float | None = Field(description="null: never chosen (unbounded below) or not identified")
    se: float | None
    rating: float | None
    intervals: list[LabelledInterval | Interval] = Field(
        description="prompt-bootstrap percentile, R scale"
    )


class InvokeRating(Model):
    """A conditional logit over first choice with the outside option "no tool" (4.2)."""

    method: str
    reason: str = Field(description="what was fitted, or why nothing was")
    runs: int
    prompts: int
    no_tool: int = Field(description="runs whose first choice was no tool (the outside option)")
    dropped: int = Field(description="runs whose first call went to nothing listed")
    position: float | None = Field(description="gamma per listing position; null: not varied")
    position_se: float | None
    branded: float | None = Field(description="lambda; null: no run records a branded prompt")
    branded_se: float | None
    prior_sd: float | None
    resamples: int
    unidentified_resamples: int
    rows: list[RatingRow] = Field(default_factory=list)
    provenance: Provenance


class ShareRow(Model):
    intent: str = Field(description="an intent, or 'roll-up' over the contested intents")
    integration: str
    hits: int
    share: float | None
    intervals: list[LabelledInterval | Interval]


class ChoiceShares(Model):
    """Invoke Share, or Selection Share when any eligible integration lacks E or C (4.2)."""

    label: Literal["Invoke Share", "Selection Share"]
    reason: str
    eligible: str = Field(description="how the eligible set of each intent was formed")
    contested_intents: list[str]
    rows: list[ShareRow] = Field(default_factory=list)
    provenance: Provenance


class CompetitorLever(Model):
    """Lever at Surfaced x Selected against the intent's best competitor (4.2, Lever)."""

    intent: str
    best_competitor: str | None
    focal_rate: float = Field(description="posterior r_D r_S of the focal integration")
    competitor_rate: float | None = Field(description="its first-choice share of the runs")
    lever: float | None = Field(description="Q (r_best / r_focal - 1)^+")


class TerminalRow(Model):
    """Runs per recorded terminal class (Figure 4): positive runs, negatives apart."""

    intent: str = Field(description="an intent, or 'all intents'")
    polarity: Literal["positive", "negative"]
    runs: int
    counts: dict[str, int]


class ResolutionRate(Model):
    rate: float
    successes: int
    runs: int
    interval: LabelledInterval | Interval


class ResolutionSplitReport(Model):
    """The Agent Resolution Split over positive runs (3.3; the degenerate split, 6.3)."""

    runs: int
    counts: dict[str, int]
    shares: dict[str, float] = Field(description="over every positive run, unjudged kept")
    weighted_shares: dict[str, float] = Field(description="intent-weighted (roll-up weights)")
    unjudged: int
    degenerate: bool
    note: str
    host_self_serve: ResolutionRate | None
    no_tool_decline: ResolutionRate | None
    provenance: Provenance


class ServerStage(Model):
    """One funnel stage of one listed integration: runs reaching it among the runs that
    listed the integration (null: not measured)."""

    stage: str
    reached: int | None
    rate: float | None
    interval: LabelledInterval | Interval | None


class ServerFunnel(Model):
    """The funnel of one listed integration over an arm's positive runs (issue 17, item 5):
    surfaced, selected (first choice), invoked (its first call validates against the
    called tool's schema); executed and completed only for the focal integration
    (competitors and decoys are replayed, never executed)."""

    integration: str
    role: str
    listed: int
    stages: list[ServerStage]
    note: str
    provenance: Provenance


class NeedTypeTest(Model):
    """Need type per intent and the exact intent-level permutation test (seed 6.2): do the
    intents that need a tool (private state, action, fresh data) score higher than those a
    host can answer from knowledge? One-sided, exact over every way of choosing the
    tool-need intents among the coded ones."""

    coding: dict[str, str] = Field(
        default_factory=dict, description="intent -> need type, as given (scored intents only)"
    )
    tool_need: list[str] = Field(default_factory=list)
    answerable: list[str] = Field(default_factory=list)
    uncoded: list[str] = Field(default_factory=list, description="scored intents with no need type")
    mean_tool_need: float | None = None
    mean_answerable: float | None = None
    difference: float | None = Field(
        None, description="mean score of tool-need intents minus answerable ones (q scale)"
    )
    pvalue: float | None = Field(None, description="exact one-sided permutation p")
    relabelings: int | None = Field(None, description="C(coded intents, tool-need intents)")
    smallest_p: float | None = Field(None, description="1 / relabelings: the smallest p possible")
    reason: str | None = Field(None, description="why the test is not run")
    note: str = ""
    provenance: Provenance | None = None


class IntentNegatives(Model):
    """Calls on one intent's negative runs (seed 6.5, Figure 3's FIR column), the arm's two
    definitions, each with the arm-level Jeffreys interval deflated at the arm's rho_S."""

    intent: str
    false_invoke: NegativeRate | None
    any_external: NegativeRate | None


class RhoEstimate(Model):
    """One intra-prompt correlation of Figure 8: a cell's (an intent at a stage, sequential
    counts) with its prompt-bootstrap interval, or the arm's pooled or within-intent rho."""

    stage: str
    intent: str = Field(description="an intent, or 'all intents' for pooled and within-intent")
    kind: Literal["cell", "pooled", "within_intent"]
    rho: float | None = Field(description="null: undefined (no replication or no variation)")
    groups: int = Field(description="prompts with runs at the stage's parent")
    interval: LabelledInterval | Interval | None = Field(
        None, description="percentile bootstrap over the cell's prompts (cells only)"
    )
    note: str | None = None


class RhoBlock(Model):
    """Figure 8 for one arm: pooled, within-intent and per-intent rho per measured stage."""

    rows: list[RhoEstimate] = Field(default_factory=list)
    note: str = ""
    provenance: Provenance | None = None


class ChoiceFactor(Model):
    """The two-level choice of seed eq. (4), P(focal) = P(external) P(focal | external),
    for one intent or all intents, from the recorded terminal classes of positive runs."""

    intent: str
    runs: int
    external: int = Field(description="runs whose first external call went anywhere")
    focal: int
    competitor: int
    answered_without_search: int
    searched_then_declined: int
    other_no_tool: int = Field(description="unresolved (and other no-tool classes)")
    p_external: float | None
    p_focal_given_external: float | None
    p_focal: float | None


class ReplicateSession(Model):
    """One replicate session of an arm (Figure 7): its rate on the prompts every session
    ran, with the within-run 90% range (the rate +- z_0.95 x the within-run SD)."""

    session: int
    runs: int = Field(description="positive runs of the session on the common prompts")
    rate: float = Field(description="share of those runs reaching Selected")
    within_range: LabelledInterval | Interval


class ReplicateRuns(Model):
    """Figure 7 for one arm: replicate sessions' rates and the between-run test (7.3)."""

    sessions: int
    repeats_per_session: int
    prompts: int = Field(description="prompts every session ran in full (the common prompts)")
    stage: str = Field(description="the rate's stage (Selected)")
    rows: list[ReplicateSession] = Field(default_factory=list)
    observed_sd: float | None = None
    within_sd: float | None = None
    variance_ratio: float | None = None
    sigma_run: float | None = Field(
        None, description="method-of-moments between-run SD (0 when no excess)"
    )
    pvalue: float | None = Field(None, description="within-prompt permutation test (7.3)")
    permutations: int | None = None
    reason: str | None = Field(None, description="why the figure is not drawn")
    note: str = ""


class HostFunnel(Model):
    """Figure 2 of one host (seed 5.5, issue 41 item 1): its selection arms (replayed)
    beside its execution arms (the focal integration live), each arm's pooled funnel."""

    host: str = Field(description="the arms' host: driver and model")
    selection: list[str] = Field(default_factory=list, description="selection arms")
    execution: list[str] = Field(default_factory=list, description="execution arms")


class ArmInvokeRank(Model):
    arm: str
    surface: str
    stage: Literal["selection", "execution"] | None = Field(
        None, description="the arm's registered run stage (arms[].stage); null: none"
    )
    host: str | None = Field(None, description="the arm's host: driver and model")
    control: str | None = None
    evidence_class: str | None
    configuration_digest: str | None = None
    model: str | None = None
    level: Literal["full", "selection", "not_computed"]
    label: str = Field(description="InvokeRank, or Selection-level InvokeRank (IR_DS)")
    symbol: str = Field(description="IR or IR_DS")
    reason: str
    stages: list[str]
    q: float | None = Field(
        description="the roll-up sum_c w_c E[Q_c], each E[Q_c] exact (the product of the "
        "stage posterior means); the score is 100 q"
    )
    intervals: list[LabelledInterval | Interval] = Field(
        default_factory=list,
        description="the score's roll-up intervals by the registered interval method "
        "(published by default); the tie rule reads these",
    )
    interval_method: Literal["published", "calibrated"] = Field(
        "published", description="the registered invokerank.interval (published when absent)"
    )
    published: list[LabelledInterval | Interval] = Field(
        default_factory=list,
        description="the published path's roll-up intervals (4.1), whichever is registered",
    )
    weights: str = ""
    positive_runs: int = 0
    prompts: int = 0
    intents: list[IntentScore] = Field(default_factory=list)
    priors: list[StagePrior] = Field(default_factory=list)
    funnel: list[StageEstimate] = Field(
        default_factory=list,
        description="pooled over intents: reaching each stage among all positive runs "
        "(Figure 2), Jeffreys on counts deflated at the pooled rho of that indicator",
    )
    loss_shares_pooled: dict[str, float | None] = Field(
        default_factory=dict, description="log-loss shares from the pooled conditional rates"
    )
    false_invoke: NegativeRate | None = None
    any_external: NegativeRate | None = None
    pass_k: float | None = None
    tied_with: list[str] = Field(
        default_factory=list,
        description="arms of the same evidence class and level whose 90% roll-up "
        "intervals overlap: 'intervals overlap, reported as tied' (a display rule); an arm "
        "without a 90% roll-up interval is tied with none (ties_note says so)",
    )
    ties_note: str | None = Field(
        None, description="why no tie was decided for this arm (no 90% roll-up interval)"
    )
    provenance: Provenance | None = None
    calibrated: list[LabelledInterval | Interval] = Field(
        default_factory=list,
        description="the roll-up's calibrated alternative interval (prompt-and-session "
        "bootstrap of the plug-in score, made to contain the score; it covers near nominal "
        "where the published interval does not)",
    )
    q_mc: float | None = Field(
        None,
        description="the Monte Carlo mean of the published path's roll-up draws (a "
        "simulation of q, shown nowhere as the score)",
    )
    plug_in: float | None = Field(
        None, description="the plug-in roll-up that the calibrated interval resamples"
    )
    rating: InvokeRating | None = None
    shares: ChoiceShares | None = None
    lever_competitor: list[CompetitorLever] = Field(default_factory=list)
    server_funnel: list[ServerFunnel] = Field(
        default_factory=list,
        description="per listed integration (focal, competitors, decoys): surfaced, "
        "selected and invoked among the positive runs that listed it",
    )
    terminal: list[TerminalRow] = Field(default_factory=list)
    resolution: ResolutionSplitReport | None = None
    need_test: NeedTypeTest | None = Field(
        None, description="need type per intent and the exact intent-level test (6.2)"
    )
    false_invoke_by_intent: list[IntentNegatives] = Field(
        default_factory=list, description="calls on negative runs per intent (6.5)"
    )
    rho: RhoBlock | None = Field(None, description="Figure 8: rho per intent and stage (7.4)")
    choice_factors: list[ChoiceFactor] = Field(
        default_factory=list, description="the two-level choice of eq. (4) per intent"
    )
    replicate_runs: ReplicateRuns | None = Field(
        None,
        description="Figure 7: the arm's replicate sessions (design.sessions >= 2); null "
        "with one session",
    )


class JudgeInvokeRank(Model):
    """One completion judge's own InvokeRank (issue 41, item 3): every arm it decides, with
    Completed taken from this judge's verdicts where no oracle decided it."""

    judge: str
    rubric_version: str
    trust: str = Field(description="trusted, untrusted or not_assessed (no gold labels)")
    withheld: str | None = Field(
        None, description="why the scores are not shown (an untrusted judge)"
    )
    arms: list[ArmInvokeRank] = Field(default_factory=list)


class TelemetryToolShare(Model):
    """One tool of the S-vs-T comparison: its synthetic (S) and telemetry (T) calls."""

    tool: str
    s_calls: int
    s_share: float
    t_calls: int
    t_share: float


class SvsTComparison(Model):
    """One arm's runs (S) beside the telemetry of the host it stands for (T), never pooled
    (:mod:`prereg.reports.invokerank.telemetry`)."""

    arm: str
    integration: str
    host: str = Field(description="the telemetry's client host (invokerank.telemetry)")
    s_evidence_class: str | None
    s_calls: int = Field(description="S: first calls to the integration over the arm's runs")
    t_calls: int = Field(description="T: the host's calls to the integration (t_basis)")
    t_basis: str = Field(description="'first calls' or 'all calls' (T's marking)")
    tools: list[TelemetryToolShare]
    total_variation: float | None
    total_variation_withheld: str | None
    spearman: float | None
    spearman_withheld: str | None


class TelemetryLogHead(Model):
    """The telemetry log the comparison read: telemetry imported after the analysis
    changes this head, so a report says which telemetry it used."""

    path: str
    events: int = Field(description="import events in the log when the report read it")
    calls: int = Field(description="calls in those events (every integration and host)")
    seq: int = Field(description="the newest line's seq (0: no log)")
    hash: str = Field(description="the sha256 of the newest line's bytes (the chain's head)")


class InvokeRankTelemetry(Model):
    """The S-vs-T comparison (evidence class T, seed 7.9), for the arms
    ``invokerank.telemetry`` names: descriptive, never pooled with the runs."""

    note: str
    log: TelemetryLogHead
    comparisons: list[SvsTComparison] = Field(default_factory=list)
    absent: list[str] = Field(
        default_factory=list,
        description="one line per named arm whose integration and host have no telemetry",
    )


class InvokeRankReport(Model):
    note: str
    display_rule: str
    interval_method: Literal["published", "calibrated"] = Field(
        "published",
        description="the score's interval method (registration field invokerank.interval; "
        "published when absent); the other method's interval is shown beside it, labelled",
    )
    levels: list[float]
    draws: int
    seed: int | None
    pass_k: int
    arms: list[ArmInvokeRank]
    replicates: str | None = Field(
        None,
        description="replicate run rates with their within-run range (Figure 7): why they "
        "are not shown when the registration has one run (session) per arm",
    )
    completed_by: str | None = Field(
        None,
        description="which judge's verdicts fill Completed where no oracle decided it, per "
        "arm, and any judge withheld as untrusted (null: no completion judge)",
    )
    by_judge: list[JudgeInvokeRank] = Field(
        default_factory=list,
        description="with two or more completion judges: each judge's own InvokeRank "
        "(its Completed stage from its verdicts), under its name",
    )
    hosts: list[HostFunnel] = Field(
        default_factory=list,
        description="with run stages registered: Figure 2 per host, its selection and "
        "execution arms side by side (empty without stages)",
    )
    telemetry: InvokeRankTelemetry | None = Field(
        None,
        description="the S-vs-T comparison (telemetry, evidence class T, never pooled) for "
        "the arms invokerank.telemetry names, with the telemetry log's head it read "
        "(null: no arm names telemetry)",
    )


class JudgedRate(Model):
    """One judge's rate on one arm: verdicts met over verdicts that parsed."""

    arm: str
    judge: str
    outcome: str
    needed: int = Field(description="runs that need this judge's verdict")
    judged: int = Field(description="verdicts that parsed")
    unparseable: int
    unjudged: int = Field(description="runs with no verdict yet (unparseable ones included)")
    met: int
    rate: float | None
    label: str = Field(
        description="'uncalibrated judge' unless a gold set corrects it (never a finding)"
    )
    corrected: dict[str, Any] | None = Field(
        None, description="the prediction-powered rate with its interval, when gold exists"
    )
    oracle_agreement: dict[str, Any] | None = Field(
        None,
        description="the completion judge against the runs' own Completed where an oracle "
        "decided it: runs, agreements, Cohen's kappa with its interval (a check of the "
        "judge, not a gold set)",
    )
    withheld: str | None = Field(
        None,
        description="why the rate and the prediction-powered figures are withheld (the "
        "judge is untrusted: its kappa against gold is below the registered threshold)",
    )
    provenance: Provenance


class JudgeTrust(Model):
    """Whether a judge is trusted: Cohen's kappa against unanimous gold labels on the
    positive-prompt runs it decides, against its registered threshold (seed 5.5)."""

    status: Literal["trusted", "untrusted", "not_assessed"]
    threshold: float
    kappa: float | None = None
    kappa_low: float | None = None
    kappa_high: float | None = None
    runs: int = Field(0, description="gold runs (unanimous labels) with a parsed verdict")
    agree: int = 0
    reason: str


class PostHocJudge(Model):
    """A judge added after registration (a post-hoc rubric revision): exploratory, it fills
    no registered figure and never the verdict (:mod:`prereg.registry.addenda`)."""

    reason: str
    added_at: str
    ledger_seq: int
    rubric_path: str


class JudgeInfo(Model):
    judge: str
    outcome: str
    driver: str
    model: str
    rubric: str
    rubric_version: str
    rubric_digest: str
    judge_digest: str
    confound_declared: bool
    models_returned: list[str]
    arms: list[str] | None = Field(None, description="the arms it decides (null: every arm)")
    trust: JudgeTrust | None = None
    post_hoc: PostHocJudge | None = Field(
        None, description="set when the judge was added after registration (exploratory)"
    )


class JudgedReport(Model):
    note: str
    judges: list[JudgeInfo]
    rates: list[JudgedRate]


# ``Report.invokerank`` names InvokeRankReport, defined after Report: resolve it now.
Report.model_rebuild()
