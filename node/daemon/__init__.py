"""The node daemon: HTTP API, server wiring, worker pool, job store and configuration."""
