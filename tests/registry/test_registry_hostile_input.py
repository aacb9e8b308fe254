"""Hostile registrations (issue 12, "Bad input"): exit 2, file:line:col and field, nothing written.

Each case drives the real CLI (in-process, or in a subprocess with a timeout where a
regression would hang or exhaust memory: a FIFO, an alias bomb) against a workspace
that already holds a registration, and checks that the registry folder is
byte-identical afterwards.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.cli import main
from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_REGISTRATION_BYTES
from prereg.registry.resolve import resolve
from tests.conftest import CliResult, tree_digest

PILOT = "drafts/music-library-pilot.yaml"
Cli = Callable[..., CliResult]


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace for the module, with the pilot registered (refusals write nothing)."""
    root = tmp_path_factory.mktemp("hostile") / "ws"
    for args in (["init", str(root)], ["-w", str(root), "register", str(root / PILOT)]):
        with pytest.raises(SystemExit) as done:
            main(args)
        assert done.value.code in (0, None)
    return root


@pytest.fixture
def ws(populated: Path) -> Iterator[Path]:
    """The module's workspace; the registry must be byte-identical after each test."""
    before = tree_digest(populated / "registry")
    yield populated
    assert tree_digest(populated / "registry") == before, "a refused call wrote to the registry"


_COUNTER = iter(range(1_000_000))


def variant(ws: Path, old: str, new: str, *, keep_id: bool = False) -> Path:
    """The pilot with ``old`` replaced by ``new``, under a fresh id and file name."""
    text = (ws / PILOT).read_text()
    assert old in text, old
    text = text.replace(old, new, 1)
    n = next(_COUNTER)
    if not keep_id:
        text = text.replace("id: music-library-pilot", f"id: hostile-{n}", 1)
    path = ws / "drafts" / f"variant{n}.yaml"
    path.write_text(text)
    return path


def line_of(path: Path, fragment: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if fragment in t)


def refused(cli: Cli, ws: Path, path: Path, *fragments: str) -> CliResult:
    """Register ``path``: exit 2, each fragment in the message, one JSON error document."""
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    error = json.loads(result.stdout)
    assert error["exit_code"] == 2 and error["error"] == "BadInput"
    return result


def _bounded() -> None:  # pragma: no cover - runs in the child
    """At most 2 GiB of address space: a regression fails instead of eating the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))


#: Run in a child: ``prereg ARGS`` for each ARGS, each case's exit code, stderr, seconds.
_CHILD = """
import contextlib, io, json, sys, time
from prereg.cli import main
out = []
for args in json.loads(sys.argv[1]):
    err, started = io.StringIO(), time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code
    out.append({"code": code, "stderr": err.getvalue(), "seconds": time.monotonic() - started})
