"""Every failure on the provider path is the SDK's own (invariant 15).

Through the real ``anthropic`` and ``openai`` clients on a mock transport: a request the
drivers post (:func:`post_plain`) must send what ``client.post`` sends, and each failure
(error statuses with their headers, timeouts, refused connections), on a route's first
request and on later ones, must raise exactly what the SDK's own typed call raises: class,
message, status, param, code, ``retry-after`` and cause. The reference is the SDK's call,
not a copy of its messages, so a new SDK release cannot make the two disagree unless
prereg stops going through it. And nothing in the project's packages reaches into an
SDK's private modules or members (anthropic, openai, mcp, inspect_ai, their httpx2).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from prereg.runners.drivers import anthropic as anthropic_driver
from prereg.runners.drivers import openai as openai_driver
from prereg.runners.drivers import openai_chat
from prereg.runners.providers import plain
from prereg.runners.providers.send import JSON_HEADERS, Route, post_plain
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
    """The raw-response post, as the SDK's documentation shows it."""
    return await client.post(
        route.path,
        content=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        cast_to=httpx2.Response,
        options={**route.options, "headers": JSON_HEADERS},
    )


async def _through_sdk(client: Any, route: Route, body: dict[str, Any]) -> Any:
    """The SDK's own typed call: the body as a mapping, the reply parsed into its type."""
    return await client.post(route.path, body=body, cast_to=route.cast_to, options=route.options)


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_requests_are_what_the_client_sends(name: str) -> None:
    make_route, read, reply = ROUTES[name]
    route = make_route()
    cookie = {"set-cookie": "cf=abc; Path=/"}  # a server's cookie, sent back by the client
    ours, theirs = Recorder(_ok(reply, **cookie)), Recorder(_ok(reply, **cookie))

    async def go() -> None:
        client, reference = _client(ours, _sdk(name)), _client(theirs, _sdk(name))
        for n in range(3):
            await post_plain(client, route, _body(n), read)
            await _through_post(reference, route, _body(n))

    run(go())
    assert len(ours.requests) == len(theirs.requests) == 3
    for mine, reference in zip(ours.requests, theirs.requests, strict=True):
        assert _seen(mine) == _seen(reference)
    assert "cookie" not in ours.requests[0].headers
    assert ours.requests[1].headers["cookie"] == ours.requests[2].headers["cookie"] == "cf=abc"


def _status(status: int, error: dict[str, Any], **headers: str) -> Callable[[str, int], Answer]:
    def make(name: str, failing: int) -> Answer:
        def answer(n: int, request: httpx2.Request) -> httpx2.Response:
            if n < failing:
                return _ok(ROUTES[name][2])(n, request)
            return httpx2.Response(
                status,
                content=json.dumps({"type": "error", "error": error}).encode(),
                headers={"content-type": "application/json", **headers},
            )

        return answer

    return make


def _raising(exc: Exception) -> Callable[[str, int], Answer]:
    def make(name: str, failing: int) -> Answer:
        def answer(n: int, request: httpx2.Request) -> httpx2.Response:
            if n < failing:
                return _ok(ROUTES[name][2])(n, request)
            raise exc

        return answer

    return make


FAILURES: dict[str, Callable[[str, int], Answer]] = {
    "rate limited": _status(
        429, {"message": "slow down", "type": "rate_limit"}, **{"retry-after": "7"}
    ),
    "bad request": _status(400, {"message": "bad tool", "param": "tools[0]", "code": "x"}),
    "unauthorised": _status(401, {"message": "no key"}),
    "server error": _status(500, {"message": "boom"}),
    "overloaded": _status(503, {"message": "busy"}),
    "not json error": lambda name, failing: (
        lambda n, request: (
            _ok(ROUTES[name][2])(n, request)
            if n < failing
            else httpx2.Response(502, content=b"<html>bad gateway</html>")
        )
    ),
    "timeout": _raising(httpx2.ReadTimeout("read timed out")),
    "connect timeout": _raising(httpx2.ConnectTimeout("connect timed out")),
    "connection refused": _raising(httpx2.ConnectError("refused")),
    "connection dropped": _raising(httpx2.RemoteProtocolError("peer closed")),
}


