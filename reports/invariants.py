"""The rule for every printed interval and the counting identities, checked on every
report ``analyse`` builds (issue 39): a figure that breaks one is a bug, never output.

:func:`check` walks a :class:`~prereg.reports.model.Report` and returns every
:class:`Violation`, each naming its figure by its JSON pointer in ``report.json``
(``/arms/1/interval``) and the rule it breaks (:data:`RULES`). :func:`enforce`, called by
:func:`prereg.reports.analysis.analyse` on the finished report, raises
:class:`ReportInvariantError` (exit 1) when there is any, before anything is written.

The rule for an interval (its quantity, support, estimate and label: :data:`INTERVALS` for
the model's interval fields, :data:`BOUNDS` for the intervals kept as keys of a dict):

1. it lies inside the support of its quantity (``support``);
2. the estimate the model pairs with it lies inside it (``estimate``);
3. of two levels of one quantity, the narrower nests inside the wider (``nesting``);
4. it has width, unless a label beside it says why not (``zero-width``; the label's
   words: :data:`LABEL_MARKERS`);
5. low <= high (``order``); no number anywhere in the report is NaN or infinite
   (``finite``: null is how the report prints "not computed"); its level is in (0, 1)
   (``level``).

An interval at a place the tables do not name is itself a violation (``unregistered``):
a new field cannot escape the rule. The counting identities (``count``) and p-values
(``p-value``, ``adjusted``) are in :func:`_report_counts` and :data:`OBJECT_CHECKS`. The
ToolBottleneckBench study prints its figures as formatted strings: cells of the form
``E [L, H]`` are read back and held to rules 1, 2, 4 and 5, and its p columns to
``p-value`` and ``adjusted`` (:func:`_study_tables`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from prereg.core.errors import PreregError
from prereg.reports.model import (
    ArmConfiguration,
    ArmInvokeRank,
    ArmReport,
    ContrastReport,
    ControlReport,
    Discordant,
    FamilyMember,
    IntentRow,
    IntentScore,
    Interval,
    InvokeRating,
    JudgedRate,
    MultiplicityReport,
    NegativeRate,
    PairwiseChange,
    Provenance,
    RatingRow,
    ReplicateRuns,
    ReplicateSession,
    Report,
    ResolutionRate,
    ResolutionSplitReport,
    RhoEstimate,
    ServerFunnel,
    ServerStage,
    ShareRow,
    StageEstimate,
    StoppingReport,
    TerminalRow,
    TestReport,
)
from prereg.reports.toolbottleneck.model import StudyTable
from prereg.stats import MULTIPLICITY_METHODS

#: Switch: when False, :func:`enforce` checks nothing (the checker itself, :func:`check`,
#: still works). On by default: a report that breaks a rule is never written.
ENFORCE = True

#: Rounding slack of a comparison (bounds and estimates are floats of one computation).
TOL = 1e-9

#: Every rule a violation can name, in words.
RULES: dict[str, str] = {
    "support": "an interval lies inside the support of its quantity",
    "estimate": "the estimate printed beside an interval lies inside it",
    "nesting": "of two levels of one quantity, the narrower interval nests inside the wider",
    "zero-width": "an interval has width unless a label beside it says why not",
    "order": "an interval's low bound is at most its high bound",
    "finite": "no number is printed as NaN or infinity (null prints 'not computed')",
    "level": "an interval's level lies in (0, 1)",
    "unregistered": "every printed interval has a quantity in the checker's table",
    "count": "a counting identity of the report holds",
    "p-value": "every p-value lies in [0, 1]",
    "adjusted": "an adjusted p-value is at least its raw p-value",
}

#: Words that label a zero-width interval (in the label fields its quantity names):
#: they say why it has no width (too little data, a boundary, a point mass).
LABEL_MARKERS: tuple[str, ...] = (
    "too few",
    "fewer than",
    "caution",
    "boundary",
    "point mass",
    "degenerate",
    "zero width",
    "zero-width",
    "no width",
)


class ReportInvariantError(PreregError):
    """Internal error: a built report breaks a rule for printed figures (exit 1).

    No class of :mod:`prereg.core.errors` means "a bug of prereg's own": this one, a
    :class:`~prereg.core.errors.PreregError` with its exit code 1, does. Raised before
    anything is written; ``field`` is the first broken figure's JSON pointer."""

    exit_code = 1


@dataclass(frozen=True)
class Violation:
    """One broken rule: the figure (a JSON pointer into report.json) and what is wrong."""

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}: {self.message}"


@dataclass(frozen=True)
class Support:
    """The values a quantity can take: [low, high] (infinite where unbounded)."""

    low: float
    high: float
    name: str

    def __str__(self) -> str:
        return f"[{_fmt(self.low)}, {_fmt(self.high)}], the support of a {self.name}"


PROPORTION = Support(0.0, 1.0, "proportion")
DIFFERENCE = Support(-1.0, 1.0, "difference of two proportions")
KAPPA = Support(-1.0, 1.0, "Cohen's kappa")
RATING = Support(-math.inf, math.inf, "Invoke Rating (R = 1000 + 400 beta / ln 10)")
PERCENT = Support(0.0, 100.0, "percentage")
POINTS = Support(-100.0, 100.0, "difference of two percentages (points)")