print(json.dumps(out))
"""


def cli_apart(*cases: list[str]) -> list[dict[str, Any]]:
    """``prereg ARGS`` for each case, in one child process with a timeout and a memory
    bound: a FIFO, a device or an alias bomb must not hang or exhaust the test run if it
    regresses (then every case of the batch fails, on the timeout)."""
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(list(cases))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_bounded,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    outcomes: list[dict[str, Any]] = json.loads(result.stdout)
    return outcomes


def where(path: Path, fragment: str, column: int) -> str:
    return f"{path.name}:{line_of(path, fragment)}:{column}"


# ---- duplicate keys ---------------------------------------------------------------------------


def test_duplicate_top_level_key_is_refused(ws: Path, cli: Cli) -> None:
    # the second id would have won silently (and registered "another-id")
    path = variant(ws, "kind: exploratory", "kind: exploratory\nid: another-id", keep_id=True)
    refused(cli, ws, path, where(path, "id: another-id", 1), ": id: duplicate key 'id'")


def test_duplicate_nested_key_is_refused(ws: Path, cli: Cli) -> None:
    path = variant(ws, "aggregate: majority}", "aggregate: majority, alpha: 0.5}")
    result = refused(cli, ws, path, "primary.alpha", "duplicate key 'alpha'")
    assert f"{path.name}:{line_of(path, 'alpha: 0.5')}:" in result.stderr


# ---- numbers canonical JSON cannot carry --------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("alpha: 0.05,", "alpha: .nan,", "primary.alpha"),
        ("turn_limit: 16}", "turn_limit: 16, spend_usd: .inf}", "budgets.spend_usd"),
        (
            "host: {driver: local}",
            "host: {driver: local, params: {threshold: -.inf}}",
            "host.params.threshold",
        ),
        ("alpha: 0.05,", "alpha: 1.0e+999,", "primary.alpha"),
    ],
    ids=["nan", "inf", "minus-inf-in-params", "float-overflow"],
)
def test_non_finite_numbers_are_refused(ws: Path, cli: Cli, old: str, new: str, field: str) -> None:
    path = variant(ws, old, new)
    fragment = new.split(": ")[-1].rstrip(",}")
    refused(cli, ws, path, f"{path.name}:{line_of(path, fragment)}:", field, "not a finite number")


@pytest.mark.parametrize(
    "value",
    ["9007199254740992", "-18446744073709551616", "9" * 5000],
    ids=["2^53", "-2^64", "5000-digits"],
)
def test_integers_beyond_canonical_json_are_refused(ws: Path, cli: Cli, value: str) -> None:
    path = variant(ws, "seed: 7", f"seed: {value}")
    refused(cli, ws, path, where(path, "seed:", 42), "design.seed", "outside the range")


# ---- tags -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("notes: !!binary aGVsbG8=", "!!binary"),
        ("notes: !!python/object:os.system {}", "!!python/object:os.system"),
        ("notes: !shout hello", "!shout"),
        ("notes: !!set {a, b}", "!!set"),
        ("notes: !!omap [a: 1]", "!!omap"),
        ("notes: !!int seven", None),
    ],
    ids=["binary", "python", "custom", "set", "omap", "explicit-int-on-text"],
)
def test_tags_other_than_plain_yaml_are_refused(
    ws: Path, cli: Cli, text: str, tag: str | None
) -> None:
    path = variant(ws, "outcome: success", f"outcome: success\n{text}")
    expected = f"the YAML tag '{tag}' is refused" if tag else "'seven' is not an integer"
    refused(cli, ws, path, where(path, "notes:", 8), ": notes: ", expected)


def test_an_implicit_date_is_kept_as_the_text_written(ws: Path) -> None:
    """Timestamps: a date-looking value is the string written (not a date, not refused)."""
    path = variant(ws, "outcome: success", "outcome: success\nnotes: 2024-01-01")
    resolved = resolve(path, ws / "experiments", path.name)
    assert resolved.registration.notes == "2024-01-01"
    assert resolved.document["registration"]["notes"] == "2024-01-01"


def test_a_mapping_key_must_be_a_string(ws: Path, cli: Cli) -> None:
    path = variant(
        ws, "host: {driver: local}", "host: {driver: openai, model: m, params: {metadata: {1: x}}}"
    )
    refused(cli, ws, path, "host.params.metadata.1", "a mapping key must be a string")


# ---- aliases and nesting --------------------------------------------------------------------

#: The "billion laughs": nine levels of nine aliases, 387 million nodes once expanded.
LAUGHS = "".join(
    f"    l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]\n"
    if i
    else "    l0: &l0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
    for i in range(9)
)


@pytest.fixture(scope="module")
def apart(populated: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The cases that could hang or exhaust memory, run once in one child process."""
    drafts = populated / "drafts"
    bomb = variant(
        populated, "host: {driver: local}", "host:\n  driver: local\n  params:\n" + LAUGHS
    )
    fifo = drafts / "fifo.yaml"
    os.mkfifo(fifo)
    zero = drafts / "zero.yaml"
    zero.symlink_to("/dev/zero")  # read to the end, /dev/zero never ends
    paths = {"bomb": bomb, "fifo": fifo, "zero": zero}
    before = tree_digest(populated / "registry")
    try:
        outcomes = cli_apart(*(["-w", str(populated), "register", str(p)] for p in paths.values()))
    finally:
        fifo.unlink()
        zero.unlink()
    assert tree_digest(populated / "registry") == before
    return {name: (path, outcomes[i]) for i, (name, path) in enumerate(paths.items())}


