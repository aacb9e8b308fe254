"""What the Anthropic and OpenAI drivers share: one request, done carefully.

Each provider driver only knows its wire format (how to build a request from the
episode and the exchanges so far, how to read a response into a turn). This
base class does everything around the request, identically for both:

- the client is built with the key from the provider's variable, the base URL
  from the provider's base-URL variable, ``max_retries=0`` (retries are ours and
  counted) and OpenTelemetry off (spans could carry request content);
- before a request: the spend cap holds its worst case, the rate limiter admits
  it (estimated tokens), then :func:`with_retries` runs the attempts;
- after: latency of the successful attempt, usage, the model string returned,
  cost from the price table; every string that leaves the driver is redacted
  (:func:`redacted_turn`: tool name, call id, arguments, text, surfaced tool names,
  the model returned; the key as it is, encoded or in pieces) and so is the message of
  every exception it raises, whatever its type (:meth:`ModelDriver.next_turn`): a hostile
  endpoint that echoes the key back anywhere in a response cannot get it into a record,
  a trace or the terminal; a turn that still holds a key-shaped string after redaction
  (a key's prefix followed by a key's body or a redacted piece:
  :func:`~prereg.runners.providers.credentials.holds_key_prefix`) is refused as an
  infrastructure error rather than stored;
- the provider transcript of an episode (raw content blocks / output items, tool
  search results, reasoning items) is kept per episode so the next request sends
  back exactly what the provider returned, not a reconstruction;
- turns primed from a batch are answered without a request.

Never done: a retry with another model, a sampling parameter the registration
did not contain, a repaired tool call.
"""

from __future__ import annotations

import asyncio
import json
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, ClassVar

from prereg.core.errors import BadInput
from prereg.registry.hosts import EvidenceClass
from prereg.runners.drivers.base import (
    CutAtCap,
    Episode,
    Exchange,
    FinalAnswer,
    InfraError,
    Malformed,
    ToolCall,
    Turn,
    Usage,
)
from prereg.runners.providers.batch_backend import BatchBackend
from prereg.runners.providers.credentials import (
    Provider,
    holds_key_prefix,
    redact,
    redact_obj,
    secret_values,
)
from prereg.runners.providers.prices import (
    ModelPrice,
    Priced,
    PriceTable,
    cost_usd,
    load_prices,
    worst_case_usd,
)
from prereg.runners.providers.ratelimit import RateLimiter
from prereg.runners.providers.response_cache import ResponseCache, plain_response
from prereg.runners.providers.retry import RetryStats, with_retries
from prereg.runners.providers.send import Encoded
from prereg.runners.providers.send import hold as hold_wire
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.providers.spend import SpendMeter
from prereg.runners.providers.transport import (
    chosen,
    http_client,
    tls_context,
)

#: Host parameters that change sampling (kept in step with the registry's list).
SAMPLING_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "min_p",
        "typical_p",
        "repetition_penalty",
    }
)

_MAX_TRANSCRIPTS = 4096
_MAX_CONTINUATIONS = 4


@dataclass
class Stored:
    """One assistant turn as the provider returned it, ready to be sent back."""

    items: list[dict[str, Any]]
    call_id: str | None = None


@dataclass
class Parsed:
    """A response read into a turn (latency is added by the caller)."""

    turn: Turn
    stored: Stored
    total_tokens: int | None = None
    #: set when the provider paused the turn and it must be continued (Anthropic)
    paused: bool = False


@dataclass
class TokenSplit:
    """Provider usage mapped to prereg's fields, plus what to bill.

    Recorded: ``input`` counts every prompt token (cached and cache-written
    included), ``cached`` the cache reads among them, ``reasoning`` the reasoning
    tokens and ``output`` the rest of the generated tokens, so that
    ``input + output + reasoning`` is the request's total (the record's
    ``Tokens.total``) with nothing counted twice. Either field is None when the
    provider did not report it.
    """

    usage: Usage
    billed: Priced
    total: int


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """A deliberately generous prompt-size estimate (two characters per token).

    Used only to hold spend and rate-limit budget before a request; the measured
    usage replaces it as soon as the response arrives.
    """
    return len(json.dumps(body, default=str, ensure_ascii=False)) // 2 + 16


