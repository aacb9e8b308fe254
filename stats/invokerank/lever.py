"""The Lever (4.2): what each stage of each intent cell costs Q against a reference.

The reference is the intent median of the stage rates or the best competitor's rates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import array
from prereg.stats.invokerank.model import FloatArray


def funnel_lever(posterior_means: Any, reference: Any = None) -> FloatArray:
    """Lever_k = Q (r_ref_k / r_k - 1)^+ per cell and stage (4.2, Lever).

    ``posterior_means`` is cells x stages; Q is their product per cell. The reference
    is the median over cells (the intent median) unless ``reference`` (one rate per
    stage, e.g. the best competitor's) is given. nan where r_k = 0 (unbounded).
    ValueError naming the argument for rates that are NaN, infinite or outside [0, 1],
    no cells or stages, and a reference without one rate per stage.
    """
    r = array(posterior_means, "posterior_means", low=0.0, high=1.0)
    if r.ndim != 2:
        raise ValueError(f"posterior_means must be cells x stages, got shape {r.shape}")
    if reference is None:
        ref = np.median(r, axis=0)
    else:
        ref = array(reference, "reference", low=0.0, high=1.0).ravel()
        if ref.size != r.shape[1]:
            raise ValueError(
                f"mismatched lengths: reference has {ref.size} rates but posterior_means "
                f"has {r.shape[1]} stages"
            )
    q = np.prod(r, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lever = q * np.clip(ref[None, :] / r - 1.0, 0.0, None)
    return np.asarray(np.where(r > 0, lever, np.nan))


def competitor_lever(focal: Any, competitors: Any) -> tuple[FloatArray, NDArray[np.int64]]:
    """Lever per cell and stage against the best competitor (4.2, Lever).

    ``focal`` is cells x stages (the focal integration's posterior means),
    ``competitors`` competitors x cells x stages (their rates on the same stages; nan
    where not measured). The best competitor of a cell is the one with the highest
    product of its stage rates (its Q); its rates are the reference of
    :func:`funnel_lever`. Returns (lever, best index per cell; -1 when no competitor of
    the cell has a finite Q, where the lever is nan). No competitors at all is allowed
    (every best index -1); ValueError naming the argument for focal rates that are NaN,
    infinite or outside [0, 1] (a competitor's may be NaN, not measured) and shapes that
    do not match.
    """
    f = array(focal, "focal", low=0.0, high=1.0)
    comp = array(competitors, "competitors", allow_empty=True, allow_nan=True, low=0.0, high=1.0)
    if f.ndim != 2 or comp.ndim != 3 or comp.shape[1:] != f.shape:
        raise ValueError("focal is cells x stages, competitors competitors x cells x stages")
    lever = np.full(f.shape, np.nan)
    best = np.full(f.shape[0], -1, dtype=np.int64)
    if comp.shape[0] == 0:
        return lever, best
    q = np.prod(comp, axis=2)
    for c in range(f.shape[0]):
        if not np.any(np.isfinite(q[:, c])):
            continue
        best[c] = int(np.nanargmax(q[:, c]))
        lever[c] = funnel_lever(f[c : c + 1], comp[best[c], c])[0]
    return lever, best