def test_an_alias_bomb_fails_fast(apart: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    """The 1 KB file that took 29 s and 278 MB: refused by the alias bound, unexpanded."""
    path, outcome = apart["bomb"]
    assert path.stat().st_size < 2048
    assert outcome["code"] == 2, outcome["stderr"][-2000:]
    assert "aliases expand this document" in outcome["stderr"]
    assert f"{path.name}:{line_of(path, 'l6: &l6')}:" in outcome["stderr"]  # the aliases' line
    assert "host.params.l6[0]" in outcome["stderr"]
    # no wall-clock bound here (a loaded machine makes it flaky): the message shows the
    # loader's alias bound refused the document before expanding it, and the child's
    # timeout and memory bound catch a regression that would expand it


def test_a_recursive_anchor_is_refused(ws: Path, cli: Cli) -> None:
    path = variant(ws, "host: {driver: local}", "host: {driver: local, params: &p {self: *p}}")
    line = line_of(path, "host:")
    column = path.read_text().splitlines()[line - 1].index("self") + 1
    refused(cli, ws, path, f"{path.name}:{line}:{column}", "host.params.self", "recursive alias")


@pytest.mark.parametrize("depth", [100, 900, 5000])
def test_deep_nesting_is_refused(ws: Path, cli: Cli, depth: int) -> None:
    path = variant(ws, "outcome: success", f"outcome: success\nnotes: {'[' * depth}{']' * depth}")
    result = refused(cli, ws, path, f"{path.name}:{line_of(path, 'notes:')}:")
    assert "nested more than 64 levels" in result.stderr or "nesting depth" in result.stderr


# ---- strict types -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "field", "got"),
    [
        (
            "host: {driver: local}",
            "host: {driver: local, allow_sampling: 'yes'}",
            "host.allow_sampling",
            "'yes'",
        ),
        ("host: {driver: local}", "host: {driver: local, tool_search: 1}", "host.tool_search", "1"),
        ("repeats: 3", "repeats: true", "design.repeats", "True"),
        ("repeats: 3", "repeats: 3.0", "design.repeats", "3.0"),
        ("q: 0.10", "q: true", "multiplicity.q", "True"),
        ("draws: 10000", "draws: '10000'", "secondary[0].draws", "'10000'"),
    ],
    ids=[
        "str-to-bool",
        "int-to-bool",
        "bool-to-int",
        "float-to-int",
        "bool-to-float",
        "str-to-int",
    ],
)
def test_no_value_is_coerced(ws: Path, cli: Cli, old: str, new: str, field: str, got: str) -> None:
    path = variant(ws, old, new)
    key = field.rsplit(".", 1)[-1]
    refused(
        cli, ws, path, f"{path.name}:{line_of(path, key + ':')}:", field, "should be a valid", got
    )


# ---- files that are not a registration ------------------------------------------------------


def test_a_registration_over_the_size_limit_is_refused(ws: Path, cli: Cli) -> None:
    path = variant(ws, "outcome: success", "outcome: success\n# " + "x" * MAX_REGISTRATION_BYTES)
    refused(cli, ws, path, path.name, "over the 1 MiB limit for a registration file")


