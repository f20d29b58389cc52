"""Output of ``tracekit compare``: the metrics and the kernel table in every format.

- table (terminal): the metrics, each row in its own unit (``12.345 ms``, ``87.3 %``), relative
  change as a signed percentage; metrics with no value in either run are named in one line; then
  the ``top`` kernels by |delta_ns|; then why B differs from A: each part of the step-time
  difference (skew, exposed_comm, host_launch, compute_inflation, data, idle, residual) and the
  ranked findings with the command that shows their evidence;
- csv / json to stdout: one document. JSON: ``{"a", "b", "threshold", "kernel_counts",
  "metrics": [...], "kernels": [...], "scaling_loss": [...], "findings": [...]}``; CSV: one
  table, a ``section`` column saying ``metric``, ``kernel`` (kernel rows: ``name`` the kernel,
  ``a``/``b``/``delta`` its total ns) or ``loss`` (``name`` the part, ``delta`` its ns per step,
  ``relative`` its share of the difference);
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
        lines += [""] + loss_lines(res, width)
        data = ("\n".join(lines) + "\n").encode()
    elif fmt == Format.json:
        doc = {"a": res["a"], "b": res["b"], "threshold": threshold, "kernel_counts": c,
               "metrics": json_rows(metrics), "kernels": json_rows(kernels),
               "scaling_loss": json_rows(_loss_table(res)), "findings": res.get("findings") or [],
               "scaling_loss_reason": res.get("loss_reason")}
        data = (json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()
    elif fmt == Format.csv:
        data = csv_bytes(one_table(metrics, kernels, res.get("loss")))
    else:  # parquet: the one long table, to -o only (without it: the usual error)
        render(one_table(metrics, kernels, res.get("loss")) if output is not None else kernels, fmt, output,
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


LOSS_UNITS = {"part": ("enum", ""), "ns": ("ns", "per step"), "share_pct": ("value", "% of the difference")}


def _loss_table(res: dict) -> pa.Table:
    from tracekit.study.scaling_loss import COLUMNS

    rows = res.get("loss") or []
    return pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.string()) for c in COLUMNS})


def loss_lines(res: dict, width: int) -> list[str]:
    """Why B differs from A: the parts of the step-time difference, then the findings."""
    rows = res.get("loss") or []
    if not rows:
        return wrap(f"why b differs from a: not attributed ({res.get('loss_reason') or 'no steps'})", width)
    r0 = rows[0]
    t = pa.table({"part": [r["part"] for r in rows], "ns": [r["ns"] for r in rows],
                  "share_pct": [None if r["share"] is None else round(100 * r["share"], 1)
                                for r in rows]})
    title = (f"why b differs from a: {r0['delta_ns'] / 1e6:+,.3f} ms per step "
             f"({r0['baseline_step_ns'] / 1e6:,.3f} -> {r0['step_ns'] / 1e6:,.3f} ms)")
    lines = table_lines(t, title, LOSS_UNITS, width)
    for i, f in enumerate(res.get("findings") or [], start=1):
        lines += wrap(f"{i}. {f['text']}: `{f['query']}`", width)
    return lines


def one_table(metrics: pa.Table, kernels: pa.Table, loss: list[dict] | None = None) -> pa.Table:
    """Metrics, kernels and the loss parts as one long table (the CSV document on stdout)."""
    m, k = metrics.to_pylist(), kernels.to_pylist()
    rows = [{"section": "metric", "name": r["metric"], "status": None, "unit": r["unit"],
             "a": r["a"], "b": r["b"], "delta": r["delta"], "relative": r["relative"],
             "instances_a": None, "instances_b": None, "query": r["query"]} for r in m]
    rows += [{"section": "kernel", "name": r["name"], "status": r["status"], "unit": "ns",
              "a": r["total_ns_a"], "b": r["total_ns_b"], "delta": r["delta_ns"],
              "relative": r["relative"], "instances_a": r["instances_a"],
              "instances_b": r["instances_b"], "query": "kernel_summary"} for r in k]
    rows += [{"section": "loss", "name": r["part"], "status": None, "unit": "ns", "a": None, "b": None,
              "delta": r["ns"], "relative": r["share"], "instances_a": None, "instances_b": None,
              "query": "tracekit.study.attribution"} for r in loss or []]
    types = {"section": pa.string(), "name": pa.string(), "status": pa.string(), "unit": pa.string(),
             "a": pa.float64(), "b": pa.float64(), "delta": pa.float64(), "relative": pa.float64(),
             "instances_a": pa.int64(), "instances_b": pa.int64(), "query": pa.string()}
    return pa.table({n: pa.array([r[n] for r in rows], t) for n, t in types.items()})
