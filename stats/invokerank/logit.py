"""The penalised conditional logit behind the Invoke Rating.

Choice sets as arrays, the log-likelihood, its exact gradient and Hessian, and the
trust-region Newton fit. It knows nothing of runs, intents or prompts: those, and the
design built from them, are :mod:`prereg.stats.invokerank.choices`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import LazyModule, optimize
from prereg.stats._validate import array
from prereg.stats.invokerank.model import FloatArray

sparse = LazyModule("scipy.sparse")


@dataclass(frozen=True)
class ChoiceDesign:
    """Choice sets as arrays: run t, alternative a (0 is the outside option), parameter p."""

    x: FloatArray  # (T, A, P) covariates; row a = 0 is all zeros (utility 0)
    available: NDArray[np.bool_]  # (T, A); column 0 always True
    chosen: NDArray[np.int64]  # (T,) in 0 .. A-1
    penalty: FloatArray  # (P,) ridge weights 1 / prior_sd^2 (0: unpenalised)

    @cached_property
    def flat(self) -> Any:
        """x as a sparse (T A) x P matrix: the design is mostly indicators, and sparse
        products avoid multithreaded BLAS, which thrashes on a loaded machine."""
        t, a, p = self.x.shape
        return sparse.csr_matrix(self.x.reshape(t * a, p))


@dataclass(frozen=True)
class LogitFit:
    """A (penalised) conditional-logit maximum: estimates, covariance, log-likelihood."""

    params: FloatArray
    cov: FloatArray
    loglik: float
    converged: bool


def _choice_probabilities(design: ChoiceDesign, theta: FloatArray) -> FloatArray:
    utility = np.asarray(design.flat @ theta).reshape(design.available.shape)
    utility = np.where(design.available, utility, -np.inf)
    utility = utility - utility.max(axis=1, keepdims=True)
    expu = np.exp(utility)
    out: FloatArray = expu / expu.sum(axis=1, keepdims=True)
    return out


def _check_design(design: Any) -> ChoiceDesign:
    """The design, or ValueError naming ``design`` and what is wrong with it."""
    if not isinstance(design, ChoiceDesign):
        raise ValueError(f"design must be a ChoiceDesign, got {type(design).__name__}")
    x = array(design.x, "design.x", allow_empty=True)
    if x.ndim != 3 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"design.x must be runs x alternatives x parameters, got {x.shape}")
    t, a, p = x.shape
    if np.shape(design.available) != (t, a):
        raise ValueError(f"design.available must be {t} x {a}, got {np.shape(design.available)}")
    chosen = array(design.chosen, "design.chosen", low=0, high=a - 1, integer=True)
    if chosen.shape != (t,):
        raise ValueError(f"design.chosen must hold {t} choices, got shape {chosen.shape}")
    if not np.all(np.asarray(design.available, dtype=bool)[np.arange(t), chosen.astype(np.int64)]):
        raise ValueError("design.chosen: a run chose an alternative not available to it")
    penalty = array(design.penalty, "design.penalty", allow_empty=True, low=0.0)
    if penalty.shape != (p,):
        raise ValueError(f"design.penalty must hold {p} weights, got shape {penalty.shape}")
    return design


def _parameters(theta: Any, name: str, design: ChoiceDesign) -> FloatArray:
    """Finite parameters, one per column of the design, or ValueError naming ``name``."""
    th = array(theta, name, allow_empty=True).ravel()
    if th.size != design.x.shape[2]:
        raise ValueError(
            f"mismatched lengths: {name} has {th.size} values but the design has "
            f"{design.x.shape[2]} parameters"
        )
    return th


def choice_loglik(design: ChoiceDesign, theta: Any) -> float:
    """Penalised conditional-logit log-likelihood (the penalty only where weights > 0).

    ValueError naming the argument for a malformed design (NaN or infinite covariates,
    shapes that differ, a choice that is not available) and parameters that are NaN,
    infinite or not one per column of the design."""
    design = _check_design(design)
    return _loglik(design, _parameters(theta, "theta", design))


def _loglik(design: ChoiceDesign, theta: Any) -> float:
    """:func:`choice_loglik` of a checked design (the optimiser's objective)."""
    th = np.asarray(theta, dtype=np.float64)
    probs = _choice_probabilities(design, th)
    picked = probs[np.arange(design.chosen.size), design.chosen]
    return float(np.sum(np.log(picked)) - 0.5 * np.sum(design.penalty * th**2))


def _gradient_hessian(design: ChoiceDesign, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
    probs = _choice_probabilities(design, theta)
    t, a, p = design.x.shape
    weighted = design.flat.multiply(probs.reshape(-1, 1)).tocsr()
    mean_x = np.asarray(weighted.toarray()).reshape(t, a, p).sum(axis=1)
    picked_x = design.x[np.arange(design.chosen.size), design.chosen]
    grad = (picked_x - mean_x).sum(axis=0) - design.penalty * theta
    second = np.asarray((weighted.T @ design.flat).toarray())
    outer = np.einsum("tp,tq->pq", mean_x, mean_x)  # einsum's own loops, not BLAS
    hess = -(second - outer) - np.diag(design.penalty)
    return np.asarray(grad), np.asarray(hess)


def fit_choice_logit(design: ChoiceDesign, start: Any = None) -> LogitFit:
    """Maximise :func:`choice_loglik` by trust-region Newton (scipy ``trust-exact``).

    ValueError naming the argument for a malformed design (as :func:`choice_loglik`) and
    a ``start`` that is NaN, infinite or not one value per parameter."""
    design = _check_design(design)
    p = design.x.shape[2]
    theta0 = np.zeros(p) if start is None else _parameters(start, "start", design)

    def negative(theta: FloatArray) -> float:
        return -_loglik(design, theta)

    last: dict[bytes, tuple[FloatArray, FloatArray]] = {}

    def derivatives(theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Gradient and Hessian together, kept for the optimiser's next call at theta."""
        key = theta.tobytes()
        if key not in last:
            last.clear()
            last[key] = _gradient_hessian(design, theta)
        return last[key]

    def jac(theta: FloatArray) -> FloatArray:
        return -derivatives(theta)[0]

    def hess(theta: FloatArray) -> FloatArray:
        return -derivatives(theta)[1]

    fit = optimize.minimize(
        negative, theta0, jac=jac, hess=hess, method="trust-exact", options={"gtol": 1e-9}
    )
    theta = np.asarray(fit.x, dtype=np.float64)
    grad, hessian = _gradient_hessian(design, theta)
    try:
        cov = np.asarray(np.linalg.inv(-hessian), dtype=np.float64)
    except np.linalg.LinAlgError:
        cov = np.full((p, p), np.nan)
    # converged when the Newton decrement (the log-likelihood still to gain, to second
    # order) is negligible; one Newton step then polishes the optimiser's last iterate
    decrement = float(grad @ cov @ grad) if np.all(np.isfinite(cov)) else math.inf
    converged = 0.0 <= decrement < 1e-8
    if converged:
        theta = theta + cov @ grad
    return LogitFit(params=theta, cov=cov, loglik=_loglik(design, theta), converged=converged)
