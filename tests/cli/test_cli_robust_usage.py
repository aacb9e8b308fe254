"""Usage errors under ``--json`` (issue 37, item 3): the parser's refusal (unknown
option, missing argument, bad value) is one JSON document on stdout, shaped as a
PreregError's, exit 2; the usage text still goes to stderr."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import BadInput

#: the keys every error document has (PreregError.to_json)
KEYS = set(BadInput("x").to_json())


@pytest.mark.parametrize(
    ("args", "message", "field"),
    [
        (["list", "--json", "--bogus"], "No such option: --bogus", "--bogus"),
        (["list", "--jsn", "--json"], "No such option: --jsn", "--jsn"),
        (["show", "--json"], "Missing argument 'ID'", "ID"),
        (["export", "some-id", "--json"], "Missing option '--out'", "--out"),
        (["run", "some-id", "--workers", "many", "--json"], "'--workers'", "--workers"),
        (["export", "some-id", "--json", "--out"], "requires an argument", "--out"),
        (["--show-completion", "tcsh", "--json"], "unknown shell 'tcsh'", "--show-completion"),
        (["no-such-command", "--json"], "No such command 'no-such-command'", None),
    ],
)
def test_a_usage_error_under_json_is_one_document(
    cli: Any, ws: Path, args: list[str], message: str, field: str | None
) -> None:
    result = cli("-w", ws, *args)
    assert result.code == 2, result.stderr
    document = json.loads(result.stdout)  # exactly one document: json.loads takes no more
    assert set(document) == KEYS, document
    assert document["error"] == "UsageError" and document["exit_code"] == 2
    assert message in document["message"] and document["field"] == field
    assert message in " ".join(result.stderr.split())  # the person still reads it


def test_a_suggestion_goes_to_details(cli: Any, ws: Path) -> None:
    document = json.loads(cli("-w", ws, "list", "--jsn", "--json").stdout)
    assert document["details"] == ["--json"]


def test_without_json_stdout_stays_empty(cli: Any, ws: Path) -> None:
    result = cli("-w", ws, "list", "--bogus")
    assert result.code == 2 and result.stdout == ""
    assert "No such option: --bogus" in result.stderr


def test_the_same_shape_as_a_prereg_error(cli: Any, ws: Path) -> None:
    """A refusal after parsing (no such registration) and one by the parser read alike."""
    refused = json.loads(cli("-w", ws, "show", "no-such-id", "--json").stdout)
    usage = json.loads(cli("-w", ws, "show", "--json").stdout)
    assert set(refused) == set(usage) == KEYS
    assert refused["exit_code"] == usage["exit_code"] == 2