Owner = Any  # the model (or dict) that holds an interval
Ancestors = tuple[Any, ...]  # the objects above it, the report first


@dataclass(frozen=True)
class Quantity:
    """What an interval is about: its support, the estimate printed beside it, and the
    text that may label it when it has no width."""

    name: str
    support: Support | Callable[[Owner, Ancestors], Support]
    estimate: Callable[[Owner], float | None] | None = None
    label: Callable[[Owner, Ancestors], str] | None = None

    def support_of(self, owner: Owner, ancestors: Ancestors) -> Support:
        s = self.support
        return s if isinstance(s, Support) else s(owner, ancestors)


def _contrast_support(weights: Mapping[str, float]) -> Support:
    """sum_c w_c m_c with every m_c in [0, 1]."""
    return Support(
        sum(w for w in weights.values() if w < 0),
        sum(w for w in weights.values() if w > 0),
        "contrast of proportions [sum of negative weights, sum of positive weights]",
    )


def _test_support(test: TestReport, ancestors: Ancestors) -> Support:
    if test.contrast is None:
        return Support(DIFFERENCE.low, DIFFERENCE.high, f"{DIFFERENCE.name} ({test.test})")
    report = ancestors[0]
    for c in report.contrasts if isinstance(report, Report) else []:
        if c.id == test.contrast:
            return _contrast_support(c.weights)
    return Support(-math.inf, math.inf, "contrast (weights not in the report)")


def _control_support(control: ControlReport, _: Ancestors) -> Support:
    return DIFFERENCE if control.control in ("placebo", "blinded") else PROPORTION


def _arm_of(ancestors: Ancestors) -> ArmInvokeRank | None:
    return next((a for a in reversed(ancestors) if isinstance(a, ArmInvokeRank)), None)


def _stage_label(stage: StageEstimate, ancestors: Ancestors) -> str:
    """A boundary stage's posterior is a point mass: its prior's method says so."""
    arm = _arm_of(ancestors)
    if arm is None:
        return ""
    return " ".join(p.method for p in arm.priors if p.stage == stage.stage)


def _parent_text(kind: type, *names: str) -> Callable[[Owner, Ancestors], str]:
    def text(_: Owner, ancestors: Ancestors) -> str:
        parent = next((a for a in reversed(ancestors) if isinstance(a, kind)), None)
        return " ".join(str(getattr(parent, n, "") or "") for n in names)

    return text


def _own_text(*names: str) -> Callable[[Owner, Ancestors], str]:
    def text(owner: Owner, _: Ancestors) -> str:
        return " ".join(str(getattr(owner, n, "") or "") for n in names)

    return text


def _ratio(successes: int, trials: int) -> float | None:
    return successes / trials if trials else None


_SCORE = Quantity(
    "InvokeRank score q (printed as 100 q points)",
    PROPORTION,
    estimate=lambda s: s.q,  # labelled by its own reason (a LabelledInterval), if at all
)

#: model class + field -> the quantity of the interval(s) it holds: every field of the
#: report model typed Interval, Interval | None or list[Interval] (a test holds this
#: table to the model).
INTERVALS: dict[tuple[type[BaseModel], str], Quantity] = {
    (ArmReport, "interval"): Quantity(
        "outcome rate of an arm", PROPORTION, estimate=lambda a: a.rate
    ),
    (TestReport, "interval"): Quantity(
        "paired difference of two arms' outcomes, or the registered contrast",
        _test_support,
        estimate=lambda t: t.estimate,
        label=_own_text("note", "reason"),
    ),
    (ContrastReport, "interval"): Quantity(
        "registered contrast sum_c w_c m_c",
        lambda c, _: _contrast_support(c.weights),
        estimate=lambda c: c.estimate,
        label=_own_text("note"),
    ),
    (PairwiseChange, "interval"): Quantity(
        "paired difference of two arms' outcomes", DIFFERENCE, estimate=lambda p: p.estimate
    ),
    (IntentRow, "interval"): Quantity(
        "paired difference of two arms' outcomes",
        DIFFERENCE,
        estimate=lambda r: r.difference,
        label=_own_text("interval_note"),
    ),
    (ControlReport, "interval"): Quantity(
        "control statistic",
        _control_support,
        estimate=lambda c: c.estimate,
        label=_own_text("reason"),
    ),
    (StageEstimate, "posterior"): Quantity(
        "InvokeRank stage rate (posterior, displayed)",
        PROPORTION,
        estimate=lambda s: s.posterior_mean,
        label=_stage_label,
    ),
    (StageEstimate, "displayed"): Quantity(
        "InvokeRank stage rate (posterior, displayed)",
        PROPORTION,
        estimate=lambda s: _ratio(s.successes, s.trials),
    ),
    (IntentScore, "intervals"): _SCORE,
    (IntentScore, "published"): _SCORE,
    (IntentScore, "calibrated"): _SCORE,  # a bootstrap of the plug-in, made to contain q
    (ArmInvokeRank, "intervals"): _SCORE,
    (ArmInvokeRank, "published"): _SCORE,
    (ArmInvokeRank, "calibrated"): _SCORE,
    (NegativeRate, "interval"): Quantity(
        "rate of calls on negative runs", PROPORTION, estimate=lambda n: n.rate
    ),
    (RatingRow, "intervals"): Quantity(
        "Invoke Rating R",
        RATING,
        estimate=lambda r: r.rating,
        label=_parent_text(InvokeRating, "reason"),
    ),
    (ShareRow, "intervals"): Quantity(
        "Invoke/Selection Share",
        PROPORTION,
        estimate=lambda r: r.share,
    ),
    (ResolutionRate, "interval"): Quantity(
        "resolution rate",
        PROPORTION,
        estimate=lambda r: r.rate,
        label=_parent_text(ResolutionSplitReport, "note"),
    ),
    (ServerStage, "interval"): Quantity(
        "per-server funnel stage rate",
        PROPORTION,
        estimate=lambda s: s.rate,
        label=_parent_text(ServerFunnel, "note"),
    ),
    (RhoEstimate, "interval"): Quantity(
        "intra-prompt correlation rho (Figure 8)",
        PROPORTION,
        estimate=lambda r: r.rho,
        label=_own_text("note"),
    ),
    (ReplicateSession, "within_range"): Quantity(
        "replicate session's Selected rate, within-run range (Figure 7)",
        PROPORTION,
        estimate=lambda r: r.rate,
        label=_parent_text(ReplicateRuns, "note"),
    ),
}


