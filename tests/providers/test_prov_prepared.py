"""A route's request built once per client and sent again with each body (issue 15:
:mod:`prereg.runners.providers.prepared`).

Through the real ``openai`` client on a mock transport that records every request: the
requests after a route's first must be what ``client.post`` sends (URL, every header,
cookies the server set, body), failures on them must raise what ``client.post`` raises,
and a client whose requests can differ between calls (a key provider) is never reused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from prereg.runners.drivers import anthropic as anthropic_driver
from prereg.runners.drivers import openai as openai_driver
from prereg.runners.drivers import openai_chat
from prereg.runners.providers import plain, prepared
from prereg.runners.providers.send import Route, post_plain
from tests.providers import fakes
from tests.providers.fakes import run

ROUTES: dict[str, tuple[Callable[[], Route], Callable[[dict[str, Any]], Any], dict[str, Any]]] = {
    "anthropic": (anthropic_driver._route, plain.anthropic_message, fakes.anthropic_text("Hi.")),
    "openai": (openai_driver._route, plain.openai_response, fakes.openai_text("Found it.")),
    "openai-chat": (
        openai_chat._route,
        plain.chat_completion,
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "served",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "Found it."},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    ),
}

Answer = Callable[[int, httpx2.Request], httpx2.Response]


class Recorder:
    """A mock transport's handler: records each request, answers with ``answer(n, req)``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.answer(len(self.requests), request)


def _ok(reply: dict[str, Any], **headers: str) -> Answer:
    def answer(n: int, request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            content=json.dumps(reply).encode(),
            headers={"content-type": "application/json", **headers},
        )

    return answer


def _client(recorder: Recorder, sdk: str = "openai", **kw: Any) -> Any:
    """A client of ``sdk`` as the drivers build it, on the recording transport."""
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(recorder))
    kw.setdefault("api_key", "sk-test")
    if sdk == "anthropic":
        return anthropic.AsyncAnthropic(
            base_url="http://fake", http_client=http, max_retries=0, open_telemetry=False, **kw
        )
    return openai.AsyncOpenAI(base_url="http://fake/v1", http_client=http, max_retries=0, **kw)


def _sdk(name: str) -> str:
    return "anthropic" if name == "anthropic" else "openai"


def _body(n: int) -> dict[str, Any]:
    return {"model": "m", "input": [{"role": "user", "content": f"question {n} ünï"}]}


def _seen(request: httpx2.Request) -> tuple[str, str, dict[str, str], bytes]:
    return request.method, str(request.url), dict(request.headers), request.content


async def _through_post(client: Any, route: Route, body: dict[str, Any]) -> Any:
    """What the drivers did before: every request through ``client.post``."""
    return await client.post(
        route.path,
        content=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        cast_to=httpx2.Response,
        options={**route.options, "headers": prepared.JSON_HEADERS},
    )


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_later_requests_are_what_the_client_sends(name: str) -> None:
    make_route, read, reply = ROUTES[name]
    route = make_route()
    cookie = {"set-cookie": "cf=abc; Path=/"}  # a server's cookie, sent back by the client
    ours, theirs = Recorder(_ok(reply, **cookie)), Recorder(_ok(reply, **cookie))

    async def go() -> None:
        client, reference = _client(ours, _sdk(name)), _client(theirs, _sdk(name))
        built = 0
        build = client._build_request

        def counting(*args: Any, **kw: Any) -> Any:
            nonlocal built
            built += 1
            return build(*args, **kw)

        client._build_request = counting
        for n in range(3):
            await post_plain(client, route, _body(n), read)
        assert prepared.template(client, route) is not None
        assert built == 2  # the first request, then its template; none for the later two
        for n in range(3):  # the reference: every request through client.post
            await _through_post(reference, route, _body(n))

    run(go())
    assert len(ours.requests) == len(theirs.requests) == 3
    for mine, reference in zip(ours.requests, theirs.requests, strict=True):
        assert _seen(mine) == _seen(reference)
    assert "cookie" not in ours.requests[0].headers
    assert ours.requests[1].headers["cookie"] == ours.requests[2].headers["cookie"] == "cf=abc"


def _status(status: int, error: dict[str, Any], **headers: str) -> Callable[[str], Answer]:
    def make(name: str) -> Answer:
        return lambda n, request: _answer(name, n, request, status, error, headers)

    return make


def _answer(
    name: str,
    n: int,
    request: httpx2.Request,
    status: int,
    error: dict[str, Any],
    headers: dict[str, str],
) -> httpx2.Response:
    if n == 1:
        return _ok(ROUTES[name][2])(n, request)
    return httpx2.Response(
        status,
        content=json.dumps({"type": "error", "error": error}).encode(),
        headers={"content-type": "application/json", **headers},
    )


