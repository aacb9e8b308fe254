"""The type checker sees across packages: a wrongly typed cross-package call fails mypy.

Before the layout change, ``prereg.stats`` resolved to ``Any`` under mypy, so this probe
passed silently. It runs mypy with the project's configuration on a file outside the
repository, as a user's or a new module's code would be checked (the repository's
mypy cache is reused, so after CI's own mypy run this takes seconds).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """\
from prereg.registry.units import plan_from_registration
from prereg.stats import mde_paired

reveal_type(mde_paired)
x: int = mde_paired("not a float", "nope")
plan_from_registration({"id": "not a registration"}, digest=7)
"""


@pytest.mark.slow
def test_wrong_cross_package_calls_fail_mypy(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(probe),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert 'Revealed type is "def (sigma_d: float, prompts: int' in text, text
    assert 'Argument 1 to "mde_paired" has incompatible type "str"; expected "float"' in text
    assert (
        'Incompatible types in assignment (expression has type "float", variable has '
        'type "int")' in text
    )
    assert 'Argument 1 to "plan_from_registration" has incompatible type' in text
    assert 'Argument "digest" to "plan_from_registration" has incompatible type "int"' in text
