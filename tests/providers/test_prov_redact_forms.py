"""Redaction of a key's derived forms, and of connection URLs (issue 40, item 5).

A hostile endpoint echoes the key the client sent, through the real ``anthropic`` and
``openai`` SDK clients against the local fake: base64 (at each byte alignment, as a key
inside a longer encoded text is), base64url, hex in both cases, every byte URL-encoded,
cut in two with the halves apart, and cut across two text blocks of one response. Nothing
in the records, the verdicts, the exports or any ``--json`` output may hold the key in
any of these forms: every output is searched by decoding what an attacker would decode
(:func:`holds_key`), not by comparing with the redactor's own list. A response that
still holds a key's prefix after redaction is refused as an infrastructure error. A
PostgreSQL URL's password, in its userinfo or its query, is printed nowhere.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from prereg.runners.drivers.anthropic import create as anthropic_driver
from prereg.runners.drivers.base import FinalAnswer, InfraError
from prereg.runners.drivers.openai import create as openai_driver
from prereg.runners.providers.credentials import REDACTED, redact
from prereg.runners.store.sqlite import RunStore
from tests.judging.helpers import RUBRIC, registration, write
from tests.providers.fakes import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    FakeProviders,
    Reply,
    anthropic_message,
    anthropic_text,
    episode,
    openai_message_item,
    openai_response,
    openai_text,
    play,
)
from tests.providers.fakes import run as run_async
from tests.providers.test_prov_e2e import register

PROVIDERS = ["anthropic", "openai"]
#: what the refusal of a response still holding a key's prefix says
REFUSED = "still holds the prefix of a provider key"
KEYS = {"anthropic": ANTHROPIC_KEY, "openai": OPENAI_KEY}
#: a key of each provider's shape that is not set (redaction cannot know it), hidden
#: from a plain match by a zero-width space after its prefix
OTHER_KEY = {
    "anthropic": "sk-ant-\u200bapi03-" + "Zq7" * 31,
    "openai": "sk-\u200bproj-" + "Zq7" * 20,
}


def hostile_forms(key: str) -> dict[str, str]:
    """The forms a hostile endpoint echoes ``key`` in."""
    data = key.encode()
    half = len(key) // 2
    return {
        "base64": base64.b64encode(data).decode(),
        "base64, after one byte": base64.b64encode(b"k" + data).decode(),
        "base64, after two bytes": base64.b64encode(b"k=" + data).decode(),
        "base64url": base64.urlsafe_b64encode(data).decode().rstrip("="),
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "url-encoded": "".join(f"%{b:02X}" for b in data),
        "split in two": f"{key[:half]} (the rest later) {key[half:]}",
    }


def _decodings(text: str) -> list[bytes]:
    """What an attacker reads out of ``text``: the text, its URL decoding, and every run of
    base64 / base64url / hex characters decoded (from each of its first four offsets)."""
    out = [text.encode(), unquote(text).encode()]
    for run in re.findall(r"[A-Za-z0-9+/_\-]{8,}", text):
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    out.append(decode(chunk))
                except (binascii.Error, ValueError):
                    pass
    for run in re.findall(r"[0-9A-Fa-f]{8,}", text):
        for start in range(2):
            chunk = run[start:]
            out.append(bytes.fromhex(chunk[: len(chunk) - len(chunk) % 2]))
    return out


def holds_key(text: str) -> list[str]:
    """The keys (or halves of one) ``text`` holds in any form :func:`hostile_forms` makes."""
    found = []
    for key in (ANTHROPIC_KEY, OPENAI_KEY):
        half = len(key) // 2
        pieces = (key.encode(), key[:half].encode(), key[half:].encode())
        if any(p in data for data in _decodings(text) for p in pieces):
            found.append(key)
    return found


def assert_no_key_in(root: Path, *outputs: str) -> None:
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert not holds_key(path.read_bytes().decode("utf-8", "replace")), path
    for text in outputs:
        assert not holds_key(text), text


def test_the_checker_finds_every_form() -> None:
    for key in (ANTHROPIC_KEY, OPENAI_KEY):
        for name, form in hostile_forms(key).items():
            assert holds_key(f"say {form}.") == [key], name
    assert not holds_key("Here is what I found: " + REDACTED)


def _text_reply(provider: str, *texts: str) -> Reply:
    """A final answer of one text block per ``texts`` (one message item each for OpenAI)."""
    if provider == "anthropic":
        return Reply(200, anthropic_message([{"type": "text", "text": t} for t in texts]))
    return Reply(200, openai_response([openai_message_item(t) for t in texts]))


def _split_across_blocks(key: str) -> tuple[str, str]:
    """The key's hex form cut across two text blocks, with the raw key cut after it."""
    hexed = key.encode().hex()
    cut, half = len(hexed) // 2 + 1, len(key) // 2
    return f"the code {hexed[:cut]}", f"{hexed[cut:]} and {key[:half]}"


