"""The registered judge: an additive field, a digested rubric, the family confound refused."""

from __future__ import annotations

import json
from pathlib import Path

from prereg.registry.digest import document_digest
from prereg.registry.judges import FAMILIES, model_family
from prereg.registry.resolve import resolve
from tests.conftest import tree_digest
from tests.judging.helpers import RUBRIC, local_judges, registration, write


def _digest(cli, path: Path) -> str:
    result = cli("--workspace", path.parent.parent, "register", path, "--json")
    assert result.code == 0, result.stderr
    return str(json.loads(result.stdout)["digest"])


def test_registration_without_judge_keeps_its_digest(cli, ws: Path) -> None:
    """The judge field is additive: a registration that does not use it digests exactly as
    a document without the key (the digest below is recomputed from the frozen document,
    with no 'judge' key in it)."""
    path = write(ws, registration("plain"))
    resolved = resolve(path, ws / "experiments")
    assert "judge" not in resolved.document["registration"]
    assert document_digest(resolved.document) == resolved.digest
    assert _digest(cli, path) == resolved.digest


def test_rubric_is_digested(cli, ws: Path) -> None:
    """One changed byte of the rubric changes the digest; the judge's fields are kept."""
    path = write(ws, registration("r1", judge=local_judges()[0]))
    before = _digest(cli, path)
    rubric = ws / "experiments" / "podcast-selection" / RUBRIC
    rubric.write_bytes(rubric.read_bytes() + b" ")
    path2 = write(ws, registration("r2", judge=local_judges()[0]))
    result = cli("--workspace", ws, "register", path2, "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["digest"] != before
    frozen = next((ws / "registry").rglob("*.json"))
    assert frozen.exists()


def test_missing_rubric_refused_naming_field(cli, ws: Path) -> None:
    judge = {**local_judges()[0], "rubric": "no-such-rubric.md"}
    path = write(ws, registration("missing", judge=judge))
    before = tree_digest(ws / "registry")
    result = cli("--workspace", ws, "register", path)
    assert result.code == 2
    assert "judge[0].rubric" in result.stderr
    assert tree_digest(ws / "registry") == before


def test_same_family_judge_refused_unless_declared(cli, ws: Path) -> None:
    host = {"driver": "anthropic", "model": "claude-sonnet-4-5"}
    judge = {
        "outcome": "completed",
        "driver": "anthropic",
        "model": "claude-opus-4-1",
        "rubric": RUBRIC,
        "rubric_version": "v1",
    }
    path = write(ws, registration("conf", host=host, judge=judge))
    before = tree_digest(ws / "registry")
    result = cli("--workspace", ws, "register", path)
    assert result.code == 2, result.stdout
    assert "judge[0].confound_declared" in result.stderr
    assert tree_digest(ws / "registry") == before
    # a judge of the same family on a gateway (openai-chat) is still the same family
    gateway = {
        **judge,
        "driver": "openai-chat",
        "model": "claude-3-haiku",
        "params": {"base_url": "http://127.0.0.1:9/v1"},
    }
    path = write(ws, registration("conf2", host=host, judge=gateway))
    assert cli("--workspace", ws, "register", path).code == 2
    # declared: registered; another family: registered
    path = write(ws, registration("conf3", host=host, judge={**judge, "confound_declared": True}))
    assert cli("--workspace", ws, "register", path).code == 0
    other = {**judge, "driver": "openai", "model": "gpt-5-mini"}
    path = write(ws, registration("conf4", host=host, judge=other))
    result = cli("--workspace", ws, "register", path)
    assert result.code == 0, result.stderr


def test_bad_judge_fields_refused(cli, ws: Path) -> None:
    for bad, field in [
        ({"outcome": "success"}, "outcome"),
        ({"driver": "replay"}, "driver"),
        ({"sample": 0}, "sample"),
        ({"colour": "red"}, "colour"),
    ]:
        judge = {**local_judges()[0], **bad}
        path = write(ws, registration("bad", judge=judge))
        result = cli("--workspace", ws, "register", path)
        assert result.code == 2, (bad, result.stdout)
        assert field in result.stderr, (bad, result.stderr)
    two = [local_judges()[0], local_judges()[0]]
    result = cli("--workspace", ws, "register", write(ws, registration("dup", judge=two)))
    assert result.code == 2 and "duplicate judge" in result.stderr


def test_family_table() -> None:
    """Families by prefix, whatever the driver; the rule-based judge has none."""
    assert model_family("anthropic", "claude-sonnet-4-5") == "anthropic-claude"
    assert model_family("openai-chat", "Claude-3-haiku") == "anthropic-claude"
    assert model_family("openai", "gpt-5") == model_family("openai", "o3-mini")
    assert model_family("openai-chat", "gpt-oss-20b") != model_family("openai", "gpt-5")
    assert model_family("local", "local-rules-v1") is None
    assert model_family("openai-chat", "my-model") == model_family("openai-chat", "MY-MODEL")
    assert model_family("openai-chat", "my-model") != model_family("openai-chat", "other")
    # prefixes that shadow a later row would make it dead
    prefixes = [p for p, _ in FAMILIES]
    for i, p in enumerate(prefixes):
        assert not any(q.startswith(p) and j > i for j, q in enumerate(prefixes) if j != i)
