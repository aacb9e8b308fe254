"""prereg: pre-registered experiments for tool-using LLM agents.

The subpackages live at the repository root (``registry/``, ``experiments/``,
``runners/``, ``stats/``, ``reports/``); ``prereg/<name>`` is a symlink to each, so
the package installs them as ``prereg.<name>`` and the type checker resolves them from
the source tree (see docs/architecture.md). ``prereg.core`` is the kernel below them all.
"""

from prereg.core.version import __version__

__all__ = ["__version__"]