@dataclass(frozen=True)
class Bounds:
    """An interval kept as keys of a dict: ``low`` and ``high`` (and ``estimate``) under
    the dict at ``where`` below the field (``*`` for every item of a list or dict)."""

    where: str
    low: str
    high: str
    estimate: str | None
    quantity: Quantity


def _dict_label(*keys: str) -> Callable[[Owner, Ancestors], str]:
    def text(owner: Owner, _: Ancestors) -> str:
        return " ".join(str(owner.get(k) or "") for k in keys) if isinstance(owner, dict) else ""

    return text


_PPI = Quantity(
    "prediction-powered rate, gold rate, TPR, FPR", PROPORTION, label=_dict_label("reason")
)
_PPI_DIFF = Quantity("prediction-powered difference", DIFFERENCE, label=_dict_label("reason"))
_KAPPA = Quantity("Cohen's kappa", KAPPA, label=_dict_label("note"))
_SHARE = Quantity("control statistic: decoy, clone_swap (share)", PROPORTION)

#: model class + dict field -> the intervals kept in it as keys.
BOUNDS: dict[tuple[type[BaseModel], str], tuple[Bounds, ...]] = {
    (JudgedRate, "corrected"): (
        Bounds("", "low", "high", "estimate", _PPI),
        Bounds("", "gold_low", "gold_high", "gold_rate", _PPI),
        Bounds("difference", "low", "high", "estimate", _PPI_DIFF),
        Bounds("difference", "gold_low", "gold_high", "gold_rate", _PPI_DIFF),
        Bounds("gold/judge_vs_gold", "kappa_low", "kappa_high", "kappa", _KAPPA),
        Bounds("gold/judge_vs_gold", "tpr_low", "tpr_high", "tpr", _PPI),
        Bounds("gold/judge_vs_gold", "fpr_low", "fpr_high", "fpr", _PPI),
        Bounds("gold/annotator_agreement/*", "kappa_low", "kappa_high", "kappa", _KAPPA),
    ),
    (JudgedRate, "oracle_agreement"): (Bounds("", "kappa_low", "kappa_high", "kappa", _KAPPA),),
    (ControlReport, "details"): tuple(
        Bounds(key, "low", "high", "estimate", _SHARE)
        for key in ("all", "positive", "negative", "pair_share", "label_bias", "position_bias")
    ),
}


#: Fields that hold the registration's own words or a computation's inputs, not printed
#: figures: a ``low``/``high`` pair there is not an interval (a factor's levels, say).
INPUTS: frozenset[tuple[type[BaseModel], str]] = frozenset(
    {
        (Report, "registration_document"),
        (Report, "host"),
        (Report, "surfaces"),
        (Report, "tasks"),
        (ArmConfiguration, "params"),
        (Provenance, "parameters"),
    }
)


# --- the walk -------------------------------------------------------------------------


def _token(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _fmt(value: float | None) -> str:
    if value is None:
        return "null"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6g}"


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _labelled(text: str) -> bool:
    low = text.lower()
    return any(m in low for m in LABEL_MARKERS)


