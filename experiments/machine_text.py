"""Machine-dependent text in what a server lists: the lint ``mcp snapshot`` runs.

Some servers write facts about the machine they run on into their tool text (the
time server names the local time zone in its descriptions; a filesystem server names
the folders it may read). The snapshot records that text verbatim, so its digest then
depends on the machine that took it: two people snapshotting the same server get two
digests, and a registration pinned on one cannot be reproduced on the other. The
lint cannot know what a server meant; it points at text that looks machine-made so the
user can pin it (``--local-timezone UTC``, a neutral folder) before registering.

What it looks for, in every string of the tools, prompts, resources and the server's
identity (names, descriptions, schemas, defaults, enums, examples):

* ``timezone``: the capturing machine's zone name (UTC excepted: it is what pinning
  picks). Zone names in general are not flagged: descriptions cite examples
  ("e.g. 'America/New_York'") that are the same on every machine;
* ``hostname``: this machine's host name, as a whole word;
* ``user``: the current user name, as a whole word (generic names like ``root`` only
  inside a path, where the path check finds them);
* ``path``: an absolute path under a home, temporary or mount folder, or this
  machine's home or working folder.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prereg.experiments.mcp_snapshot import LIST_ITEMS, TOOLS_LIST, Snapshot

Kind = Literal["timezone", "hostname", "user", "path"]

# Names too generic to flag as a whole word: they occur in ordinary tool text.
_GENERIC_USERS = frozenset({"root", "admin", "user", "users", "ubuntu", "debian", "app", "runner"})
_UNIVERSAL_ZONES = frozenset({"UTC", "GMT", "Etc/UTC", "Etc/GMT", "Universal", "Zulu"})
_ABSOLUTE_PATH = re.compile(
    r"(?<![\w.:/])(?:/(?:home|Users|root|tmp|var/folders|private|mnt|media|srv|opt|workspace|work)"
    r"(?:/[^\s'\"`<>)\],;]+)+|[A-Za-z]:\\(?:[^\s'\"`<>\\]+\\?)+|~/[^\s'\"`<>)\],;]+)"
)


@dataclass(frozen=True)
class Machine:
    """The facts of the capturing machine the lint compares text with."""

    zones: frozenset[str]
    hostname: str
    user: str
    folders: tuple[str, ...]

    @classmethod
    def current(cls) -> Machine:
        return cls(
            zones=frozenset(z for z in _local_zones() if z and z not in _UNIVERSAL_ZONES),
            hostname=socket.gethostname().split(".")[0],
            user=_user(),
            folders=tuple(f for f in (str(Path.home()), os.getcwd()) if len(f) > 1),
        )


@dataclass(frozen=True)
class MachineText:
    """One finding: where the text is, what kind of fact it looks like, the fact."""

    where: str  # e.g. "tools[get_current_time].inputSchema.properties.timezone.description"
    kind: Kind
    value: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "kind": self.kind, "value": self.value}

    def message(self) -> str:
        return f"{self.where}: looks machine-dependent ({self.kind} {self.value!r})"


def find_machine_text(listed: dict[str, Any], machine: Machine) -> list[MachineText]:
    """Every machine-dependent-looking string in ``listed`` (label -> JSON), in order."""
    found: list[MachineText] = []
    seen: set[tuple[str, str, str]] = set()
    for where, text in _strings(listed, ""):
        for kind, value in _facts(text, machine):
            if (where, kind, value) not in seen:
                seen.add((where, kind, value))
                found.append(MachineText(where=where, kind=kind, value=value))
    return found


def _facts(text: str, machine: Machine) -> Iterator[tuple[Kind, str]]:
    for zone in sorted(machine.zones):
        if re.search(rf"(?<![\w/]){re.escape(zone)}(?![\w/])", text):
            yield "timezone", zone
    if len(machine.hostname) >= 3 and _word(machine.hostname, text):
        yield "hostname", machine.hostname
    user = machine.user
    if len(user) >= 3 and user.lower() not in _GENERIC_USERS and _word(user, text):
        yield "user", user
    for folder in machine.folders:
        if folder in text:
            yield "path", folder
    for match in _ABSOLUTE_PATH.finditer(text):
        yield "path", match.group(0).rstrip(".,:;!?")  # the sentence's, not the path's


def _word(word: str, text: str) -> bool:
    """A whole word, not part of a path (the path check reports those once)."""
    pattern = rf"(?<![\w/-]){re.escape(word)}(?![\w/-])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(location, string) for every string, keys included, walking lists by item name."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, f"{where}.{key}(key)" if where else str(key))
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            label = item.get("name") if isinstance(item, dict) else None
            tag = label if isinstance(label, str) and len(label) <= 80 else index
            yield from _strings(item, f"{where}[{tag}]")


def _local_zones() -> Iterator[str]:
    """The local zone by every name a server might have read it from."""
    yield os.environ.get("TZ", "").lstrip(":")
    try:
        yield Path("/etc/timezone").read_text(encoding="utf-8").strip()
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            yield target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    yield from time.tzname


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return ""


def snapshot_machine_text(snapshot: Snapshot, machine: Machine) -> list[MachineText]:
    """The lint over everything a snapshot serves that a host shows a model."""
    listed: dict[str, Any] = {
        "serverInfo": snapshot.server_info(),
        "instructions": snapshot.instructions,
        "tools": snapshot.tools(),
    }
    for method, key in LIST_ITEMS.items():
        if method != TOOLS_LIST and snapshot.items(method):
            listed[key] = snapshot.items(method)
    return find_machine_text(listed, machine)
