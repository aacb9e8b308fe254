"""The OpenAI-compatible Chat Completions driver: open-weights servers through the ``openai`` SDK.

vLLM, SGLang, llama.cpp's server, Ollama and most gateways speak the Chat Completions wire
format, few speak the Responses API the ``openai`` driver uses. This driver sends
``POST {base_url}/chat/completions`` through the official SDK client and shares every rule
around the request with the other provider drivers
(:class:`~prereg.runners.providers.driver.ModelDriver`: retries, rate limits, spend holds,
redaction).

The server: ``host.params.base_url`` when the registration pins one (it is then part of the
digest and of every record's ``config``; it is never sent as a body field), else
``OPENAI_BASE_URL``; one of them is required (a clear exit 2 before anything is written).
A URL carrying credentials is refused: the key comes from ``OPENAI_API_KEY``, which is sent
when set and redacted wherever it could surface; when it is unset the placeholder
``EMPTY`` is sent, which servers started without a key accept. The driver names the
server (``host:port``, never a path, a query or a credential) in its errors.

What is sent (and nothing else):

- ``model`` as registered, the arm's system prompt (if any) as a ``system`` message, the
  user prompt, then for each past turn the assistant message as returned (its first tool
  call only) and a ``tool`` message answering it;
- the arm's tools as ``function`` tools (name, description, parameters exactly as
  registered; no ``strict``): this path has no field for an MCP server's name or
  description, so ``server_text`` is ``"none"``;
- ``tool_choice: "auto"`` and ``parallel_tool_calls: false``;
- the completion cap as ``max_completion_tokens``; a server that rejects that field with a
  400 naming it, or ignores it (answers with more completion tokens than the cap), gets
  ``max_tokens`` instead, for the rest of the run (:attr:`cap_field`);
- the registration's ``host.params`` verbatim (sampling parameters only when the
  registration allows them), ``base_url`` excepted.

What is read: the first tool call (arguments that are not a JSON object are a malformed
call, never repaired; the malformed call goes back to the server as ``{}`` next to the
harness's parse error, as on the Anthropic path, because servers such as vLLM parse past
arguments to render their chat template and an unparsable one would fail every later
request), ``finish_reason: length`` as a cut at the cap, the ``model`` string returned,
usage (``prompt_tokens`` with ``cached_tokens``, ``completion_tokens`` with
``reasoning_tokens`` split out; a detail the server does not report is null).

No batch API and no tool search: open-weights servers have neither, so both are refused
before a request. Cost is null unless a price table lists the model under
``openai-chat`` (a local server has no price; a gateway's is the user's to state).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from functools import cache
from types import ModuleType
from typing import Any, ClassVar, Final, cast
from urllib.parse import urlsplit

from prereg.core.errors import BadInput
from prereg.registry.hosts import DRIVERS, base_url_problem
from prereg.runners.drivers.base import (
    Action,
    CutAtCap,
    Episode,
    Exchange,
    FinalAnswer,
    InfraError,
    Malformed,
    OfferedTool,
    ToolCall,
    Turn,
    Usage,
)
from prereg.runners.providers.batch_backend import BatchBackend
from prereg.runners.providers.credentials import (
    BASE_URL_VARIABLES,
    MissingKey,
    Provider,
    api_key,
    base_url,
)
from prereg.runners.providers.driver import ModelDriver, Parsed, Stored, TokenSplit
from prereg.runners.providers.plain import chat_completion
from prereg.runners.providers.prices import Priced
from prereg.runners.providers.send import Route, post_plain
from prereg.runners.providers.settings import ProviderSettings

NAME: Final = "openai-chat"
#: the variable the base URL comes from when the registration does not pin one
BASE_URL_VARIABLE = BASE_URL_VARIABLES["openai"]
#: the key sent when ``OPENAI_API_KEY`` is unset (vLLM's documented placeholder)
NO_KEY = "EMPTY"
#: the completion-cap fields, in the order they are tried
CAP_FIELDS = ("max_completion_tokens", "max_tokens")
#: the body key the cap travels under inside prereg (renamed at send, see ``_create``); it
#: is also the key ``ModelDriver`` reads the worst-case output from for the spend hold
_CAP_KEY = "max_tokens"


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return dict(obj)
    dumped: dict[str, Any] = obj.model_dump(mode="json", exclude_none=True, warnings=False)
    return dumped


def resolve_base_url(params: Mapping[str, Any]) -> str:
    """The server's base URL: ``params['base_url']``, else ``OPENAI_BASE_URL``.

    BadInput (exit 2) naming the field when neither is set or the URL is unusable.
    """
    registered = params.get("base_url")
    if registered is not None:
        problem = base_url_problem(registered)
        if problem is not None:
            raise BadInput(problem, field="host.params.base_url")
        return str(registered)
    from_env = base_url("openai")
    if from_env is None:
        raise BadInput(
            f"the {NAME} driver needs the server's base URL: set host.params.base_url in "
            f"the registration or export {BASE_URL_VARIABLE} (for example "
            "http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for Ollama)",
            field=f"host.params.base_url or {BASE_URL_VARIABLE}",
        )
    problem = base_url_problem(from_env)
    if problem is not None:
        raise BadInput(problem, field=BASE_URL_VARIABLE)
    return from_env


def server_name(url: str) -> str:
    """``host[:port]`` of a base URL: what names the server (no path, query or credential)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{host}:{parts.port}" if parts.port else host


