"""report.md shows untrusted text as text: no live link, no remote image, no raw escape byte.

Issue 12, "Why" point 6: report.md kept ``[x](javascript:...)`` and remote images from
tool descriptions and prompts (a Markdown viewer turns an image into a beacon), and raw
escape bytes. The report is rendered here with a CommonMark renderer (markdown-it, the
one rich uses) with tables on, and the HTML it produces is what a reader's viewer shows.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import unicodedata

import pytest
import yaml
from markdown_it import MarkdownIt

from prereg.cli import main
from prereg.core.untrusted import markdown_block, markdown_code, markdown_text
from tests.reports import _dump, append, make_lab, paired_records, registration

EVIL = "evil.example"
LINK = f"[click me](javascript:alert(1)) [site](https://{EVIL}/phish) <https://{EVIL}/auto>"
IMAGE = f"![](https://{EVIL}/beacon.png) ![x][ref]\n\n[ref]: https://{EVIL}/ref.png"
ESCAPES = "\x1b[2J\x1b[31mred\x1b]8;;https://evil.example\x07here\x1b]8;;\x07\x9b1m\x7f\u202e"
TOOL = f"Get one item. {LINK} <img src=https://{EVIL}/img.png> see www.{EVIL}/x {ESCAPES}"
PROMPT = "Show item {k}. " + IMAGE.replace("\n", " ") + f" mail me@{EVIL} " + ESCAPES
TITLE = f"Report [t](https://{EVIL}/t) ![i](https://{EVIL}/title.png) {ESCAPES}"
HYPOTHESIS = f"b wins.\n- a list item\n![h](https://{EVIL}/h.png)\n> a quote {ESCAPES}"


def _cli(*args: object) -> tuple[int, str]:
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue()


@pytest.fixture(scope="module")
def markdown(tmp_path_factory: pytest.TempPathFactory) -> str:
    """report.md of a lab whose tool description, prompts, title and hypothesis are hostile."""
    ws = tmp_path_factory.mktemp("md") / "ws"
    assert _cli("init", ws)[0] == 0
    tasks = make_lab(ws, n_tasks=6, description=TOOL, prompt=PROMPT)
    # the prompts' invisible format characters declared, as an experiment meaning them must
    experiment_path = ws / "experiments" / "lab" / "experiment.yaml"
    experiment = yaml.safe_load(experiment_path.read_text())
    hidden = {c for c in PROMPT if unicodedata.category(c) == "Cf"}
    experiment["format_characters"] = sorted(f"U+{ord(c):04X}" for c in hidden)
    _dump(experiment_path, experiment)
    draft = ws / "drafts" / "lab-md.yaml"
    _dump(draft, registration("lab-md", title=TITLE, hypothesis=HYPOTHESIS))
    code, out = _cli("-w", ws, "register", draft, "--json")
    assert code == 0, out
    ok = [[True]] * 6
    append(ws, paired_records("lab-md", json.loads(out)["digest"], tasks, ok, ok))
    assert _cli("-w", ws, "analyse", "lab-md", "--json")[0] == 0
    return (ws / "reports" / "lab-md" / "report.md").read_text()


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_markdown_links_from_untrusted_text_are_not_live(markdown: str) -> None:
    html = _html(markdown)
    assert "<a " not in html and "href=" not in html
    assert "javascript:alert(1)" in html  # shown, as text
    assert "[click me](javascript:alert(1))" in html.replace("&quot;", '"')


def test_remote_images_from_untrusted_text_are_not_rendered(markdown: str) -> None:
    html = _html(markdown)
    sources = re.findall(r'<img src="([^"]*)"', html)
    assert sources and all(s.startswith("figures/") for s in sources)
    assert "<img src=https" not in html  # the inline HTML image is text too
    assert f"https://{EVIL}/beacon.png" in html  # shown, as text


def test_bare_urls_and_addresses_are_code_so_no_renderer_autolinks_them(markdown: str) -> None:
    html = _html(markdown)
    for shown in (f"https://{EVIL}/beacon.png", f"www.{EVIL}/x", f"me@{EVIL}"):
        assert f"<code>{shown}</code>" in html, shown
    # wherever the hostile host appears in the rendered text, it is inside a code span
    outside = re.sub(r"<code>.*?</code>", "", html)
    assert EVIL not in outside


def test_no_raw_escape_or_control_byte_reaches_report_md(markdown: str) -> None:
    raw = [c for c in markdown if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]
    assert raw == []
    # the bytes are shown, escaped, where they were
    assert "\\\\x1b\\[2J" in markdown and "\\\\x9b" in markdown and "\\\\u202e" in markdown


def test_free_text_keeps_its_lines_and_starts_no_block(markdown: str) -> None:
    html = _html(markdown)
    assert "<li>a list item" not in html and "<blockquote>\n<p>a quote" not in html
    assert "- a list item" in html and "&gt; a quote" in html


@pytest.mark.parametrize(
    "value",
    [
        LINK,
        IMAGE,
        TOOL,
        "<script>x()</script> &lt;b&gt; &#106;avascript:x | cell | `code` **b** _i_ ~~s~~",
        "\\[x](javascript:1) trailing backslash \\",
        "``[x](https://evil.example)`` `<img src=x>`",
    ],
)
def test_markdown_helpers_leave_nothing_live(value: str) -> None:
    for markdown in (
        markdown_text(value),
        "\n".join(markdown_block(value)),
        "| a |\n|---|\n| " + markdown_text(value) + " |",
        "x " + markdown_code(value),
    ):
        html = _html(markdown)
        assert "<a " not in html and "<img" not in html and "<script" not in html, markdown
        assert "&amp;lt;" in html or "&lt;" not in value  # entities are shown, not decoded
