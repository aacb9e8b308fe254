"""prereg.experiments: experiment definitions, the service store, oracles, bundled examples."""
