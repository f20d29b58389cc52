"""Convert profiler outputs into a run folder (``tracekit convert``).

- :func:`convert` (:mod:`tracekit.convert.dispatch`): the entry point; one run or a multi-rank
  job;
- :mod:`tracekit.convert.single`: the inputs of one run, each format's collector once;
- :mod:`tracekit.convert.job`: a multi-rank job, one rank per input, merged into one run folder;
- :mod:`tracekit.convert.identity`: whether a job's inputs can be one job;
- :mod:`tracekit.convert.clocks`: the job's clock model, estimated from its collectives;
- where the parts run (this process, local worker processes or a Dask scheduler's workers) is
  :mod:`tracekit.workers`.
"""

from __future__ import annotations

import importlib

_EXPORTS = {"convert": "tracekit.convert.dispatch", "convert_single": "tracekit.convert.single"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):  # imported on first use: the CLI reads SCHEDULER_ENV at start-up
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tracekit.convert' has no attribute {name!r}")