def wire_tokens(wire: bytes) -> int:
    """The same generous estimate from the bytes a request sends (compact JSON, UTF-8),
    which the driver encodes once for both (:func:`~prereg.runners.providers.send.hold`)."""
    return len(wire) // 2 + 16


def episode_key(episode: Episode) -> str:
    return f"{episode.label}#{episode.seed}"


def ends_episode(turn: Turn) -> bool:
    return isinstance(turn.action, FinalAnswer | CutAtCap)


def redacted_turn(turn: Turn) -> Turn:
    """``turn`` with every string the provider returned passed through :func:`redact`.

    The transcript sent back to the provider (:class:`Stored`) keeps what it returned;
    only what leaves the driver for the harness, the records and the terminal is
    redacted. A turn whose strings still hold a key-shaped string afterwards (a provider
    key's prefix followed by a key's body or a redacted piece, :func:`holds_key_prefix`: a
    key in a form redaction does not know) is refused: :class:`InfraError`, naming the
    reason and not the text. A prefix alone, or followed by a word (``sk-learn``), is text.
    """
    action = turn.action
    secrets = secret_values()  # read once for the turn's strings
    if isinstance(action, ToolCall):
        action = replace(
            action,
            name=redact(action.name, secrets),
            arguments=redact_obj(action.arguments, secrets),
            call_id=None if action.call_id is None else redact(action.call_id, secrets),
        )
    elif isinstance(action, Malformed | FinalAnswer | CutAtCap):
        action = replace(action, text=redact(action.text, secrets))
    returned = turn.model_returned
    clean = replace(
        turn,
        action=action,
        model_returned=None if returned is None else redact(returned, secrets),
        surfaced=None
        if turn.surfaced is None
        else tuple(redact(n, secrets) for n in turn.surfaced),
    )
    said: list[Any] = [clean.model_returned, clean.surfaced]
    if isinstance(action, ToolCall):
        said += [action.name, action.arguments, action.call_id]
    elif isinstance(action, Malformed | FinalAnswer | CutAtCap):
        said.append(action.text)
    if holds_key_prefix(said):
        raise InfraError(KEY_PREFIX_REFUSED)
    return clean


#: the reason a response is refused when a key's prefix survives its redaction
KEY_PREFIX_REFUSED = (
    "the response still holds the prefix of a provider key after redaction (a key echoed "
    "back in a form prereg cannot remove); refused rather than stored"
)


def redacted_error(exc: Exception, provider: str) -> InfraError:
    """``exc`` as an :class:`InfraError` whose message is redacted, whatever its type.

    An InfraError (a provider error, a refused spend, ...) keeps its class and
    attributes and has its message redacted in place; any other exception (a parse
    error of a malformed response, a bug) becomes an InfraError naming its type.
    Raise the result ``from None``: the original may hold the key in its message, its
    arguments or its request object.
    """
    if isinstance(exc, InfraError):
        exc.args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
        return exc
    return InfraError(redact(f"{provider}: {type(exc).__name__}: {exc}"))


@dataclass
class _Transcripts:
    by_episode: OrderedDict[str, list[Stored]] = field(default_factory=OrderedDict)

    def start(self, key: str) -> list[Stored]:
        self.by_episode.pop(key, None)
        self.by_episode[key] = []
        while len(self.by_episode) > _MAX_TRANSCRIPTS:
            self.by_episode.popitem(last=False)
        return self.by_episode[key]

    def get(self, key: str, turns: int) -> list[Stored] | None:
        stored = self.by_episode.get(key)
        if stored is None or len(stored) != turns:
            return None
        return stored


#: distinct tool listings a driver keeps encoded (an arm has one per rotation and cell)
MAX_LISTINGS = 256


def listing_key(episode: Episode) -> tuple[object, ...]:
    """What a driver's tool specs depend on: each offered tool's text fields and its
    schema (by identity: the schemas are the offer's own objects, shared by its units)."""
    return tuple(
        (
            t.name,
            t.title,
            t.description,
            t.integration,
            t.integration_description,
            id(t.input_schema),
        )
        for t in episode.tools
    )


