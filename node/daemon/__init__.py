"""The node daemon: HTTP API, server wiring, worker pool, job store and configuration, and
its chain role (the executor that runs chain jobs on the worker pool, the divergence monitor)."""
