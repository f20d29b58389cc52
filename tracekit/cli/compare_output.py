"""Output of ``tracekit compare``: the metrics and the kernel table in every format.

- table (terminal): the metrics, each row in its own unit (``12.345 ms``, ``87.3 %``) under its
  name without a unit suffix (``step``, ``gpu_idle``, ``memcpy_PtoP size``), relative change as a
  signed percentage, one line saying what the rows are over (means per measured step of a rank;
  totals over each run's window summed over its GPUs); metrics with no value in either run are
  named in one line; then the ``top`` kernels, largest change per step first: status, mean time
  per launch in A and B and its change, launches per step, change of the kernel's time per step;
  the window note when the runs' windows differ; then why B differs from A: each part of the
  step-time difference (skew, exposed_comm, host_launch, compute_inflation, data, idle,
  residual) and the ranked findings with the command that shows their evidence;
- csv / json to stdout: one document. JSON: ``{"a", "b", "threshold", "kernel_counts",
  "windows", "window_note", "metrics": [...], "kernels": [...], "scaling_loss": [...],
  "findings": [...]}``; CSV: one table, a ``section`` column saying ``metric``, ``kernel``
  (kernel rows: ``name`` the kernel, ``a``/``b``/``delta``/``relative`` its mean ns per launch,
  then the kernel table's per-step and ``window_*`` total columns) or ``loss`` (``name`` the part,
  ``delta`` its ns per step, ``relative`` its share of the difference);
- with ``-o FILE``: that same document in FILE and nothing else (no second file beside it: ``-o``
  may be a FIFO or ``/dev/null``); Parquet (``-o`` only) is the CSV's one long table. The table
  format in a file shows every kernel, at 100 columns.
Values in CSV, JSON and Parquet are the raw ones (ns, fractions) under the metric names with units.
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
from tracekit.labels import visible
from tracekit.outfile import write_output

_KIND = {"ns": "duration", "fraction": "fraction", "bytes": "bytes", "bytes/s": "bytes/s", "%": "%"}
KERNEL_UNITS = {"status": ("enum", ""), "name": ("text", ""), "mean_ns_a": ("ns", ""),
                "mean_ns_b": ("ns", ""), "per_launch": ("value", "a fraction 0-1"),
                "med_ns_a": ("ns", ""), "med_ns_b": ("ns", ""), "launches_per_step_a": ("value", ""),
                "launches_per_step_b": ("value", ""), "step_ns_a": ("ns", ""), "step_ns_b": ("ns", ""),
                "step_delta_ns": ("ns", ""), "per_step": ("value", "a fraction 0-1"),
                "window_launches_a": ("count", ""), "window_launches_b": ("count", ""),
                "window_total_ns_a": ("ns", ""), "window_total_ns_b": ("ns", ""),
                "window_delta_ns": ("ns", "")}


def _signed_pct(v) -> str:
    return "" if v is None or v != v else f"{v * 100:+.1f}%"


def _count(v) -> str:
    return "" if v is None or v != v else f"{v:.2f}".rstrip("0").rstrip(".")


def kernel_lines(kernels: pa.Table, title: str, width: int) -> list[str]:
    """The kernel table on the terminal: status, name, mean time per launch in A and B (one unit)
    and its change, launches per step (``a -> b`` where they differ) and the change of the
    kernel's time per step (where both runs have steps)."""
    rows = kernels.to_pylist()
    per_launch = column("v", [r[k] for r in rows for k in ("mean_ns_a", "mean_ns_b")], "duration")
    unit = per_launch.header.split(" ")[-1]
    step = column("v", [r["step_delta_ns"] for r in rows], "duration")
    steps = any(r["launches_per_step_a"] is not None or r["launches_per_step_b"] is not None for r in rows)

    def counts(r):
        a, b = _count(r["launches_per_step_a"]), _count(r["launches_per_step_b"])
        return a if a == b else f"{a or '-'} -> {b or '-'}"
    cols = [Col("status", "status", [r["status"] for r in rows], kind="key", priority=5),
            Col("name", "name", [visible(r["name"]) for r in rows], kind="key", priority=6,
                shortenable=True),
            Col("mean_ns_a", f"a {unit}", per_launch.cells[0::2], "right", "num", 4),
            Col("mean_ns_b", f"b {unit}", per_launch.cells[1::2], "right", "num", 4),
            Col("per_launch", "change", [_signed_pct(r["per_launch"]) for r in rows], "right", "num", 5)]
    if steps:
        cols += [Col("launches_per_step", "launches", [counts(r) for r in rows], "right", "num", 4),
                 Col("step_delta_ns", f"Δ {step.header.split(' ')[-1]}/step", [
                     f"+{c}" if c and (r["step_delta_ns"] or 0) > 0 else c for c, r in zip(step.cells, rows)],
                     "right", "num", 3)]
    return wrap(title, width) + render_lines(cols, width)[0]


