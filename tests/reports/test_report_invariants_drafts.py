"""Every bundled draft's report keeps the rule for printed intervals (issue 39, acceptance).

Each draft that runs offline is registered in a fresh workspace, run on the local host
(judged where it registers judges) and analysed; the checker (:func:`check`) must find no
interval outside its support, none excluding its estimate, no unlabelled zero-width
interval and no broken count. ``analyse`` refuses such a report itself (exit 1), so the
demo and pool tests that analyse the other drafts hold them to the same rule; the meta
test below keeps the list of drafts and the tests that cover them in step.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from unittest import mock

import pytest

from prereg.cli import main
from prereg.commands.demo_cmds import DEMO_EXAMPLES, DEMO_STUDIES
from prereg.core.workspace import Workspace
from prereg.reports import invariants
from prereg.reports.analysis import Options, analyse
from prereg.reports.invariants import check

ROOT = Path(__file__).resolve().parents[2]
DRAFTS = ROOT / "registry" / "drafts"

#: analysed here
HERE = ("music-library-confirmatory", "toolbottleneck-local")
#: analysed by tests/reports/test_report_invariants_property.py (judges, controls, pools)
POOL = ("podcast-selection-judged", "podcast-selection-controls")
#: analysed by ``prereg demo`` in tests/reports/test_narrow_terminal.py and the demo tests
DEMO = tuple(Path(p).stem for p in (*DEMO_EXAMPLES.values(), *DEMO_STUDIES.values()))
#: runs only against a provider (Anthropic): dry-run in tests/toolbottleneck/test_tb_api_draft.py;
#: its study tables are built by the same code as toolbottleneck-local's
PROVIDER_ONLY = ("toolbottleneck-api",)


def _cli(*args: str | Path) -> tuple[int, str]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            main([str(a) for a in args])
        return 0, out.getvalue()
    except SystemExit as exc:
        return (exc.code if isinstance(exc.code, int) else 1), out.getvalue()


def test_every_bundled_draft_is_held_to_the_rule_somewhere() -> None:
    drafts = {p.stem for p in DRAFTS.glob("*.yaml")}
    assert drafts == set(HERE) | set(POOL) | set(DEMO) | set(PROVIDER_ONLY)


@pytest.mark.parametrize("name", HERE)
def test_the_bundled_draft_keeps_the_rules(name: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    assert _cli("init", ws)[0] == 0
    code, out = _cli("-w", ws, "register", ws / "drafts" / f"{name}.yaml", "--json")
    assert code == 0, out
    code, out = _cli("-w", ws, "run", name, "--no-progress", "--json")
    assert code == 0, out
    with mock.patch.object(invariants, "ENFORCE", False):
        report = analyse(Workspace(ws), name, Options(allow_incomplete=True))
    found = check(report)
    assert not found, "\n".join(str(v) for v in found[:20])
    code, out = _cli("-w", ws, "analyse", name, "--json")  # and analyse itself writes it
    assert code == 0, out
