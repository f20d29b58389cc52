"""tracekit: where GPU time goes in deep-learning training, from Nsight Systems, Nsight Compute
and PyTorch profiler output.

The library turns profiler outputs into *run folders* (``manifest.json`` plus one Parquet file per
table, see ``docs/schema.md``) and answers named DuckDB queries over one or many run folders.

Public entry points:

- :func:`tracekit.convert.convert` — profiler output file(s) -> run folder
- :func:`tracekit.query.run` / :class:`tracekit.query.Session` — the front door: named and
  ad-hoc SQL over run folders, each result with its warnings and why it is empty
- :mod:`tracekit.schema` — the one definition of every table and column
"""

__version__ = "0.1.0"
