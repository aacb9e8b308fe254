"""The InvokeRank score: the published empirical-Bayes funnel estimator (method v1.0, 4.1).

The package owns what method v1.0 computes from counts (pure numpy and scipy, no registry
types, no I/O): the published score and its parts, the calibrated interval shown beside it,
the Lever, the Invoke Rating, the Invoke and Selection Shares, the Agent Resolution Split
and the between-run variance of replicate runs. One idea per module:

- ``model``: the funnel's stages, the reporting levels, the score's interval methods
  (``SCORE_INTERVALS``), the validated per-prompt counts and the roll-up weights;
- ``rho``: the intra-prompt correlation (step 2: ANOVA from per-prompt counts; the cell's,
  then the pooled estimate, then the stage default);
- ``prior``: the shared beta-binomial prior of a stage and capPrior (steps 4 and 5);
- ``posterior``: one stage's fit (steps 2 to 6) and seeded draws from its posteriors;
- ``intervals``: equal-tailed intervals of draws and of a Beta, and the display rule
  "intervals overlap, reported as tied" (steps 7 and 10);
- ``score``: :func:`invokerank`, the published path over the stages, Q and the roll-up
  (steps 1 to 9);
- ``rates``: single rates with Jeffreys intervals on deflated counts (step 8), the
  False-Invoke Rate among them;
- ``lever``: the Lever against the intent median or the best competitor (4.2);
- ``logit``: the penalised conditional logit (likelihood, derivatives, trust-region fit);
- ``choices``: runs' first choices, the terms a rating fit carries, and its design;
- ``batch``: every bootstrap refit of the rating at once (batched damped Newton);
- ``rating``: the Invoke Rating and its bootstrap over prompts within intents (4.2);
- ``resample``: bootstrap resamples as multiplicities of prompts and units;
- ``shares``: the Invoke and Selection Shares (4.2);
- ``resolution``: the terminal classes and the Agent Resolution Split (3.3, 6.3);
- ``calibrated``: the calibrated interval, a bootstrap of the plug-in score (7.5);
- ``minimum``: the small-sample rule: the fewest prompts per intent (and sessions) for an
  interval to be shown;
- ``replicates``: the between-run variance of replicate runs and its permutation test (7.3);
- ``rho_intervals``: rho with intent means removed and the cell rho's prompt-bootstrap
  interval (7.4, Figure 8).

The modules import one another directly, never this package, which only re-exports the
names other code reads from ``prereg.stats.invokerank`` (``__all__``; the underscore names
are the helpers the tests reach).

May import: only the statistics below it in ``prereg.stats`` (:data:`MAY_IMPORT`: the
scipy proxies and distribution functions, the argument checks, the clustering, funnel and
interval helpers and the result types), never the layers above. Every public function
here refuses bad input with a ValueError naming the argument (NaN, infinity, empty input,
negative counts, mismatched lengths, non-positive draw counts, levels outside (0, 1);
issue 39), through the shared checks of ``prereg.stats._validate``.

The method, as the published path states it:

For one integration on one surface (one arm), the positive runs of every intent cell
``c`` are reduced to per-prompt counts: how many runs of prompt ``p`` reached each stage
of the nested funnel (Surfaced, Selected, Invoked, Executed, Completed). For each stage
``k`` the published path then does, exactly as section 4.1 states it:

1. sequential counts (y_ck, n_ck): runs reaching ``k`` among the runs reaching its parent;
2. the intra-prompt correlation rho_ck by the one-way ANOVA estimator for binary data,
   truncated to [0, 1], prompts as groups (:func:`prereg.stats.icc_binary`); if the cell
   cannot estimate it (fewer than two prompts with data, no replication, no variation)
   the estimate pooled over all the integration's prompts (every prompt of every intent
   one group, so between-intent differences are included, as in the seed's 7.4); failing
   that the stage default (rho_D = 0.6, rho_S = 0.8, rho_I = rho_E = rho_C = 0.6);
3. Kish's design effect DEFF = 1 + (Kbar - 1) rho over the prompts' run counts in the
   stage's denominator, and deflated counts (y / DEFF, n / DEFF);
4. a shared prior Beta(mu kappa, (1 - mu) kappa) across the cells, fitted to the deflated
   counts by beta-binomial marginal maximum likelihood (Nelder-Mead on logit mu and
   log kappa, started from the method of moments, kappa bounded to [1, 10 000]); the
   method of moments if the fit does not converge; Jeffreys Beta(1/2, 1/2) when fewer
   than two cells have trials;
5. the prior cap (capPrior): kappa is capped, cell by cell, at the deflated trials of the
   *other* cells; where the cap binds, mu becomes their pooled rate;
6. the conjugate posterior Beta(y + mu kappa, n - y + (1 - mu) kappa); a cell whose
   parent stage never fired has n = 0, so its posterior is the prior (no epsilon floor);
7. 4,000 seeded draws per stage and cell, multiplied into draws of Q, equal-tailed
   intervals (90% for monitoring, 95% for ship decisions);
8. (display) single-stage rates with Jeffreys intervals on the deflated counts;
9. the roll-up sum_c w_c Q_c with stated weights (equal by default), draws combined index
   by index (intents assumed independent);
10. the display rule: overlapping 90% intervals are "intervals overlap, reported as tied"
    (:func:`intervals_overlap`), which is not an equivalence test.

Readings where the seed is silent, chosen and stated here:

- Method of moments (start and fallback): mu is the unweighted mean of the cells'
  deflated proportions, and with s^2 their sample variance (ddof 1) and h the mean of
  1 / n_c, the beta-binomial variance Var(p_c) = mu (1 - mu) [1/n_c + (1 - 1/n_c) /
  (kappa + 1)] is solved for kappa: 1 / (kappa + 1) = (s^2 / (mu (1 - mu)) - h) / (1 - h),
  then clipped to [1, 10 000] (no excess variance: 10 000; more than binomial at every
  n, or h >= 1: 1).
- A boundary stage: when no cell has a success, or no cell a failure (Invoked equal to
  Selected in every run, or Surfaced on a host that loads every tool), the marginal
  likelihood has no interior maximum (logit mu runs to -inf or +inf), the fit cannot
  converge and the published rule applies literally: the method of moments, mu = 0 or
  1 and kappa at its bound. The posterior is then the point mass at 0 or 1 (no epsilon
  floor, as the seed states): the stage contributes no loss and no width, which is what
  the seed reports ("r_I = 1 empirically"). The displayed Jeffreys interval of the stage
  (step 8) still shows its uncertainty; a calibrated path should not inherit this.
- The cap does not apply to a Jeffreys prior (nothing was fitted to borrow from).
- The score is E[Q] exactly: under the independent stage posteriors, the product of the
  stage posterior means (:class:`InvokeRankResult`'s ``q_exact``; the roll-up
  sum_c w_c q_exact_c), the seed's figure. ``q`` and ``rollup`` are the Monte Carlo means
  of the draws, which only approximate it (27.6 against 27.3 on an arm of the bundled
  podcast controls draft); the report prints the exact value (issue 39).

References: InvokeRank method v1.0, 4.1 and 4.2; Kish (1965); Rao and Scott (1992);
Fleiss, Levin and Paik (2003); Ridout, Demetrio and Firth (1999); Robbins (1956);
Efron and Morris (1975); Kass and Steffey (1989); Jeffreys (1946); Brown, Cai and
DasGupta (2001).
"""

