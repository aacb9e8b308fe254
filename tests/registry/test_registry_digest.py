"""The digest: invariant to YAML formatting and key order; any byte of any file changes it."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prereg.commands.registry_cmds import init_workspace
from prereg.registry.digest import document_digest
from prereg.registry.resolve import resolve

_TEMPLATE: dict[str, Path] = {}


def _template(tmp_path_factory) -> Path:
    if "ws" not in _TEMPLATE:
        root = tmp_path_factory.mktemp("template")
        init_workspace(root)
        _TEMPLATE["ws"] = root
    return _TEMPLATE["ws"]


def _shuffle(value: object, rng: random.Random) -> object:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffle(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffle(v, rng) for v in value]
    return value


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**32 - 1),
    flow=st.sampled_from([None, True, False]),
    indent=st.integers(2, 6),
    width=st.integers(40, 200),
    comment=st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=30),
)
def test_digest_ignores_formatting_and_key_order(
    tmp_path_factory, seed: int, flow: bool | None, indent: int, width: int, comment: str
) -> None:
    ws = _template(tmp_path_factory)
    draft = ws / "drafts" / "music-library-pilot.yaml"
    reference = resolve(draft, ws / "experiments")
    data = yaml.safe_load(draft.read_text())
    text = yaml.safe_dump(
        _shuffle(data, random.Random(seed)),
        default_flow_style=flow,
        indent=indent,
        width=width,
        sort_keys=False,
        allow_unicode=True,
    )
    text = "# " + comment.replace("\n", " ") + "\n" + text
    other = tmp_path_factory.mktemp("fmt") / "draft.yaml"
    other.write_text(text)
    assert resolve(other, ws / "experiments").digest == reference.digest


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_one_byte_change_of_a_referenced_file_changes_the_digest(
    tmp_path_factory, data
) -> None:
    ws = _template(tmp_path_factory)
    draft = ws / "drafts" / "music-library-pilot.yaml"
    reference = resolve(draft, ws / "experiments")
    copy = tmp_path_factory.mktemp("byte")
    shutil.copytree(ws / "experiments", copy / "experiments")
    rel = data.draw(st.sampled_from(sorted(reference.files)))
    target = copy / "experiments" / "music-library" / rel
    content = bytearray(target.read_bytes())
    position = data.draw(st.integers(0, len(content) - 1))
    # Append a YAML comment byte-change or flip a byte to another printable one; either way
    # the file's bytes differ, and the digest must differ (even when the YAML means the same).
    replacement = data.draw(
        st.sampled_from([b" ", b"#", b"x", b"\n"]).filter(lambda b: b[0] != content[position])
    )
    content[position : position + 1] = replacement
    target.write_bytes(bytes(content))
    try:
        changed = resolve(draft, copy / "experiments")
    except Exception:  # the edit broke the file: then it cannot be registered at all
        return
    assert changed.digest != reference.digest


def test_digest_is_canonical_json_sha256() -> None:
    import hashlib
    import json

    doc = {"b": [1, 2.5, "x"], "a": {"z": None, "y": True}}
    expected = hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert document_digest(doc) == "sha256:" + expected
    assert document_digest({"a": {"y": True, "z": None}, "b": [1, 2.5, "x"]}) == document_digest(
        doc
    )


def test_digest_covers_registration_fields(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    draft = tmp_path / "drafts" / "music-library-pilot.yaml"
    base = resolve(draft, tmp_path / "experiments").digest
    draft.write_text(draft.read_text().replace("seed: 7", "seed: 9"))
    assert resolve(draft, tmp_path / "experiments").digest != base
