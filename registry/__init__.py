"""prereg.registry: registration schema, resolution, canonical digest, ledger, verify."""
