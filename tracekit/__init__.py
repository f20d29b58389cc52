"""tracekit: where GPU time goes in deep-learning training, from Nsight Systems, Nsight Compute
and PyTorch profiler output.

The library turns profiler outputs into *run folders* (``manifest.json`` plus one Parquet file per
table, see ``docs/schema.md``) and answers named DuckDB queries over one or many run folders.

Public entry points:

- :func:`tracekit.convert.convert` — profiler output file(s) -> run folder
- :class:`tracekit.query.engine.Engine` — DuckDB views over run folders; named and ad-hoc SQL
- :mod:`tracekit.schema` — the one definition of every table and column
"""

__version__ = "0.1.0"
