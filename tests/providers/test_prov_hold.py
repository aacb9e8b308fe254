"""A request's body is encoded once: the bytes that size it are the bytes posted.

``ModelDriver._request`` sizes a request from :func:`hold` (the body encoded as the SDK's
encoder writes it) and the driver's ``post`` sends the held bytes for that same body object.
A body rebuilt in between, or one held by another unit's task, must never be sent instead.
"""

from __future__ import annotations

import asyncio
import json

from prereg.runners.providers.driver import wire_tokens
from prereg.runners.providers.send import encode, encoded, hold


def test_the_held_bytes_are_sent_for_that_body_only() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "é \u2028"}], "n": 1.5}
    wire = hold(body)
    assert wire == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert encoded(body) is wire  # not encoded a second time
    twin = json.loads(json.dumps(body))  # equal, but another object (say a rebuilt body)
    assert encoded(twin) == wire and encoded(twin) is not wire
    twin["n"] = 2
    assert json.loads(encoded(twin))["n"] == 2
    assert wire_tokens(wire) == len(wire) // 2 + 16


def test_one_units_held_body_is_invisible_to_another() -> None:
    async def unit(body: dict[str, str], ready: asyncio.Event, go: asyncio.Event) -> bytes:
        hold(body)
        ready.set()
        await go.wait()
        return encoded(body)

    async def both() -> tuple[bytes, bytes, bytes]:
        a, b = {"unit": "a"}, {"unit": "b"}
        ra, rb, go = asyncio.Event(), asyncio.Event(), asyncio.Event()
        ta = asyncio.create_task(unit(a, ra, go))
        tb = asyncio.create_task(unit(b, rb, go))
        await ra.wait()
        await rb.wait()
        go.set()
        return await ta, await tb, encoded(a)

    sent_a, sent_b, outside = asyncio.run(both())
    assert sent_a == encode({"unit": "a"}) and sent_b == encode({"unit": "b"})
    assert outside == encode({"unit": "a"})  # nothing held here: encoded afresh
