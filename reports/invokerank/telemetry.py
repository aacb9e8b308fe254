"""The S-vs-T comparison (InvokeRank 7.9, RQ8): "the synthetic tool mix" of an integration
against "its real calls on the same host", never pooled.

S is one arm's runs of a registration (synthetic runs: API, local or replay evidence, as
registered); T is the integration's imported telemetry from one client host
(:mod:`prereg.runners.exchange.telemetry`). The two are compared, never combined: each
side's counts and shares are shown apart and the comparison is two descriptive figures.

Readings (docs/invokerank.md, "Telemetry and the S-vs-T comparison"):

1. **The tool mix.** S's mix is, over the arm's runs whose first external call went to
   the integration (terminal class ``focal``, positive and negative prompts alike: real
   traffic carries both), the share of each of its tools among those first calls. T's mix
   is the share of each tool among the host's calls to the integration: its first calls
   when the telemetry marks them (``first: true`` on any row of that integration and host),
   else every call, which the output says (T then counts later calls of a session that S's
   first calls do not).
2. **The figures.** The total variation distance between the two mixes, half the sum of
   absolute share differences over the union of tools (0: the same mix, 1: disjoint), and
   Spearman's rank correlation of the two shares across that union (average ranks for
   ties): the "synthetic-to-production correlation" the seed names and could not compute.
3. **Too few.** Each is withheld, with the reason printed, when either side has fewer than
   :data:`MIN_CALLS` calls (the seed's T held 8 calls and it computed nothing), and the
   correlation also when the union has fewer than :data:`MIN_TOOLS` tools or a side's
   shares are all equal (a rank correlation is then undefined). No interval is printed:
   the two samples are of different units (prompts against sessions) and no resampling
   unit is shared.
4. **In the report** (:func:`report_block`): the arms the registration names in
   ``invokerank.telemetry`` (arm -> the telemetry's client ``host`` and, optionally, its
   ``integration``; default the arm's surface id) are compared in ``analyse``'s InvokeRank
   section. The pairing is registered, not guessed: a registry host is a driver
   (``anthropic``, ``local``), a telemetry host a client (``claude``), and no rule maps
   one to the other. Without the field the log is not read and there is no block. The
   block records the log's head (import events, calls, the newest line's seq and hash):
   telemetry imported after the analysis changes the head, never silently the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from prereg.registry.schema import Registration
from prereg.reports.model import (
    InvokeRankTelemetry,
    SvsTComparison,
    TelemetryLogHead,
    TelemetryToolShare,
)
from prereg.reports.observations import Obs
from prereg.stats._scipy import stats as sps

#: fewest calls on either side for any figure
MIN_CALLS = 30
#: fewest tools in the union for the rank correlation
MIN_TOOLS = 3


class TelemetryLike(Protocol):
    """What the comparison reads of a telemetry row."""

    @property
    def integration(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def first(self) -> bool | None: ...


@dataclass(frozen=True)
class ToolShare:
    tool: str
    s_calls: int
    s_share: float
    t_calls: int
    t_share: float


@dataclass(frozen=True)
class SvsT:
    integration: str
    host: str
    s_evidence_class: str | None
    s_calls: int
    t_calls: int
    t_basis: str  # "first calls" or "all calls"
    tools: tuple[ToolShare, ...]
    total_variation: float | None
    total_variation_withheld: str | None
    spearman: float | None
    spearman_withheld: str | None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["tools"] = [asdict(t) for t in self.tools]
        return out


def synthetic_counts(runs: Iterable[Obs]) -> Counter[str]:
    """First calls per tool over the ok runs whose first external call went to the focal
    integration (reading 1)."""
    out: Counter[str] = Counter()
    for o in runs:
        if o.ok and o.terminal_class == "focal" and o.first_call is not None:
            out[o.first_call[0]] += 1
    return out


def telemetry_counts(
    rows: Iterable[TelemetryLike], integration: str, host: str
) -> tuple[Counter[str], str]:
    """Calls per tool of ``integration`` from ``host``, and the basis (reading 1)."""
    mine = [r for r in rows if r.integration == integration and r.host == host]
    marked = any(r.first is not None for r in mine)
    out: Counter[str] = Counter()
    for r in mine:
        if not marked or r.first:
            out[r.tool] += r.count
    return out, "first calls" if marked else "all calls"


def _spearman(s: np.ndarray, t: np.ndarray) -> float:
    rs, rt = sps.rankdata(s), sps.rankdata(t)
    return float(np.corrcoef(rs, rt)[0, 1])


def compare(
    s_counts: Mapping[str, int],
    t_counts: Mapping[str, int],
    *,
    integration: str,
    host: str,
    t_basis: str,
    s_evidence_class: str | None,
    tools: Sequence[str] = (),
) -> SvsT:
    """The two mixes side by side and the two figures, each withheld when too few
    (readings 2 and 3). ``tools``: the integration's tools (listed even when no side
    called them; they enter the union)."""
    union = list(dict.fromkeys([*tools, *sorted(s_counts), *sorted(t_counts)]))
    n_s, n_t = sum(s_counts.values()), sum(t_counts.values())
    s = np.array([s_counts.get(k, 0) for k in union], dtype=float)
    t = np.array([t_counts.get(k, 0) for k in union], dtype=float)
    ps = s / n_s if n_s else np.zeros_like(s)
    pt = t / n_t if n_t else np.zeros_like(t)
    few = [
        f"too few {side} calls ({n} < {MIN_CALLS})"
        for side, n in (("synthetic (S)", n_s), ("telemetry (T)", n_t))
        if n < MIN_CALLS
    ]
    tvd_why = "; ".join(few) or None
    tvd = None if tvd_why else float(0.5 * np.abs(ps - pt).sum())
    rho_why = tvd_why
    if rho_why is None and len(union) < MIN_TOOLS:
        rho_why = f"too few tools for a rank correlation ({len(union)} < {MIN_TOOLS})"
    if rho_why is None and (np.ptp(ps) == 0 or np.ptp(pt) == 0):
        rho_why = "a side calls every tool equally often: its ranks are all tied"
    rho = None if rho_why else _spearman(ps, pt)
    return SvsT(
        integration=integration,
        host=host,
        s_evidence_class=s_evidence_class,
        s_calls=n_s,
        t_calls=n_t,
        t_basis=t_basis,
        tools=tuple(
            ToolShare(k, int(a), float(x), int(b), float(y))
            for k, a, x, b, y in zip(union, s, ps, t, pt, strict=True)
        ),
        total_variation=tvd,
        total_variation_withheld=tvd_why,
        spearman=rho,
        spearman_withheld=rho_why,
    )


#: the block's note (the report's InvokeRank section)
REPORT_NOTE = (
    "Telemetry (evidence class T), never pooled with the runs: each named arm's synthetic "
    "tool mix (S: first calls to the integration over its runs) beside the real calls of "
    "the client host the registration names for it (T), with their total variation "
    "distance and Spearman rank correlation, each withheld below "
    f"{MIN_CALLS} calls a side. No interval: S's unit is the prompt, T's the session. The "
    "telemetry log's head is recorded: telemetry imported later changes it."
)


def report_block(
    reg: Registration,
    observations: Sequence[Obs],
    surfaces: Mapping[str, Any],
    evidence_class: str | None,
    telemetry: Callable[[], tuple[Sequence[TelemetryLike], TelemetryLogHead]],
) -> InvokeRankTelemetry | None:
    """The S-vs-T block of the report (reading 4), or None when the registration names no
    telemetry (``telemetry``, which reads the verified log and its head,
    :func:`prereg.reports.load.load_telemetry`, is then not called). An arm whose
    integration and host have no telemetry row gets one line in ``absent`` and no
    comparison."""
    named = reg.invokerank.telemetry if reg.invokerank is not None else None
    if not named:
        return None
    rows, head = telemetry()
    arms = {a.id: a for a in reg.arms}
    comparisons: list[SvsTComparison] = []
    absent: list[str] = []
    for arm_id, match in named.items():
        integration = match.integration or arms[arm_id].surface
        t_counts, basis = telemetry_counts(rows, integration, match.host)
        if not any(r.integration == integration and r.host == match.host for r in rows):
            absent.append(
                f"arm {arm_id}: no telemetry for integration {integration} from host "
                f"{match.host} in {head.path} ({head.events} import(s), {head.calls} call(s))"
            )
            continue
        surface = surfaces.get(arm_id)
        result = compare(
            synthetic_counts(o for o in observations if o.arm == arm_id),
            t_counts,
            integration=integration,
            host=match.host,
            t_basis=basis,
            s_evidence_class=evidence_class,
            tools=[t.name for t in surface.tools] if surface is not None else [],
        )
        data = result.to_json()
        data["tools"] = [TelemetryToolShare(**t) for t in data["tools"]]
        comparisons.append(SvsTComparison(arm=arm_id, **data))
    return InvokeRankTelemetry(note=REPORT_NOTE, log=head, comparisons=comparisons, absent=absent)
