"""One corpus of hostile strings through all four outputs of a report (issue 40, item 6).

A lab whose untrusted fields hold the corpus of :mod:`tests.hostile_strings` (the title,
hypothesis and falsification of the registration, a tool description, every task prompt,
the intents' free-text descriptions, host answers in the trace and provider errors of
infrastructure failures) is analysed; the terminal output, ``--json``, report.json,
report.md and report.html then carry no raw control, bidi, format or separator character,
and report.html parses (``html.parser``) with no script element, no event handler and
nothing loaded from elsewhere.

Before this issue report.html kept ESC, BEL, OSC sequences and U+202E raw (``el`` ran
text through ``html.escape`` only), while report.md and the terminal escaped them: the
three now share :func:`prereg.core.untrusted.display_text`.
"""

from __future__ import annotations

import contextlib
import io
import json
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from prereg.cli import main
from prereg.core.untrusted import html_text
from tests.hostile_strings import ALL, HOSTILE, raw_unsafe
from tests.reports import append, make_lab, paired_records, record, registration

REG = "lab-hostile"
N_TASKS = 8
SHORT = " ".join(text for name, text in HOSTILE if name != "long")


def _dump(path: Path, data: object) -> None:
    """YAML with every unsafe character as an escape (``\\x1b``, ``\\U000e0041``)."""
    path.write_text(yaml.safe_dump(data, allow_unicode=False, width=10**9))


def _cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    ws = tmp_path_factory.mktemp("hostile") / "ws"
    assert _cli("init", ws)[0] == 0
    prompts = [text for _, text in HOSTILE]
    tasks = make_lab(ws, n_tasks=N_TASKS, description="placeholder", prompt="{k}")
    surface_path = ws / "experiments" / "lab" / "surfaces" / "b.yaml"
    surface = yaml.safe_load(surface_path.read_text())
    surface["tools"][0]["description"] = "Get one item. " + SHORT
    _dump(surface_path, surface)
    corpus_path = ws / "experiments" / "lab" / "corpus.yaml"
    corpus = yaml.safe_load(corpus_path.read_text())
    for k, task in enumerate(corpus["tasks"]):
        task["prompt"] = f"task {k} " + prompts[k % len(prompts)]
    corpus["intents"] = {key: f"{key} {SHORT}" for key in corpus["intents"]}
    _dump(corpus_path, corpus)
    # the prompts' invisible characters declared, as an experiment that means them must
    experiment_path = ws / "experiments" / "lab" / "experiment.yaml"
    experiment = yaml.safe_load(experiment_path.read_text())
    hidden = {c for t in corpus["tasks"] for c in t["prompt"] if unicodedata.category(c) == "Cf"}
    experiment["format_characters"] = sorted(f"U+{ord(c):04X}" for c in hidden)
    _dump(experiment_path, experiment)
    doc = registration(
        REG, title="T " + SHORT, hypothesis="b wins. " + ALL, falsification="no. " + SHORT
    )
    draft = ws / "drafts" / f"{REG}.yaml"
    _dump(draft, doc)
    code, out, err = _cli("-w", ws, "register", draft, "--json")
    assert code == 0, out + err
    digest = json.loads(out)["digest"]
    answer = [{"kind": "final", "turn": 0, "text": SHORT}]
    ok = [[True]] * N_TASKS
    fail = [[k % 2 == 0] for k in range(N_TASKS)]
    records = paired_records(REG, digest, tasks, fail, ok, trace=answer)
    records.append(
        record(
            REG,
            digest,
            "baseline",
            tasks[0],
            None,
            repeat=0,
            status="infra_error",
            error="provider said " + SHORT,
        )
    )
    append(ws, records)
    code, terminal, err = _cli("-w", ws, "analyse", REG)
    assert code == 0, terminal + err
    code, as_json, err = _cli("-w", ws, "analyse", REG, "--json")
    assert code == 0, as_json + err
    folder = ws / "reports" / REG
    return {
        "terminal": terminal,
        "--json": as_json,
        "report.json": (folder / "report.json").read_text(),
        "report.md": (folder / "report.md").read_text(),
        "report.html": (folder / "report.html").read_text(),
    }


@pytest.mark.parametrize(
    "output", ["terminal", "--json", "report.json", "report.md", "report.html"]
)
def test_no_output_carries_a_raw_control_or_bidi_character(
    outputs: dict[str, str], output: str
) -> None:
    text = outputs[output]
    assert "H01" in text and "H08" in text  # the hostile fields are rendered in it
    found = raw_unsafe(text)
    assert not found, f"{output} holds raw {sorted(map(hex, map(ord, found)))}"


def test_json_outputs_keep_the_exact_strings(outputs: dict[str, str]) -> None:
    """--json is data: escapes that decode to the very strings (nothing lost)."""
    report = json.loads(outputs["--json"])
    assert report["hypothesis"] == "b wins. " + ALL
    assert json.loads(outputs["report.json"])["title"] == "T " + SHORT


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_report_html_parses_with_no_script_and_text_escaped_visibly(
    outputs: dict[str, str],
) -> None:
    parser = _Elements()
    parser.feed(outputs["report.html"])
    parser.close()
    assert "script" not in parser.tags and "iframe" not in parser.tags
    assert not [name for name, _ in parser.attrs if name.startswith("on")]
    for name, value in parser.attrs:
        if name in ("src", "href"):
            assert value is not None and value.startswith(("data:image/png;base64,", "#"))
    shown = "".join(parser.text)
    # every character is there to read, as an escape, as in report.md and the terminal
    assert "\\x1b[2J" in shown and "\\u202eevil.exe" in shown and "\\x07" in shown
    assert '<script>alert("x")</script>' in shown  # as text
    assert not raw_unsafe(shown)


def test_html_and_markdown_escape_the_same_characters() -> None:
    """One escaping path: html_text shows what markdown_text and the terminal show."""
    from prereg.core.untrusted import display_text, markdown_text

    for _, text in HOSTILE:
        visible = display_text(text, multiline=True)
        assert not raw_unsafe(html_text(text))
        assert not raw_unsafe(markdown_text(text))
        parser = _Elements()
        parser.feed(html_text(text))
        assert "".join(parser.text) == visible
