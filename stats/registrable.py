"""The statistical tests a registration may name: one table, read by the schema and the report.

The registry's schema validates ``primary.test`` / ``secondary[].test`` against
:data:`REGISTRABLE_TESTS` (and asks for a margin where the table says so); the report
(:mod:`prereg.reports.registered.apply`) has one adapter per name that chooses the inputs the
registration names and calls the function listed here. tests/test_architecture.py checks
that the adapters and this table name the same tests. Adding a test: docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from prereg.stats.bootstrap import paired_bootstrap
from prereg.stats.paired import mcnemar_exact, tost_paired
from prereg.stats.permutation import exact_permutation_test, sign_flip_test
from prereg.stats.sequential import beta_mixture_evalue

TestName = Literal[
    "mcnemar_exact",
    "paired_bootstrap",
    "tost_paired",
    "sign_flip_test",
    "exact_permutation_test",
    "beta_mixture",
]


@dataclass(frozen=True)
class RegistrableTest:
    """A test a registration may name, and what registering it requires."""

    #: the function of this package that computes it
    function: Callable[..., object]
    #: the registration must give ``margin`` (an equivalence test)
    needs_margin: bool
    summary: str


REGISTRABLE_TESTS: Mapping[TestName, RegistrableTest] = {
    "mcnemar_exact": RegistrableTest(
        mcnemar_exact, False, "exact McNemar test on the discordant pairs"
    ),
    "paired_bootstrap": RegistrableTest(
        paired_bootstrap, False, "paired prompt-and-run bootstrap interval of the difference"
    ),
    "tost_paired": RegistrableTest(
        tost_paired, True, "two one-sided tests of equivalence within the margin"
    ),
    "sign_flip_test": RegistrableTest(
        sign_flip_test, False, "exact sign-flip test of the paired differences"
    ),
    "exact_permutation_test": RegistrableTest(
        exact_permutation_test, False, "exact permutation test of the paired differences"
    ),
    "beta_mixture": RegistrableTest(
        beta_mixture_evalue, False, "beta-mixture e-value of the discordant pairs"
    ),
}

#: The names in table order (error messages list them in this order).
TEST_NAMES: tuple[TestName, ...] = get_args(TestName)

assert tuple(REGISTRABLE_TESTS) == TEST_NAMES, "REGISTRABLE_TESTS and TestName must agree"