@dataclass
class _Walk:
    report: Report
    found: list[Violation] = field(default_factory=list)
    #: (id of a dict, bound key) pairs the tables registered, skipped by the generic scan
    registered: set[tuple[int, str]] = field(default_factory=set)

    def add(self, path: str, rule: str, message: str) -> None:
        self.found.append(Violation(path or "/", rule, message))

    # -- models and plain values ------------------------------------------------------

    def model(self, obj: BaseModel, path: str, ancestors: Ancestors) -> None:
        here = (*ancestors, obj)
        for name, info in type(obj).model_fields.items():
            value = getattr(obj, name)
            p = f"{path}/{_token(info.alias or name)}"
            quantity = INTERVALS.get((type(obj), name))
            if quantity is not None:
                self.intervals(value, p, quantity, obj, here)
                continue
            for b in BOUNDS.get((type(obj), name), ()):
                for sub, where, owner_chain in _at(value, b.where, p, here):
                    self.bounds(sub, where, b, owner_chain)
            self.value(value, p, here, scan=(type(obj), name) not in INPUTS)
        for rule in OBJECT_CHECKS.get(type(obj), ()):
            rule(self, obj, path, ancestors)

    def value(self, value: object, path: str, ancestors: Ancestors, scan: bool = True) -> None:
        """Walk ``value``: models, lists, dicts (``scan``: looking for intervals the
        tables do not name) and numbers (finite)."""
        if isinstance(value, Interval):
            self.add(path, "unregistered", "an Interval in a field the checker's table omits")
            self.interval(value, path, None, None, ancestors)
        elif isinstance(value, BaseModel):
            self.model(value, path, ancestors)
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                self.value(v, f"{path}/{i}", ancestors, scan)
        elif isinstance(value, dict):
            if scan:
                self.unregistered_bounds(value, path)
            for k, v in value.items():
                self.value(v, f"{path}/{_token(k)}", (*ancestors, value), scan)
        elif isinstance(value, float) and not math.isfinite(value):
            self.add(path, "finite", f"{_fmt(value)} printed as a number")

    # -- intervals --------------------------------------------------------------------

    def intervals(
        self, value: object, path: str, q: Quantity, owner: Owner, ancestors: Ancestors
    ) -> None:
        if value is None:
            return
        if isinstance(value, Interval):
            self.interval(value, path, q, owner, ancestors)
            return
        if not isinstance(value, list):
            self.add(path, "unregistered", f"expected intervals, found {type(value).__name__}")
            return
        for i, iv in enumerate(value):
            self.interval(iv, f"{path}/{i}", q, owner, ancestors)
        self.nesting(
            [(f"{path}/{i}", iv.level, iv.low, iv.high) for i, iv in enumerate(value)],
            q.name,
        )

    def interval(
        self,
        iv: Interval,
        path: str,
        q: Quantity | None,
        owner: Owner,
        ancestors: Ancestors,
    ) -> None:
        if not (isinstance(iv.level, float | int) and 0.0 < iv.level < 1.0):
            self.add(path, "level", f"level {iv.level!r} is not in (0, 1)")
        own = getattr(iv, "reason", None)  # a LabelledInterval says why it has no width
        self.check_bounds(
            path,
            iv.low,
            iv.high,
            q,
            owner,
            ancestors,
            what="low",
            other="high",
            own_label=own if isinstance(own, str) else "",
        )

    def check_bounds(
        self,
        path: str,
        low: object,
        high: object,
        q: Quantity | None,
        owner: Owner,
        ancestors: Ancestors,
        *,
        what: str,
        other: str,
        own_label: str = "",
    ) -> None:
        bounds: list[float | None] = []
        for key, v in ((what, low), (other, high)):
            if v is None:
                bounds.append(None)
            elif not isinstance(v, int | float) or isinstance(v, bool):
                self.add(path, "finite", f"{key} is {v!r}, not a number")
                return
            elif not math.isfinite(v):
                self.add(path, "finite", f"{key} {_fmt(float(v))} printed as a number")
                return
            else:
                bounds.append(float(v))
        lo, hi = bounds
        if lo is not None and hi is not None and lo > hi + TOL:
            self.add(path, "order", f"{what} {_fmt(lo)} > {other} {_fmt(hi)}")
            return
        if q is None:
            return
        s = q.support_of(owner, ancestors)
        if lo is not None and lo < s.low - TOL:
            self.add(path, "support", f"{what} {_fmt(lo)} is outside {s} ({q.name})")
        if hi is not None and hi > s.high + TOL:
            self.add(path, "support", f"{other} {_fmt(hi)} is outside {s} ({q.name})")
        est = q.estimate(owner) if q.estimate is not None else None
        if est is not None and math.isfinite(est):
            if (lo is not None and est < lo - TOL) or (hi is not None and est > hi + TOL):
                self.add(
                    path,
                    "estimate",
                    f"the estimate {_fmt(est)} is outside [{_fmt(lo)}, {_fmt(hi)}] ({q.name})",
                )
        if lo is not None and hi is not None and abs(hi - lo) <= TOL:
            text = own_label + " " + (q.label(owner, ancestors) if q.label is not None else "")
            if not _labelled(text):
                self.add(
                    path,
                    "zero-width",
                    f"[{_fmt(lo)}, {_fmt(hi)}] has no width and nothing beside it says why "
                    f"({q.name})",
                )

    def nesting(
        self, items: Sequence[tuple[str, float, float | None, float | None]], name: str
    ) -> None:
        """Each pair of levels: the narrower level's interval inside the wider's."""
        for pa, la, loa, hia in items:
            for pb, lb, lob, hib in items:
                if not la < lb or None in (loa, hia, lob, hib):
                    continue
                assert loa is not None and hia is not None and lob is not None and hib is not None
                if loa < lob - TOL or hia > hib + TOL:
                    self.add(
                        pa,
                        "nesting",
                        f"the {la:.0%} interval [{_fmt(loa)}, {_fmt(hia)}] is not inside the "
                        f"{lb:.0%} interval {pb} [{_fmt(lob)}, {_fmt(hib)}] ({name})",
                    )

    # -- intervals kept in dicts ------------------------------------------------------

    def bounds(self, d: object, path: str, b: Bounds, ancestors: Ancestors) -> None:
        if not isinstance(d, dict) or (b.low not in d and b.high not in d):
            return
        self.registered.add((id(d), b.low))
        level = d.get("level")
        if b.low == "low" and level is not None and not (_number(level) and 0 < level < 1):
            self.add(path, "level", f"level {level!r} is not in (0, 1)")
        q = b.quantity
        if b.estimate is not None:
            key = b.estimate
            q = Quantity(
                q.name,
                q.support,
                estimate=lambda o: o.get(key) if _number(o.get(key)) else None,
                label=q.label,
            )
        self.check_bounds(
            path, d.get(b.low), d.get(b.high), q, d, ancestors, what=b.low, other=b.high
        )

    def unregistered_bounds(self, d: dict[Any, Any], path: str) -> None:
        """A dict holding an interval (``low``/``high``, ``X_low``/``X_high``) that no
        entry of :data:`BOUNDS` names."""
        for key in d:
            if not isinstance(key, str) or not (key == "low" or key.endswith("_low")):
                continue
            high = key[: -len("low")] + "high"
            if high not in d or (id(d), key) in self.registered:
                continue
            if all(v is None or _number(v) for v in (d[key], d[high])):
                self.add(path, "unregistered", f"an interval ({key}, {high}) not in BOUNDS")