def chat_key() -> str:
    """``OPENAI_API_KEY`` when set (read by the credentials module), else :data:`NO_KEY`."""
    try:
        return api_key("openai")
    except MissingKey:
        return NO_KEY


def token_split(usage: Any) -> TokenSplit | None:
    """Chat Completions usage in prereg's fields (see :class:`TokenSplit`).

    ``cached`` and ``reasoning`` are null when the server reports no detail for them
    (vLLM without prompt-token details, most servers for reasoning): not measured.
    """
    if usage is None:
        return None
    prompt = int(_get(usage, "prompt_tokens") or 0)
    completion = int(_get(usage, "completion_tokens") or 0)
    prompt_details = _get(usage, "prompt_tokens_details")
    raw_cached = _get(prompt_details, "cached_tokens") if prompt_details is not None else None
    cached = None if raw_cached is None else min(int(raw_cached), prompt)
    out_details = _get(usage, "completion_tokens_details")
    raw_reasoning = _get(out_details, "reasoning_tokens") if out_details is not None else None
    reasoning = None if raw_reasoning is None else min(int(raw_reasoning), completion)
    recorded = Usage(
        input=prompt, output=completion - (reasoning or 0), reasoning=reasoning, cached=cached
    )
    billed = Priced(prompt - (cached or 0), cached or 0, 0, completion)
    return TokenSplit(recorded, billed, prompt + completion)


