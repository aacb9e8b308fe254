"""The seed's further per-arm analyses (issue 41, item 4), from the same runs as the score:

- :func:`need_test`: need type per intent and the exact intent-level permutation test of
  seed 6.2 (tool-need intents against answerable ones, one-sided, exact over every way of
  choosing the tool-need intents among the coded ones);
- :func:`negatives_by_intent`: calls on each intent's negative runs (seed 6.5, Figure 3's
  FIR column), with the arm-level block's Jeffreys interval deflated at the arm's rho_S;
- :func:`rho_block`: Figure 8: per measured stage, the pooled rho, rho with intent means
  removed, and each intent cell's rho with a percentile bootstrap over its prompts;
- :func:`choice_factors`: the two-level choice of seed eq. (4), P(focal) = P(external) x
  P(focal | external), from the recorded terminal classes of positive runs;
- :func:`session_counts`: an arm's runs per (prompt, replicate session), the rows the
  calibrated interval's session part reads (``design.sessions``, issue 41 item 1);
- :func:`replicate_runs`: Figure 7: each replicate session's Selected rate on the prompts
  every session ran in full, with the within-run 90% range, and the between-run test of
  seed 7.3 (:func:`prereg.stats.replicate_variance`);
- :data:`REPLICATES_ONE_RUN`: why replicate run rates (Figure 7) are not shown with one
  session.

Readings where the seed is silent are in docs/invokerank.md ("Further analyses").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np

from prereg import stats
from prereg.reports.invokerank.counts import Prompts
from prereg.reports.invokerank.intervals import LEVELS, _iv, _withheld
from prereg.reports.invokerank.negatives import EXTERNAL, negative_rate
from prereg.reports.model import (
    ChoiceFactor,
    IntentNegatives,
    IntentScore,
    NeedTypeTest,
    Provenance,
    ReplicateRuns,
    ReplicateSession,
    RhoBlock,
    RhoEstimate,
    TerminalRow,
)
from prereg.reports.observations import Obs, outcome_place
from prereg.stats.invokerank import replicate_variance
from prereg.stats.invokerank.rho import grouped_icc
from prereg.stats.invokerank.rho_intervals import (
    MIN_RHO_PROMPTS,
    RHO_RESAMPLES,
    nested_icc,
    rho_bootstrap,
)

#: Need types: the native judge's vocabulary (3.3; ``runners.judging.ask.NEEDS``, which
#: this package may not import; a test holds the two equal), and the needs never counted
#: as self-served (``NEVER_SELF_SERVED``): the tool-need intents of 6.2.
NEEDS: tuple[str, ...] = ("knowledge", "private_state", "action", "fresh_data")
NEVER_SELF_SERVED = frozenset({"private_state", "action", "fresh_data"})
#: The seed's words for them ("answerable" is "knowledge").
NEED_ALIASES = {"answerable": "knowledge", "private state": "private_state"}
NEED_NOTE = (
    "Exact one-sided permutation test at the intent level (seed 6.2): the mean score of the "
    "intents coded as needing a tool (private_state, action, fresh_data) minus the mean of "
    "those coded knowledge (answerable), p = share of the C(n, k) ways of choosing the "
    "tool-need intents whose difference is at least the observed one. Few intents: the "
    "smallest p possible is 1 / C(n, k). The coding is an input, not a finding; need type "
    "is confounded with prompt wording and the tools' own descriptions (6.2)."
)
NO_CODING = (
    "not run: no need type per intent is given (the coding of seed Table 2); the analysis "
    "takes it as need_types (intent -> knowledge, private_state, action or fresh_data)"
)
RHO_NOTE = (
    "Figure 8 (7.4). Cell: one intent at one stage, the one-way ANOVA rho of the sequential "
    "counts with prompts as groups (the rho the published path uses when the cell can "
    "estimate it), with a 90% percentile bootstrap over the cell's prompts "
    f"({RHO_RESAMPLES} resamples; no interval below "
    f"{MIN_RHO_PROMPTS} prompts with data, when more than 10% of resamples have no rho, or "
    "when every resample gives the same rho). Pooled: every prompt of every intent one "
    "group (includes between-intent differences). Within intent: intent means removed "
    "(prompts nested in intents, nested one-way ANOVA)."
)
REPLICATES_ONE_RUN = (
    "Replicate run rates (Figure 7) not shown: each arm of this registration is one run "
    "(one session; its repeats are not sessions), so there is no run-to-run spread to "
    "compare with the within-run range. Register design.sessions (replicate sessions in "
    "one registration), or compare replicate registrations of one design by "
    "'prereg plan --from-runs A B C' (stats.replicate_variance)."
)
#: The within-run range's level (the seed's Figure 7: "Within-run 90% range").
REPLICATE_LEVEL = 0.90
REPLICATE_NOTE = (
    "Figure 7 (7.3): each replicate session's share of positive runs reaching Selected, on "
    "the prompts every session ran in full (its K repeats), with the within-run 90% range, "
    "rate +- z_0.95 x sqrt(sum_i p_i (1 - p_i) / (N^2 K)) from the prompts' rates pooled "
    "over sessions (clipped to 0..1; a range, not an interval for the session's rate). "
    "Between-run SD by the method of moments, max(0, (s^2 - W) / (1 - 1/N)), and the "
    "within-prompt permutation test of the run rates' variance "
    "(p = (1 + #{s^2* >= s^2}) / (1 + B))."
)


def session_counts(
    runs: Sequence[Obs], tasks: Sequence[str], stage: str, per_session: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(runs, reached, prompt index, session) per (prompt, session) cell with runs, for the
    calibrated interval's session part: ``runs`` an arm's positive runs, ``tasks`` the
    prompts in the order of the section's counts, ``stage`` the last scored stage,
    ``per_session`` the repeats of one session (a run's session is its repeat number //
    ``per_session``, :meth:`prereg.registry.schema.Design.session_of`)."""
    place = outcome_place(stage)
    index = {t: i for i, t in enumerate(tasks)}
    cells: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for o in runs:
        cell = cells[(index[o.task_id], o.repeat // per_session)]
        cell[0] += 1
        cell[1] += bool(o.outcomes[place])
    keys = sorted(cells)
    return (
        [cells[k][0] for k in keys],
        [cells[k][1] for k in keys],
        [k[0] for k in keys],
        [k[1] for k in keys],
    )


def replicate_runs(
    runs: Sequence[Obs], sessions: int, per_session: int, seed: int | None
) -> ReplicateRuns:
    """Figure 7 for one arm's positive runs (module docstring). Only prompts with all
    ``per_session`` runs in every session count (the seed's "rate on common prompts"), so
    each session's rate is over the same prompts; below two such prompts, or with a
    session without any, nothing is computed and ``reason`` says why."""
    place = outcome_place("selected")
    cube: dict[str, dict[int, list[tuple[int, bool]]]] = defaultdict(lambda: defaultdict(list))
    for o in runs:
        cube[o.task_id][o.repeat // per_session].append((o.repeat, bool(o.outcomes[place])))
    common = sorted(
        t
        for t, by_session in cube.items()
        if all(len(by_session.get(s, [])) == per_session for s in range(sessions))
    )
    base = ReplicateRuns(
        sessions=sessions,
        repeats_per_session=per_session,
        prompts=len(common),
        stage="selected",
        note=REPLICATE_NOTE,
    )
    if sessions < 2:
        return base.model_copy(update={"reason": "one session: no run-to-run spread"})
    if len(common) < 2:
        return base.model_copy(
            update={"reason": f"too few prompts run in full in every session ({len(common)} < 2)"}
        )
    y = np.array(
        [[[v for _, v in sorted(cube[t][s])] for s in range(sessions)] for t in common],
        dtype=np.float64,
    )
    rv = replicate_variance(y, seed=seed)
    z = NormalDist().inv_cdf(0.5 + REPLICATE_LEVEL / 2)
    method = f"rate +- z x within-run SD ({REPLICATE_LEVEL:.0%} range, clipped to 0..1)"
    rows = []
    for s, rate in enumerate(rv.run_rates):
        r = float(rate)
        lo, hi = max(0.0, r - z * rv.within_sd), min(1.0, r + z * rv.within_sd)
        rows.append(
            ReplicateSession(
                session=s,
                runs=len(common) * per_session,
                rate=r,
                within_range=_iv(
                    lo,
                    hi,
                    REPLICATE_LEVEL,
                    method,
                    zero_width="zero width: every common prompt reached Selected in all of "
                    "its runs or in none, so the within-run range is a point",
                    estimate=r,
                ),
            )
        )
    ratio = rv.variance_ratio
    return base.model_copy(
        update={
            "rows": rows,
            "observed_sd": rv.observed_sd,
            "within_sd": rv.within_sd,
            "variance_ratio": None if math.isnan(ratio) else ratio,
            "sigma_run": rv.sigma_run,
            "pvalue": rv.pvalue,
            "permutations": rv.permutations,
        }
    )


def _need(value: str) -> str:
    v = NEED_ALIASES.get(value.strip().lower(), value.strip().lower())
    if v not in NEEDS:
        raise ValueError(f"need type {value!r} is not one of {', '.join(NEEDS)} (or answerable)")
    return v


def need_test(intents: Sequence[IntentScore], need_types: Mapping[str, str] | None) -> NeedTypeTest:
    """The intent-level test over the arm's scored intents (module docstring)."""
    if not need_types:
        return NeedTypeTest(reason=NO_CODING, note=NEED_NOTE)
    coding = {i.intent: _need(need_types[i.intent]) for i in intents if i.intent in need_types}
    uncoded = [i.intent for i in intents if i.intent not in need_types]
    scores = {i.intent: i.q for i in intents}
    tool = [k for k, v in coding.items() if v in NEVER_SELF_SERVED]
    knowledge = [k for k, v in coding.items() if v not in NEVER_SELF_SERVED]
    base = NeedTypeTest(
        coding=coding, tool_need=tool, answerable=knowledge, uncoded=uncoded, note=NEED_NOTE
    )
    if not tool or not knowledge:
        return base.model_copy(
            update={
                "reason": "not run: the test needs at least one tool-need and one knowledge "
                f"intent among the coded ones ({len(tool)} and {len(knowledge)})"
            }
        )
    # scores equal to 12 decimals are ties: intents with the same counts get the same
    # score but for the last bits of floating-point arithmetic, which would otherwise
    # order them (the test is exact in the ordering of its statistics)
    x = [round(scores[k], 12) for k in tool]
    y = [round(scores[k], 12) for k in knowledge]
    res = stats.exact_permutation_test(x, y, "greater")
    relabelings = math.comb(len(x) + len(y), len(x))
    note = NEED_NOTE
    if not res.exact:  # above 10^6 relabelings: seeded random ones, p = (1 + hits) / (1 + B)
        note += (
            f" Here C(n, k) = {relabelings} exceeds the exact limit: p is from "
            f"{res.n_resamples} seeded random relabelings ({res.method})."
        )
    return base.model_copy(
        update={
            "note": note,
            "mean_tool_need": float(np.mean(x)),
            "mean_answerable": float(np.mean(y)),
            "difference": float(res.statistic),
            "pvalue": float(res.pvalue),
            "relabelings": relabelings,
            "smallest_p": 1.0 / relabelings if res.exact else 1.0 / (1 + res.n_resamples),
            "provenance": Provenance(
                function="prereg.stats.exact_permutation_test",
                parameters={"alternative": "greater", "statistic": "difference of means of q"},
                registration_field=None,
            ),
        }
    )


def negatives_by_intent(
    observations: Sequence[Obs], arm: str, rho_s: float
) -> list[IntentNegatives]:
    """Per intent of the arm's negative runs, both definitions (as :func:`_negatives`)."""
    intents = sorted(
        {o.intent for o in observations if o.arm == arm and o.polarity == "negative" and o.ok}
    )
    out = []
    for intent in intents:
        runs = [o for o in observations if o.intent == intent]
        focal = negative_rate(
            runs, arm, frozenset({"focal"}), f"False-Invoke Rate, intent {intent}", rho_s
        )
        external = negative_rate(runs, arm, EXTERNAL, f"any external call, intent {intent}", rho_s)
        if focal is not None or external is not None:
            out.append(IntentNegatives(intent=intent, false_invoke=focal, any_external=external))
    return out


def _stage_counts(prompts: Prompts, k: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.array([r[k] for r in prompts.reached], dtype=np.int64)
    n = np.array(
        [prompts.runs[p] if k == 0 else prompts.reached[p][k - 1] for p in range(len(y))],
        dtype=np.int64,
    )
    return y, n


def _rho(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def rho_block(prompts: Prompts, stages: Sequence[str], seed: int | None) -> RhoBlock:
    """Figure 8 for one arm (module docstring)."""
    rows: list[RhoEstimate] = []
    cells = np.asarray(prompts.cell)
    for k, stage in enumerate(stages):
        y, n = _stage_counts(prompts, k)
        groups = int(np.count_nonzero(n))
        pooled = grouped_icc(y, n) if groups else math.nan
        within = nested_icc(y, n, cells) if groups else math.nan
        for kind, value in (("pooled", pooled), ("within_intent", within)):
            rows.append(
                RhoEstimate(
                    stage=stage,
                    intent="all intents",
                    kind=kind,
                    rho=_rho(value),
                    groups=groups,
                    note=None if not math.isnan(value) else "undefined",
                )
            )
        for c, intent in enumerate(prompts.intents):
            mask = cells == c
            b = rho_bootstrap(y[mask], n[mask], level=LEVELS[0], seed=seed)
            method = b.method
            if b.reason is not None:
                iv = _withheld(LEVELS[0], method, b.reason)
            else:
                iv = _iv(b.low, b.high, LEVELS[0], method, estimate=b.rho)
            rows.append(
                RhoEstimate(
                    stage=stage,
                    intent=intent,
                    kind="cell",
                    rho=_rho(b.rho),
                    groups=b.groups,
                    interval=iv,
                    note=iv.reason,
                )
            )
    return RhoBlock(
        rows=rows,
        note=RHO_NOTE,
        provenance=Provenance(
            function="prereg.stats.invokerank.rho_intervals.rho_bootstrap",
            parameters={"resamples": RHO_RESAMPLES, "level": LEVELS[0], "seed": seed},
            registration_field=None,
        ),
    )


def choice_factors(terminal: Sequence[TerminalRow]) -> list[ChoiceFactor]:
    """Eq. (4) per positive terminal row (all intents first, then each intent)."""
    out = []
    for t in terminal:
        if t.polarity != "positive" or t.runs == 0:
            continue
        c = t.counts
        external = sum(c.get(k, 0) for k in EXTERNAL)
        focal = c.get("focal", 0)
        no_search = c.get("answered_without_search", 0)
        declined = c.get("searched_then_declined", 0)
        out.append(
            ChoiceFactor(
                intent=t.intent,
                runs=t.runs,
                external=external,
                focal=focal,
                competitor=c.get("competitor", 0),
                answered_without_search=no_search,
                searched_then_declined=declined,
                other_no_tool=t.runs - external - no_search - declined,
                p_external=external / t.runs,
                p_focal_given_external=focal / external if external else None,
                p_focal=focal / t.runs,
            )
        )
    return out