def _raising(exc: Exception) -> Callable[[str], Answer]:
    def make(name: str) -> Answer:
        def answer(n: int, request: httpx2.Request) -> httpx2.Response:
            if n == 1:
                return _ok(ROUTES[name][2])(n, request)
            raise exc

        return answer

    return make


FAILURES: dict[str, Callable[[str], Answer]] = {
    "rate limited": _status(
        429, {"message": "slow down", "type": "rate_limit"}, **{"retry-after": "7"}
    ),
    "bad request": _status(400, {"message": "bad tool", "param": "tools[0]", "code": "x"}),
    "server error": _status(500, {"message": "boom"}),
    "overloaded": _status(503, {"message": "busy"}),
    "timeout": _raising(httpx2.ReadTimeout("read timed out")),
    "connection refused": _raising(httpx2.ConnectError("refused")),
}


def _outcome(client: Any, route: Route, send: Callable[..., Any]) -> tuple[Any, ...]:
    async def go() -> tuple[Any, ...]:
        await send(client, route, _body(0))  # the first request succeeds
        try:
            await send(client, route, _body(1))
        except (openai.APIError, anthropic.APIError) as exc:
            response = getattr(exc, "response", None)
            return (
                type(exc),
                str(exc),
                getattr(exc, "status_code", None),
                getattr(exc, "param", None),
                getattr(exc, "code", None),
                None if response is None else response.headers.get("retry-after"),
                type(exc.__cause__),
            )
        raise AssertionError("no exception")

    result: tuple[Any, ...] = run(go())
    return result


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_failures_on_later_requests_raise_what_the_client_raises(name: str, failure: str) -> None:
    make_route, read, _ = ROUTES[name]
    route = make_route()
    answer = FAILURES[failure](name)
    ours_client = _client(Recorder(answer), name)
    ours = _outcome(ours_client, route, lambda c, r, b: post_plain(c, r, b, read))
    assert prepared.template(ours_client, route) is not None  # the failure took that road
    theirs = _outcome(_client(Recorder(answer), name), route, _through_post)
    assert ours == theirs
    assert issubclass(ours[0], (openai.APIError, anthropic.APIError))


def test_a_client_with_a_key_provider_is_never_reused() -> None:
    keys = iter(["sk-first", "sk-second", "sk-third"])

    async def provide() -> str:
        return next(keys)

    recorder = Recorder(_ok(ROUTES["openai"][2]))
    route = openai_driver._route()

    async def go() -> None:
        client = _client(recorder, api_key=provide)
        assert not prepared.reusable(client)
        for n in range(3):
            await post_plain(client, route, _body(n), plain.openai_response)
        assert prepared.template(client, route) is None

    run(go())
    # each request asked the provider for the key: none was sent from a kept build
    assert [r.headers["authorization"] for r in recorder.requests] == [
        "Bearer sk-first",
        "Bearer sk-second",
        "Bearer sk-third",
    ]


def test_only_known_plain_clients_are_reused() -> None:
    recorder = Recorder(_ok(ROUTES["openai"][2]))
    assert prepared.reusable(_client(recorder))
    assert prepared.reusable(_client(recorder, "anthropic"))
    assert not prepared.reusable(object())
    # a client whose request path does more per call: traced, with middleware, custom auth
    for attribute, value in (
        ("_lazy_tracer", object()),  # what its _tracer property returns
        ("_middleware", (object(),)),
        ("_custom_auth", httpx2.Auth()),
        ("_token_cache", object()),
    ):
        client = _client(recorder, "anthropic")
        setattr(client, attribute, value)
        assert not prepared.reusable(client), attribute

    class Wrapped(openai.AsyncOpenAI):  # another class: its requests may differ
        pass

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(recorder))
    wrapped = Wrapped(api_key="k", base_url="http://fake/v1", http_client=http, max_retries=0)
    assert not prepared.reusable(wrapped)


def test_a_client_whose_request_cannot_be_built_apart_builds_each_itself() -> None:
    # an SDK whose internals moved: the build for reuse fails; the request that just
    # succeeded stands, and every later one goes through client.post
    recorder = Recorder(_ok(ROUTES["openai"][2]))
    route = openai_driver._route()

    async def go() -> None:
        client = _client(recorder)
        build = client._build_request

        def failing(options: Any, *, retries_taken: int = 0) -> Any:
            if options.content == b"":  # the build apart, with no body
                raise AttributeError("moved")
            return build(options, retries_taken=retries_taken)

        client._build_request = failing
        for n in range(3):
            reply = await post_plain(client, route, _body(n), plain.openai_response)
            assert reply is not None
        assert prepared.template(client, route) is None
        assert client in prepared._REFUSED

    run(go())
    assert [json.loads(r.content)["input"][0]["content"] for r in recorder.requests] == [
        f"question {n} ünï" for n in range(3)
    ]
