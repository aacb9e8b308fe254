"""Tool metadata, prompts and free text are data: escaped in HTML, Markdown and terminal."""

from __future__ import annotations

from pathlib import Path

from tests.reports import append, make_lab, paired_records, register, registration

SCRIPT = '<script>alert("pwned")</script>'
TOOL = f'Get one item. {SCRIPT}<img src=x onerror="alert(1)"> & more'
PROMPT = "Show item {k} <b onmouseover=alert(2)>now</b> </td></table><script>x()</script>"
HYPOTHESIS = "Surface b wins. <script>steal()</script>"
TITLE = "A <i>title</i> [bold red]rich markup[/bold red]"


def test_untrusted_strings_arrive_escaped(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=6, description=TOOL, prompt=PROMPT)
    digest = register(cli, ws, registration("lab-esc", hypothesis=HYPOTHESIS, title=TITLE))
    ok = [[True]] * 6
    append(ws, paired_records("lab-esc", digest, tasks, ok, ok))

    result = cli("-w", ws, "analyse", "lab-esc")
    assert result.code == 0, result.stderr
    folder = ws / "reports" / "lab-esc"
    html = (folder / "report.html").read_text()

    # the markup arrives as text ...
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; more" in html
    assert "&lt;b onmouseover=alert(2)&gt;now&lt;/b&gt; &lt;/td&gt;&lt;/table&gt;" in html
    assert "&lt;script&gt;steal()&lt;/script&gt;" in html
    assert "A &lt;i&gt;title&lt;/i&gt;" in html
    # ... and never as markup: the file has no script element, no handler, nothing remote
    lowered = html.lower()
    assert "<script" not in lowered
    assert "<img src=x" not in lowered and 'onerror="' not in lowered
    assert "<b onmouseover" not in lowered and "<i>title" not in lowered
    assert 'src="http' not in lowered and 'href="http' not in lowered
    assert lowered.count("<img ") == lowered.count('src="data:image/png;base64,')

    markdown = (folder / "report.md").read_text()
    assert "<script" not in markdown.lower() and "&lt;script&gt;" in markdown
    assert "<b onmouseover" not in markdown

    # rich markup in free text is printed as text in the terminal, not interpreted
    assert "[bold red]rich markup[/bold red]" in result.stdout
