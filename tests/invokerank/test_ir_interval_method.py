"""The score's interval method as a registration field (issue 17, item 5):
``invokerank: {interval: published | calibrated}``, absent from the digested document
unless set (every earlier digest unchanged), refused precisely when bad."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from tests.conftest import tree_digest
from tests.invokerank.test_ir_weights import DIGEST_BEFORE, FILES, REGISTRATION


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES))


def test_a_registration_without_the_block_digests_as_before_the_field_existed() -> None:
    # DIGEST_BEFORE was computed by the code at commit def726a, before either
    # intent_weights or invokerank existed
    assert _digest(REGISTRATION) == DIGEST_BEFORE
    document = build_document(Registration.model_validate(REGISTRATION), FILES)
    assert "invokerank" not in document["registration"]
    assert Registration.model_validate(REGISTRATION).invokerank is None
    chosen = {**REGISTRATION, "invokerank": {"interval": "calibrated"}}
    assert _digest(chosen) != DIGEST_BEFORE  # the interval method decides a result
    # written out, the default is digested too (the registration chose to state it)
    assert _digest({**REGISTRATION, "invokerank": {}}) not in (DIGEST_BEFORE, _digest(chosen))
    reloaded = Registration.model_validate(
        build_document(Registration.model_validate(chosen), FILES)["registration"]
    )
    assert reloaded.invokerank is not None and reloaded.invokerank.interval == "calibrated"


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ("{interval: bootstrap}", "invokerank.interval"),
        ("{interval: published, draws: 10}", "invokerank.draws"),
        ("calibrated", "invokerank"),
    ],
)
def test_bad_interval_method_exits_2_naming_the_field(
    ws: Path, cli: Any, block: str, fragment: str
) -> None:
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    path = ws / "drafts" / "interval.yaml"
    path.write_text(text + f"invokerank: {block}\n")
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "interval.yaml" in result.stderr and fragment in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2
    assert tree_digest(ws / "registry") == before
