"""Run records reduced to what the analysis reads: one immutable observation per run.

The analysis never touches a run record directly. Reading every field through
this one adapter keeps the statistics independent of the record's storage shape
and makes the outcome definitions (which runs count, what a missing stage means)
live in exactly one place.

Outcome definitions (fixed here, before any data, for every registration):

- ``success``: the run's ``success`` field; every task of the split counts,
  negatives included (for a negative task success means the right no-tool
  behaviour, scored by the oracles).
- a funnel stage (``surfaced`` ... ``completed``): reaching that stage, counted
  over *positive* tasks only, as InvokeRank computes its selection scores (on a
  negative task reaching a stage is a false invoke, a different quantity, shown
  under "Exploratory"). A stage recorded as null is treated as *not reached*
  when an earlier stage of the same run is recorded false (the run never got
  there); otherwise null means *not measured* and the run is left out of that
  outcome, never imputed (invariant 7).
- ``focal``: the terminal class is ``focal`` (positive tasks only); null when
  the terminal class was not recorded.
- a unit counted as a failure under ``harness: {infrastructure: count_as_failure}``
  (its registered attempts all failed on infrastructure; :mod:`.load` builds it from
  its last infra_error record, with ``counted_failure`` set and no cost or tokens, which
  its records already carry): every outcome is false (success, each funnel stage,
  focal), with the same positive-tasks-only rule as any run. Intention to treat: the
  unit is kept in every denominator, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from sys import intern
from typing import Any, cast

import msgspec
from msgspec import structs, to_builtins
from msgspec.structs import asdict, force_setattr
from pydantic import BaseModel

from prereg.core.struct_view import field_decoder, struct_view
from prereg.runners.record import RunRecord, TraceEvent
from prereg.runners.store.interface import indexed_columns

#: A run record as stored, or the same fields as a mapping (an imported or test record).
RecordLike = RunRecord | Mapping[str, Any]

STAGES: tuple[str, ...] = ("surfaced", "selected", "invoked", "executed", "completed")
POSITIVE_ONLY: frozenset[str] = frozenset(STAGES) | {"focal"}
#: Every outcome a run defines (any other name is an error, or None on a run not counted).
OUTCOMES: tuple[str, ...] = ("success", "focal", *STAGES)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _bool_or_none(value: Any) -> bool | None:
    if value is None:
        return None
    return bool(value)


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


#: each outcome's place in an observation's :attr:`Obs.outcomes`
_PLACE: dict[str, int] = {name: i for i, name in enumerate(OUTCOMES)}
#: the funnel stages' outcomes in :attr:`Obs.outcomes` (:data:`STAGES` order)
STAGE_OUTCOMES = slice(_PLACE[STAGES[0]], _PLACE[STAGES[-1]] + 1)


def outcome_place(name: str) -> int:
    """Where outcome ``name`` sits in :attr:`Obs.outcomes`: ``o.outcomes[place]`` is
    ``o.outcome(name)``, read without a call (a loop over tens of thousands of runs reads
    it so); ValueError for a name that is no outcome."""
    place = _PLACE.get(name)
    if place is None:
        raise ValueError(f"unknown outcome '{name}'")
    return place


class Obs(msgspec.Struct, frozen=True, gc=False):
    """One run as the analysis sees it.

    A frozen msgspec Struct (slotted, untracked by the cyclic collector: it holds no
    cycle), with its outcomes computed once as it is built: tens of thousands of them
    are read hundreds of thousands of times, built at 27,000 runs in a quarter of the
    time of a frozen dataclass (whose ``__init__`` sets each field through
    ``object.__setattr__``), and sent back by forked children, which pickle each as its
    class and a tuple of its fields (rebuilt in one C call, a seventh of the dataclass's
    field-by-field ``__setstate__``)."""

    record_id: str
    registration_id: str
    digest: str
    arm: str
    task_id: str
    intent: str
    cluster: str
    polarity: str
    repeat: int
    rotation: int | None
    status: str
    evidence_class: str | None
    driver: str | None
    model_requested: str | None
    model_returned: str | None
    success: bool | None
    funnel: Mapping[str, bool | None]
    terminal_class: str | None
    selection_rate: float | None
    cost_usd: float | None
    tokens: Mapping[str, Any] | None
    batch: Any = None
    terminal_flag: str | None = None
    offer: Mapping[str, Any] | None = None  # the record's offer block, as plain data
    #: an unsettled-by-infrastructure unit counted as a failure (see the module docstring)
    counted_failure: bool = False
    #: the trace, reduced for InvokeRank's per-server funnel: tool names a tool search
    #: surfaced before the first call (None: the run recorded no search), and the first
    #: call's tool name and arguments (untrusted data, only ever validated)
    surfaced_tools: frozenset[str] | None = None
    first_call: tuple[str, Any] | None = None
    #: every outcome (:data:`OUTCOMES` order), computed from the fields above as the run
    #: is built (whatever is passed here is replaced)
    outcomes: tuple[bool | None, ...] = ()

    def __post_init__(self) -> None:
        force_setattr(self, "outcomes", _outcome_values(self))

    @property
    def first_server(self) -> str | None:
        """The offered integration the first tool call went to (None: none, or unknown)."""
        return None if self.offer is None else self.offer.get("first_server")

    @property
    def clone(self) -> Mapping[str, Any] | None:
        """clone_swap's cell of this run (labels of copies a and b, which was listed first)."""
        return None if self.offer is None else self.offer.get("clone")

    @property
    def unit(self) -> tuple[str, str, int]:
        """The run unit key: (arm, task, repeat)."""
        return (self.arm, self.task_id, self.repeat)

    @property
    def ok(self) -> bool:
        """Whether the run finished as an agent run (not an infrastructure failure)."""
        return self.status == "ok"

    def label(self) -> str:
        return unit_label(self.unit)

    def outcome(self, name: str) -> bool | None:
        """The binary outcome ``name`` of this run, or None when not measured / not counted.

        See the module docstring for the definitions. Returns None for runs that
        are not ``ok`` (an infrastructure failure has no agent outcome).
        """
        place = _PLACE.get(name)
        if place is None:  # not an outcome: None on a run that is not counted, else an error
            if not self.ok and not self.counted_failure:
                return None
            raise ValueError(f"unknown outcome '{name}'")
        return self.outcomes[place]


