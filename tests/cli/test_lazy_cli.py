"""The lazy root group (issue 15, item 1): ``prereg --help`` and ``prereg plan`` start
without the heavy libraries, and every command behaves as it did registered eagerly.

The reference for "as before" is an app built the way prereg/cli.py built it before: one
typer app with the same settings, every command module's ``register(app)`` called on it,
then the flag-help fix. Each command's help through the lazy root must equal its help
through that app, byte for byte.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist

import pytest
import typer
from typer.testing import CliRunner

from prereg import cli, stats
from prereg.commands import plan_cmds
from prereg.commands._common import FlagHelpGroup, RootOptions, use_flag_help
from prereg.reports import analysis
from tests.test_architecture import ROOT, _modules, layer_of

#: libraries that no listing of the commands needs (seconds of imports between them)
HEAVY = ("numpy", "scipy", "anthropic", "openai", "mcp", "matplotlib")
MODULES = sorted({module for module, _ in cli.COMMANDS.values()})


def _eager_app() -> typer.Typer:
    """The root app as prereg/cli.py built it before it was lazy (the reference)."""
    app = typer.Typer(
        name="prereg",
        help=cli.app.info.help,
        no_args_is_help=True,
        cls=FlagHelpGroup,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
    )

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = RootOptions(None)

    for module in MODULES:
        importlib.import_module(f"{cli.COMMAND_PACKAGE}.{module}").register(app)
    use_flag_help(app)
    return app


def _help(app: typer.Typer, args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], prog_name="prereg", env={"NO_COLOR": "1"})
    assert result.exit_code == 0, (args, result.output)
    return result.output


def _paths(group: typer.Typer) -> list[list[str]]:
    """Every command path of ``group`` (a subgroup and each of its commands)."""
    root = typer.main.get_group(group)
    found: list[list[str]] = []
    for name, command in root.commands.items():
        found.append([name])
        for sub in getattr(command, "commands", {}):
            found.append([name, sub])
    return found


def _in_child(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def _run_and_list_modules(argv: list[str], modules: tuple[str, ...]) -> dict[str, object]:
    code = f"""
import contextlib, io, json, sys
from prereg.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main({argv!r})
    except SystemExit as exc:
        code = exc.code
print(json.dumps({{"code": code, "stdout": out.getvalue(),
                   "loaded": [m for m in {modules!r} if m in sys.modules]}}))
"""
    return _in_child(code)


def test_root_help_lists_every_command_and_imports_no_heavy_library() -> None:
    got = _run_and_list_modules(["--help"], (*HEAVY, "prereg.commands.run_cmds"))
    assert got["code"] in (0, None)
    assert got["loaded"] == [], f"--help imported {got['loaded']}"
    text = " ".join(
        str(got["stdout"]).replace("│", " ").split()
    )  # panels' borders and wrapping undone
    for name, (_, summary) in cli.COMMANDS.items():
        assert f" {name} {summary}" in text, name


def test_plan_from_options_needs_neither_the_registry_nor_scipy_stats() -> None:
    absent = ("prereg.registry.schema", "prereg.runners.record", "scipy.stats", "matplotlib")
    argv = ["plan", "--sigma-d", "0.28", "--prompts", "100", "--sims", "0", "--json"]
    got = _run_and_list_modules(argv, absent)
    assert got["code"] in (0, None), got["stdout"]
    assert got["loaded"] == []
    # the same figure as the closed form: z = z_.975 + z_.8, MDE = z * 0.28 / sqrt(100),
    # with the standard library's normal quantile as the independent reference
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert json.loads(str(got["stdout"]))["mde"] == pytest.approx(z * 0.28 / 10, rel=1e-12)


def test_every_registered_command_is_in_the_table_under_its_module() -> None:
    registered = {name: module for module in MODULES for name in cli.module_commands(module)}
    assert registered == {name: module for name, (module, _) in cli.COMMANDS.items()}


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_summary_is_the_first_paragraph_of_the_commands_own_help(name: str) -> None:
    module, summary = cli.COMMANDS[name]
    command = cli.module_commands(module)[name]
    first = inspect.cleandoc(command.help or "").split("\n\n")[0]
    assert " ".join(first.split()) == summary


def test_every_commands_help_is_what_the_eager_app_printed() -> None:
    eager = _eager_app()
    paths = _paths(eager)
    assert len(paths) > len(cli.COMMANDS)  # the subgroups' commands are in
    for args in paths:
        assert _help(cli.app, args) == _help(eager, args), args


def test_a_mistyped_command_is_refused_with_a_suggestion() -> None:
    result = CliRunner().invoke(cli.app, ["pla"], prog_name="prereg")
    assert result.exit_code == 2
    assert "No such command 'pla'" in result.output and "'plan'" in result.output


def test_a_command_still_runs_through_the_lazy_root(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli.app, ["-w", str(tmp_path / "ws"), "init", "--json"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ws" / "registry").is_dir()


# ---- the modules imported by name keep the layer order -----------------------------------


def _dynamic_import_sites() -> set[str]:
    """Every project module that calls ``import_module`` (importing a module by name)."""
    sites = set()
    for module, path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name == "import_module":
                    sites.add(module)
    return sites


def _dynamic_targets() -> dict[str, list[str]]:
    """What each site imports by name: its declared table or constant."""
    return {
        "prereg.cli": [f"{cli.COMMAND_PACKAGE}.{m}" for m in MODULES],
        "prereg.commands.plan_cmds": [plan_cmds.FROM_RUNS],
        "prereg.stats._scipy": ["scipy.stats", "scipy.special", "scipy.optimize"],
        # what the analysis imports ahead, while children verify the chain
        "prereg.reports.analysis": [*analysis.FIRST_USE, analysis.STUDY_TABLES],
        # the lazy package: each public name's submodule, on first use
        "prereg.stats": [f"prereg.stats.{m}" for m in (*stats.SOURCES, *stats.PRIVATE_MODULES)],
    }


def test_modules_imported_by_name_are_declared_and_keep_the_layer_order() -> None:
    targets = _dynamic_targets()
    assert _dynamic_import_sites() == set(targets), "declare a new import-by-name site here"
    for site, modules in targets.items():
        for target in modules:
            importlib.import_module(target)  # it exists
            if not target.startswith("prereg."):
                continue
            source, dest = layer_of(site), layer_of(target)
            assert source is not None and dest is not None, (site, target)
            assert dest <= source, f"{site} imports {target} by name, against the layer order"


def test_the_architecture_scan_covers_cli_py() -> None:
    assert (ROOT / "prereg" / "cli.py") in {path for _, path in _modules()}


def test_the_program_freezes_what_is_alive_as_it_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` (console script, ``python -m prereg``): main, then gc.freeze, however main
    ends, so the exit's final collection has nothing to walk."""
    calls: list[str] = []
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    # run() marks the process as the prereg program: restored afterwards, so later tests
    # on this worker are not taken for it (the analyse collector tests were, once)
    monkeypatch.setattr(cli.PROCESS, "program", False)

    def main(argv: list[str] | None = None) -> None:
        calls.append("main")
        raise SystemExit(3)

    monkeypatch.setattr(cli, "main", main)
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == 3 and calls == ["main", "freeze"]
    done = subprocess.run(
        [sys.executable, "-m", "prereg", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "register" in done.stdout
