"""The seed's capacity prompts and repairs bundled verbatim (issue 42; seed appendix A).

Each bundled text is checked against the seed's own wording, derived here by the seed's
rules (the workflow prompt replaces the base's second sentence, the interface guide
inserts a passage after it), and a changed byte is refused by its pinned digest.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from prereg.core.errors import IntegrityError
from prereg.experiments.toolbottleneck import prompts

SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "001_c199d40ded3f5484.txt"
BUNDLED = Path(prompts.__file__).resolve().parent.parent / "bundled" / "toolbottleneck"

BASE = (
    "You operate in a deterministic sandbox with synthetic business records. Use tools "
    "iteratively and stop only when the task is supported by current evidence. Never call "
    "an unlisted function. Each search/read description declares workspace, region, and "
    "collection coordinates. Use only tools whose three coordinates exactly match the "
    "required source route in the user request; other routes may contain valid current "
    "records for other workspaces but cannot support this case. A next_handoff object "
    "identifies the connector and exact search query for the next current record; follow "
    "it when more requested facts are still missing. Avoid wasting the call budget on "
    "identical tool calls. Once all requested facts are present, stop using tools and "
    "return raw JSON only, with no markdown fence or explanatory prose. Never send "
    "messages, issue payment, or delete data. Follow the user\u2019s exact JSON response "
    "schema."
)


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=\.) ", text)


def test_the_base_prompt_is_the_seeds_word_for_word() -> None:
    assert prompts.seed_prompt("capacity-base") == BASE
    if SEED.exists():  # the method's own text, where the checkout has it
        assert BASE in SEED.read_text(encoding="utf-8")


def test_the_two_prompt_repairs_follow_the_seeds_rules() -> None:
    base = _sentences(BASE)
    workflow = _sentences(prompts.seed_prompt("workflow-prompt"))
    assert workflow[0] == base[0] and workflow[2:] == base[2:]
    assert workflow[1].startswith("Before every tool request, privately verify the connector")
    guide = prompts.seed_prompt("interface-guide")
    assert guide.startswith(" ".join(base[:2]) + " Read returned records by interface:")
    assert guide.endswith(" ".join(base[2:]))
    if SEED.exists():
        seed = SEED.read_text(encoding="utf-8")
        assert workflow[1] in seed
        inserted = guide[len(" ".join(base[:2])) + 1 : -len(" ".join(base[2:])) - 1]
        assert inserted in seed


def test_every_bundled_file_is_pinned_and_a_changed_byte_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, digest in prompts.PROMPT_SHA256.items():
        data = (BUNDLED / "prompts" / f"{name}.txt").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest
    assert set(prompts.REPAIRS) == {"R", "V", "W", "D"}
    # a tampered copy: one byte changed
    folder = tmp_path / "bundled" / "toolbottleneck" / "prompts"
    folder.mkdir(parents=True)
    for f in (BUNDLED / "prompts").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    path = folder / "interface-guide.txt"
    path.write_bytes(path.read_bytes().replace(b"payload", b"Payload"))
    monkeypatch.setattr(prompts.resources, "files", lambda _pkg: tmp_path)
    with pytest.raises(IntegrityError, match="interface-guide"):
        prompts.seed_prompt("interface-guide")
    assert prompts.seed_prompt("capacity-base") == BASE