def replaced(obs: Obs, **changes: Any) -> Obs:
    """``obs`` with some fields changed, its outcomes computed again from the new fields."""
    return structs.replace(obs, **changes)


def _outcome_values(obs: Obs) -> tuple[bool | None, ...]:
    """Every outcome of ``obs`` (:data:`OUTCOMES` order): the module docstring's
    definitions. The analysis reads a run's outcomes once per pair of arms, arm block
    and section, hundreds of thousands of reads at 27,000 runs; they are computed once
    (the fields are frozen, so the values are too)."""
    out: dict[str, bool | None] = dict.fromkeys(OUTCOMES)
    if not obs.ok and not obs.counted_failure:
        return tuple(out.values())
    positive = obs.polarity == "positive"
    if obs.counted_failure:  # intention to treat: every outcome counted, and false
        for name in OUTCOMES:
            if positive or name not in POSITIVE_ONLY:
                out[name] = False
        return tuple(out.values())
    out["success"] = obs.success
    if positive:
        out["focal"] = None if obs.terminal_class is None else obs.terminal_class == "focal"
        stopped = False  # an earlier stage is recorded false: a null stage is not reached
        for stage in STAGES:
            value = obs.funnel.get(stage)
            out[stage] = value if value is not None else (False if stopped else None)
            stopped = stopped or value is False
    return tuple(out.values())


