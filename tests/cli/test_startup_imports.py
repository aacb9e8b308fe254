"""Start-up (issue 15): what ``prereg --help`` and ``prereg plan`` from options import.

The regression guard is the set of modules a command leaves unimported, checked in a
fresh interpreter after the command ran in it (no time is asserted): the numerical
libraries, the provider SDKs, pydantic (typer converts option values through it, see
:class:`prereg.commands.plain_coercion._PlainCoercion`) and the statistics beyond the closed
forms a paired plan needs. The lazy ``prereg.stats`` package that makes this possible is
checked here too: every public name resolves to its definition, whatever was imported
first.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import pytest

from prereg import stats
from prereg.commands.plain_coercion import _PlainCoercion
from tests.cli.test_lazy_cli import _in_child, _run_and_list_modules
from tests.test_architecture import ROOT

#: what neither command may import: numerical libraries, provider SDKs, pydantic
HEAVY = (
    "numpy",
    "scipy",
    "statsmodels",
    "matplotlib",
    "anthropic",
    "openai",
    "mcp",
    "pydantic",
    "pydantic_core",
    "typer._adapters",
)
#: the bench's plan (bench/startup.py): a paired design from options
PLAN = ["plan", "--sigma-d", "0.28", "--prompts", "100", "--json"]


def test_plan_from_options_imports_no_heavy_library() -> None:
    project = (
        "prereg.stats.planning",
        "prereg.stats.results",
        "prereg.registry.schema",
        "prereg.runners.record",
        "prereg.reports.planning.from_runs",
        "rich.table",  # only the drawn plan uses rich's tables
    )
    got = _run_and_list_modules(PLAN, (*HEAVY, *project, "prereg.stats.sizing"))
    assert got["code"] in (0, None), got["stdout"]
    assert got["loaded"] == ["prereg.stats.sizing"], f"plan imported {got['loaded']}"
    plan = json.loads(str(got["stdout"]))
    assert plan["prompts"] == 100 and plan["min_discordant"] == 6
    assert plan["inputs"]["alpha"] == 0.05 and plan["inputs"]["sims"] == 2000


def test_plan_for_a_target_mde_imports_no_heavy_library() -> None:
    argv = ["plan", "--sigma-d", "0.35", "--mde", "0.10", "--alpha", "0.05", "--json"]
    got = _run_and_list_modules(argv, HEAVY)
    assert got["code"] in (0, None), got["stdout"]
    assert got["loaded"] == []
    assert json.loads(str(got["stdout"]))["prompts"] == 97  # plan's help: "97 prompts"


def test_root_help_imports_no_heavy_library_and_no_statistics() -> None:
    got = _run_and_list_modules(["--help"], (*HEAVY, "prereg.stats", "prereg.commands.plan_cmds"))
    assert got["code"] in (0, None)
    assert got["loaded"] == [], f"--help imported {got['loaded']}"


def test_a_plan_with_discordance_rates_still_loads_what_it_needs() -> None:
    """The McNemar figures come through the lazy package (numpy and scipy then load)."""
    argv = ["plan", "--p01", "0.45", "--p10", "0.05", "--sims", "0", "--json"]
    got = _run_and_list_modules(argv, ("numpy", "prereg.stats.planning"))
    assert got["code"] in (0, None), got["stdout"]
    assert got["loaded"] == ["numpy", "prereg.stats.planning"]
    mcnemar = json.loads(str(got["stdout"]))["mcnemar"]
    assert (mcnemar["prompts"], mcnemar["prompts_asymptotic"]) == (25, 23)  # plan's help


def test_a_bad_option_value_is_refused_as_typer_refuses_it() -> None:
    got = _run_and_list_modules(["plan", "--sigma-d", "abc", "--prompts", "10"], ())
    assert got["code"] == 2


# ---- option values converted without pydantic: the same values and errors -------------


def _typer_param(annotation: type, **info: Any) -> _PlainCoercion:
    from typer._coercion import TypeDescriptor  # lazy: typer's internals
    from typer.models import OptionInfo  # lazy: typer's internals

    parameter_info = OptionInfo(**info)
    return _PlainCoercion(
        parameter_info, annotation, TypeDescriptor(annotation, parameter_info, None)
    )


def _outcome(convert: Any, value: object) -> tuple[str, object]:
    try:
        got = convert(value)
    except Exception as exc:  # the error typer raises, compared by type and message
        return ("error", f"{type(exc).__name__}: {exc}")
    return (type(got).__name__, repr(got))


VALUES = (
    *("0.28", "100", "-3", "0", "-0", "1e-3", "2E+5", "1e400", "0.1000000000000000055511"),
    *("007", "+1", " 1", "1 ", "1_000", "1.", ".5", "inf", "nan", "-inf", "0x10", "abc", ""),
    *(0.05, 2000, 0, True, 1.5, 3),
)


@pytest.mark.parametrize("annotation", [float, int, str])
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_plain_conversion_gives_typers_value_or_typers_error(
    annotation: type, value: object
) -> None:
    from typer._coercion import build_runtime_param  # lazy: typer's internals

    plain = _typer_param(annotation)
    reference = build_runtime_param(plain.descriptor)
    mine = _outcome(lambda v: plain.coerce(v, param=None, ctx=None), value)  # type: ignore[arg-type]
    theirs = _outcome(lambda v: reference.coerce(v, param=None, ctx=None), value)  # type: ignore[arg-type]
    assert mine == theirs


def test_a_ranged_number_goes_to_typers_own_conversion() -> None:
    ranged = _typer_param(int, min=1)
    assert ranged._plain("5") == (False, None)
    assert _typer_param(int)._plain("5") == (True, 5)
    assert _typer_param(float)._plain("0.5") == (True, 0.5)
    assert _typer_param(float)._plain("0.5e") == (False, None)


# ---- the lazy statistics package ------------------------------------------------------


def _type_checking_imports() -> dict[str, str]:
    """name -> submodule, from the imports under ``TYPE_CHECKING`` in stats/__init__.py."""
    tree = ast.parse((ROOT / "stats" / "__init__.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                for alias in imp.names:
                    found[alias.asname or alias.name] = imp.module.removeprefix("prereg.stats.")
    return found


def test_the_table_the_type_imports_and_all_name_the_same_things() -> None:
    assert set(stats.__all__) == set(stats.EXPORTS)
    assert len(stats.__all__) == len(set(stats.__all__))
    assert _type_checking_imports() == stats.EXPORTS


def test_every_submodule_is_in_the_table() -> None:
    files = {p.stem for p in (ROOT / "stats").glob("*.py")} - {"__init__"}
    files |= {p.parent.name for p in (ROOT / "stats").glob("*/__init__.py")}
    assert files == {*stats.SOURCES, *stats.PRIVATE_MODULES}


def test_every_name_resolves_to_its_definition_whatever_loads_first() -> None:
    """In fresh interpreters: each submodule imported directly first (as the registry
    imports ``prereg.stats.invokerank``), then every public name read from the package."""
    for first in ("invokerank", "planning", "calibration"):
        code = f"""