def test_a_fifo_is_refused_without_blocking(apart: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    path, outcome = apart["fifo"]
    assert outcome["code"] == 2, outcome["stderr"][-2000:]
    # never opened for reading: a blocked open would hang the child (cli_apart's guard)
    assert path.name in outcome["stderr"] and "a FIFO (named pipe)" in outcome["stderr"]


def test_a_device_is_refused(apart: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    path, outcome = apart["zero"]
    assert outcome["code"] == 2, outcome["stderr"][-2000:]
    assert path.name in outcome["stderr"]
    assert "character device, not a regular file" in outcome["stderr"]


def test_a_symlink_loop_is_refused_by_resolve(ws: Path) -> None:
    loop = ws / "drafts" / "loop.yaml"
    loop.symlink_to("loop.yaml")
    try:
        with pytest.raises(BadInput) as info:
            resolve(loop, ws / "experiments", "drafts/loop.yaml")
    finally:
        loop.unlink()
    assert info.value.file == "drafts/loop.yaml"
    assert "symlink loop" in info.value.message


def test_a_symlink_loop_is_refused_by_the_cli(ws: Path, cli: Cli) -> None:
    loop = ws / "drafts" / "loop-cli.yaml"
    loop.symlink_to("loop-cli.yaml")
    try:
        refused(cli, ws, loop, "loop-cli.yaml", "symlink loop")
    finally:
        loop.unlink()


# ---- control characters are escaped in every message ------------------------------------------


def test_escape_bytes_of_an_unknown_key_are_escaped(ws: Path, cli: Cli) -> None:
    path = variant(
        ws, "outcome: success", 'outcome: success\n"\\e[2J\\e]8;;http://x\\e\\\\evil": 1'
    )
    result = refused(cli, ws, path, "unknown field", "\\x1b[2J")
    assert "\x1b" not in result.stderr and "\x1b" not in result.stdout


def test_escape_bytes_in_a_file_name_are_escaped(ws: Path, cli: Cli) -> None:
    path = ws / "drafts" / "evil\x1b[31m\u202e.yaml"
    path.write_text("id: [\n")
    try:
        result = refused(cli, ws, path, "evil\\x1b[31m\\u202e.yaml", "malformed YAML")
    finally:
        path.unlink()
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr


def test_escape_bytes_of_a_value_the_resolver_echoes_are_escaped(ws: Path, cli: Cli) -> None:
    path = variant(
        ws, "{id: semantic, surface: semantic}", '{id: semantic, surface: "se\\emantic"}'
    )
    result = refused(cli, ws, path, "arms[1].surface", "se\\x1bmantic")
    assert "\x1b" not in result.stderr


# ---- provider params are checked at register ------------------------------------------------


@pytest.mark.parametrize(
    ("host", "field", "message"),
    [
        ("{driver: replay, params: {foo: 1}}", "host.params.foo", "replay driver takes no param"),
        ("{driver: local, params: {serch_k: 3}}", "host.params.serch_k", "no param 'serch_k'"),
        ("{driver: local, params: {search_k: 0}}", "host.params.search_k", "must be >= 1"),
        (
            "{driver: local, params: {server_text: 'yes'}}",
            "host.params.server_text",
            "true or false",
        ),
        (
            "{driver: anthropic, model: claude-x, params: {max_tokens: 5}}",
            "host.params.max_tokens",
            "may not set 'max_tokens'",
        ),
        (
            "{driver: openai, model: gpt-x, params: {tools: []}}",
            "host.params.tools",
            "may not set 'tools'",
        ),
    ],
    ids=[
        "replay-any",
        "local-unknown",
        "local-range",
        "local-type",
        "anthropic-reserved",
        "openai-reserved",
    ],
)
def test_params_the_driver_refuses_are_refused_at_register(
    ws: Path, cli: Cli, host: str, field: str, message: str
) -> None:
    path = variant(ws, "host: {driver: local}", f"host: {host}")
    refused(cli, ws, path, f"{path.name}:{line_of(path, 'host:')}:", field, message)


# ---- nothing written, not even a lock file --------------------------------------------------


def test_a_refusal_in_a_fresh_registry_writes_nothing(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "fresh"
    assert cli("init", root).code == 0
    before = tree_digest(root / "registry")
    listing = sorted(p.name for p in (root / "registry").rglob("*"))
    bad = root / "drafts" / "bad.yaml"
    # a duplicate id: the last one won silently, and the registration was written
    bad.write_text(
        (root / PILOT).read_text().replace("kind: exploratory", "kind: exploratory\nid: other")
    )
    assert cli("-w", root, "register", bad).code == 2
    assert tree_digest(root / "registry") == before
    assert sorted(p.name for p in (root / "registry").rglob("*")) == listing
    assert not (root / "registry" / "ledger.jsonl.lock").exists()
