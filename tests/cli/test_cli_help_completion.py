"""Help shows on/off flags without a ``<bool>`` placeholder; shell completion is offered
(issue 16, item 5)."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any

import pytest

from tests.cli.helpers import script
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


def _completion_run(words: str, cword: int) -> list[str]:
    exe = script()
    if not exe.exists():
        skip_unless_ci("the prereg console script is not installed next to the interpreter")
    env = {**os.environ, "_PREREG_COMPLETE": "complete_bash"}
    env.update(COMP_WORDS=words, COMP_CWORD=str(cword))
    done = subprocess.run(
        [str(exe)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
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
