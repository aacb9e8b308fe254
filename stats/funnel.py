"""Funnel metrics: loss shares of stages and the unbiased pass^k estimator."""

from __future__ import annotations

from typing import Any

import numpy as np

from prereg.stats._validate import array, broadcastable, count, scalar_or_array

__all__ = ["loss_shares", "pass_hat_k"]


def loss_shares(rates: Any) -> Any:
    """Share of the log loss of a funnel owed to each stage.

        L_k = -ln r_k / sum_j -ln r_j

    over the conditional stage rates r_k (the last axis; leading axes, such as
    posterior draws, are handled independently). Because -ln Q = sum_k -ln r_k for
    Q = prod_k r_k, the shares decompose the log loss exactly and sum to one. They are
    diagnostic, not causal. Edge cases, as documented in the InvokeRank method (4.2):
    a stage at rate 1 contributes 0; when every stage is at 1 there is no loss and the
    shares are undefined (all nan); a stage at rate 0 takes the whole loss (share 1,
    every positive-rate stage 0); if several stages are at 0 their individual shares
    depend on how the limit is approached and are nan, while positive-rate stages
    still get 0. Rates must lie in [0, 1]. Reference: InvokeRank method v1.0, 4.2 and
    appendix B.
    """
    r = array(rates, "rates", allow_empty=True)
    if r.ndim == 0 or r.shape[-1] == 0 or r.size == 0:
        raise ValueError("rates must have at least one stage (last axis)")
    array(r, "rates", low=0.0, high=1.0)  # rates lie in [0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = -np.log(r)
        loss = np.where(r == 1.0, 0.0, loss)  # avoid -0.0
        zeros = (r == 0.0).sum(axis=-1, keepdims=True)
        total = np.where(zeros > 0, 1.0, loss.sum(axis=-1, keepdims=True))
        shares = np.where(zeros > 0, np.where(r == 0.0, 1.0, 0.0), loss / total)
        shares = np.where((zeros > 1) & (r == 0.0), np.nan, shares)
        none = (zeros == 0) & (loss.sum(axis=-1, keepdims=True) == 0.0)
        shares = np.where(none, np.nan, shares)
    return shares


def pass_hat_k(c: Any, n: Any, k: int) -> Any:
    """Unbiased estimator of pass^k, the chance that k independent repeats all succeed.

        pass^k_hat = C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c - i) / (n - i)

    from c successes in n repeats of one prompt (unbiased for p^k when the n repeats
    are i.i.d. Bernoulli(p)). nan when n < k (it cannot be estimated, e.g. pass^3 from
    two repeats). Broadcasts over ``c`` and ``n``; average the per-prompt values for a
    suite-level figure. ValueError naming the argument for NaN, infinite, negative or
    fractional counts, no counts, c > n, or shapes that do not broadcast. Reference:
    Yao et al. (2025), tau-bench, ICLR.
    """
    k = count(k, "k")  # 2.5 or "3" refused, not truncated or parsed
    ca = array(c, "c", low=0, integer=True)
    na = array(n, "n", low=0, integer=True)  # n = inf would read 0.0
    broadcastable(c=ca, n=na)
    if np.any(ca > na):
        raise ValueError("c and n must be integers with 0 <= c <= n")
    ca, na = np.broadcast_arrays(ca, na)
    out = np.ones(ca.shape)
    for i in range(k):
        with np.errstate(divide="ignore", invalid="ignore"):
            out = out * np.clip(ca - i, 0.0, None) / (na - i)
    out = np.where(na < k, np.nan, out)
    return scalar_or_array(out)