import importlib, json
import prereg.stats.{first}
import prereg.stats as s
from prereg.stats import *  # noqa: F403
from prereg.stats import invokerank
wrong = [n for n in s.__all__
         if getattr(s, n) is not getattr(importlib.import_module("prereg.stats." + s.EXPORTS[n]), n)
         or globals()[n] is not getattr(s, n)]
unlisted = sorted(set(s.__all__) - set(dir(s)))
print(json.dumps({{"wrong": wrong, "invokerank": callable(invokerank) and invokerank.__name__,
                   "attr": s.invokerank is invokerank, "dir": unlisted}}))
"""
        got = _in_child(code)
        assert got == {"wrong": [], "invokerank": "invokerank", "attr": True, "dir": []}, first


def test_importing_the_package_imports_no_submodule_and_unknown_names_fail() -> None:
    got = _in_child(
        "import json, sys\nimport prereg.stats as s\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('prereg.stats.') or m == 'numpy')\n"
        "try:\n    s.no_such_name\n    missing = False\n"
        "except AttributeError:\n    missing = True\n"
        "print(json.dumps({'loaded': loaded, 'missing': missing, 'paired': s.paired.__name__}))"
    )
    assert got == {"loaded": [], "missing": True, "paired": "prereg.stats.paired"}


def test_the_closed_forms_give_the_planning_modules_figures() -> None:
    from prereg.stats import planning  # the re-exports keep the old home working

    assert planning.mde_paired is stats.mde_paired and planning.min_discordant(0.05) == 6
    assert math.isclose(stats.mde_paired(0.28, 58), 0.103, abs_tol=5e-4)
    assert Path(stats.mde_paired.__code__.co_filename).name == "sizing.py"


def test_a_typer_without_its_conversion_internals_still_runs_every_command() -> None:
    """``typer._coercion`` is private: where a typer release moves it, the plain
    conversion is skipped (typer converts every value itself) and the command's output is
    the same, never an import error at start-up."""
    import subprocess  # noqa: PLC0415 - only this test starts interpreters
    import sys  # noqa: PLC0415

    code = (
        "import sys{block}\n"
        "from prereg.cli import main\n"
        "main(['plan', '--sigma-d', '0.28', '--prompts', '100', '--json'])\n"
    )
    outputs = []
    # the plain conversion unimportable, as where typer._coercion lacks its names
    for block in ("", "; sys.modules['prereg.commands.plain_coercion'] = None"):
        done = subprocess.run(
            [sys.executable, "-c", code.format(block=block)],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