_PER_STEP = ("step_ns", "samples_per_s", "gpu_busy_ns", "comm_ns")


def metric_label(metric: str) -> str:
    """A metric's name on the terminal, where its values carry their unit: ``step_ns`` -> ``step``,
    ``memcpy_PtoP_bytes`` -> ``memcpy_PtoP size`` (CSV and JSON keep the names with units)."""
    if metric.endswith("_ns"):
        return metric[:-3]
    return metric[:-6] + " size" if metric.endswith("_bytes") else metric


def scope_line(windows: dict | None, a: str, b: str) -> str:
    """What the metric rows are over: means per measured step of one rank, or totals over each
    run's window summed over its GPUs (with both runs' counts)."""
    w = windows or {}
    wa, wb = w.get(a) or {}, w.get(b) or {}
    return (f"{', '.join(metric_label(m) for m in _PER_STEP)}: means over the measured steps of "
            f"every rank (a {wa.get('steps', '?')}, b {wb.get('steps', '?')}); the other rows: totals "
            f"over each run's window, summed over its GPUs (a {wa.get('gpus', '?')}, "
            f"b {wb.get('gpus', '?')})")


def metric_lines(metrics: pa.Table, title: str, width: int, scope: str | None = None) -> list[str]:
    """The metrics as a terminal table: metric (:func:`metric_label`), a, b, delta, relative.
    Rows of one kind (durations, bytes, rates) share one unit, the one that shows the largest of
    their values with at most four digits before the point, so a column reads down in one unit;
    ``scope`` (:func:`scope_line`) under it."""
    rows, empty = [], []
    for row in metrics.to_pylist():
        if row["a"] is None and row["b"] is None:
            empty.append(metric_label(row["metric"]))
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
    names = [metric_label(r["metric"]) for r in rows]
    cols = [Col("metric", "metric", names, kind="key")]
    cols += [Col(k, k, [texts[i][n] for i in range(len(rows))], "right", "num", 4)
             for n, k in enumerate(("a", "b", "delta"))]
    cols.append(Col("relative", "relative", [_signed_pct(r["relative"]) for r in rows], "right", "num", 4))
    lines, _ = render_lines(cols, width, title)
    if scope:
        lines += wrap(scope, width)
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
    counts = ", ".join(f"{n} {k}" for k, n in c.items() if n) or "none"
    summary = f"{res['a']} -> {res['b']}: kernels {counts} (threshold {threshold:g})"
    if fmt == Format.table:
        width = terminal_width() if output is None else 100
        lines = metric_lines(metrics, f"{res['a']} (a) -> {res['b']} (b)", width,
                             scope_line(res.get("windows"), res["a"], res["b"]))
        shown = kernels if top == 0 or output is not None else kernels.slice(0, top)
        per_step = res["kernels"].step_delta_ns.notna().any()
        what = ("mean time per launch in a and b and its change; launches per step; change of "
                "the kernel's time per step" if per_step else
                "mean time per launch in a and b and its change (per step: not both runs have steps)")
        lines += [""] + kernel_lines(shown, f"kernels, largest change first ({len(shown)} of "
                                     f"{len(kernels)}): {what}", width)
        if res.get("window_note"):
            lines += wrap(res["window_note"], width)
        lines += [""] + loss_lines(res, width)
        data = ("\n".join(lines) + "\n").encode()
    elif fmt == Format.json:
        doc = {"a": res["a"], "b": res["b"], "threshold": threshold, "kernel_counts": c,
               "windows": res.get("windows"), "window_note": res.get("window_note"),
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


LOSS_UNITS = {"part": ("enum", ""), "per_step_ns": ("ns", "per step"), "share": ("%", "of the difference")}


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
    t = pa.table({"part": [r["part"] for r in rows], "per_step_ns": [r["ns"] for r in rows],
                  "share": [None if r["share"] is None else round(100 * r["share"], 1) + 0.0
                            for r in rows]})
    title = (f"why b differs from a: {r0['delta_ns'] / 1e6:+,.3f} ms per step "
             f"({r0['baseline_step_ns'] / 1e6:,.3f} -> {r0['step_ns'] / 1e6:,.3f} ms)")
    lines = table_lines(t, title, LOSS_UNITS, width, hint="`-f json` shows every value.")
    for i, f in enumerate(res.get("findings") or [], start=1):
        lines += wrap(f"{i}. {f['text']}: `{f['query']}`", width)
    return lines


_KERNEL_EXTRA = ("med_ns_a", "med_ns_b", "launches_per_step_a", "launches_per_step_b", "step_ns_a",
                 "step_ns_b", "step_delta_ns", "per_step", "window_launches_a", "window_launches_b",
                 "window_total_ns_a", "window_total_ns_b", "window_delta_ns")


def one_table(metrics: pa.Table, kernels: pa.Table, loss: list[dict] | None = None) -> pa.Table:
    """Metrics, kernels and the loss parts as one long table (the CSV document on stdout). A
    kernel row's ``a``, ``b``, ``delta``, ``relative`` are its mean time per launch (unit ``ns
    per launch``); its other columns (null on other rows) are the kernel table's: median per
    launch, launches and time per step, and the totals over each run's window."""
    m, k = metrics.to_pylist(), kernels.to_pylist()
    none = dict.fromkeys(_KERNEL_EXTRA)
    rows = [{"section": "metric", "name": r["metric"], "status": None, "unit": r["unit"],
             "a": r["a"], "b": r["b"], "delta": r["delta"], "relative": r["relative"],
             "query": r["query"], **none} for r in m]
    rows += [{"section": "kernel", "name": r["name"], "status": r["status"], "unit": "ns per launch",
              "a": r["mean_ns_a"], "b": r["mean_ns_b"],
              "delta": None if r["mean_ns_a"] is None or r["mean_ns_b"] is None else r["mean_ns_b"] - r["mean_ns_a"],
              "relative": r["per_launch"], "query": "kernel_summary, study_kernel_steps",
              **{c: r[c] for c in _KERNEL_EXTRA}} for r in k]
    rows += [{"section": "loss", "name": r["part"], "status": None, "unit": "ns per step", "a": None,
              "b": None, "delta": r["ns"], "relative": r["share"],
              "query": "tracekit.study.attribution", **none} for r in loss or []]
    types = {"section": pa.string(), "name": pa.string(), "status": pa.string(), "unit": pa.string(),
             "a": pa.float64(), "b": pa.float64(), "delta": pa.float64(), "relative": pa.float64(),
             **{c: pa.int64() if c.startswith("window_") else pa.float64() for c in _KERNEL_EXTRA},
             "query": pa.string()}
    return pa.table({n: pa.array([r[n] for r in rows], t) for n, t in types.items()})
