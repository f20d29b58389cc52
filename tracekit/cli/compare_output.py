"""Output of ``tracekit compare``: the metrics and the kernel table in every format.

- table (terminal): the metrics, each row in its own unit (``12.345 ms``, ``87.3 %``), relative
  change as a signed percentage; metrics with no value in either run are named in one line; then
  the ``top`` kernels by |delta_ns|;
- csv / json to stdout: one document. JSON: ``{"a", "b", "threshold", "kernel_counts",
  "metrics": [...], "kernels": [...]}``; CSV: one table, a ``section`` column saying ``metric`` or
  ``kernel`` (kernel rows: ``name`` the kernel, ``a``/``b``/``delta`` its total ns);
- with ``-o FILE``: that same document in FILE and nothing else (no second file beside it: ``-o``
  may be a FIFO or ``/dev/null``); Parquet (``-o`` only) is the CSV's one long table. The table
  format in a file shows every kernel, at 100 columns.
Values in CSV, JSON and Parquet are the raw ones (ns, fractions).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa

from tracekit.cli.display import column
from tracekit.cli.messages import info, note
from tracekit.cli.output import Format, render, table_lines
from tracekit.cli.serialize import csv_bytes, json_rows
from tracekit.cli.termtable import Col, render_lines, terminal_width, wrap
from tracekit.outfile import write_output

_KIND = {"ns": "duration", "fraction": "fraction", "bytes": "bytes", "bytes/s": "bytes/s", "%": "%"}
KERNEL_UNITS = {"status": ("enum", ""), "name": ("text", ""), "instances_a": ("count", ""),
                "instances_b": ("count", ""), "total_ns_a": ("ns", ""), "total_ns_b": ("ns", ""),
                "delta_ns": ("ns", ""), "relative": ("value", "a fraction 0-1")}


def _signed_pct(v) -> str:
    return "" if v is None or v != v else f"{v * 100:+.1f}%"


def metric_lines(metrics: pa.Table, title: str, width: int) -> list[str]:
    """The metrics as a terminal table: metric, a, b, delta, relative. Rows of one kind
    (durations, bytes, rates) share one unit, the one that shows the largest of their values
    with at most four digits before the point, so a column reads down in one unit."""
    rows, empty = [], []
    for row in metrics.to_pylist():
        if row["a"] is None and row["b"] is None:
            empty.append(row["metric"])
        else:
            rows.append(row)
    texts: dict[int, list[str]] = {}
    by_kind: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_kind.setdefault(_KIND.get(row["unit"], "value"), []).append(i)
    for kind, idx in by_kind.items():
        values = [rows[i][k] for i in idx for k in ("a", "b", "delta")]
        c = column("v", values, kind)
        label = c.header.split(" ")[-1] if c.header != "v" else ""
        for j, i in enumerate(idx):
            texts[i] = [f"{t} {label}".strip() if t else "" for t in c.cells[3 * j:3 * j + 3]]
    names = [r["metric"] for r in rows]
    cols = [Col("metric", "metric", names, kind="key")]
    cols += [Col(k, k, [texts[i][n] for i in range(len(rows))], "right", "num", 4)
             for n, k in enumerate(("a", "b", "delta"))]
    cols.append(Col("relative", "relative", [_signed_pct(r["relative"]) for r in rows], "right", "num", 4))
    lines, _ = render_lines(cols, width, title)
    if empty:
        lines += wrap(f"no value in either run: {', '.join(empty)}", width)
    return lines


def write_compare(res: dict, fmt: Format, output: Path | None, *, top: int, threshold: float,
                  protect=()) -> None:
    """Write the result of :func:`tracekit.study.compare_runs` (see the module docstring);
    ``protect``: run folders no output may be written into (:func:`tracekit.outfile.write_output`)."""
    metrics = pa.Table.from_pandas(res["metrics"], preserve_index=False)
    kernels = pa.Table.from_pandas(res["kernels"], preserve_index=False)
    c = res["kernel_counts"]
    summary = (f"{res['a']} -> {res['b']}: kernels {c['new']} new, {c['missing']} missing, "
               f"{c['slower']} slower, {c['faster']} faster, {c['same']} same "
               f"(threshold {threshold:g})")
    if fmt == Format.table:
        width = terminal_width() if output is None else 100
        lines = metric_lines(metrics, f"{res['a']} (a) -> {res['b']} (b)", width)
        shown = kernels if top == 0 or output is not None else kernels.slice(0, top)
        lines += [""] + table_lines(shown, f"kernels by |delta_ns| ({len(shown)} of {len(kernels)})",
                                    KERNEL_UNITS, width, hint="`-f csv` shows them all.")
        data = ("\n".join(lines) + "\n").encode()
    elif fmt == Format.json:
        doc = {"a": res["a"], "b": res["b"], "threshold": threshold, "kernel_counts": c,
               "metrics": json_rows(metrics), "kernels": json_rows(kernels)}
        data = (json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()
    elif fmt == Format.csv:
        data = csv_bytes(one_table(metrics, kernels))
    else:  # parquet: the one long table, to -o only (without it: the usual error)
        render(one_table(metrics, kernels) if output is not None else kernels, fmt, output,
               protect=protect)
        info(f"{summary}; wrote {output}")
        return
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        if fmt == Format.table:
            note(summary)  # --quiet silences it
        return
    write_output(output, lambda f: f.write(data), protect)  # one file: metrics and kernels
    info(f"{summary}; wrote {output}")


def one_table(metrics: pa.Table, kernels: pa.Table) -> pa.Table:
    """Metrics and kernels as one long table (the CSV document on stdout)."""
    m, k = metrics.to_pylist(), kernels.to_pylist()
    rows = [{"section": "metric", "name": r["metric"], "status": None, "unit": r["unit"],
             "a": r["a"], "b": r["b"], "delta": r["delta"], "relative": r["relative"],
             "instances_a": None, "instances_b": None, "query": r["query"]} for r in m]
    rows += [{"section": "kernel", "name": r["name"], "status": r["status"], "unit": "ns",
              "a": r["total_ns_a"], "b": r["total_ns_b"], "delta": r["delta_ns"],
              "relative": r["relative"], "instances_a": r["instances_a"],
              "instances_b": r["instances_b"], "query": "kernel_summary"} for r in k]
    types = {"section": pa.string(), "name": pa.string(), "status": pa.string(), "unit": pa.string(),
             "a": pa.float64(), "b": pa.float64(), "delta": pa.float64(), "relative": pa.float64(),
             "instances_a": pa.int64(), "instances_b": pa.int64(), "query": pa.string()}
    return pa.table({n: pa.array([r[n] for r in rows], t) for n, t in types.items()})