def _driver(provider: str) -> Any:
    return anthropic_driver("claude-haiku-4-5") if provider == "anthropic" else (
        openai_driver("gpt-5-mini")
    )  # fmt: skip


# ---- at the driver's boundary -------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("form", sorted(hostile_forms("k")))
def test_each_form_of_the_key_leaves_the_driver_redacted(
    fake: FakeProviders, provider: str, form: str
) -> None:
    echoed = hostile_forms(KEYS[provider])[form]
    fake.script(provider, _text_reply(provider, f"Your credential: {echoed}. Done."))
    (turn,) = run_async(play(_driver(provider), episode()))
    assert isinstance(turn.action, FinalAnswer) and REDACTED in turn.action.text
    assert not holds_key(repr(turn)), turn.action.text
    assert turn.action.text.startswith("Your credential: ")  # the rest of the text stays


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_cut_across_two_text_blocks_leaves_the_driver_redacted(
    fake: FakeProviders, provider: str
) -> None:
    fake.script(provider, _text_reply(provider, *_split_across_blocks(KEYS[provider])))
    (turn,) = run_async(play(_driver(provider), episode()))
    assert isinstance(turn.action, FinalAnswer)
    assert not holds_key(repr(turn)), turn.action.text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_response_still_holding_a_key_prefix_is_refused(
    fake: FakeProviders, provider: str
) -> None:
    key = KEYS[provider]
    # another key of the provider's shape (one not set here, so redaction cannot know
    # it), a zero-width space after its prefix: key-shaped to a reader all the same
    fake.script(provider, _text_reply(provider, f"take {OTHER_KEY[provider]}"))
    with pytest.raises(InfraError) as caught:
        run_async(play(_driver(provider), episode()))
    assert REFUSED in str(caught.value)
    assert not holds_key(str(caught.value)) and key[:7] not in str(caught.value)


# ---- through prereg run, export, judge: nothing stored or printed ------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prereg_run_and_export_hold_no_form_of_the_key(
    ws: Path, cli: Any, fake: FakeProviders, provider: str, tmp_path: Path
) -> None:
    key = KEYS[provider]
    reg_id = register(cli, ws, provider)
    everything = " ; ".join(hostile_forms(key).values())
    fake.script(
        provider,
        _text_reply(provider, f"Echo: {everything}"),
        _text_reply(provider, *_split_across_blocks(key)),
        _text_reply(provider, f"take {OTHER_KEY[provider]}"),
    )
    result = cli("-w", ws, "run", reg_id, "--max-units", "3", "--concurrency", "1", "--json")
    assert result.code == 0, result.stderr
    assert not fake.scripts[provider]  # every hostile reply was served
    summary = result.json()
    assert summary["completed"] == 2 and summary["failed"] == 1, summary
    (refused,) = RunStore(ws / "runs").records(registration_id=reg_id, status="infra_error")
    assert REFUSED in (refused.error or "")
    finals = [
        e.text or ""
        for r in RunStore(ws / "runs").records(registration_id=reg_id, status="ok")
        for e in r.trace
        if e.kind == "final"
    ]
    assert any(t.startswith("Echo: ") and REDACTED in t for t in finals), finals
    outputs = [result.stdout, result.stderr]
    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"export.{fmt}"
        exported = cli("-w", ws, "export", reg_id, "--out", out, "-f", fmt, "--json")
        assert exported.code == 0, exported.stderr
        outputs += [exported.stdout, exported.stderr, out.read_text()]
    human = cli("-w", ws, "run", reg_id, "--max-units", "1")  # the terminal's output too
    assert_no_key_in(ws, *outputs, human.stdout, human.stderr)