def _at(
    value: object, where: str, path: str, ancestors: Ancestors
) -> Iterable[tuple[object, str, Ancestors]]:
    """The values at ``where`` (``a/b``, ``*`` every item) below ``value``."""
    items: list[tuple[object, str, Ancestors]] = [(value, path, ancestors)]
    for part in [p for p in where.split("/") if p]:
        nxt: list[tuple[object, str, Ancestors]] = []
        for v, p, anc in items:
            if part == "*":
                pairs = (
                    list(enumerate(v))
                    if isinstance(v, list)
                    else list(v.items())
                    if isinstance(v, dict)
                    else []
                )
                nxt += [(x, f"{p}/{_token(k)}", (*anc, v)) for k, x in pairs]
            elif isinstance(v, dict) and part in v:
                nxt.append((v[part], f"{p}/{_token(part)}", (*anc, v)))
        items = nxt
    return items


# --- counting identities and p-values, per object --------------------------------------

ObjectCheck = Callable[[_Walk, Any, str, Ancestors], None]


def _p(w: _Walk, path: str, value: float | None) -> None:
    if value is not None and math.isfinite(value) and not (-TOL <= value <= 1 + TOL):
        w.add(path, "p-value", f"{_fmt(value)} is not in [0, 1]")


def _count(w: _Walk, path: str, holds: bool, identity: str) -> None:
    if not holds:
        w.add(path, "count", identity)


def _arm(w: _Walk, a: ArmReport, path: str, _: Ancestors) -> None:
    settled = a.runs_ok + a.counted_as_failure
    _count(
        w,
        path,
        a.runs == a.runs_ok + a.infra_errors,
        f"runs {a.runs} != runs_ok {a.runs_ok} + infra_errors {a.infra_errors}",
    )
    _count(
        w,
        path,
        settled <= a.planned_runs,
        f"runs_ok {a.runs_ok} + counted_as_failure {a.counted_as_failure} > planned_runs "
        f"{a.planned_runs}",
    )
    if w.report.completeness.missing == 0 and w.report.completeness.stopping_cut is None:
        _count(
            w,
            path,
            settled == a.planned_runs,
            f"no unit is missing, yet runs_ok {a.runs_ok} + counted_as_failure "
            f"{a.counted_as_failure} != planned_runs {a.planned_runs}",
        )
    _count(
        w,
        path,
        a.measured <= settled,
        f"measured {a.measured} > runs_ok {a.runs_ok} + counted_as_failure {a.counted_as_failure}",
    )
    _count(w, path, 0 <= a.successes <= a.measured, f"successes {a.successes} > measured")
    expected = _ratio(a.successes, a.measured)
    _count(
        w,
        path,
        (a.rate is None) == (expected is None)
        and (expected is None or abs((a.rate or 0.0) - expected) <= TOL),
        f"rate {_fmt(a.rate)} != successes {a.successes} / measured {a.measured}",
    )
    if w.report.completeness.infrastructure != "count_as_failure":
        _count(
            w,
            path,
            a.counted_as_failure == 0,
            f"counted_as_failure {a.counted_as_failure} under infrastructure: "
            f"{w.report.completeness.infrastructure}",
        )


def _discordant(w: _Walk, d: Discordant, path: str, ancestors: Ancestors) -> None:
    _count(w, path, d.b + d.c == d.n, f"b {d.b} + c {d.c} != n {d.n}")
    owner = ancestors[-1] if ancestors else None
    if isinstance(owner, TestReport):
        _count(w, path, d.n <= owner.n, f"discordant n {d.n} > the test's n {owner.n}")