def unit_label(unit: tuple[str, str, int]) -> str:
    arm, task, repeat = unit
    return f"{arm}/{task}/r{repeat}"


def _funnel(record: RecordLike) -> dict[str, bool | None]:
    nested = _get(record, "funnel")
    out: dict[str, bool | None] = {}
    for stage in STAGES:
        value = _get(nested, stage) if nested is not None else _get(record, stage)
        out[stage] = _bool_or_none(value)
    return out


def _tokens(record: RecordLike) -> Mapping[str, Any] | None:
    tokens = _get(record, "tokens")
    if tokens is None:
        return None
    if hasattr(tokens, "model_dump"):
        tokens = tokens.model_dump()
    return dict(tokens) if isinstance(tokens, Mapping) else None


def _offer(record: RecordLike) -> Mapping[str, Any] | None:
    offer = _get(record, "offer")
    if offer is None:
        return None
    if hasattr(offer, "model_dump"):
        offer = offer.model_dump(mode="json")
    return dict(offer) if isinstance(offer, Mapping) else None


def _trace(record: RecordLike) -> tuple[frozenset[str] | None, tuple[str, Any] | None]:
    """(surfaced tool names before the first call or None, the first call) of a record."""
    surfaced: set[str] | None = None
    for event in _get(record, "trace") or []:
        kind = _get(event, "kind")
        if kind == "search":
            surfaced = (surfaced or set()) | {str(n) for n in _get(event, "surfaced") or []}
        elif kind == "tool_call":
            call = (str(_get(event, "tool")), _get(event, "arguments"))
            return (None if surfaced is None else frozenset(surfaced)), call
    return (None if surfaced is None else frozenset(surfaced)), None


def from_record(record: RecordLike) -> Obs:
    """Read a run record (pydantic model or mapping) into an observation."""
    if type(record) is RunRecord:
        return _from_run_record(record)
    return _from_any(record)


def _from_any(record: RecordLike) -> Obs:
    """:func:`from_record` field by field through :func:`_get` (a model or a mapping)."""
    status = str(_get(record, "status", "ok") or "ok")
    repeat = _get(record, "repeat", 0)
    rotation = _get(record, "rotation")
    surfaced, first_call = _trace(record)
    return Obs(
        record_id=str(_get(record, "record_id", "") or ""),
        registration_id=str(_get(record, "registration_id", "")),
        digest=str(_get(record, "registration_digest", "")),
        arm=str(_get(record, "arm")),
        task_id=str(_get(record, "task_id")),
        intent=str(_get(record, "intent", "") or ""),
        cluster=str(_get(record, "cluster", "") or ""),
        polarity=str(_get(record, "polarity", "positive") or "positive"),
        repeat=int(repeat or 0),
        rotation=None if rotation is None else int(rotation),
        status=status,
        evidence_class=_get(record, "evidence_class"),
        driver=_get(record, "driver"),
        model_requested=_get(record, "model_requested"),
        model_returned=_get(record, "model_returned"),
        success=_bool_or_none(_get(record, "success")),
        funnel=_funnel(record),
        terminal_class=_get(record, "terminal_class"),
        selection_rate=_float_or_none(_get(record, "selection_rate")),
        cost_usd=_float_or_none(_get(record, "cost_usd")),
        tokens=_tokens(record),
        batch=_get(record, "batch"),
        terminal_flag=_get(record, "terminal_flag"),
        offer=_offer(record),
        surfaced_tools=surfaced,
        first_call=first_call,
    )


def _interned(value: str | None) -> str | None:
    return None if value is None else intern(value)


def _from_run_record(record: RunRecord) -> Obs:
    """:func:`from_record` of a validated record: the same observation (a test compares
    them), read by attribute without the mapping-or-model dispatch per field, which is
    most of the per-record cost at tens of thousands of runs. The model's types make the
    generic path's string coercions (``str(...) or ""``) identities here. The strings
    tens of thousands of runs share (digest, arm, task, status...) are interned: one
    object each instead of one per run, so the observations take less memory, and fewer
    pages for a forked child to copy and bytes to send back (:mod:`prereg.core.forked`)."""
    offer = record.offer
    return _observation(
        record, _funnel_data(record.funnel), None if offer is None else _offer_data(offer)
    )