class OpenAIChatDriver(ModelDriver):
    # ModelDriver types ``provider`` as a credentials Provider (a driver with a key of its
    # own); this one reads OpenAI's variables itself (``_make_client``) and its name keys the
    # settings, the price table and every message. The cast goes once ModelDriver types
    # ``provider`` as the driver's name (a DriverName) rather than a credentials Provider.
    provider: ClassVar[Provider] = cast("Provider", NAME)
    #: the Chat Completions path has no field for server metadata: only tools are sent
    server_text = "none"
    #: the request fields the driver sets itself (the registry refuses them at register)
    reserved_params: ClassVar[frozenset[str]] = DRIVERS[NAME].reserved_params

    def __init__(
        self,
        model: str | None,
        params: Mapping[str, Any] | None = None,
        *,
        settings: ProviderSettings | None = None,
        **options: Any,
    ) -> None:
        params = dict(params or {})
        self.registered_base_url: str | None = params.pop("base_url", None)
        if options.get("tool_search"):
            raise BadInput(
                f"the {NAME} driver has no tool search (Chat Completions servers load "
                "every tool): register host.tool_search: false",
                field="host.tool_search",
            )
        super().__init__(
            model,
            params,
            settings=settings or ProviderSettings.from_env(NAME.replace("-", "_")),
            **options,
        )
        #: the field the completion cap is sent as (switches once, see ``_create``)
        self.cap_field: str = CAP_FIELDS[0]
        self._call_ids = itertools.count(1)
        self._server: str | None = None
        try:
            self._server = server_name(self._base_url())
        except BadInput:  # refused by the run factory before any unit; named at first use
            pass

    @property
    def server(self) -> str | None:
        """``host:port`` of the server (named in errors; what a record field would carry)."""
        return self._server

    def _base_url(self) -> str:
        given = {} if self.registered_base_url is None else {"base_url": self.registered_base_url}
        return resolve_base_url(given)

    def _import_sdk(self) -> ModuleType:
        import openai  # lazy: the SDK is heavy; imported off the event loop

        return openai

    def _make_client(self) -> Any:
        import openai  # lazy: the OpenAI SDK is heavy; loaded at the first request

        return openai.AsyncOpenAI(
            api_key=chat_key(),
            base_url=self._base_url(),
            max_retries=0,
            timeout=self.settings.timeout_s,
            http_client=self._http_client(openai),
        )

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        """The shared path (redacted turn or redacted InfraError); errors name the server."""
        try:
            return await super().next_turn(episode, history)
        except InfraError as exc:
            if exc.args and isinstance(exc.args[0], str):
                exc.args = (f"{exc.args[0]} [server {self._server or '?'}]", *exc.args[1:])
            raise

    # ---- request --------------------------------------------------------------------------

    def tools(self, episode: Episode) -> list[dict[str, Any]]:
        """The arm's tools as Chat Completions function tools (no server name or text)."""
        return [_function(tool) for tool in episode.tools]

    def build_request(
        self,
        episode: Episode,
        history: Sequence[Exchange],
        transcript: Sequence[Stored] | None = None,
    ) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if episode.system is not None:
            messages.append({"role": "system", "content": episode.system})
        messages.append({"role": "user", "content": episode.prompt})
        for index, exchange in enumerate(history):
            stored = (
                transcript[index] if transcript is not None else _synthesised(exchange.turn, index)
            )
            messages.extend(stored.items)
            if exchange.result is None:
                continue
            if stored.call_id is not None:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": stored.call_id,
                        "content": exchange.result.text,
                    }
                )
            else:  # no call id to answer (a rebuilt malformed turn): the result as text
                messages.append({"role": "user", "content": exchange.result.text})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if episode.completion_cap is not None:
            body[_CAP_KEY] = episode.completion_cap
        tools = self.tool_specs(episode)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
            body["parallel_tool_calls"] = False
        body.update(self.params)
        return body

    async def _create(self, client: Any, body: dict[str, Any]) -> Any:
        """Send ``body`` with the cap under :attr:`cap_field`.

        While that is ``max_completion_tokens``, a server that refuses it (a 400 naming it)
        or ignores it (more completion tokens than the cap: some servers drop fields they
        do not know) gets the request once more with ``max_tokens``, which is then kept
        for the rest of the run. The discarded attempt is not recorded.
        """
        self._server = self._server or server_name(str(client.base_url))
        cap = body.get(_CAP_KEY)
        first = self.cap_field
        negotiating = cap is not None and first == CAP_FIELDS[0]
        try:
            response = await _send(client, _with_cap(body, first))
        except Exception as exc:  # noqa: BLE001 - re-raised unless it rejects the cap field
            if not negotiating or not _rejects(exc, first):
                raise
        else:
            if not negotiating or not _over_cap(response, cap):
                return response
        self.cap_field = CAP_FIELDS[1]
        return await _send(client, _with_cap(body, self.cap_field))

    # ---- response -------------------------------------------------------------------------

    def parse(self, response: Any, *, batch: bool = False) -> Parsed:
        model_returned = _get(response, "model")
        split = token_split(_get(response, "usage"))
        usage = None if split is None else split.usage
        cost = None if split is None else self.cost(split.billed, model_returned, batch=batch)
        choices = _get(response, "choices") or []
        if not choices:
            raise InfraError(f"{NAME}: the response has no choices")
        choice = choices[0]
        message = _as_dict(_get(choice, "message"))
        action, stored = self._read(_get(choice, "finish_reason"), message)
        turn = Turn(
            action=action,
            usage=usage,
            model_returned=model_returned,
            latency_ms=None,
            cost_usd=cost,
        )
        return Parsed(turn, stored, None if split is None else split.total)

    def _read(self, finish: Any, message: dict[str, Any]) -> tuple[Action, Stored]:
        """The turn's action and the assistant message to send back: a cut at the cap, a
        tool call (malformed when its arguments are not a JSON object) or the answer."""
        text = _text(message)
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        call = calls[0] if calls else None
        if finish == "length":
            raw = "" if call is None else _raw_arguments(call)
            return CutAtCap(text=text + raw), Stored([_assistant(text, None)], None)
        if call is None:
            return FinalAnswer(text=text), Stored([_assistant(text, None)], None)
        function = call.get("function") or {}
        call_id = str(call.get("id") or f"call_prereg_{next(self._call_ids):04d}")
        name = str(function.get("name"))
        raw_args = function.get("arguments")
        arguments = _arguments(raw_args)
        if arguments is None:
            sent = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": "{}"},
            }
            return Malformed(text=_raw_arguments(call)), Stored([_assistant(text, sent)], call_id)
        sent_args = raw_args if isinstance(raw_args, str) else json.dumps(raw_args)
        sent = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": sent_args},
        }
        action = ToolCall(name=name, arguments=arguments, call_id=call_id)
        return action, Stored([_assistant(text, sent)], call_id)

    # ---- batches --------------------------------------------------------------------------

    def batch_backend(self) -> BatchBackend:
        raise BadInput(
            f"the {NAME} driver has no batch API (Chat Completions servers answer one "
            "request at a time): run without --batch and register host.batch: false",
            field="host.batch",
        )


