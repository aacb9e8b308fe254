"""prereg.runners: run units, drivers, harness, run store, resume."""