def _test(w: _Walk, t: TestReport, path: str, _: Ancestors) -> None:
    _p(w, f"{path}/pvalue", t.pvalue)
    if t.evalue is not None and math.isfinite(t.evalue) and t.evalue < 0:
        w.add(f"{path}/evalue", "count", f"e-value {_fmt(t.evalue)} < 0")


def _takes(method: str) -> str:
    rule = next((r for name, r in MULTIPLICITY_METHODS.items() if name == method), None)
    return "p" if rule is None else rule.takes


def _adjusted(
    w: _Walk, path: str, raw: float | None, evalue: float | None, adj: float | None, takes: str
) -> None:
    _p(w, f"{path}/adjusted", adj)
    if adj is None or not math.isfinite(adj):
        return
    if takes == "p" and raw is not None and math.isfinite(raw) and adj < raw - TOL:
        w.add(f"{path}/adjusted", "adjusted", f"adjusted {_fmt(adj)} < raw p {_fmt(raw)}")
    if takes == "e" and evalue is not None and evalue > 0:
        floor = min(1.0, 1.0 / evalue)
        if adj < floor - TOL:
            w.add(
                f"{path}/adjusted",
                "adjusted",
                f"adjusted {_fmt(adj)} < min(1, 1/e) {_fmt(floor)} (e-value {_fmt(evalue)})",
            )


def _family(w: _Walk, m: MultiplicityReport, path: str, _: Ancestors) -> None:
    takes = _takes(m.method)
    for i, member in enumerate(m.members):
        where = f"{path}/members/{i}"
        _p(w, f"{where}/pvalue", member.pvalue)
        _adjusted(w, where, member.pvalue, member.evalue, member.adjusted, takes)
    rejected = sum(1 for member in m.members if member.reject)
    _count(w, path, m.n_rejected == rejected, f"n_rejected {m.n_rejected} != {rejected} rejected")


def _contrast(w: _Walk, c: ContrastReport, path: str, _: Ancestors) -> None:
    _p(w, f"{path}/pvalue", c.pvalue)
    m = w.report.multiplicity
    takes = _takes(m.method) if m is not None else "p"
    _adjusted(w, path, c.pvalue, None, c.adjusted, takes)


def _stopping(w: _Walk, s: StoppingReport, path: str, _: Ancestors) -> None:
    _p(w, f"{path}/pvalue", s.pvalue)


def _stage(w: _Walk, s: StageEstimate, path: str, _: Ancestors) -> None:
    _count(w, path, 0 <= s.successes <= s.trials, f"successes {s.successes} > trials {s.trials}")


def _funnel(w: _Walk, stages: Sequence[StageEstimate], path: str) -> None:
    """A nested funnel: fewer runs reach each later stage."""
    for i in range(1, len(stages)):
        a, b = stages[i - 1], stages[i]
        _count(
            w,
            f"{path}/{i}",
            b.successes <= a.successes,
            f"stage {b.stage} reached by {b.successes}, more than {a.stage}'s {a.successes} "
            "(a nested funnel never grows)",
        )


def _intent(w: _Walk, i: IntentScore, path: str, _: Ancestors) -> None:
    _funnel(w, i.stages, f"{path}/stages")


def _ir_arm(w: _Walk, a: ArmInvokeRank, path: str, _: Ancestors) -> None:
    _funnel(w, a.funnel, f"{path}/funnel")


def _server_funnel(w: _Walk, f: ServerFunnel, path: str, _: Ancestors) -> None:
    last: tuple[str, int] | None = None
    for i, s in enumerate(f.stages):
        if s.reached is None:
            continue
        _count(
            w,
            f"{path}/stages/{i}",
            0 <= s.reached <= f.listed,
            f"{s.stage} reached by {s.reached} of {f.listed} listing runs",
        )
        if last is not None:
            _count(
                w,
                f"{path}/stages/{i}",
                s.reached <= last[1],
                f"stage {s.stage} reached by {s.reached}, more than {last[0]}'s {last[1]} "
                "(a nested funnel never grows)",
            )
        last = (s.stage, s.reached)


def _negative(w: _Walk, n: NegativeRate, path: str, _: Ancestors) -> None:
    _count(w, path, 0 <= n.calls <= n.runs, f"calls {n.calls} > runs {n.runs}")


def _resolution_rate(w: _Walk, r: ResolutionRate, path: str, _: Ancestors) -> None:
    _count(w, path, 0 <= r.successes <= r.runs, f"successes {r.successes} > runs {r.runs}")


def _resolution(w: _Walk, r: ResolutionSplitReport, path: str, _: Ancestors) -> None:
    total = sum(r.counts.values())
    _count(w, path, total == r.runs, f"the classes' counts sum to {total}, not runs {r.runs}")


def _terminal(w: _Walk, t: TerminalRow, path: str, _: Ancestors) -> None:
    total = sum(t.counts.values())
    _count(w, path, total == t.runs, f"the classes' counts sum to {total}, not runs {t.runs}")


def _rating_row(w: _Walk, r: RatingRow, path: str, _: Ancestors) -> None:
    _count(w, path, 0 <= r.chosen <= r.listed, f"chosen {r.chosen} > listed {r.listed}")


