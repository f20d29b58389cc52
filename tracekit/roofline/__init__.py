"""Roofline support for the query engine: loads the per-GPU peak table and the roofline macros,
which live with the other SQL under ``queries/`` (``queries/data/gpu_peaks.csv``,
``queries/data/tensor_factors.csv``, ``queries/roofline/_macros.sql``).

:func:`prepare` is the query core's extension (:mod:`tracekit.query.hooks`, listed in
``tracekit/extensions.py`` with the names of :func:`provides` and :func:`reads`): the engine calls
it on a connection whose statement names one of these (on demand). It creates

- ``gpu_peaks``: the documented per-GPU ceilings of ``gpu_peaks.csv`` (device_name as ncu's
  ``device__attribute_display_name`` prints it, resource ``flop``/``tensor``/``dram``, datatype,
  dense/sparse, value in FLOP/s or bytes/s, source);
- ``gpu_aliases``: other names of the GPUs of the peak table (``gpu_aliases.csv``: names traces use,
  told apart by compute capability and SM count where one name stands for two parts), resolved by
  the macro ``tk_gpu_table_name``;
- ``tensor_factors``: FLOP per tensor-pipe instruction by compute capability, for the labelled
  estimate used when a report has no per-datatype tensor op counters;
- ``tk_ncu_spec``: :data:`tracekit.schema.ncu_metrics.INPUTS` as rows (alias, metric_name, prio);
- the macros of ``queries/roofline/_macros.sql``: ``tk_roofline_launches()`` (one row per ncu launch with FLOPs,
  bytes, time and ceilings) and scalar helpers ``tk_bound``.

The named queries in ``queries/roofline/`` build on these; docs/roofline.md documents them.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from tracekit.errors import QueryError, one_line
from tracekit.query.named_queries import data_file, macros_sql
from tracekit.schema.ncu_metrics import INPUTS

if TYPE_CHECKING:  # imported where it is used: naming the roofline's tables needs no DuckDB
    import duckdb


def peaks_path() -> str:
    """Path of the shipped per-GPU peak table (CSV)."""
    return data_file("gpu_peaks.csv")


def load_peaks():
    """The per-GPU peak table as an Arrow table."""
    import pyarrow.csv as pacsv

    return pacsv.read_csv(peaks_path())


def macros_text() -> str:
    """Text of the roofline macros (``queries/roofline/_macros.sql``)."""
    return macros_sql("roofline")


# the tables register() creates beside the macros of queries/roofline/_macros.sql
TABLES = frozenset({"gpu_peaks", "gpu_aliases", "tensor_factors", "kernel_name_tags", "tk_ncu_spec"})
_MACRO = re.compile(r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?MACRO\s+(\w+)",
                    re.IGNORECASE | re.MULTILINE)
_IDENT = re.compile(r"[a-z_][a-z0-9_]*")
_COMMENT = re.compile(r"--[^\n]*")


@functools.cache
def provides() -> frozenset[str]:
    """The names :func:`register` creates: its tables and every macro of the roofline macros."""
    return TABLES | {m.group(1).lower() for m in _MACRO.finditer(macros_text())}


@functools.cache
def reads() -> frozenset[str]:
    """The words of the roofline macros: the run-folder tables and core macros they use."""
    return frozenset(_IDENT.findall(_COMMENT.sub("", macros_text()).lower()))


def prepare(engine, con: duckdb.DuckDBPyConnection) -> None:
    """The query core's extension hook (:class:`tracekit.query.hooks.Extension`): :func:`register`
    on the engine's connection."""
    register(con)


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Create gpu_peaks, tensor_factors, gpu_aliases, kernel_name_tags, tk_ncu_spec and the
    roofline macros on ``con``."""
    import duckdb

    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE gpu_peaks AS SELECT * FROM read_csv(?, header = true, "
            "columns = {'device_name': 'VARCHAR', 'resource': 'VARCHAR', 'datatype': 'VARCHAR', "
            "'sparsity': 'VARCHAR', 'value': 'DOUBLE', 'unit': 'VARCHAR', 'source': 'VARCHAR'})",
            [peaks_path()])
        con.execute(
            "CREATE OR REPLACE TEMP TABLE tensor_factors AS SELECT * FROM read_csv(?, header = true, "
            "columns = {'compute_capability': 'VARCHAR', 'flop_per_inst': 'DOUBLE', 'source': 'VARCHAR'})",
            [data_file("tensor_factors.csv")])
        con.execute(
            "CREATE OR REPLACE TEMP TABLE gpu_aliases AS SELECT * FROM read_csv(?, header = true, "
            "columns = {'alias': 'VARCHAR', 'compute_capability': 'VARCHAR', 'sm_count': 'INTEGER', "
            "'device_name': 'VARCHAR', 'source': 'VARCHAR'})",
            [data_file("gpu_aliases.csv")])
        con.execute(
            "CREATE OR REPLACE TEMP TABLE kernel_name_tags AS SELECT * FROM read_csv(?, header = true, "
            "quote = '\"', columns = {'priority': 'INTEGER', 'pattern': 'VARCHAR', 'precision': 'VARCHAR', "
            "'tensor_core': 'BOOLEAN', 'library': 'VARCHAR', 'source': 'VARCHAR'})",
            [data_file("kernel_name_tags.csv")])
        rows = [(alias, name, prio) for alias, names in INPUTS.items() for prio, name in enumerate(names)]
        con.execute("CREATE OR REPLACE TEMP TABLE tk_ncu_spec (alias VARCHAR, metric_name VARCHAR, prio INTEGER)")
        con.executemany("INSERT INTO tk_ncu_spec VALUES (?, ?, ?)", rows)
        con.execute(macros_text())
    except duckdb.Error as exc:
        raise QueryError(f"roofline macros failed: {one_line(exc)}") from None
