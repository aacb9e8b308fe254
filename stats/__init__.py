"""prereg.stats: pure statistical functions over numpy arrays; no I/O, no project imports.

Tests and intervals return small frozen result objects (``prereg.stats.results``) in
the style of ``scipy.stats``; single-number quantities (design effect, ICC, pass^k,
loss shares, planning figures) are returned as plain floats, ints or arrays so they
can be used in arithmetic directly. Everything random is seeded with
``numpy.random.default_rng(seed)``.
"""

from prereg.stats.bootstrap import paired_bootstrap
from prereg.stats.clustering import design_effect, icc_binary
from prereg.stats.contrasts import (
    check_weights,
    contrast_bootstrap,
    contrast_sign_flip,
    factorial_weights,
)
from prereg.stats.funnel import loss_shares, pass_hat_k
from prereg.stats.intervals import jeffreys_interval
from prereg.stats.invokerank import (
    FUNNEL_STAGES,
    RHO_DEFAULTS,
    beta_interval,
    betabinom_loglik,
    betabinom_moments,
    cap_prior,
    equal_tailed,
    false_invoke_rate,
    fit_beta_prior,
    funnel_lever,
    grouped_icc,
    intervals_overlap,
    invokerank,
)
from prereg.stats.multiplicity import (
    MULTIPLICITY_METHODS,
    MultiplicityMethod,
    MultiplicityRule,
    benjamini_hochberg,
    e_bh,
    holm,
)
from prereg.stats.paired import equivalence_margin, mcnemar_exact, tango_interval, tost_paired
from prereg.stats.permutation import exact_permutation_test, sign_flip_test
from prereg.stats.planning import (
    mcnemar_sample_size,
    mde_paired,
    min_discordant,
    prompts_for_mde,
    sequential_monitor_exact,
    simulate_sequential_monitor,
)
from prereg.stats.registrable import REGISTRABLE_TESTS, TEST_NAMES, RegistrableTest, TestName
from prereg.stats.results import (
    BetaPrior,
    BootstrapResult,
    ContrastResult,
    DifferenceInterval,
    EValueResult,
    FunnelStage,
    InvokeRankResult,
    McNemarResult,
    MonitorExact,
    MonitorResult,
    MonitorSimulation,
    MultipleTestResult,
    PermutationResult,
    ProportionInterval,
    TOSTResult,
)
from prereg.stats.sequential import beta_mixture_evalue, sequential_monitor

__all__ = [
    # paired binary comparisons
    "mcnemar_exact",
    "tango_interval",
    "tost_paired",
    "equivalence_margin",
    # intervals and clustering
    "jeffreys_interval",
    "design_effect",
    "icc_binary",
    # funnel
    "pass_hat_k",
    "loss_shares",
    # multiplicity
    "benjamini_hochberg",
    "holm",
    "e_bh",
    "MULTIPLICITY_METHODS",
    "MultiplicityMethod",
    "MultiplicityRule",
    # the tests a registration may name
    "REGISTRABLE_TESTS",
    "TEST_NAMES",
    "RegistrableTest",
    "TestName",
    # anytime-valid
    "beta_mixture_evalue",
    "sequential_monitor",
    # resampling
    "paired_bootstrap",
    "exact_permutation_test",
    "sign_flip_test",
    # registered contrasts over design cells
    "factorial_weights",
    "check_weights",
    "contrast_bootstrap",
    "contrast_sign_flip",
    # planning
    "mde_paired",
    "prompts_for_mde",
    "mcnemar_sample_size",
    "min_discordant",
    "sequential_monitor_exact",
    "simulate_sequential_monitor",
    # result types
    "BootstrapResult",
    "ContrastResult",
    "DifferenceInterval",
    "EValueResult",
    "McNemarResult",
    "MonitorResult",
    "MonitorExact",
    "MonitorSimulation",
    "MultipleTestResult",
    "PermutationResult",
    "ProportionInterval",
    "TOSTResult",
    # the InvokeRank score (published path, 4.1-4.2)
    "FUNNEL_STAGES",
    "RHO_DEFAULTS",
    "invokerank",
    "fit_beta_prior",
    "betabinom_loglik",
    "betabinom_moments",
    "cap_prior",
    "grouped_icc",
    "equal_tailed",
    "beta_interval",
    "intervals_overlap",
    "funnel_lever",
    "false_invoke_rate",
    "BetaPrior",
    "FunnelStage",
    "InvokeRankResult",
]

# calibration (issue 14): exact sample size and power of the exact McNemar test
from prereg.stats.planning import mcnemar_exact_power, mcnemar_exact_sample_size  # noqa: E402

__all__ += ["mcnemar_exact_power", "mcnemar_exact_sample_size"]

# judged outcomes (issue 18): prediction-powered inference and agreement
from prereg.stats.ppi import PPI_MIN_GOLD, PPIResult, ppi_difference, ppi_mean  # noqa: E402

__all__ += ["PPI_MIN_GOLD", "PPIResult", "ppi_difference", "ppi_mean"]
from prereg.stats.agreement import (  # noqa: E402
    JudgeRates,
    KappaResult,
    cohens_kappa,
    cohens_kappa_table,
    judge_rates,
)

__all__ += ["JudgeRates", "KappaResult", "cohens_kappa", "cohens_kappa_table", "judge_rates"]
