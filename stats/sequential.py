"""Anytime-valid inference on paired binary outcomes: the beta-mixture e-process."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from prereg.stats._scipy import special
from prereg.stats._validate import (
    broadcastable,
    count,
    counts,
    refuse_text,
    same_length,
    scalar_or_array,
    vector,
)
from prereg.stats.results import EValueResult, MonitorResult

__all__ = ["beta_mixture_evalue", "sequential_monitor"]


def _prior(prior: Any) -> tuple[float, float]:
    refuse_text(prior, "prior")
    try:
        a, b = (float(v) for v in prior)
    except (TypeError, ValueError):
        raise ValueError(f"prior must be a pair (a, b), got {prior!r}") from None
    if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
        raise ValueError(f"prior parameters must be positive and finite, got {prior!r}")
    return a, b


def _log_evalue(b: Any, c: Any, a: float, beta: float) -> Any:
    """log of 2^(b+c) B(a + b, beta + c) / B(a, beta) (broadcasts)."""
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    return (b + c) * math.log(2.0) + special.betaln(a + b, beta + c) - special.betaln(a, beta)


def beta_mixture_evalue(
    b: Any,
    c: Any,
    prior: tuple[float, float] = (1.0, 1.0),
) -> EValueResult:
    """Beta-mixture likelihood ratio of the discordant pairs against p = 1/2.

    Each discordant pair favours the first arm with probability p; H0: p = 1/2. Mixing
    the Bernoulli likelihood over p ~ Beta(a, b0) (``prior = (a, b0)``) gives

        E = integral p^b (1 - p)^c dBeta(p; a, b0) / (1/2)^(b + c)
          = 2^(b + c) B(a + b, b0 + c) / B(a, b0).

    Evaluated along the stream of pairs, E_t is a nonnegative martingale with E_0 = 1
    under H0 (concordant pairs leave it unchanged, whatever the concordance rate), so it
    is an e-process: P(sup_t E_t >= 1/alpha) <= alpha (Ville's inequality), and 1/E is a
    valid p-value at any stopping time. The symmetric default prior (uniform) makes the
    test two-sided. ``pvalue`` is min(1, 1/E); ``estimate`` b / (b + c). Inputs
    broadcast; NaN, infinite, negative or fractional counts, no counts and shapes that
    do not broadcast are refused (ValueError naming the argument). References: Robbins
    (1970); Ramdas, Gruenwald, Vovk and Shafer (2023), Stat Sci 38:576-601.
    """
    a, b0 = _prior(prior)
    bb = counts(b, "b", allow_empty=False)
    cc = counts(c, "c", allow_empty=False)
    broadcastable(b=bb, c=cc)
    bb, cc = np.broadcast_arrays(bb, cc)
    loge = _log_evalue(bb, cc, a, b0)
    e = np.exp(loge)
    m = bb + cc
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(m > 0, bb / np.where(m > 0, m, 1), np.nan)
    return EValueResult(
        evalue=scalar_or_array(e),
        log_evalue=scalar_or_array(loge),
        pvalue=scalar_or_array(np.minimum(1.0, np.exp(-loge))),
        estimate=scalar_or_array(est),
        b=int(bb) if bb.ndim == 0 else bb,
        c=int(cc) if cc.ndim == 0 else cc,
        n=int(m) if m.ndim == 0 else m,
        prior=(a, b0),
        method=f"beta-mixture e-value, Beta({a:g}, {b0:g}) prior, H0 p = 1/2",
    )


def _binary(values: Any, name: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    arr = vector(values, name, allow_empty=True)
    if not np.all((arr == 0.0) | (arr == 1.0)):
        raise ValueError(f"{name} must be binary outcomes (0/1 or bool)")
    return arr.astype(bool)


def _threshold(threshold: Any) -> float:
    refuse_text(threshold, "threshold")
    try:
        thr = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"threshold must be a number, got {threshold!r}") from None
    if not (math.isfinite(thr) and thr >= 1.0):
        raise ValueError(f"threshold must be finite and >= 1, got {threshold!r}")
    return thr


def sequential_monitor(
    first: Any,
    second: Any,
    threshold: float = 20.0,
    min_prompts: int = 40,
    prior: tuple[float, float] = (1.0, 1.0),
) -> MonitorResult:
    """Monitor a stream of paired binary outcomes with the beta-mixture e-process.

    ``first[t]`` and ``second[t]`` are the two arms' outcomes on the t-th prompt, in
    the order the prompts completed. After each prompt the e-value of the discordant
    pairs so far (see :func:`beta_mixture_evalue`) is updated; the monitor stops at the
    first prompt t >= ``min_prompts`` at which E_t >= ``threshold`` (registered defaults
    20 and 40, the InvokeRank rule). By Ville's inequality the probability of ever
    stopping under H0 is at most 1/threshold, however often one looks. The reported
    ``pvalue`` is the anytime-valid p-value at the decision point,
    min(1, 1 / max_{s <= t} E_s) (the running minimum of 1/E), which stays valid
    under continuous monitoring and optional stopping. An empty stream (no prompt
    completed yet, or no paired prompt: ``reports.registered.stopping``) reads E = 1, not
    stopped; NaN, infinite or non-binary outcomes and streams of different lengths are
    refused (ValueError naming the argument).
    """
    f = _binary(first, "first")
    s = _binary(second, "second")
    same_length(f, "first", s, "second")
    thr = _threshold(threshold)
    min_prompts = count(min_prompts, "min_prompts")
    a, b0 = _prior(prior)
    bpath = np.cumsum(f & ~s)
    cpath = np.cumsum(~f & s)
    loge = _log_evalue(bpath, cpath, a, b0) if f.size else np.zeros(0)
    evalues = np.exp(loge)
    t = np.arange(1, f.size + 1)
    hit = (t >= min_prompts) & (loge >= math.log(thr) - 1e-12)
    stopped = bool(hit.any())
    n = int(np.argmax(hit)) + 1 if stopped else int(f.size)
    if n == 0:
        e_at, b_at, c_at, emax = 1.0, 0, 0, 1.0
    else:
        e_at = float(evalues[n - 1])
        b_at, c_at = int(bpath[n - 1]), int(cpath[n - 1])
        emax = max(1.0, float(evalues[:n].max()))
    est = b_at / (b_at + c_at) if b_at + c_at else math.nan
    return MonitorResult(
        stopped=stopped,
        stop_at=n if stopped else None,
        evalue=e_at,
        max_evalue=emax,
        pvalue=min(1.0, 1.0 / emax),
        estimate=est,
        b=b_at,
        c=c_at,
        n=n,
        n_stream=int(f.size),
        threshold=thr,
        min_prompts=min_prompts,
        prior=(a, b0),
        method=(
            f"beta-mixture e-process, Beta({a:g}, {b0:g}) prior; stop when E >= {thr:g} "
            f"after >= {min_prompts} prompts"
        ),
        evalues=evalues,
    )
