"""Every output survives any encoding (issue 37, item 1): on a stream that cannot hold
the text (``PYTHONIOENCODING=ascii``, latin-1) human output escapes what it cannot
encode and ``--json`` is ASCII-only JSON of the same data, never a UnicodeEncodeError.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from prereg.core.output import ascii_json, dumps
from tests.cli.helpers import PILOT, prereg
from tests.mcp.test_mcp_snapshot_model import document

#: the text that does not encode: an accented letter, an em dash, a check mark
ODD = "é — ✓"
UNI_ID = "uni-pilot"


def unicode_workspace(root: Path) -> Path:
    """A workspace with one registration whose title and hypothesis hold :data:`ODD`,
    run to completion (56 units: one repeat of the pilot's design)."""
    done = prereg("init", root)
    assert done.returncode == 0, done.stderr
    draft = yaml.safe_load((root / PILOT).read_text(encoding="utf-8"))
    draft.update(id=UNI_ID, title=f"Café surface {ODD} pilot")
    draft["hypothesis"] = f"{ODD} {draft['hypothesis']}"
    draft["design"]["repeats"] = 1
    path = root / "drafts" / "uni.yaml"
    path.write_text(yaml.safe_dump(draft, allow_unicode=True), encoding="utf-8")
    for args in (("register", path), ("run", UNI_ID)):
        done = prereg("-w", root, *args)
        assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def uni_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unicode_workspace(tmp_path_factory.mktemp("encoding") / "ws")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = document()
    doc["server"]["lists"]["tools/list"]["pages"][0]["tools"][0]["description"] = ODD
    path = tmp_path_factory.mktemp("snapshot") / "odd.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def _in(encoding: str, ws: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``prereg -w WS ARGS`` with stdout and stderr in ``encoding``, read back as such."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "FORCE_TERMINAL")}
    env["PYTHONIOENCODING"] = encoding
    command = [sys.executable, "-m", "prereg", "-w", str(ws), *map(str, args)]
    done = subprocess.run(command, capture_output=True, timeout=120, check=False, env=env)
    out, err = done.stdout.decode(encoding), done.stderr.decode(encoding)
    assert "Traceback" not in err and "UnicodeEncodeError" not in err, err
    assert done.returncode == 0, err
    return subprocess.CompletedProcess(command, done.returncode, out, err)


REPORTING = [
    ["list"],
    ["show", UNI_ID],
    ["analyse", UNI_ID],
    ["verify"],
    ["plan", "--from-runs", UNI_ID],
]


@pytest.mark.parametrize("args", REPORTING, ids=lambda a: " ".join(a))
def test_human_output_escapes_what_ascii_cannot_hold(uni_ws: Path, args: list[str]) -> None:
    done = _in("ascii", uni_ws, *args)
    assert done.stdout.isascii() and done.stdout.strip()
    if args[0] == "show":  # the title, escaped, not dropped
        assert "Caf\\u00e9 surface \\u00e9 \\u2014 \\u2713 pilot" in done.stdout


def test_latin1_keeps_what_it_can_and_escapes_the_rest(uni_ws: Path) -> None:
    done = _in("latin-1", uni_ws, "show", UNI_ID)
    assert "Café surface é \\u2014 \\u2713 pilot" in done.stdout


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("args", REPORTING, ids=lambda a: " ".join(a))
def test_json_is_ascii_and_the_same_data(uni_ws: Path, args: list[str], encoding: str) -> None:
    done = _in(encoding, uni_ws, *args, "--json")
    assert done.stdout.isascii()
    data = json.loads(done.stdout)
    if args[0] == "list":
        assert data["registrations"][0]["title"] == f"Café surface {ODD} pilot"
    if args[0] == "show":
        assert data["title"] == f"Café surface {ODD} pilot"
        assert data["registration"]["hypothesis"].startswith(ODD)


def test_mcp_show_in_ascii(snapshot: Path, tmp_path: Path) -> None:
    human = _in("ascii", tmp_path, "mcp", "show", snapshot)
    assert "\\u00e9 \\u2014 \\u2713" in human.stdout
    shown = json.loads(_in("ascii", tmp_path, "mcp", "show", snapshot, "--json").stdout)
    assert shown["tools"][0]["description"] == ODD


def test_utf8_json_keeps_the_characters(uni_ws: Path) -> None:
    done = _in("utf-8", uni_ws, "show", UNI_ID, "--json")
    assert f"Café surface {ODD} pilot" in done.stdout  # raw, not escaped, where UTF-8 holds it


def test_ascii_json_round_trips_every_kind_of_character() -> None:
    data = {"é": ["\u2014", "\U0001f600", "\x1b[31m", "\u202e", "plain", 1.5, None]}
    text = ascii_json(dumps(data))
    assert text.isascii()
    assert json.loads(text) == data
    assert "\\ud83d\\ude00" in text  # above U+FFFF: a surrogate pair, as ensure_ascii writes