def _function(tool: OfferedTool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.input_schema),
        },
    }


def _assistant(text: str, call: dict[str, Any] | None) -> dict[str, Any]:
    """The assistant message as sent back: its text and at most one tool call."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if call is not None:
        message["tool_calls"] = [call]
    elif not text:
        message["content"] = ""
    return message


def _text(message: dict[str, Any]) -> str:
    """The message's text (a string, or text parts as some gateways send) and refusal."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = content if isinstance(content, str) else ""
    refusal = message.get("refusal")
    return text + (refusal if isinstance(refusal, str) else "")


def _raw_arguments(call: dict[str, Any]) -> str:
    raw = (call.get("function") or {}).get("arguments")
    return raw if isinstance(raw, str) else json.dumps(raw, default=str)


def _arguments(raw: Any) -> dict[str, Any] | None:
    """The call's arguments as an object, or None: not JSON, or JSON that is not an object
    (never repaired). A server that sends an object instead of a string is read as is."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _with_cap(body: dict[str, Any], cap_field: str) -> dict[str, Any]:
    if _CAP_KEY not in body:
        return body
    out = {k: v for k, v in body.items() if k != _CAP_KEY}
    out[cap_field] = body[_CAP_KEY]
    return out


def _rejects(exc: BaseException, field: str) -> bool:
    """A 400 whose error names ``field`` (the server does not accept it)."""
    if getattr(exc, "status_code", None) != 400:
        return False
    param = getattr(exc, "param", None)
    if isinstance(param, str) and param:  # the server says which field: trust it
        return param == field
    return field in str(exc)


def _over_cap(response: Any, cap: Any) -> bool:
    """The server generated more tokens than the cap it was sent (so it ignored it)."""
    completion = _get(_get(response, "usage"), "completion_tokens")
    return isinstance(completion, int) and isinstance(cap, int) and completion > cap


@cache
def _route() -> Route:
    """Where ``chat.completions.create`` posts, its response type and its credentials."""
    from openai.types.chat import ChatCompletion  # lazy: the SDK loads at the first request

    return Route("/chat/completions", ChatCompletion, {"security": {"bearer_auth": True}})


async def _send(client: Any, body: dict[str, Any]) -> Any:
    """One request: the body (wire JSON, a server's own fields included) posted as
    ``chat.completions.create`` would post it (see providers/send.py), the reply read as
    plain data where that is certain (providers/plain.py)."""
    return await post_plain(client, _route(), body, chat_completion)


def _synthesised(turn: Turn, index: int) -> Stored:
    """A past turn rebuilt from the protocol's view (used only without a transcript)."""
    action = turn.action
    if isinstance(action, ToolCall):
        call_id = action.call_id or f"call_prereg_{index:04d}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": action.name, "arguments": json.dumps(action.arguments)},
        }
        return Stored([_assistant("", call)], call_id)
    return Stored([_assistant(getattr(action, "text", ""), None)], None)


def create(
    model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
) -> OpenAIChatDriver:
    """The Chat Completions driver; ``options``: allow_sampling, settings, spend, prices,
    http_client_factory (see :class:`ModelDriver`); ``tool_search`` is refused."""
    return OpenAIChatDriver(model, params, **options)
