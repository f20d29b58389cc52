"""Moved to :mod:`tracekit.workers.cluster` (workers are not conversion's own: query and whatif
run parts on them too); this name stays for code that imports it from here."""

from __future__ import annotations

from tracekit.workers.cluster import (  # noqa: F401
    DEFAULT_SCHEDULER_TIMEOUT_S,
    SCHEDULER_ENV,
    SCHEDULER_TIMEOUT_ENV,
    connect,
    default_jobs,
    run_parts,
    scheduler_address,
    scheduler_timeout,
)