def _judged(w: _Walk, j: JudgedRate, path: str, _: Ancestors) -> None:
    _count(
        w,
        path,
        j.needed == j.judged + j.unjudged,
        f"needed {j.needed} != judged {j.judged} + unjudged {j.unjudged}",
    )
    _count(
        w,
        path,
        j.unparseable <= j.unjudged,
        f"unparseable {j.unparseable} > unjudged {j.unjudged}",
    )
    _count(w, path, 0 <= j.met <= j.judged, f"met {j.met} > judged {j.judged}")
    for key, d in (("oracle_agreement", j.oracle_agreement),):
        if isinstance(d, dict) and _number(d.get("agree")) and _number(d.get("runs")):
            _count(w, f"{path}/{key}", d["agree"] <= d["runs"], "agree > runs")


def _control(w: _Walk, c: ControlReport, path: str, _: Ancestors) -> None:
    for key, d in c.details.items():
        if isinstance(d, dict) and _number(d.get("successes")) and _number(d.get("trials")):
            _count(
                w,
                f"{path}/details/{_token(key)}",
                0 <= d["successes"] <= d["trials"],
                f"successes {d['successes']} > trials {d['trials']}",
            )


#: model class -> its counting identities and p-value rules.
OBJECT_CHECKS: dict[type[BaseModel], tuple[ObjectCheck, ...]] = {
    ArmReport: (_arm,),
    Discordant: (_discordant,),
    TestReport: (_test,),
    MultiplicityReport: (_family,),
    ContrastReport: (_contrast,),
    StoppingReport: (_stopping,),
    StageEstimate: (_stage,),
    IntentScore: (_intent,),
    ArmInvokeRank: (_ir_arm,),
    ServerFunnel: (_server_funnel,),
    NegativeRate: (_negative,),
    ResolutionRate: (_resolution_rate,),
    ResolutionSplitReport: (_resolution,),
    TerminalRow: (_terminal,),
    RatingRow: (_rating_row,),
    JudgedRate: (_judged,),
    ControlReport: (_control,),
    FamilyMember: (),  # its p-values are checked with the family's method (_family)
}


# --- identities across the report ------------------------------------------------------


def _report_counts(w: _Walk) -> None:
    r = w.report
    comp, runs, arms = r.completeness, r.runs, r.arms
    _count(
        w,
        "/completeness",
        comp.completed + comp.missing == comp.planned,
        f"completed {comp.completed} + missing {comp.missing} != planned {comp.planned}",
    )
    _count(
        w,
        "/completeness",
        comp.infra_errors_open <= comp.missing,
        f"infra_errors_open {comp.infra_errors_open} > missing {comp.missing}",
    )
    if comp.complete and comp.stopping_cut is None:
        _count(w, "/completeness", comp.missing == 0, f"complete with {comp.missing} missing")
    if arms:
        planned = sum(a.planned_runs for a in arms)
        settled = sum(a.runs_ok + a.counted_as_failure for a in arms)
        counted = sum(a.counted_as_failure for a in arms)
        infra = sum(a.infra_errors for a in arms)
        _count(
            w,
            "/completeness",
            planned == comp.planned,
            f"the arms' planned_runs sum to {planned}, not planned {comp.planned}",
        )
        _count(
            w,
            "/completeness",
            settled == comp.completed,
            f"the arms' runs_ok + counted_as_failure sum to {settled}, not completed "
            f"{comp.completed}",
        )
        _count(
            w,
            "/completeness",
            counted == comp.counted_as_failure,
            f"the arms' counted_as_failure sum to {counted}, not {comp.counted_as_failure}",
        )
        _count(
            w,
            "/runs",
            infra == runs.infra_errors,
            f"the arms' infra_errors sum to {infra}, not infra_errors {runs.infra_errors}",
        )
    _count(
        w,
        "/runs",
        runs.used == comp.completed,
        f"used {runs.used} != completed units {comp.completed}",
    )
    _count(
        w,
        "/runs",
        runs.records == runs.used - comp.counted_as_failure + runs.infra_errors,
        f"records {runs.records} != used {runs.used} - counted_as_failure "
        f"{comp.counted_as_failure} + infra_errors {runs.infra_errors}",
    )
    _count(
        w,
        "/runs",
        len(runs.units) == runs.used,
        f"{len(runs.units)} units listed, used {runs.used}",
    )
    _exploratory_funnel(w, r.exploratory)


def _exploratory_funnel(w: _Walk, block: Mapping[str, Any]) -> None:
    """The exploratory block's funnel per arm: reached <= of, and non-increasing."""
    funnel = block.get("funnel")
    if not isinstance(funnel, dict):
        return
    for arm, data in funnel.items():
        stages = data.get("stages") if isinstance(data, dict) else None
        if not isinstance(stages, dict):
            continue
        last: tuple[str, int] | None = None
        for name, s in stages.items():
            path = f"/exploratory/funnel/{_token(arm)}/stages/{_token(name)}"
            if not isinstance(s, dict) or not _number(s.get("reached")):
                continue
            reached = int(s["reached"])
            if _number(s.get("of")):
                _count(w, path, 0 <= reached <= s["of"], f"reached {reached} > of {s['of']}")
            if last is not None:
                _count(
                    w,
                    path,
                    reached <= last[1],
                    f"stage {name} reached by {reached}, more than {last[0]}'s {last[1]} "
                    "(a nested funnel never grows)",
                )
            last = (name, reached)


