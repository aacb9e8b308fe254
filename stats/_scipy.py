"""scipy's submodules, imported on first use.

``scipy.stats`` takes about 0.9 s to import, and every command of the CLI reaches this
package through the registration schema (it reads the tables of registrable tests and
multiplicity methods), so an eager import made ``prereg --help`` four times slower. The
statistical functions use these proxies exactly like the modules (``sps.norm.ppf``); the
first attribute read imports the module. One place, one reason, instead of a
function-level import in every function that needs scipy.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module ``name``; imports it when an attribute is first read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module {self._name} ({state})>"


stats = LazyModule("scipy.stats")
special = LazyModule("scipy.special")
optimize = LazyModule("scipy.optimize")
