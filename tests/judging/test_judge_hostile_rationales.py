"""A judge's free text is untrusted: the hostile corpus through every output (issue 40, 6).

A judge's answer (its rationale, ``Verdict.raw_response``), the evidence parsed out of it,
the model name its provider returned, and a provider error of a failed verdict request
come from a model and an endpoint: untrusted text, stored in ``runs/verdicts.sqlite``. Here
judges behind the local fake (real ``anthropic`` and ``openai`` SDK clients) answer with
every string of :mod:`tests.hostile_strings`: as the evidence of a parsed verdict, as a
whole unparseable answer, as the model returned, and as the message of an error. Then
each output that shows verdicts or what comes of them, ``judge`` (terminal and
``--json``), ``analyse`` (terminal, ``--json``, report.json, report.md, report.html),
``judge --export`` and ``export``'s verdict file, must carry no raw control, bidi, format
or separator character: the human outputs escape them as
:func:`prereg.core.untrusted.display_text` does, the JSON ones as
:func:`prereg.core.untrusted.json_safe` does (escapes that decode to the very strings).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from prereg.cli import main
from prereg.runners.judging.verdicts import Verdict
from tests.hostile_strings import HOSTILE, raw_unsafe
from tests.judging.helpers import RUBRIC, registration, write
from tests.providers.fake_chat import ChatBrain, FakeChat
from tests.providers.fakes import Reply, anthropic_text, anthropic_usage, openai_text, provider_env

REG = "hostile-judged"
#: the corpus without its 22,000-character string (kept whole where a field allows it)
SHORT = " ".join(text for name, text in HOSTILE if name != "long")
EVIDENCE = "evidence: " + SHORT
#: a model name as a hostile provider returns it (escape sequences, bidi, markup)
#: registered free text of at most 100 characters: a rubric version
VERSION_TEXT = "\x1b[2J\x1b]0;t\x07 \u202eevil.exe\u202c \x9d0;title\x9c <b>x</b> \u2028"
MODEL_SUFFIX = " " + " ".join(text for name, text in HOSTILE if name in ("csi", "bidi", "script"))


class HostileJudge(ChatBrain):
    """Every judge answer carries the corpus: the completion judge (Anthropic) a parsed
    verdict whose evidence is the corpus, the native judge (OpenAI) an unparseable answer
    that is the corpus; both under a hostile model name."""

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = json.dumps({"met": True, "evidence": EVIDENCE}, ensure_ascii=False)
        model = str(body.get("model")) + MODEL_SUFFIX
        return anthropic_text(answer, model=model, usage=anthropic_usage(400, 20))

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        return openai_text("rationale: " + SHORT, model=str(body.get("model")) + MODEL_SUFFIX)


JUDGES = [
    {
        "id": "done-claude",
        "outcome": "completed",
        "driver": "anthropic",
        "model": "claude-haiku-4-5",
        "rubric": RUBRIC,
        # registered free text the judged section shows in every output, beside the counts
        "rubric_version": "v1 " + VERSION_TEXT,
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


def _cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _ok(*args: object) -> str:
    code, out, err = _cli(*args)
    assert code == 0, out + err
    return out + err


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("hostile-judged")
    ws = root / "ws"
    with FakeChat(HostileJudge()) as fake, pytest.MonkeyPatch.context() as env:
        provider_env(env, fake)
        _ok("init", ws)
        _ok("-w", ws, "register", write(ws, registration(REG, judge=JUDGES)))
        _ok("-w", ws, "run", REG, "--no-progress", "--json")
        # the first verdict request fails with the corpus as the provider's error message
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": SHORT}}
        fake.script("anthropic", Reply(400, error))
        shown: dict[str, str] = {}
        shown["judge --json (an error)"] = _ok(
            "-w", ws, "judge", REG, "--max-verdicts", "1", "--concurrency", "1", "--json"
        )
        shown["judge (terminal)"] = _ok("-w", ws, "judge", REG, "--no-progress")
        shown["judge --json"] = _ok("-w", ws, "judge", REG, "--json")
        shown["analyse (terminal)"] = _ok("-w", ws, "analyse", REG)
        shown["analyse --json"] = _ok("-w", ws, "analyse", REG, "--json")
        folder = ws / "reports" / REG
        for name in ("report.json", "report.md", "report.html"):
            shown[name] = (folder / name).read_text(encoding="utf-8")
        _ok("-w", ws, "judge", REG, "--export", root / "verdicts.jsonl")
        shown["judge --export"] = (root / "verdicts.jsonl").read_text(encoding="utf-8")
        _ok("-w", ws, "export", REG, "--out", root / "runs.jsonl")
        shown["export (verdict file)"] = (root / "runs.jsonl.verdicts.jsonl").read_text(
            encoding="utf-8"
        )
        yield shown


def _verdicts(text: str) -> list[Verdict]:
    return [
        Verdict.model_validate(json.loads(line)["verdict"])
        for line in text.splitlines()
        if line.strip() and "verdict" in json.loads(line)
    ]


def test_the_judges_answered_with_the_corpus(outputs: dict[str, str]) -> None:
    """The hostile text is in the store (the premise of every test below)."""
    verdicts = _verdicts(outputs["judge --export"])
    parsed = [v for v in verdicts if v.judge == "done-claude"]
    unparsed = [v for v in verdicts if v.judge == "native-gpt"]
    assert parsed and all(v.parse == "ok" and v.evidence == EVIDENCE for v in parsed)
    assert unparsed and all(v.parse == "unparseable" for v in unparsed)
    assert all(v.raw_response == "rationale: " + SHORT for v in unparsed)
    assert all((v.model_returned or "").endswith(MODEL_SUFFIX) for v in verdicts)


OUTPUTS = [
    "judge --json (an error)",
    "judge (terminal)",
    "judge --json",
    "analyse (terminal)",
    "analyse --json",
    "report.json",
    "report.md",
    "report.html",
    "judge --export",
    "export (verdict file)",
]


@pytest.mark.parametrize("output", OUTPUTS)
def test_no_output_carries_a_raw_control_or_bidi_character(
    outputs: dict[str, str], output: str
) -> None:
    found = raw_unsafe(outputs[output])
    assert not found, f"{output} holds raw {sorted(map(hex, map(ord, found)))}"


@pytest.mark.parametrize("output", ["analyse (terminal)", "report.md", "report.html"])
def test_the_judged_section_shows_the_judges_free_text_escaped(
    outputs: dict[str, str], output: str
) -> None:
    """The judged section is in each human output, its free text there to read (escaped)."""
    text = outputs[output]
    assert "Judged outcomes" in text
    for escape in ("\\x1b", "\\x07", "\\u202e", "\\u202c", "\\x9d", "\\x9c", "\\u2028"):
        assert escape in text, escape  # shown as an escape, to be read
    assert "evil.exe" in text
    if output != "analyse (terminal)":  # markup is text on a terminal, a tag in a document
        assert "<b>x</b>" not in text


@pytest.mark.parametrize("output", ["judge --export", "export (verdict file)"])
def test_verdict_exports_keep_the_exact_strings(outputs: dict[str, str], output: str) -> None:
    """An export is data: its escapes decode to the very strings the judge returned."""
    verdicts = _verdicts(outputs[output])
    assert {v.evidence for v in verdicts if v.judge == "done-claude"} == {EVIDENCE}
    assert {v.raw_response for v in verdicts if v.judge == "native-gpt"} == {"rationale: " + SHORT}


def test_the_json_outputs_show_the_strings_escaped_and_exact(outputs: dict[str, str]) -> None:
    """The provider's error and the model names the judges' providers returned reach the
    ``--json`` documents as escapes that decode to what was returned."""
    errors = json.loads(outputs["judge --json (an error)"])["errors"]
    assert errors and "H01" in errors[0] and "\\x1b" not in errors[0]
    assert "\x1b[2J" in errors[0]  # exact: the escape sequence as data, not as text
    for name in ("analyse --json", "report.json"):
        judged = json.loads(outputs[name])["judged"]
        returned = {m for j in judged["judges"] for m in j["models_returned"]}
        assert returned and all(m.endswith(MODEL_SUFFIX) for m in returned), name
