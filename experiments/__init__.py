"""prereg.experiments: experiment definitions, the service store, oracles, bundled examples.

The public entry point is :func:`load_experiment`; it reads through a function
so that runs load the registry's frozen copy, never the editable workspace.
"""

from prereg.experiments.loader import Experiment, PoolEntry, load_experiment
from prereg.experiments.models import SPLIT_NAMES, Task
from prereg.experiments.surfaces import Surface, Tool

__all__ = ["SPLIT_NAMES", "Experiment", "PoolEntry", "Surface", "Task", "Tool", "load_experiment"]