from __future__ import annotations

from prereg.stats.invokerank.batch import _Batch
from prereg.stats.invokerank.calibrated import (
    BootstrapScore,
    _expanded,
    _interaction,
    _uncross,
    bootstrap_score,
)
from prereg.stats.invokerank.choices import _choice_runs, _design, _terms
from prereg.stats.invokerank.intervals import beta_interval, equal_tailed, intervals_overlap
from prereg.stats.invokerank.lever import competitor_lever, funnel_lever
from prereg.stats.invokerank.logit import choice_loglik, fit_choice_logit
from prereg.stats.invokerank.minimum import (
    MIN_PROMPTS,
    MIN_SESSIONS,
    too_few_prompts,
    too_few_sessions,
)
from prereg.stats.invokerank.model import FUNNEL_STAGES, SCORE_INTERVALS, ScoreInterval
from prereg.stats.invokerank.prior import (
    betabinom_loglik,
    betabinom_moments,
    cap_prior,
    fit_beta_prior,
)
from prereg.stats.invokerank.rates import false_invoke_rate, prompt_rate
from prereg.stats.invokerank.rating import (
    RATING_RESAMPLES,
    InvokeRatingResult,
    _betas,
    invoke_rating,
)
from prereg.stats.invokerank.replicates import REPLICATE_PERMUTATIONS, replicate_variance
from prereg.stats.invokerank.resample import _run_weights
from prereg.stats.invokerank.resolution import (
    SPLIT_CLASSES,
    TERMINAL_CLASSES,
    resolution_split,
    terminal_counts,
)
from prereg.stats.invokerank.rho import RHO_DEFAULTS, grouped_icc
from prereg.stats.invokerank.score import invokerank
from prereg.stats.invokerank.shares import choice_shares

#: What modules here may import from the rest of the project (module prefixes); checked
#: by tests/test_architecture.py.
MAY_IMPORT: tuple[str, ...] = (
    "prereg.stats._dist",
    "prereg.stats._scipy",
    "prereg.stats._validate",
    "prereg.stats.clustering",
    "prereg.stats.funnel",
    "prereg.stats.intervals",
    "prereg.stats.results",
)

__all__ = [
    # the published path (4.1): prior, rho, intervals, the score (prereg.stats re-exports these)
    "FUNNEL_STAGES",
    "RHO_DEFAULTS",
    "beta_interval",
    "betabinom_loglik",
    "betabinom_moments",
    "cap_prior",
    "equal_tailed",
    "false_invoke_rate",
    "fit_beta_prior",
    "funnel_lever",
    "grouped_icc",
    "intervals_overlap",
    "invokerank",
    # the score's interval methods (registry.schema), the calibrated interval (reports, bench)
    "SCORE_INTERVALS",
    "ScoreInterval",
    "BootstrapScore",
    "bootstrap_score",
    # the small-sample rule of every interval the section prints (reports, bench)
    "MIN_PROMPTS",
    "MIN_SESSIONS",
    "too_few_prompts",
    "too_few_sessions",
    # the Invoke Rating, shares, Lever, split and single rates (reports.invokerank)
    "RATING_RESAMPLES",
    "InvokeRatingResult",
    "invoke_rating",
    "choice_loglik",
    "fit_choice_logit",
    "choice_shares",
    "competitor_lever",
    "SPLIT_CLASSES",
    "TERMINAL_CLASSES",
    "resolution_split",
    "terminal_counts",
    "prompt_rate",
    # replicate runs (reports.planning.from_runs)
    "REPLICATE_PERMUTATIONS",
    "replicate_variance",
    # helpers the tests reach through this package
    "_Batch",
    "_betas",
    "_choice_runs",
    "_design",
    "_expanded",
    "_interaction",
    "_run_weights",
    "_terms",
    "_uncross",
]