def _outcome(client: Any, route: Route, send: Callable[..., Any], failing: int) -> tuple[Any, ...]:
    async def go() -> tuple[Any, ...]:
        for n in range(1, failing):  # the requests before the failing one succeed
            await send(client, route, _body(n))
        try:
            await send(client, route, _body(failing))
        except (openai.APIError, anthropic.APIError) as exc:
            response = getattr(exc, "response", None)
            return (
                type(exc),
                str(exc),
                getattr(exc, "status_code", None),
                getattr(exc, "param", None),
                getattr(exc, "code", None),
                getattr(exc, "body", None),
                None if response is None else response.headers.get("retry-after"),
                type(exc.__cause__),
            )
        raise AssertionError("no exception")

    result: tuple[Any, ...] = run(go())
    return result


@pytest.mark.parametrize("failing", [1, 3], ids=["first request", "later request"])
@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("name", sorted(ROUTES))
def test_failures_raise_what_the_sdk_raises(name: str, failure: str, failing: int) -> None:
    make_route, read, _ = ROUTES[name]
    route = make_route()
    answer = FAILURES[failure](name, failing)
    ours = _outcome(
        _client(Recorder(answer), _sdk(name)),
        route,
        lambda c, r, b: post_plain(c, r, b, read),
        failing,
    )
    theirs = _outcome(_client(Recorder(answer), _sdk(name)), route, _through_sdk, failing)
    assert ours == theirs
    assert issubclass(ours[0], (openai.APIError, anthropic.APIError))


#: the project's packages (invariant 15 holds in all of them)
PROJECT_CODE = ("prereg", "registry", "experiments", "runners", "stats", "reports")
#: the SDKs and their HTTP client, whose private modules and members are theirs alone
SDKS = {"anthropic", "openai", "httpx2", "httpx", "mcp", "inspect_ai"}


def _private_uses(source: str, path: str) -> list[str]:
    """Where ``source`` (of ``path``) imports an SDK's private module or reads a private
    member of an SDK module or of a client (``client._x``, ``sdk._x``, ``getattr(x, "_x")``)."""
    tree = ast.parse(source, filename=path)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            names = [alias.name for alias in node.names]
            if parts[0] in SDKS and (
                any(p.startswith("_") for p in parts) or any(n.startswith("_") for n in names)
            ):
                found.append(f"{path}:{node.lineno} from {node.module} import {names}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in SDKS and any(p.startswith("_") for p in parts):
                    found.append(f"{path}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            base = node.value
            if isinstance(base, ast.Name) and (base.id in SDKS | {"sdk", "client"}):
                if not node.attr.startswith("__"):
                    found.append(f"{path}:{node.lineno} {base.id}.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
            and not node.args[1].value.startswith("__")
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in SDKS | {"sdk", "client"}
        ):
            found.append(f"{path}:{node.lineno} {node.func.id}({node.args[0].id}, ...)")
    return found


def test_no_private_sdk_module_or_member_is_used() -> None:
    root = Path(__file__).resolve().parents[2]
    files = [
        f
        for folder in PROJECT_CODE
        for f in sorted((root / folder).rglob("*.py"))
        if "bundled" not in f.parts and not (root / folder).is_symlink()
    ]
    assert len(files) > 100
    uses = [use for f in files for use in _private_uses(f.read_text(), str(f))]
    assert uses == []


def test_the_private_use_check_sees_each_kind() -> None:
    # the check itself, on the kinds of use the provider path once had (issue 37)
    sample = (
        "from openai import _httpx2 as failures\n"
        "import anthropic._models\n"
        "from anthropic._base_client import get_platform\n"
        "client._build_request(options)\n"
        "sdk._models.FinalRequestOptions\n"
        "find = getattr(sdk, '_base_client', None)\n"
        "client.__class__\n"
        "from openai.types import Response\n"
    )
    uses = _private_uses(sample, "sample")
    assert len(uses) == 6, uses