def _observation(
    record: RunRecord, funnel: Mapping[str, bool | None], offer: Mapping[str, Any] | None
) -> Obs:
    """:func:`_from_run_record` with the record's funnel and offer as plain data already."""
    surfaced: set[str] | None = None
    first_call: tuple[str, Any] | None = None
    for event in record.trace:
        if event.kind == "search":
            surfaced = (surfaced or set()) | {str(n) for n in event.surfaced or []}
        elif event.kind == "tool_call":
            first_call = (str(event.tool), event.arguments)
            break
    return Obs(
        record_id=record.record_id,
        registration_id=intern(record.registration_id),
        digest=intern(record.registration_digest),
        arm=intern(record.arm),
        task_id=intern(record.task_id),
        intent=intern(record.intent),
        cluster=intern(record.cluster),
        polarity=intern(record.polarity),
        repeat=int(record.repeat),
        rotation=int(record.rotation),
        status=intern(record.status),
        evidence_class=_interned(record.evidence_class),
        driver=_interned(record.driver),
        model_requested=_interned(record.model_requested),
        model_returned=_interned(record.model_returned),
        success=_bool_or_none(record.success),
        funnel=funnel,
        terminal_class=_interned(record.terminal_class),
        selection_rate=_float_or_none(record.selection_rate),
        cost_usd=_float_or_none(record.cost_usd),
        tokens=_tokens_data(record.tokens),
        batch=record.batch,
        terminal_flag=record.terminal_flag,
        offer=offer,
        surfaced_tools=None if surfaced is None else _shared_names(frozenset(surfaced)),
        first_call=first_call,
    )


#: funnel blocks as plain data, one object per combination of stages (:func:`_funnel_data`)
_FUNNELS: dict[tuple[bool | None, ...], Mapping[str, bool | None]] = {}


def _funnel_data(funnel: Any) -> Mapping[str, bool | None]:
    """A record's funnel as plain data (:data:`STAGES` order), one object for every run
    with the same stages (at most 3 ** 5 combinations; read-only, as all of an
    observation), as :func:`_offer_data` shares offer blocks."""
    key = (funnel.surfaced, funnel.selected, funnel.invoked, funnel.executed, funnel.completed)
    shared = _FUNNELS.get(key)
    if shared is None:
        shared = _FUNNELS[key] = dict(zip(STAGES, key, strict=True))
    return shared


#: tool names surfaced before a first call, one object per set (:func:`_shared_names`)
_NAMES: dict[frozenset[str], frozenset[str]] = {}


def _shared_names(names: frozenset[str]) -> frozenset[str]:
    """One object for every run that surfaced the same tools (a task's runs mostly do)."""
    if len(_NAMES) >= 4096:  # a bound: a registration's runs share far fewer
        _NAMES.clear()
    return _NAMES.setdefault(names, names)


#: The record fields an observation reads (:func:`_from_run_record`), the row's indexed
#: columns among them (:func:`indexed_columns`), and of a trace event the ones it reads.
READ_FIELDS: tuple[str, ...] = (
    *("record_id", "registration_id", "registration_digest", "arm", "task_id", "intent"),
    *("cluster", "polarity", "repeat", "rotation", "status", "evidence_class", "driver"),
    *("model_requested", "model_returned", "success", "funnel", "terminal_class"),
    *("selection_rate", "cost_usd", "tokens", "batch", "terminal_flag", "offer"),
)
READ_EVENT_FIELDS: tuple[str, ...] = ("kind", "tool", "arguments", "surfaced")