# --- the study's tables (formatted strings) --------------------------------------------

_NUM = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+|nan|inf|NaN|Infinity)"
_CELL = re.compile(
    rf"^\s*(?:(?P<est>{_NUM})\s*(?P<unit>%|pp)?\s*)?"
    rf"\[\s*(?P<lo>{_NUM})\s*(?:%|pp)?\s*,\s*(?P<hi>{_NUM})\s*(?P<unit2>%|pp)?\s*\]\s*$"
)
_SCALAR = re.compile(rf"^\s*(?P<value>{_NUM})\s*(?:%|pp)?\s*$")
_P_COLUMNS = re.compile(r"^p\b|\bp$|\bp \(", re.IGNORECASE)


def _study_tables(w: _Walk) -> None:
    study = w.report.toolbottleneck
    if study is None:
        return
    for t, table in enumerate(study.tables):
        _study_table(w, table, f"/toolbottleneck/tables/{t}")


def _study_table(w: _Walk, table: StudyTable, path: str) -> None:
    """Cells ``E [L, H]`` (``%``: a percentage, ``pp``: points) and the p columns."""
    interval_cols = {j for j, c in enumerate(table.columns) if "interval" in c.lower()}
    p_cols = {j for j, c in enumerate(table.columns) if _P_COLUMNS.search(c.strip())}
    holm = {j for j in p_cols if "holm" in table.columns[j].lower()}
    for r, row in enumerate(table.rows):
        raw: float | None = None
        for j, cell in enumerate(row):
            where = f"{path}/rows/{r}/{j}"
            scalar = _SCALAR.match(cell)
            if scalar is not None and not math.isfinite(float(scalar["value"])):
                w.add(where, "finite", f"{cell!r} prints a non-finite number")
                continue
            m = _CELL.match(cell)
            if m is not None:
                _study_interval(w, where, m, table.columns[j], j in interval_cols)
            if j in p_cols:
                value = _p_cell(cell)
                if value is None:
                    continue
                _p(w, where, value)
                if j not in holm:
                    raw = value
                elif raw is not None and value < raw - 5e-4:  # printed to 3 decimals
                    w.add(where, "adjusted", f"Holm p {cell} < raw p {_fmt(raw)}")


def _study_interval(w: _Walk, where: str, m: re.Match[str], column: str, interval: bool) -> None:
    lo, hi = float(m["lo"]), float(m["hi"])
    est = float(m["est"]) if m["est"] is not None else None
    if not all(math.isfinite(v) for v in (lo, hi, est if est is not None else 0.0)):
        w.add(where, "finite", f"{m.string!r} prints a non-finite number")
        return
    unit = m["unit"] or m["unit2"]
    if lo > hi:
        w.add(where, "order", f"low {_fmt(lo)} > high {_fmt(hi)} in {column!r}")
        return
    s = PERCENT if unit == "%" else POINTS if unit == "pp" else None
    if s is not None and (lo < s.low - TOL or hi > s.high + TOL):
        w.add(where, "support", f"[{_fmt(lo)}, {_fmt(hi)}] is outside {s} ({column!r})")
    if est is not None and not lo - 0.05 <= est <= hi + 0.05:  # printed to 0.1
        w.add(where, "estimate", f"{_fmt(est)} is outside [{_fmt(lo)}, {_fmt(hi)}] ({column!r})")
    if interval and lo == hi:
        w.add(where, "zero-width", f"[{_fmt(lo)}, {_fmt(hi)}] has no width in {column!r}")


def _p_cell(cell: str) -> float | None:
    text = cell.strip()
    if text.startswith("<"):
        return None  # a bound, not a value
    try:
        return float(text)
    except ValueError:
        return None


# --- the entry points ------------------------------------------------------------------


def check(report: Report) -> list[Violation]:
    """Every violation of the rules in ``report`` (empty: it may be written)."""
    w = _Walk(report)
    w.model(report, "", ())
    _report_counts(w)
    _study_tables(w)
    return w.found


#: Violations named in the error's details, at most (the rest are counted).
MAX_NAMED = 20


def enforce(report: Report) -> None:
    """Raise :class:`ReportInvariantError` (exit 1) when ``report`` breaks a rule and
    :data:`ENFORCE` is on; nothing has been written then."""
    if not ENFORCE:
        return
    found = check(report)
    if not found:
        return
    details = [str(v) for v in found[:MAX_NAMED]]
    if len(found) > MAX_NAMED:
        details.append(f"... and {len(found) - MAX_NAMED} more")
    first = found[0]
    raise ReportInvariantError(
        f"internal error: the report of '{report.registration}' breaks {len(found)} rule(s) "
        f"for printed figures, first {first.path} ({first.rule}: {RULES[first.rule]}); "
        "nothing was written. A broken figure is a bug of prereg, never output: please "
        "report it",
        field=first.path,
        details=details,
    )
