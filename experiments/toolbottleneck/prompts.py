"""The seed's system prompts and its four repairs, one aimed at each pressure (seed 4.3,
appendix A "System prompts"; issue 42).

The three capacity prompts are bundled verbatim as text files
(``experiments/bundled/toolbottleneck/prompts/<name>.txt``, UTF-8, one trailing newline
that is not part of the text) and pinned here by sha256, so a changed byte is refused
before a prompt is used: the base capacity prompt, the workflow prompt (the repair of W:
the base with its second sentence replaced) and the interface guide (the repair of D: the
base with a passage inserted after its second sentence). Registered as an arm's
``system_prompt``, a text is digested with the registration (invariant 2).

The other two repairs have no text: the router (R) is the connector-first retriever
against the flat lexical one (an arm's ``toolbottleneck.retriever``), the routed menu (V)
the routed menu mode against the fixed one (``toolbottleneck.menu_mode``).
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Literal

from prereg.core.errors import IntegrityError

PromptName = Literal["capacity-base", "workflow-prompt", "interface-guide"]

#: sha256 of each bundled file's bytes (the text and its trailing newline)
PROMPT_SHA256: dict[str, str] = {
    "capacity-base": "c51f31d25765e1ff0dd17297cb821ceaa247c62c425d9662326dbaabe0317c20",
    "workflow-prompt": "44993284e8cd9d61cc82e351adc92f7e68cfc9d0c72971cdb4fcd4d90680029a",
    "interface-guide": "f1f3f467dbcc719cece65de69497ee3791421d5a98bf7f39b4c4e6d44bd7dec8",
}

#: the repair aimed at each pressure (seed 4.3) and how a registration expresses it
REPAIRS: dict[str, str] = {
    "R": "router: toolbottleneck.retriever connector-first (no repair: flat-lexical)",
    "V": "routed menu: toolbottleneck.menu_mode routed (no repair: fixed)",
    "W": "workflow prompt: system_prompt = seed_prompt('workflow-prompt')",
    "D": "interface guide: system_prompt = seed_prompt('interface-guide')",
}


def prompt_bytes(name: PromptName) -> bytes:
    """The bundled file of a prompt, checked against its pinned sha256."""
    if name not in PROMPT_SHA256:
        raise ValueError(f"name: no bundled prompt '{name}' (one of {sorted(PROMPT_SHA256)})")
    path = resources.files("prereg.experiments") / "bundled" / "toolbottleneck" / "prompts"
    data = (path / f"{name}.txt").read_bytes()
    found = "sha256:" + hashlib.sha256(data).hexdigest()
    if found != "sha256:" + PROMPT_SHA256[name]:
        raise IntegrityError(
            f"bundled prompt '{name}' has digest {found}, not the pinned "
            f"sha256:{PROMPT_SHA256[name]}: the seed's text was changed"
        )
    return data


def seed_prompt(name: PromptName) -> str:
    """A seed prompt's text (the file without its trailing newline)."""
    text = prompt_bytes(name).decode("utf-8")
    return text[:-1] if text.endswith("\n") else text