#: A run record's body read for an observation: what :func:`_from_run_record` reads, each
#: field decoded as :class:`RunRecord` declares it (type, constraints, default; nested
#: models with their own checks), of the trace's events only what is read, every other
#: member skipped, not decoded (:mod:`prereg.core.struct_view`: a sixth of the cost of
#: pydantic's validation of the same fields, the largest part of reading a pinned link).
#: The funnel and the offer are kept as their JSON text and decoded once per distinct
#: text (:class:`_Shared`): a programme's runs repeat a few dozen funnels and a handful
#: of offers, whose decoding and checks were a fifth of a link's reading.
PINNED_VIEW = struct_view(
    RunRecord, READ_FIELDS, raw=("funnel", "offer"), trace=(TraceEvent, READ_EVENT_FIELDS)
)


class _Shared:
    """One field's value as plain data by its JSON text: decoded as :class:`RunRecord`
    declares the field (:func:`prereg.core.struct_view.field_decoder`), checks included,
    the first time a text is seen; the same object for every later run with the same
    text (read-only, as all of an observation)."""

    def __init__(self, name: str, plain: Callable[[Any], Any]) -> None:
        self._decoder = field_decoder(RunRecord, name)
        self._plain = plain
        self._seen: dict[bytes, Any] = {}

    def __call__(self, text: msgspec.Raw) -> Any:
        key = bytes(text)
        value = self._seen.get(key, _UNSEEN)
        if value is _UNSEEN:
            decoded = self._decoder.decode(key)  # ValueError (ValidationError): not as declared
            if len(self._seen) >= 4096:  # a bound, never reached by one registration's runs
                self._seen.clear()
            value = self._seen[key] = self._plain(decoded)
        return value


_UNSEEN = object()
_FUNNEL = _Shared("funnel", lambda funnel: _funnel_data(funnel))
_OFFER = _Shared("offer", lambda offer: None if offer is None else _offer_data(offer))


def pinned_observation(body: str) -> tuple[tuple[object, ...], Obs]:
    """A pinned link's body read into (its indexed columns, its observation), decoding
    only what the observation reads (:data:`PINNED_VIEW`); the chain check reads links
    the registry's anchor pins this way (:data:`prereg.runners.store.verify.PinnedRead`:
    their bytes are the ones a full check accepted, record-level rules included). The
    same observation as :func:`from_record` of the validated record (a test compares
    them); ValueError (msgspec's ValidationError) where a field read is not as the schema
    declares it."""
    view = cast(RunRecord, PINNED_VIEW.decode(body))  # the fields read, typed so
    funnel, offer = _FUNNEL(view.funnel), _OFFER(view.offer)  # type: ignore[arg-type]
    return indexed_columns(view), _observation(view, funnel, offer)


#: offer blocks as plain data by their JSON text (:func:`_offer_data`)
_OFFERS: dict[bytes, Mapping[str, Any]] = {}


def _offer_data(offer: Any) -> Mapping[str, Any]:
    """A record's offer block (a model, or its :data:`PINNED_VIEW` Struct) as plain data,
    one object for every run whose block is the same (a programme's runs share a handful:
    4 at 27,000 runs; read-only, as all of an observation): a tenth of an observation's
    memory and of what a forked child sends."""
    model = isinstance(offer, BaseModel)
    key = offer.__pydantic_serializer__.to_json(offer) if model else msgspec.json.encode(offer)
    shared = _OFFERS.get(key)
    if shared is None:
        if len(_OFFERS) >= 4096:  # a bound, never reached by one registration's offers
            _OFFERS.clear()
        shared = _OFFERS[key] = offer.model_dump(mode="json") if model else to_builtins(offer)
    return shared


def _tokens_data(tokens: Any) -> dict[str, Any]:
    """A record's token counts (a model, or its :data:`PINNED_VIEW` Struct) as a dict."""
    return tokens.model_dump() if isinstance(tokens, BaseModel) else asdict(tokens)
