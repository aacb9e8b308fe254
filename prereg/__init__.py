"""prereg: pre-registered experiments for tool-using LLM agents.

The subpackages live at the repository root (``registry/``, ``experiments/``,
``runners/``, ``stats/``, ``reports/``) and install as ``prereg.<name>``.
"""

__version__ = "0.1.0"
