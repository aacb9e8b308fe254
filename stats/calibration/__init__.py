"""Calibration of a registered paired analysis by simulation: type I error, power, coverage.

:func:`calibrate` draws data sets from a :class:`~prereg.stats.calibration_model.Population`
(the registration's prompts, repeats and planning figures) and applies each registered
test to every data set as ``analyse`` applies it: the same aggregation of repeats, the same
resampling unit, the same decision rule and the same function of this package, reduced to
the sufficient statistic the function reads where that is exact (see each evaluator). It
returns, for each test, its rejection rate with no effect (type I error), its rejection
rate in the planned direction at the planned effect (power) and the coverage of the
interval the report prints beside it, each with its Monte Carlo standard error and a
verdict judged against that error.

This package owns the calibration engine; the simulated population it draws from is
:mod:`prereg.stats.calibration_model`. One idea per module:

* ``plans``: the registered tests, stopping rule and multiplicity family as the
  simulation applies them (:class:`PlannedTest`, :class:`MonitorPlan`,
  :class:`FamilyPlan`);
* ``scenarios``: the scenarios a test is judged in (null, planned effect, margin), its
  estimand, and the latent effects that realise a contrast's planned effect;
* ``outcome``: the per data set decisions of one test and their sum over blocks;
* ``reductions``: per-unit means and distinct rows, shared by the evaluators;
* the evaluators, one per kind of registered test: ``paired`` (McNemar, beta-mixture,
  sign-flip; Tango's interval), ``permutation`` (two-sample permutation test),
  ``equivalence`` (TOST), ``bootstrap`` (the paired bootstrap, :func:`bootstrap_intervals`),
  ``contrast`` (tests of registered contrasts, and the p values a family of contrasts
  adjusts) and ``stopping`` (the e-process);
* ``mc_error``: the Monte Carlo standard error of a rate and :func:`verdict`;
* ``summary``: the result table (:class:`CalibrationRow`, :class:`CalibrationResult`);
* ``driver``: the simulation loop, :func:`calibrate`.

Below are re-exported the names other code imports from ``prereg.stats.calibration``,
including the private evaluators tests/calibration/test_cal_engine.py checks. The modules
of this package import each other directly, never from this package.
"""

from __future__ import annotations

from prereg.stats.calibration.bootstrap import bootstrap_intervals
from prereg.stats.calibration.contrast import _contrast, contrast_intervals, contrast_pvalues
from prereg.stats.calibration.driver import Progress, calibrate, contrast_family_rejects
from prereg.stats.calibration.equivalence import _Regions, _tost
from prereg.stats.calibration.mc_error import verdict
from prereg.stats.calibration.paired import _mcnemar_p, _sign_flip, _tango_cover
from prereg.stats.calibration.permutation import _hypergeometric_p, _permutation
from prereg.stats.calibration.plans import FamilyPlan, MonitorPlan, PlannedTest, family_levels
from prereg.stats.calibration.stopping import _monitor
from prereg.stats.calibration.summary import CalibrationResult, CalibrationRow

__all__ = [
    "CalibrationResult",
    "CalibrationRow",
    "FamilyPlan",
    "MonitorPlan",
    "PlannedTest",
    "Progress",
    "bootstrap_intervals",
    "calibrate",
    "contrast_family_rejects",
    "contrast_intervals",
    "contrast_pvalues",
    "family_levels",
    "verdict",
    # private evaluators, imported by tests/calibration/test_cal_engine.py
    "_Regions",
    "_contrast",
    "_hypergeometric_p",
    "_mcnemar_p",
    "_monitor",
    "_permutation",
    "_sign_flip",
    "_tango_cover",
    "_tost",
]
