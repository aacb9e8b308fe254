"""prereg.stats: pure statistical functions over numpy arrays; no I/O, no project imports."""
