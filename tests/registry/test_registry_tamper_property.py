"""Property: any one-byte edit, appended byte or deleted file in the registry is detected.

Invariant 1 says any edit of the registry is detected by ``verify``. The example-based
tests name each kind of tampering; this one lets hypothesis pick the file, the byte and
the change, over every file prereg writes (ledger, frozen copies, claims, objects).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prereg.commands.registry_cmds import init_workspace
from prereg.registry.registrations import Registry
from prereg.registry.verify import verify

_TEMPLATE: dict[str, Path] = {}


def _template(tmp_path_factory) -> Path:
    """A workspace with two registrations and a locked-split claim (built once)."""
    if "ws" not in _TEMPLATE:
        root = tmp_path_factory.mktemp("tamper-template")
        init_workspace(root)
        registry = Registry(root / "registry")
        for draft in ("music-library-pilot.yaml", "music-library-confirmatory.yaml"):
            registry.register(root / "drafts" / draft, root / "experiments")
        registry.claim_locked_split(registry.get("music-library-confirmatory"))
        assert verify(registry).ok
        _TEMPLATE["ws"] = root
    return _TEMPLATE["ws"]


def _files(registry_dir: Path) -> list[str]:
    """Every file prereg wrote with content (the empty lock file guards, it records nothing)."""
    return sorted(
        str(p.relative_to(registry_dir))
        for p in registry_dir.rglob("*")
        if p.is_file() and p.stat().st_size > 0 and not p.name.endswith(".lock")
    )


def _victim(tmp_path_factory, data) -> tuple[Path, Path]:
    """A writable copy of the template registry and one of its files, drawn."""
    target = tmp_path_factory.mktemp("tampered") / "registry"
    shutil.copytree(_template(tmp_path_factory) / "registry", target)
    for path in target.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    rel = data.draw(st.sampled_from(_files(target)), label="file")
    return target, target / rel


# 60 examples in the suite; TAMPER_EXAMPLES=3000 for a longer hunt
EXAMPLES = int(os.environ.get("TAMPER_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(data=st.data())
def test_any_one_byte_edit_is_detected(tmp_path_factory, data) -> None:
    registry_dir, path = _victim(tmp_path_factory, data)
    content = bytearray(path.read_bytes())
    position = data.draw(st.integers(0, len(content) - 1), label="position")
    content[position] ^= data.draw(st.integers(1, 255), label="xor")
    path.write_bytes(bytes(content))
    report = verify(Registry(registry_dir))
    assert not report.ok, f"a byte edit of {path.name} at {position} went undetected"


@SETTINGS
@given(data=st.data())
def test_any_appended_byte_or_deleted_file_is_detected(tmp_path_factory, data) -> None:
    registry_dir, path = _victim(tmp_path_factory, data)
    if data.draw(st.booleans(), label="delete"):
        path.unlink()
    else:
        path.write_bytes(path.read_bytes() + data.draw(st.binary(min_size=1, max_size=3)))
    report = verify(Registry(registry_dir))
    assert not report.ok, f"tampering with {path.name} went undetected"
