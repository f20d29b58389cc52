"""The study's files: one self-contained ``report.html`` (figures as embedded PNG, drawn by
:mod:`tracekit.plots.study`; tables) and every table as CSV and Parquet, written atomically into
the study folder."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.labels import html_text
from tracekit.plots.study import TITLES, figures, memory_unit
from tracekit.study import mlperf as _mlperf
from tracekit.study.tables import (
    COLUMNS,
    NOT_TENSOR_CORE_NAME_RE,
    SOURCES,
    TENSOR_CORE_NAME_RE,
    Study,
)

PARAMS = {
    "step_summary": "include_warmup=false",
    "host_cpu_utilization": "scope 'run', level 'all'",
    "roofline": "per=kernel, ceilings=none",
    "gpu_utilization": "scope 'run'",
}


# -- HTML ---------------------------------------------------------------------------------------
_CSS = """
body{font-family:sans-serif;max-width:1360px;margin:1em auto;color:#222;font-size:14px}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}
table{border-collapse:collapse;font-size:12px;margin:.5em 0;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td.t{text-align:left;max-width:26em;overflow-wrap:break-word}figure{margin:.5em 0}img{max-width:100%}
figcaption,.src{font-size:12px;color:#555}.why{color:#a33}
code{background:#f5f5f5;padding:0 2px;overflow-wrap:anywhere}
"""

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"))


def _fmt(v) -> str:
    """A table cell: integers as written, fractions to 4 significant digits, large values with
    an SI prefix (2.5e14 -> '250 T'), never scientific notation."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        if v == 0:
            return "0"
        for scale, prefix in _SI:
            if abs(v) >= scale:
                return f"{v / scale:.3g} {prefix}"
        if abs(v) >= 1:
            return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) >= 1e-4 else "< 0.0001"
    return str(v)


def display_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The table as the report shows it: every ``*_ns`` column in milliseconds, renamed
    ``* (ms)`` (step_ns -> step (ms)); ``*_bytes`` columns in the unit of the memory figure's
    axis (:func:`tracekit.plots.study.memory_unit`: peak_allocated_bytes -> peak allocated
    (GiB)); run lists with a space after each comma, so they wrap between run ids. The CSV and
    Parquet files keep nanoseconds and bytes."""
    out = df.copy()
    sizes = [c for c in df.columns if c.endswith("_bytes")]
    unit, f = memory_unit(v for c in sizes for v in df[c])
    for c in df.columns:
        if c.endswith("_ns") or c == "ns":
            out[c] = pd.to_numeric(df[c], errors="coerce") / 1e6
            out = out.rename(columns={c: (c[:-3].replace("_", " ") if c != "ns" else "time") + " (ms)"})
        elif c in sizes:
            out[c] = pd.to_numeric(df[c], errors="coerce") / f
            out = out.rename(columns={c: c[:-6].replace("_", " ") + f" ({unit})"})
        elif c == "runs":
            out[c] = [v.replace(",", ", ") if isinstance(v, str) else v for v in df[c]]
    return out


def _html_table(df: pd.DataFrame) -> str:
    df = display_frame(df)
    head = "".join(f"<th>{html_text(c)}</th>" for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for c, v in zip(df.columns, rec):
            cls = ' class="t"' if isinstance(v, str) else ""
            text = _fmt(v)
            if c.endswith("(ms)") and isinstance(v, float) and v == v:
                text = f"{v:,.3f}"  # durations: fixed milliseconds
            cells.append(f"<td{cls}>{html_text(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _runs_of(study: Study, name: str) -> list[str]:
    df = study.tables[name]
    if "runs" in df.columns and len(df):
        return sorted({r for s in df["runs"].dropna() for r in str(s).split(",") if r})
    if "run" in df.columns and len(df):  # scaling_loss: each run and its baseline
        return sorted(set(df["run"].dropna()) | set(df["baseline_run"].dropna()))
    return []


def runs_table(study: Study) -> pd.DataFrame:
    """The report's Runs table: one row per run, its keys and where each came from."""
    def unk(v):
        return "unknown" if v is None or (isinstance(v, float) and v != v) else v

    return pd.DataFrame([{
        "run_id": r.run_id, "workload": r.workload, "precision": r.precision,
        "world_size": unk(r.world_size), "batch_size": unk(r.batch_size),
        "interconnect": r.interconnect or "", "pass": r.kind, "profiler": r.profiler or "",
        "steps from": r.step_source or "no steps",
        "threads/rank": unk(r.threads_per_rank),
        "keys from": "; ".join(f"{k}: {r.origin[k]}" for k in ("workload", "precision", "world_size",
                                                                "batch_size", "suite", "interconnect")
                               if k in r.origin),
    } for r in study.runs])


def render_html(study: Study, figs: dict[str, list[tuple[str, str]]], title: str) -> str:
    esc = html_text
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>"]
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<p class='src'>Made by <code>tracekit study</code> on {when} from "
                 f"{len(study.runs)} run folder(s). Every number comes from tracekit's named "
                 "queries (<code>tracekit queries -v</code>) on these runs; definitions in "
                 "docs/study.md. Tables are also in this folder as CSV and Parquet.</p>")
    parts.append("<h2 id='runs'>Runs</h2>")
    parts.append(_html_table(runs_table(study)))
    parts.append("<p class='src'>" + ("Runs with equal keys are pooled (--pool): their values are "
                 "averaged into one point." if study.pool else "Each run is its own point (pool runs "
                 "with equal keys with --pool).") + " Keys a manifest lacks are inferred from the "
                 "trace (docs/study.md); <i>unknown</i> is shown as such, never replaced by a "
                 "default.</p>")
    shown = [n for n in TITLES if n != "mlperf_scaling" or _mlperf.shown(study)]  # MLPerf: with its logs
    parts.append("<ul>" + "".join(f"<li><a href='#{n}'>{esc(TITLES[n])}</a></li>" for n in shown)
                 + "</ul>")
    for name in shown:
        parts.append(f"<h2 id='{name}'>{esc(TITLES[name])}</h2>")
        runs = _runs_of(study, name)
        queries = ", ".join(f"{q} ({PARAMS[q]})" if q in PARAMS else q for q in SOURCES[name])
        for b64, alt in figs.get(name, []):
            if b64 is None:  # a figure or panel left out for want of data
                parts.append(f"<p class='src'>Not drawn: {esc(alt)}.</p>")
                continue
            parts.append(f"<figure><img alt='{esc(alt)}' src='data:image/png;base64,{b64}'>"
                         f"<figcaption>Runs: {esc(', '.join(runs) or 'none')}. "
                         f"Queries: {esc(queries)}.</figcaption></figure>")
        if name in study.reasons:
            parts.append(f"<p class='why'>{esc(study.reasons[name])}</p>")
        if name == "precision":
            parts.append("<p class='src'>Name-based estimate: kernels whose name matches "
                         f"<code>{esc(TENSOR_CORE_NAME_RE)}</code> and not "
                         f"<code>{esc(NOT_TENSOR_CORE_NAME_RE)}</code>.</p>")
        if name == "scaling_loss":
            parts.append(_findings_html(study))
        df = study.tables[name]
        parts.append(f"<p class='src'>{name}.csv, {name}.parquet — {len(df)} row(s)</p>")
        parts.append(_html_table(df) if len(df) else "<p class='why'>(empty table)</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _findings_html(study: Study) -> str:
    """The ranked causes of scaling loss, each with the command that shows its evidence."""
    if not study.findings:
        return ""
    items = "".join(f"<li>{html_text(f['text'])} &mdash; <code>{html_text(f['query'])}</code></li>"
                    for f in study.findings)
    return ("<p class='src'>Ranked causes (parts of at least 5 % of a run's loss; per step; the "
            "parts add up to delta; docs/study.md, \"Why scaling loses\"):</p><ol>" + items + "</ol>")


# -- writing ------------------------------------------------------------------------------------
INT_COLUMNS = {"world_size", "batch_size", "steps", "kernels", "cpus", "threads_per_rank",
               "peak_allocated_bytes", "peak_reserved_bytes"} | _mlperf.INT
TEXT_COLUMNS = {"workload", "suite", "precision", "interconnect", "source", "tensor_core_source", "runs",
                "device", "run", "baseline_run", "part"} | _mlperf.TEXT
def _arrow(df: pd.DataFrame, name: str) -> pa.Table:
    df = df[COLUMNS[name]]
    fields = []
    for c in df.columns:
        s = df[c]
        if c in INT_COLUMNS:
            fields.append(pa.array(pd.to_numeric(s, errors="coerce").astype("Int64"), type=pa.int64()))
        elif c in TEXT_COLUMNS:
            fields.append(pa.array([None if v is None or (isinstance(v, float) and v != v) else str(v)
                                    for v in s.tolist()], type=pa.string()))
        else:
            fields.append(pa.array(pd.to_numeric(s, errors="coerce").astype("float64"), type=pa.float64()))
    return pa.table(fields, names=list(df.columns))


def _records(df: pd.DataFrame) -> list[dict]:
    """Rows as JSON-safe dicts (NaN -> None)."""
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
            for r in df.astype(object).to_dict("records")]


def write_study(study: Study, out_dir: str | os.PathLike, *, force: bool = False,
                title: str = "tracekit study", inputs=()) -> Path:
    """Write report.html, NAME.csv and NAME.parquet for every table, and study.json (runs,
    reasons, sources) into ``out_dir`` atomically (temp folder + rename)."""
    import pyarrow.csv as pacsv

    from tracekit.runfolder import check_replaceable

    out = Path(out_dir).absolute()
    # only a study folder tracekit wrote is replaced, never a run folder read (nor anything else)
    check_replaceable(out, force=force, inputs=inputs, marker="study.json", key="tables",
                      what="study folder")
    figs = figures(study)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # mkdir inside: a Ctrl-C right after it still removes the folder
        tmp.mkdir()
        for name in COLUMNS:
            t = _arrow(study.tables[name], name)
            pacsv.write_csv(t, tmp / f"{name}.csv")
            pq.write_table(t, tmp / f"{name}.parquet")
        (tmp / "report.html").write_text(render_html(study, figs, title), encoding="utf-8")
        meta = {"runs": [{"run_id": r.run_id, "path": str(r.path), "workload": r.workload,
                          "suite": r.suite, "precision": r.precision, "world_size": r.world_size,
                          "batch_size": r.batch_size, "interconnect": r.interconnect,
                          "pass": r.kind, "origin": r.origin, "step_source": r.step_source,
                          "threads_per_rank": r.threads_per_rank} for r in study.runs],
                "pool": study.pool,
                "scaling_loss": {"unit": "ns per step", "rows": _records(study.tables["scaling_loss"]),
                                 "findings": study.findings},
                "tables": {n: {"rows": len(study.tables[n]), "queries": SOURCES[n],
                               "reason": study.reasons.get(n)} for n in COLUMNS}}
        (tmp / "study.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        if os.path.lexists(out):
            check_replaceable(out, force=force, inputs=inputs, marker="study.json", key="tables",
                              what="study folder")
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
