"""Workers: where per-rank and per-run work runs (this process, local worker processes, or a Dask
scheduler's workers), for `tracekit convert` (ranks), `tracekit query` (parts of a named query)
and `tracekit whatif` (parts of the dependency graph). :mod:`tracekit.workers.cluster` holds it.
"""

from __future__ import annotations

from tracekit.workers.cluster import (
    DEFAULT_SCHEDULER_TIMEOUT_S,
    SCHEDULER_ENV,
    SCHEDULER_TIMEOUT_ENV,
    connect,
    default_jobs,
    run_parts,
    scheduler_address,
    scheduler_timeout,
)

__all__ = ["DEFAULT_SCHEDULER_TIMEOUT_S", "SCHEDULER_ENV", "SCHEDULER_TIMEOUT_ENV", "connect",
           "default_jobs", "run_parts", "scheduler_address", "scheduler_timeout"]
