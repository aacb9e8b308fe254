"""Every bootstrap refit of the Invoke Rating at once (:class:`_Batch`).

Weighted damped Newton from the point estimate on the point fit's design, collapsed to
its distinct choice situations: one trust-region fit per resample, each on a rebuilt
design, cost seconds per arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import LazyModule
from prereg.stats.invokerank.choices import ChoiceRuns, RatingTerms, _design
from prereg.stats.invokerank.logit import ChoiceDesign
from prereg.stats.invokerank.model import FloatArray

sparse = LazyModule("scipy.sparse")


#: Newton iterations of a batched bootstrap refit before the resample is refitted alone
NEWTON_STEPS = 40
#: a refit has converged when the Newton decrement after its last step is below this
NEWTON_DECREMENT = 1e-14


@dataclass(frozen=True)
class _Batch:
    """The point fit's choice design in per-intent local coordinates, collapsed to its
    distinct choice situations, for refitting all bootstrap resamples at once (why: 200
    trust-region fits, each on a rebuilt design, cost seconds per arm, and every analyse
    of a registration with offers pays it).

    The likelihood depends on the runs only through their choice situations (intent,
    listed alternatives, covariates, the alternative chosen) and how often each occurs:
    runs in one situation are collapsed into one row (``members`` maps runs to rows), and
    a resample's run multiplicities become row weights by summing over each row's runs
    (exact: integer counts). A prompt's repeats share their alternatives, so S rows are
    far fewer than T runs. A run of intent c touches only D = k (beta) + k (u_.c) +
    position + branded of the P parameters, so the utilities and the Hessian's m m' term
    are computed in those coordinates (``index[c]``: their global columns) and scattered
    per intent; the Hessian's first term sum_a p x x' goes through the precomputed sparse
    products of each row's covariates (``pairs``).
    """

    runs: ChoiceRuns
    terms: RatingTerms
    design: ChoiceDesign  # of the runs (T rows): penalty and shape
    members: Any  # sparse (T, S): run t is in row s
    local: FloatArray  # (S, A, D)
    available: NDArray[np.bool_]  # (S, A)
    chosen: NDArray[np.int64]  # (S,) in 0 .. A-1
    index: NDArray[np.int64]  # (C, D) global column of each local coordinate per intent
    cell: NDArray[np.int64]  # (S,) the row's intent (0 when there are no intent effects)
    picked: FloatArray  # (S, D) local covariates of the chosen alternative
    pairs: Any  # sparse (P P) x (S A): x_sa,i x_sa,j of each row (s, a)

    @classmethod
    def build(cls, runs: ChoiceRuns, terms: RatingTerms, prior_sd: float | None) -> _Batch:
        design = _design(runs, terms, prior_sd)
        t, a, p = design.x.shape
        k = terms.kept.size
        cells = max(terms.cells, 1)
        cell = runs.intent if terms.cells else np.zeros(t, np.int64)
        tail = np.arange(k + k * terms.cells, p)  # position, branded
        index = np.stack(
            [
                np.concatenate(
                    [np.arange(k), k + np.arange(k) * terms.cells + c if terms.cells else [], tail]
                ).astype(np.int64)
                for c in range(cells)
            ]
        )
        local = design.x[
            np.arange(t)[:, None, None], np.arange(a)[None, :, None], index[cell][:, None, :]
        ]
        situation = np.concatenate(
            [
                np.stack([cell, design.chosen], axis=1).astype(np.float64),
                design.available.astype(np.float64),
                local.reshape(t, -1),
            ],
            axis=1,
        )
        _, first, group = np.unique(situation, axis=0, return_index=True, return_inverse=True)
        group = np.asarray(group, np.int64).ravel()
        members = sparse.csr_matrix((np.ones(t), (np.arange(t), group)), shape=(t, first.size))
        x = design.x[first]
        return cls(
            runs=runs,
            terms=terms,
            design=design,
            members=members,
            local=local[first],
            available=design.available[first],
            chosen=design.chosen[first],
            index=index,
            cell=cell[first],
            picked=local[first, design.chosen[first]],
            pairs=_pair_products(x.reshape(-1, p)),
        )

    def collapse(self, weights: FloatArray) -> FloatArray:
        """Row weights (R, S) of run multiplicities (R, T): each row's runs summed."""
        return np.asarray((self.members.T @ weights.T).T, dtype=np.float64)

    def betas(self, weights: FloatArray, start: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
        """beta per resample (rows of ``weights``, the runs' multiplicities) and
        alternative, by the rules of :func:`_betas`, and which resamples to refit alone."""
        theta, active, alone = self.refit(weights, start)
        k = self.terms.kept.size
        beta = np.full((weights.shape[0], self.runs.available.shape[1]), -np.inf)
        beta[:, self.terms.kept] = np.where(active[:, 1:], theta[:, :k], -np.inf)
        beta[~active[:, 0]] = np.nan  # no run chose no tool: not identified
        return beta, alone

    def refit(
        self, weights: FloatArray, start: FloatArray
    ) -> tuple[FloatArray, NDArray[np.bool_], NDArray[np.bool_]]:
        """(theta (B, P), active (B, k + 1), alone (B,)): the penalised maximum of each
        resample by :meth:`_newton` (an alternative never chosen in it fitted out, its
        columns 0), which alternatives it chose (column 0: no tool), and the resamples
        this cannot refit: other terms than the point fit's, or no convergence (theta
        nan there and where no run chose no tool)."""
        rows_weights = self.collapse(weights)
        onehot = self.chosen[:, None] == np.arange(self.terms.kept.size + 1)[None, :]
        active = (rows_weights @ onehot) > 0
        theta = np.full((weights.shape[0], start.size), np.nan)
        same = self._same_terms(weights)
        some = active[:, 1:].any(axis=1)  # none chosen: every beta -inf, nothing to fit
        theta[active[:, 0] & ~some] = 0.0
        rows = np.flatnonzero(active[:, 0] & some & same)
        alone = active[:, 0] & some & ~same
        if rows.size:
            got, ok = self._newton(rows_weights[rows], active[rows], start)
            theta[rows[ok]] = got[ok]
            alone[rows[~ok]] = True
        return theta, active, alone

    def _same_terms(self, weights: FloatArray) -> NDArray[np.bool_]:
        """Whether each resample keeps the point fit's position and branded terms (as
        :func:`_terms` decides them: over the runs' listed alternatives)."""
        same = np.ones(weights.shape[0], bool)
        for values, present in (
            (self.runs.position, self.terms.position),
            (self.runs.branded, self.terms.branded),
        ):
            if present and values is not None:
                with_outside = np.concatenate([np.zeros((values.shape[0], 1)), values], axis=1)
                mask = np.concatenate(
                    [np.ones((values.shape[0], 1), bool), self.runs.available], axis=1
                )
                lo = np.where(mask, with_outside, np.inf).min(axis=1)
                hi = np.where(mask, with_outside, -np.inf).max(axis=1)
                same &= np.any((weights > 0) & (hi > lo)[None, :], axis=1)
        return same

    def _free(self, active: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """(R, P): the parameters each resample fits (an alternative it never chose is
        fitted out, with its beta and intent effects)."""
        k, cells = self.terms.kept.size, self.terms.cells
        p = self.design.x.shape[2]
        free = np.ones((active.shape[0], p), bool)
        free[:, :k] = active[:, 1:]
        if cells:
            free[:, k : k + k * cells] = np.repeat(active[:, 1:], cells, axis=1)
        return free

    def _loglik(
        self, theta: FloatArray, weights: FloatArray, active: NDArray[np.bool_]
    ) -> tuple[FloatArray, FloatArray]:
        """Penalised log-likelihood per resample and the choice probabilities (R, S, A);
        ``weights``: the rows' (R, S)."""
        local_theta = theta[:, self.index][:, self.cell]  # (R, T, D)
        utility = np.matmul(self.local, local_theta.transpose(1, 2, 0)).transpose(2, 0, 1)
        mask = self.available[None, :, :] & active[:, None, :]
        utility = np.where(mask, utility, -np.inf)
        utility = utility - utility.max(axis=2, keepdims=True)
        expu = np.exp(utility)
        total = expu.sum(axis=2)
        t = np.arange(self.cell.size)
        with np.errstate(invalid="ignore"):
            logp = utility[:, t, self.chosen] - np.log(total)
        logp = np.where(weights > 0, logp, 0.0)
        penalty = 0.5 * (self.design.penalty[None, :] * theta**2).sum(axis=1)
        return (weights * logp).sum(axis=1) - penalty, expu / total[:, :, None]

    def _derivatives(
        self, theta: FloatArray, weights: FloatArray, probs: FloatArray, free: NDArray[np.bool_]
    ) -> tuple[FloatArray, FloatArray]:
        """Gradient (R, P) and Hessian (R, P, P) of the penalised log-likelihood."""
        r, p = theta.shape
        t, a, _ = self.local.shape
        mean = np.matmul(probs.transpose(1, 0, 2), self.local).transpose(1, 0, 2)  # (R, S, D)
        contrib = weights[:, :, None] * (self.picked[None, :, :] - mean)
        first = self.pairs @ (weights[:, :, None] * probs).reshape(r, t * a).T
        hess = np.ascontiguousarray(first.T).reshape(r, p, p)
        grad = np.zeros((r, p))
        for c, cols in enumerate(self.index):
            mine = self.cell == c
            grad[:, cols] += contrib[:, mine].sum(axis=1)
            m = mean[:, mine]
            hess[:, cols[:, None], cols[None, :]] -= np.matmul(
                (m * weights[:, mine, None]).transpose(0, 2, 1), m
            )
        grad -= self.design.penalty[None, :] * theta
        hess = -hess - np.diag(self.design.penalty)[None, :, :]
        fixed = ~free
        grad[fixed] = 0.0
        hess[fixed[:, :, None] | fixed[:, None, :]] = 0.0
        rows, cols = np.nonzero(fixed)
        hess[rows, cols, cols] = -1.0
        return grad, hess

    def _newton(
        self, weights: FloatArray, active: NDArray[np.bool_], start: FloatArray
    ) -> tuple[FloatArray, NDArray[np.bool_]]:
        """Damped Newton for every resample (row weights (R, S)) at once, from the point
        estimate."""
        free = self._free(active)
        theta = np.where(free, start[None, :], 0.0)
        loglik, probs = self._loglik(theta, weights, active)
        done = np.zeros(theta.shape[0], bool)
        ok = np.zeros(theta.shape[0], bool)
        for _ in range(NEWTON_STEPS):
            todo = np.flatnonzero(~done)
            if not todo.size:
                break
            grad, hess = self._derivatives(theta[todo], weights[todo], probs[todo], free[todo])
            step, solved = _solve_each(-hess, grad)
            decrement = np.einsum("rp,rp->r", grad, step)
            scale = np.ones(todo.size)
            for _ in range(30):  # halve the step where the likelihood would fall
                trial = theta[todo] + scale[:, None] * step
                new, new_probs = self._loglik(trial, weights[todo], active[todo])
                worse = ~(new >= loglik[todo] - 1e-12 * (1.0 + np.abs(loglik[todo])))
                if not np.any(worse & solved):
                    break
                scale[worse] *= 0.5
            theta[todo], loglik[todo], probs[todo] = trial, new, new_probs
            finished = solved & (decrement < NEWTON_DECREMENT)
            ok[todo[finished]] = True
            done[todo[finished | ~solved]] = True
        return theta, ok


def _pair_products(flat: FloatArray) -> Any:
    """Sparse (P P) x N: the products x_n,i x_n,j of each row n of ``flat`` (N, P), from
    its non-zeros only (the design is mostly indicators)."""
    n, p = flat.shape
    rows, cols = np.nonzero(flat)  # row-major: a row's non-zeros are consecutive
    width = np.bincount(rows, minlength=n)
    slot = np.arange(rows.size) - (np.cumsum(width) - width)[rows]
    padded = np.full((n, max(int(width.max(initial=0)), 1)), -1, np.int64)
    padded[rows, slot] = cols
    row3 = np.broadcast_to(np.arange(n)[:, None, None], padded.shape + padded.shape[1:])
    first = np.broadcast_to(padded[:, :, None], row3.shape)
    second = np.broadcast_to(padded[:, None, :], row3.shape)
    keep = (first >= 0) & (second >= 0)
    r_, i_, j_ = row3[keep], first[keep], second[keep]
    return sparse.csc_matrix((flat[r_, i_] * flat[r_, j_], (i_ * p + j_, r_)), shape=(p * p, n))


def _solve_each(matrix: FloatArray, vector: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
    """matrix[r]^-1 vector[r] for each r; a singular one gives zeros and False."""
    try:
        out = np.asarray(np.linalg.solve(matrix, vector[:, :, None])[:, :, 0], np.float64)
        return out, np.ones(len(vector), bool)
    except np.linalg.LinAlgError:
        out, solved = np.zeros_like(vector), np.zeros(len(vector), bool)  # one by one
        for r in range(len(vector)):
            try:
                out[r] = np.linalg.solve(matrix[r], vector[r])
                solved[r] = True
            except np.linalg.LinAlgError:
                pass
        return out, solved
