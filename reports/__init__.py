"""prereg.reports: loading runs with refusal, the registered analysis, rendering."""
