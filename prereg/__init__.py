"""prereg: pre-registered experiments for tool-using LLM agents.

The subpackages live at the repository root (``registry/``, ``experiments/``,
``runners/``, ``stats/``, ``reports/``); ``prereg/<name>`` is a symlink to each, so
the package installs them as ``prereg.<name>`` and the type checker resolves them from
the source tree (see docs/architecture.md). ``prereg.core`` is the kernel below them all.
"""

from typing import TYPE_CHECKING

from prereg.core.version import package_version

if TYPE_CHECKING:
    __version__: str
else:

    def __getattr__(name: str) -> str:
        """``__version__`` read on first use (see :mod:`prereg.core.version`)."""
        if name == "__version__":
            return package_version()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__"]
