"""prereg.stats: pure statistical functions over numpy arrays; no I/O, no project imports.

Tests and intervals return small frozen result objects (``prereg.stats.results``) in
the style of ``scipy.stats``; single-number quantities (design effect, ICC, pass^k,
loss shares, planning figures) are returned as plain floats, ints or arrays so they
can be used in arithmetic directly. Everything random is seeded with
``numpy.random.default_rng(seed)``.

The names below are imported on first use (issue 15: start-up): :data:`SOURCES` names the
submodule that defines each one, and ``from prereg.stats import X`` (or ``stats.X``)
imports that submodule when ``X`` is first asked for. Importing this package costs
nothing, so the CLI's layers can name ``prereg.stats`` and ``prereg plan`` from options
loads only :mod:`prereg.stats.sizing` (no numpy). Type checkers read the imports under
``TYPE_CHECKING``, which are the same names (tests/stats/test_stats_lazy.py checks that
the three lists agree and that every name resolves to its definition).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prereg.stats.agreement import (
        JudgeRates,
        KappaResult,
        cohens_kappa,
        cohens_kappa_table,
        judge_rates,
    )
    from prereg.stats.bootstrap import paired_bootstrap
    from prereg.stats.clustering import design_effect, icc_binary
    from prereg.stats.contrasts import (
        check_weights,
        contrast_bootstrap,
        contrast_sign_flip,
        factorial_weights,
    )
    from prereg.stats.enumeration import (
        MAX_ENUMERATED,
        MC_SE_TARGET,
        ResampledContrast,
        bootstrap_multiset_count,
        bootstrap_multisets,
        draws_for_mc_se,
        holm_mc_se,
        mc_standard_error,
        resampled_contrast,
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
        mcnemar_exact_power,
        mcnemar_exact_sample_size,
        mcnemar_sample_size,
        sequential_monitor_exact,
        simulate_sequential_monitor,
    )
    from prereg.stats.ppi import PPI_MIN_GOLD, PPIResult, ppi_difference, ppi_mean
    from prereg.stats.registrable import (
        REGISTRABLE_TESTS,
        TEST_NAMES,
        RegistrableTest,
        TestName,
    )
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
    from prereg.stats.sizing import mde_paired, min_discordant, prompts_for_mde

#: Each submodule of this package and the public names it defines (imported on first use).
SOURCES: dict[str, tuple[str, ...]] = {
    "agreement": ("JudgeRates", "KappaResult", "cohens_kappa", "cohens_kappa_table", "judge_rates"),
    "bootstrap": ("paired_bootstrap",),
    "clustering": ("design_effect", "icc_binary"),
    "contrasts": ("check_weights", "contrast_bootstrap", "contrast_sign_flip", "factorial_weights"),
    "funnel": ("loss_shares", "pass_hat_k"),
    "intervals": ("jeffreys_interval",),
    "invokerank": (
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
    ),
    "multiplicity": (
        "MULTIPLICITY_METHODS",
        "MultiplicityMethod",
        "MultiplicityRule",
        "benjamini_hochberg",
        "e_bh",
        "holm",
    ),
    "paired": ("equivalence_margin", "mcnemar_exact", "tango_interval", "tost_paired"),
    "permutation": ("exact_permutation_test", "sign_flip_test"),
    "planning": (
        "mcnemar_exact_power",
        "mcnemar_exact_sample_size",
        "mcnemar_sample_size",
        "sequential_monitor_exact",
        "simulate_sequential_monitor",
    ),
    "ppi": ("PPI_MIN_GOLD", "PPIResult", "ppi_difference", "ppi_mean"),
    "registrable": ("REGISTRABLE_TESTS", "TEST_NAMES", "RegistrableTest", "TestName"),
    "results": (
        "BetaPrior",
        "BootstrapResult",
        "ContrastResult",
        "DifferenceInterval",
        "EValueResult",
        "FunnelStage",
        "InvokeRankResult",
        "McNemarResult",
        "MonitorExact",
        "MonitorResult",
        "MonitorSimulation",
        "MultipleTestResult",
        "PermutationResult",
        "ProportionInterval",
        "TOSTResult",
    ),
    "enumeration": (
        "MAX_ENUMERATED",
        "MC_SE_TARGET",
        "ResampledContrast",
        "bootstrap_multiset_count",
        "bootstrap_multisets",
        "draws_for_mc_se",
        "holm_mc_se",
        "mc_standard_error",
        "resampled_contrast",
    ),
    "sequential": ("beta_mixture_evalue", "sequential_monitor"),
    "sizing": ("mde_paired", "min_discordant", "prompts_for_mde"),
}
#: The submodules without public names here (read as attributes, they are imported too).
PRIVATE_MODULES = ("_dist", "_scipy", "_validate", "calibration", "calibration_model")
#: public name -> the submodule defining it
EXPORTS: dict[str, str] = {name: module for module, names in SOURCES.items() for name in names}

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
    "MAX_ENUMERATED",
    "MC_SE_TARGET",
    "ResampledContrast",
    "bootstrap_multiset_count",
    "bootstrap_multisets",
    "draws_for_mc_se",
    "holm_mc_se",
    "mc_standard_error",
    "resampled_contrast",
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
    # calibration (issue 14): exact sample size and power of the exact McNemar test
    "mcnemar_exact_power",
    "mcnemar_exact_sample_size",
    # judged outcomes (issue 18): prediction-powered inference and agreement
    "PPI_MIN_GOLD",
    "PPIResult",
    "ppi_difference",
    "ppi_mean",
    "JudgeRates",
    "KappaResult",
    "cohens_kappa",
    "cohens_kappa_table",
    "judge_rates",
]


class _LazyPackage(ModuleType):
    """This package's module type: public names and submodules imported on first read.

    A public name that is also a submodule's name (``invokerank``, the function of
    ``prereg.stats.invokerank``) stays the function, as when this package imported
    everything up front: the import system binds a submodule on its package once it has
    loaded it, and that binding is declined here for such names.
    """

    def __getattr__(self, name: str) -> Any:
        module = EXPORTS.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f"{self.__name__}.{module}"), name)
            super().__setattr__(name, value)  # found directly from now on
            return value
        if name in SOURCES or name in PRIVATE_MODULES:
            return importlib.import_module(f"{self.__name__}.{name}")
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in EXPORTS and isinstance(value, ModuleType):
            return  # the import system binding submodule ``name``: the public name wins
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *__all__})


importlib.import_module(__name__).__class__ = _LazyPackage  # this module, being imported