class ModelDriver(ABC):
    """Base of the provider drivers (see the module docstring)."""

    provider: ClassVar[Provider]
    #: request fields the driver sets itself; a registration's params may not set them
    reserved_params: ClassVar[frozenset[str]] = frozenset()
    evidence_class: EvidenceClass = "api"
    sees_solution = False

    def __init__(
        self,
        model: str | None,
        params: Mapping[str, Any] | None = None,
        *,
        tool_search: bool = False,
        allow_sampling: bool | None = None,
        settings: ProviderSettings | None = None,
        spend: SpendMeter | None = None,
        prices: PriceTable | None = None,
        http_client_factory: Any = None,
        cache_credit: bool = True,
    ) -> None:
        if not model:
            raise BadInput(
                f"driver '{self.provider}' needs a model (host.model)", field="host.model"
            )
        params = dict(params or {})
        reserved = sorted(self.reserved_params & set(params))
        if reserved:
            raise BadInput(
                f"host.params may not set {', '.join(reserved)}: the "
                f"{self.provider} driver sets these from the registration "
                "(model, budgets, tools)",
                field="host.params",
            )
        sampling = sorted(SAMPLING_PARAMS & set(params))
        if sampling and allow_sampling is False:
            raise BadInput(
                f"sampling parameter(s) {', '.join(sampling)} need host.allow_sampling: true",
                field="host.params",
            )
        self.name: str = self.provider
        self.model: str = model
        self.params: dict[str, Any] = params
        self.tool_search = bool(tool_search)
        self.loads_all_tools = not self.tool_search
        self.settings = settings or ProviderSettings.from_env(self.provider)
        self.prices = prices or load_prices(self.settings.prices_path)
        #: the registration's cost policy (``harness.cache_credit``; see ``cost``)
        self.cache_credit = bool(cache_credit)
        self.spend = spend or SpendMeter(None)
        self.limiter = RateLimiter(self.settings.rpm, self.settings.tpm)
        self.stats = RetryStats()
        self.batch_only = False
        self._http_client_factory = http_client_factory
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._loading: asyncio.Task[None] | None = None  # the SDK's load, shared by all units
        self._transcripts = _Transcripts()
        self._primed: dict[str, Parsed | InfraError] = {}
        self._specs: dict[tuple[object, ...], tuple[object, Encoded]] = {}
        #: the pilot's response cache (``run --cache``), or None
        self.cache: ResponseCache | None = None

    def use_cache(self, cache: ResponseCache) -> None:
        """Answer requests from ``cache`` where it holds them (``run --cache``); every
        record this driver makes then carries the evidence class ``cached``."""
        self.cache = cache
        self.evidence_class = "cached"

    # ---- provider-specific -------------------------------------------------------------

    @abstractmethod
    def _make_client(self) -> Any:
        """The provider's SDK client (key and base URL from the environment)."""

    @abstractmethod
    def _import_sdk(self) -> ModuleType:
        """Import the provider's SDK and return it (run in a worker thread, see
        :meth:`_ready_client`)."""

    @abstractmethod
    def tools(self, episode: Episode) -> list[dict[str, Any]]:
        """The episode's tools as the provider's request lists them."""

    def tool_specs(self, episode: Episode) -> list[dict[str, Any]]:
        """:meth:`tools`, built and encoded once per distinct listing (every unit of an arm
        lists the same tools in one of a few orders), kept as :class:`Encoded`."""
        key = listing_key(episode)
        hit = self._specs.get(key)
        if hit is None:
            if len(self._specs) >= MAX_LISTINGS:
                self._specs.clear()
            # the episode's tools are kept with the specs: their schemas' ids in the key
            # stay theirs while the entry lives
            hit = self._specs[key] = (episode.tools, Encoded(self.tools(episode)))
        return hit[1]

    @abstractmethod
    def build_request(
        self,
        episode: Episode,
        history: Sequence[Exchange],
        transcript: Sequence[Stored] | None = None,
    ) -> dict[str, Any]:
        """The request body for the next turn (also the body of a batch request)."""

    @abstractmethod
    async def _create(self, client: Any, body: dict[str, Any]) -> Any:
        """Send one request through the SDK; returns the SDK's response object."""

    @abstractmethod
    def parse(self, response: Any, *, batch: bool = False) -> Parsed:
        """The turn a response carries, with usage, cost and the model returned."""

    @abstractmethod
    def batch_backend(self) -> BatchBackend:
        """The provider's batch API, driven by :mod:`prereg.runners.providers.batch`."""

    def _continuation(self, body: dict[str, Any], parsed: Parsed) -> dict[str, Any]:
        """The request that continues a paused turn (providers that pause override it)."""
        raise InfraError(f"{self.provider} paused a turn and prereg cannot continue it")

    # ---- shared ---------------------------------------------------------------------------

    @property
    def price(self) -> ModelPrice | None:
        return self.prices.price(self.provider, self.model)

    def cost(self, billed: Priced, model_returned: str | None, *, batch: bool) -> float | None:
        """Cost at the price of the model that answered (else the one requested), under
        the registered cost policy (cache credit or not)."""
        price = self.prices.price(self.provider, model_returned) or self.price
        discount = self.prices.batch_discount(self.provider) if batch else 1.0
        return cost_usd(price, billed, discount=discount, cache_credit=self.cache_credit)

    def preload(self) -> None:
        """Load the SDK now: a parent about to fork ``prereg run --workers N`` processes
        loads it once for all of them, so no worker pays the import mid-run."""
        self._load_sdk()

    def _load_sdk(self) -> None:
        """Import the SDK and build the TLS context its aiohttp transport shares
        (:func:`~prereg.runners.providers.transport.tls_context`)."""
        self._import_sdk()
        if self._http_client_factory is None and chosen(self.settings) == "aiohttp":
            tls_context()

    async def _ready_client(self) -> Any:
        """The client for the running loop. The SDK's first load (a second or more of
        CPU) runs in a worker thread, so the event loop (every other unit's requests and
        timers) is not held for it; once, however many units start together (32 loads
        at once cost 0.2 s of the run's start)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            if self._loading is None or self._loading.get_loop() is not loop:
                self._loading = loop.create_task(asyncio.to_thread(self._load_sdk))
            await asyncio.shield(self._loading)  # a cancelled unit leaves the load to the rest
        return self._client_for_loop()

    def _client_for_loop(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = self._make_client()
            self._client_loop = loop
        return self._client

    def _http_client(self, sdk: ModuleType) -> Any:
        """The client's transport: a test's factory, else the settings' (see
        :mod:`prereg.runners.providers.transport`)."""
        if self._http_client_factory is not None:
            return self._http_client_factory()
        return http_client(sdk, self.settings)

    async def aclose(self) -> None:
        client, self._client, self._client_loop = self._client, None, None
        self._transcripts = _Transcripts()
        self._primed.clear()
        if client is not None:
            try:
                await client.close()
            except RuntimeError:  # the loop the client was bound to is gone
                pass

    def prime(self, episode: Episode, parsed: Parsed) -> None:
        """Answer the first turn of ``episode`` with a batch result (no request)."""
        self._primed[episode_key(episode)] = parsed

    def prime_error(self, episode: Episode, error: InfraError) -> None:
        """Make the first turn of ``episode`` fail as infrastructure (its batch request
        errored, expired or was cancelled)."""
        self._primed[episode_key(episode)] = error

    def primed_count(self) -> int:
        return len(self._primed)

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        """The next turn, redacted; any failure is a redacted :class:`InfraError`."""
        try:
            return redacted_turn(await self._next_turn(episode, history))
        except Exception as exc:  # noqa: BLE001 - every failure leaves redacted
            raise redacted_error(exc, self.provider) from None

    async def _next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        key = episode_key(episode)
        if not history:
            transcript = self._transcripts.start(key)
            primed = self._primed.pop(key, None)
            if isinstance(primed, InfraError):
                raise primed
            if primed is not None:
                transcript.append(primed.stored)
                return primed.turn
            if self.batch_only:
                raise InfraError(
                    "no batch result for this unit (batch mode sends no synchronous request)"
                )
        stored = self._transcripts.get(key, len(history))
        body = self.build_request(episode, history, stored)
        parsed, latency, retries = await self._request(body, episode.label)
        merged, merged_latency = parsed, latency
        for _ in range(_MAX_CONTINUATIONS):
            if not merged.paused:
                break
            body = self._continuation(body, merged)
            more, more_latency, more_retries = await self._request(body, episode.label)
            retries += more_retries
            merged = _merge(merged, more)
            merged_latency = _add(merged_latency, more_latency)
        else:
            if merged.paused:
                raise InfraError(
                    f"{self.provider} kept pausing the turn ({_MAX_CONTINUATIONS} continuations)"
                )
        if stored is not None:
            stored.append(merged.stored)
        turn = replace(merged.turn, latency_ms=merged_latency, retries=retries)
        if ends_episode(turn):
            self._transcripts.by_episode.pop(key, None)
        return turn

    async def _request(
        self, body: dict[str, Any], unit: str | None = None
    ) -> tuple[Parsed, float | None, int]:
        """One request with spend hold, rate limit and retries; from the response cache
        instead when the pilot uses one and it holds this unit's request.

        Returns (parsed, latency ms of the successful attempt, retries it took).
        """
        cache_key = None
        if self.cache is not None and unit is not None:
            cache_key = self.cache.key(self.provider, unit, body)
            kept = self.cache.get(cache_key)
            if kept is not None:  # nothing sent, nothing spent, no latency measured
                parsed = self.parse(kept, batch=False)
                spent = None if parsed.turn.cost_usd is None else 0.0
                return replace(parsed, turn=replace(parsed.turn, cost_usd=spent)), None, 0
        prompt_tokens = wire_tokens(hold_wire(body))
        max_out = int(body.get("max_tokens") or body.get("max_output_tokens") or 0)
        price = self.price
        worst = None if price is None else worst_case_usd(price, prompt_tokens, max_out)
        hold = (
            self.spend.reserve(worst)
            if (self.spend.cap_usd is not None or worst is not None)
            else None
        )
        latency: list[float | None] = [None]
        parsed_box: list[Parsed] = []
        responses: list[Any] = []
        attempts = [0]

        async def attempt() -> Any:
            attempts[0] += 1
            client = await self._ready_client()
            reservation = await self.limiter.acquire(prompt_tokens + max_out)
            started = time.perf_counter()
            try:
                response = await self._create(client, body)
            except BaseException:
                self.limiter.settle(reservation, 0)
                raise
            latency[0] = (time.perf_counter() - started) * 1000.0
            parsed = self.parse(response, batch=False)
            parsed_box.append(parsed)
            responses.append(response)
            self.limiter.settle(reservation, parsed.total_tokens)
            return response

        try:
            await with_retries(
                attempt,
                self.settings.retry,
                stats=self.stats,
                what=f"{self.provider} request (model {self.model})",
            )
        except BaseException:
            if hold is not None:
                self.spend.release(hold)
            raise
        parsed = parsed_box[-1]
        if hold is not None:
            self.spend.settle(hold, parsed.turn.cost_usd)
        if self.cache is not None and cache_key is not None:
            kept = redact_obj(plain_response(responses[-1]))  # no secret is kept on disk
            if not holds_key_prefix(kept):
                self.cache.put(cache_key, kept)
        return parsed, latency[0], attempts[0] - 1


def _add(a: float | int | None, b: float | int | None) -> Any:
    return None if a is None or b is None else a + b


def _merge(first: Parsed, second: Parsed) -> Parsed:
    """A paused turn and its continuation as one turn (usage and cost added)."""
    u1, u2 = first.turn.usage, second.turn.usage
    usage = (
        None
        if u1 is None or u2 is None
        else Usage(
            input=_add(u1.input, u2.input),
            output=_add(u1.output, u2.output),
            reasoning=_add(u1.reasoning, u2.reasoning),
            cached=_add(u1.cached, u2.cached),
        )
    )
    surfaced: tuple[str, ...] | None = None
    if first.turn.surfaced is not None or second.turn.surfaced is not None:
        surfaced = tuple(dict.fromkeys((first.turn.surfaced or ()) + (second.turn.surfaced or ())))
    searched = None
    if first.turn.searched is not None or second.turn.searched is not None:
        searched = bool(first.turn.searched) or bool(second.turn.searched)
    turn = replace(
        second.turn,
        usage=usage,
        cost_usd=_add(first.turn.cost_usd, second.turn.cost_usd),
        surfaced=surfaced,
        searched=searched,
    )
    stored = Stored(first.stored.items + second.stored.items, second.stored.call_id)
    return Parsed(turn, stored, _add(first.total_tokens, second.total_tokens), second.paused)
