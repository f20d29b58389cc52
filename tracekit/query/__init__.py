"""Running queries: the one front door (:func:`run` -> :class:`QueryResult`) and what it is made of.

- :mod:`tracekit.query.api`: :func:`run` and :class:`QueryResult` (rows, units, notices,
  warnings, why a result is empty), used by the CLI, plots, study, timeline and workers, and
  :class:`Session` (one set of run folders, many queries through :func:`run`);
- :mod:`tracekit.query.engine`: :class:`Engine`, DuckDB views over run folders (a session that
  runs many queries over the same runs);
- :mod:`tracekit.query.catalog`: every name a statement may use (tables, views, macros);
- :mod:`tracekit.query.hooks`: the one extension point, names other packages provide (the
  roofline tables, the critical path), listed in ``tracekit/extensions.py``;
- :mod:`tracekit.query.named_queries`: the ``.sql`` files of ``queries/`` and their headers
  (parameters, output columns and units);
- :mod:`tracekit.query.explain`: warnings and empty-result explanations from the manifests;
- :mod:`tracekit.query.sql_guard`: limits on ad-hoc SQL (``tracekit sql``);
- :mod:`tracekit.query.parts`: a named query computed in parts on workers.

The names below are imported on first use, so ``tracekit queries`` does not load DuckDB.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "run": "tracekit.query.api",
    "QueryResult": "tracekit.query.api",
    "Session": "tracekit.query.api",
    "Engine": "tracekit.query.engine",
    "NamedQuery": "tracekit.query.named_queries",
    "all_queries": "tracekit.query.named_queries",
    "get_query": "tracekit.query.named_queries",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tracekit.query' has no attribute {name!r}")