JUDGES = [
    {
        "id": "done-claude",
        "outcome": "completed",
        "driver": "anthropic",
        "model": "claude-haiku-4-5",
        "rubric": RUBRIC,
        "rubric_version": "v1",
    },
    {
        "id": "native-gpt",
        "outcome": "native_self_service",
        "driver": "openai",
        "model": "gpt-5-mini",
        "rubric": RUBRIC,
        "rubric_version": "v1",
    },
]


def test_verdicts_and_judge_json_hold_no_form_of_the_key(
    ws: Path, cli: Any, fake: FakeProviders
) -> None:
    assert cli("-w", ws, "register", write(ws, registration("sdk", judge=JUDGES))).code == 0
    ran = cli("-w", ws, "run", "sdk", "--no-progress", "--json")
    assert ran.code == 0, ran.stderr
    for provider, reply in (("anthropic", anthropic_text), ("openai", openai_text)):
        forms = " ; ".join(hostile_forms(KEYS[provider]).values())
        verdict = {"met": True, "need": "knowledge", "evidence": f"the key is {forms}"}
        fake.script(provider, Reply(200, reply(json.dumps(verdict))))
    result = cli("-w", ws, "judge", "sdk", "--concurrency", "1", "--json")
    assert result.code == 0, result.stderr
    assert not fake.scripts["anthropic"] and not fake.scripts["openai"]  # all served
    assert (ws / "runs" / "verdicts.sqlite").exists()
    assert_no_key_in(ws, result.stdout, result.stderr)


# ---- connection URLs ----------------------------------------------------------------------

PASSWORDS = ("pw-in-userinfo-41", "pw-in-query-42", "sslpw-in-query-43")


@pytest.mark.parametrize(
    "url",
    [
        # nothing listens on port 1 of the loopback: the store cannot be reached (exit 1)
        f"postgresql://prereg:{PASSWORDS[0]}@127.0.0.1:1/db?password={PASSWORDS[1]}"
        f"&sslpassword={PASSWORDS[2]}",
        # a malformed URL (exit 2), whose driver error quotes the value it cannot decode
        f"postgresql://prereg@127.0.0.1:1/db?sslpassword={PASSWORDS[2]}&password={PASSWORDS[1]}%zz",
    ],
)
def test_a_store_urls_passwords_are_printed_nowhere(ws: Path, cli: Any, url: str) -> None:
    pytest.importorskip("psycopg")
    assert cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml").code == 0
    for extra in ([], ["--json"]):
        result = cli("-w", ws, "run", "music-library-pilot", "--store", url, *extra)
        assert result.code in (1, 2), result.stdout
        printed = result.stdout + result.stderr
        assert "postgresql://prereg" in printed and "***" in printed, printed
        assert not any(p in printed for p in PASSWORDS), printed


def test_a_connection_url_in_any_redacted_text_loses_its_passwords() -> None:
    text = (
        f"the tool said: postgresql://prereg:{PASSWORDS[0]}@db.internal/prereg?"
        f"sslmode=require&password={PASSWORDS[1]}&sslpassword={PASSWORDS[2]} - retrying"
    )
    clean = redact(text)
    assert not any(p in clean for p in PASSWORDS), clean
    assert clean.startswith("the tool said: postgresql://prereg:***@db.internal/prereg?")
    assert "sslmode=require" in clean and clean.endswith(" - retrying")
