"""Help shows on/off flags without a ``<bool>`` placeholder; shell completion is offered
(issue 16, item 5)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperCommand

from prereg.commands._common import complete_registration_id
from tests.cli.helpers import PILOT, PILOT_ID, script
from tests.conftest import skip_unless_ci


@pytest.mark.parametrize(
    "args",
    [[], ["run"], ["list"], ["export"], ["analyse"], ["split", "show"], ["mcp", "serve"]],
)
def test_flags_have_no_bool_placeholder(cli: Any, args: list[str]) -> None:
    result = cli(*args, "--help")
    assert result.code == 0, result.stderr
    assert "<bool>" not in result.stdout
    assert "--help" in result.stdout


def test_options_with_values_keep_their_type(cli: Any) -> None:
    text = cli("run", "--help").stdout
    assert "--json" in text and "--dry-run" in text
    assert "<path>" in text  # --prices takes a value and says which kind
    assert "<bool>" not in cli("run", "--help").stdout
    assert cli("run", "x", "--json=yes").code == 2  # a flag still takes no value


def test_root_help_offers_completion(cli: Any) -> None:
    text = cli("--help").stdout
    assert "--install-completion" in text and "--show-completion" in text


def _completion_run(words: str, cword: int, cwd: Path | None = None) -> list[str]:
    """What bash completion offers for ``words`` (COMP_WORDS) at word ``cword``."""
    exe = script()
    if not exe.exists():
        skip_unless_ci("the prereg console script is not installed next to the interpreter")
    env = {**os.environ, "_PREREG_COMPLETE": "complete_bash"}
    env.pop("PREREG_WORKSPACE", None)
    env.update(COMP_WORDS=words, COMP_CWORD=str(cword))
    done = subprocess.run(
        [str(exe)], env=env, capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.split()


def test_show_completion_prints_a_script_and_completion_answers() -> None:
    exe = script()
    if not exe.exists():
        skip_unless_ci("the prereg console script is not installed next to the interpreter")
    # --show-completion detects the shell from the parent processes (shellingham), so run
    # it from bash explicitly (not exec'd: the trailing command keeps bash the parent)
    # rather than depend on whatever started pytest
    shown = subprocess.run(
        ["bash", "-c", f"{shlex.quote(str(exe))} --show-completion; status=$?; exit $status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "_prereg_completion" in shown.stdout and "_PREREG_COMPLETE" in shown.stdout
    assert _completion_run("prereg li", 1) == ["list"]
    assert set(_completion_run("prereg export x --f", 3)) == {"--format", "--force"}


# ---- issue 37, item 5: each named shell's script; ids, experiments, formats complete -----

#: what only each shell's script says
SCRIPTS = {
    "bash": "complete -o default -F _prereg_completion prereg",
    "zsh": "#compdef prereg",
    "fish": "complete --command prereg",
    "powershell": "Register-ArgumentCompleter",
    "pwsh": "Register-ArgumentCompleter",
}


@pytest.mark.parametrize("shell", list(SCRIPTS))
def test_show_completion_prints_the_named_shells_script(shell: str) -> None:
    exe = script()
    if not exe.exists():
        skip_unless_ci("the prereg console script is not installed next to the interpreter")
    for args in (["--show-completion", shell], [f"--show-completion={shell.upper()}"]):
        shown = subprocess.run(
            [str(exe), *args], capture_output=True, text=True, timeout=60, check=False
        )
        assert shown.returncode == 0, shown.stderr
        assert SCRIPTS[shell] in shown.stdout
        others = {text for name, text in SCRIPTS.items() if text != SCRIPTS[shell]}
        assert not any(text in shown.stdout for text in others), (shell, shown.stdout[:200])


def test_an_unknown_shell_is_a_usage_error(cli: Any) -> None:
    result = cli("--show-completion", "tcsh")
    assert result.code == 2 and "unknown shell 'tcsh'" in result.stderr
    assert "--show-completion" in cli("--help").stdout


HOSTS_ID = "music-library-hosts"


@pytest.fixture
def two(ws: Path, cli: Any) -> Path:
    """A workspace with two registrations: the pilot, then the hosts draft."""
    for draft in (PILOT, "drafts/music-library-hosts.yaml"):
        assert cli("-w", ws, "register", ws / draft).code == 0
    return ws


@pytest.mark.parametrize(
    "command", ["show", "run", "analyse", "export", "judge", "calibrate", "compare"]
)
def test_registration_ids_complete(two: Path, command: str) -> None:
    assert _completion_run(f"prereg {command} ", 2, cwd=two / "drafts") == [PILOT_ID, HOSTS_ID]
    assert _completion_run(f"prereg -w {two} {command} music-library-h", 4) == [HOSTS_ID]


def test_ids_complete_with_w_after_the_command_and_for_both_of_compare(
    two: Path, tmp_path: Path
) -> None:
    assert _completion_run(f"prereg show -w {two} ", 4, cwd=tmp_path) == [PILOT_ID, HOSTS_ID]
    second = _completion_run(f"prereg compare -w {two} {PILOT_ID} ", 5, cwd=tmp_path)
    assert second == [PILOT_ID, HOSTS_ID]
    assert _completion_run("prereg show ", 2, cwd=tmp_path) == []  # no workspace: nothing


def test_experiments_and_formats_complete(two: Path) -> None:
    experiments = _completion_run(f"prereg -w {two} split show ", 5)
    assert experiments == sorted(p.name for p in (two / "experiments").iterdir())
    assert "music-library" in experiments
    formats = _completion_run(f"prereg -w {two} export {PILOT_ID} --format ", 6)
    assert formats == ["jsonl", "csv", "parquet", "inspect"]
    assert _completion_run(f"prereg -w {two} export {PILOT_ID} -f c", 6) == ["csv"]


def test_ids_come_from_the_ledger_cheaply(two: Path, cli: Any) -> None:
    """Each id once, in ledger order, with what it is; a torn or foreign line skipped."""
    ledger = two / "registry" / "ledger.jsonl"
    with ledger.open("a", encoding="utf-8") as out:
        out.write('{"event": "registration", "id": "bad\\u001b[2J"}\n{"torn": \n')
    ctx = typer.Context(TyperCommand("probe"))
    with ctx.scope():
        ctx.meta["prereg.workspace"] = two
        offered = complete_registration_id(ctx, "")
    assert [reg_id for reg_id, _ in offered] == [PILOT_ID, HOSTS_ID]
    assert offered[0][1] == "exploratory, music-library, split dev"
