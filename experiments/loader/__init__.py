"""Loading an experiment folder through a ``read`` function, with precise errors.

``load_experiment(read, name)`` reads ``experiment.yaml`` and every file it
references through ``read`` (a path relative to the experiment folder ->
bytes; FileNotFoundError when missing). Runs pass a reader over the registry's
frozen objects, so what runs is exactly what was registered; ``prereg split
show`` and registration pass a reader over the workspace folder.

Every problem is a :class:`prereg.core.errors.BadInput` naming the file, the line and
column, and the field, for both schema errors (pydantic, via
:mod:`prereg.core.yamlio`) and cross-file rules checked here.

The package owns turning an experiment folder into a checked :class:`Experiment`;
one idea per module:

- :mod:`.files`: the ``Reader``, :func:`folder_reader`, reading and parsing one file
  with errors naming the file and the field (``Doc``);
- :mod:`.experiment`: the frozen :class:`Experiment` and its :class:`PoolEntry`;
- :mod:`.assemble`: :func:`load_experiment`, which reads ``experiment.yaml`` and
  assembles the parts below (or a ToolBottleneckBench study);
- :mod:`.service_rules`: the service file's operations, collections and seed records;
- :mod:`.surface_files`: surfaces (YAML or MCP snapshot), their tools mapped onto the
  service, tool names unique within a pool;
- :mod:`.corpus`: the tasks checked against the service, their clusters assigned to
  splits (through :mod:`prereg.experiments.splits`).

The submodules import one another, never this package; modules outside it import
from here.
"""

from prereg.experiments.loader.assemble import load_experiment
from prereg.experiments.loader.experiment import Experiment, PoolEntry
from prereg.experiments.loader.files import folder_reader

__all__ = ["Experiment", "PoolEntry", "folder_reader", "load_experiment"]
