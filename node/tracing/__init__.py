"""Signed execution traces: the statement of a run, and verification by re-execution."""
