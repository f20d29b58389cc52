"""The study's files: one self-contained ``report.html`` (figures as embedded PNG, tables) and
every table as CSV and Parquet, written atomically into the study folder."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import os
import shutil
import uuid
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.errors import ToolNotFoundError
from tracekit.study.tables import COLUMNS, NOT_TENSOR_CORE_NAME_RE, SOURCES, TENSOR_CORE_NAME_RE, Study

TITLES = {
    "scaling": "Throughput and scaling efficiency against GPU count",
    "precision": "Mixed-precision speed-up and tensor-core share of GPU time",
    "cpu": "Host CPU utilization against GPU count",
    "characterization": "Compute rate against memory traffic (characterization)",
    "communication": "Communication share of step time and exposed communication",
    "interconnect": "NVLink against PCIe",
}

PARAMS = {
    "step_summary": "include_warmup=false",
    "host_cpu_utilization": "scope 'run', level 'all'",
    "roofline": "per=kernel, ceilings=none",
    "gpu_utilization": "scope 'run'",
}


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ToolNotFoundError("the study report needs matplotlib: pip install 'tracekit[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    fig.clf()
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _series_label(row) -> str:
    parts = [row["workload"], row.get("precision")]
    if isinstance(row.get("interconnect"), str) and row.get("interconnect"):
        parts.append(row["interconnect"])
    return " ".join(str(p) for p in parts if p)


def _note_figure(plt, title: str, text: str, xlabel: str, ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9,
            transform=ax.transAxes, color="#a33")
    return _png(fig)


def _lines(plt, df: pd.DataFrame, ys: list[tuple[str, str]], title: str) -> str:
    fig, axes = plt.subplots(1, len(ys), figsize=(5.2 * len(ys), 3.6), squeeze=False)
    for ax, (col, label) in zip(axes[0], ys):
        for key, g in df.groupby(["workload", "precision", "interconnect"], dropna=False, sort=True):
            g = g.sort_values("world_size")
            if g[col].notna().any():
                ax.plot(g["world_size"], g[col], marker="o", label=_series_label(g.iloc[0]))
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel(label)
        ax.set_xticks(sorted(df["world_size"].unique()))
        ax.grid(alpha=0.3)
        if col == "scaling_efficiency":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def _bars(plt, df: pd.DataFrame, cols: list[tuple[str, str]], title: str, xcols: list[str]) -> str:
    fig, axes = plt.subplots(1, len(cols), figsize=(5.2 * len(cols), 3.8), squeeze=False)
    labels = [" ".join(str(r[c]) for c in xcols if r.get(c) is not None and str(r[c]) != "nan")
              for _, r in df.iterrows()]
    for ax, (col, label) in zip(axes[0], cols):
        vals = pd.to_numeric(df[col], errors="coerce")
        ax.bar(range(len(df)), vals.fillna(0), color=["#4c72b0" if v == v else "#ddd" for v in vals])
        for i, v in enumerate(vals):
            ax.text(i, 0 if v != v else v, "n/a" if v != v else f"{v:.3g}", ha="center",
                    va="bottom", fontsize=7)
        ax.set_xticks(range(len(df)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=10)
    return _png(fig)


def _scatter(plt, df: pd.DataFrame) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4))
    markers = {"mlperf": "o", "dawnbench": "s", "deepbench": "^"}
    for ax, (col, label) in zip(axes, [("dram_bytes_per_s", "DRAM bytes/s"),
                                       ("dram_transactions_per_s", "DRAM transactions/s")]):
        d = df[df[col].notna() & df["flop_per_s"].notna()]
        for suite, g in d.groupby(d["suite"].fillna("other")):
            ax.scatter(g[col], g["flop_per_s"], marker=markers.get(suite, "D"), label=suite, s=40)
            for _, r in g.iterrows():
                ax.annotate(f"{r['workload']} {r['precision']}", (r[col], r["flop_per_s"]),
                            fontsize=7, xytext=(3, 3), textcoords="offset points")
        if len(d) and (d[col] > 0).all() and (d["flop_per_s"] > 0).all():
            from matplotlib.ticker import NullFormatter

            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(label)
        ax.set_ylabel("FLOP/s")
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, title="suite", title_fontsize=7)
    fig.suptitle("FLOP/s against DRAM traffic per workload (ncu passes)", fontsize=10)
    return _png(fig)


def figures(study: Study) -> dict[str, list[tuple[str, str]]]:
    """{table: [(base64 PNG, alt text)]}: every table gets at least one figure; a figure whose
    data is missing (e.g. no ncu pass) is drawn with the reason in it. Text from the runs
    (workload, precision, interconnect names) is drawn as text, never as mathtext (`$`)."""
    plt = _plt()
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        return _figures(study, plt)


def _figures(study: Study, plt) -> dict[str, list[tuple[str, str]]]:
    t = study.tables
    out: dict[str, list[tuple[str, str]]] = {}

    def missing(name, xlabel, ylabel):
        why = study.reasons.get(name, "no data")
        return [(_note_figure(plt, TITLES[name], "\n".join(_wrap(why, 75)), xlabel, ylabel),
                 f"{TITLES[name]}: {why}")]

    sc = t["scaling"]
    out["scaling"] = ([(_lines(plt, sc, [("samples_per_s", "samples/s"),
                                          ("scaling_efficiency", "scaling efficiency")],
                               TITLES["scaling"]), TITLES["scaling"])]
                      if len(sc) else missing("scaling", "GPUs", "samples/s"))
    pc = t["precision"]
    out["precision"] = ([(_bars(plt, pc, [("speedup_vs_fp32", "speed-up vs fp32 (x)"),
                                          ("tensor_core_time_share", "tensor-core share of GPU time")],
                                TITLES["precision"], ["workload", "precision", "world_size"]),
                          TITLES["precision"])]
                        if len(pc) else missing("precision", "workload", "speed-up"))
    cpu = t["cpu"]
    out["cpu"] = ([(_lines(plt, cpu, [("cores_busy", "CPU cores busy"),
                                      ("cpu_utilization", "CPU utilization (0-1)")],
                           TITLES["cpu"]), TITLES["cpu"])]
                  if len(cpu) else missing("cpu", "GPUs", "cores busy"))
    ch = t["characterization"]
    out["characterization"] = ([(_scatter(plt, ch), TITLES["characterization"])]
                               if len(ch) and ch["flop_per_s"].notna().any()
                               else missing("characterization", "DRAM bytes/s", "FLOP/s"))
    cm = t["communication"]
    out["communication"] = ([(_lines(plt, cm, [("comm_share", "communication share of step time"),
                                               ("exposed_comm_ns", "exposed comm per step (ns)")],
                                     TITLES["communication"]), TITLES["communication"])]
                            if len(cm) else missing("communication", "GPUs", "share"))
    ic = t["interconnect"]
    out["interconnect"] = ([(_bars(plt, ic, [("samples_per_s", "samples/s"),
                                             ("comm_share", "communication share")],
                                   TITLES["interconnect"],
                                   ["workload", "precision", "world_size", "interconnect"]),
                             TITLES["interconnect"])]
                           if len(ic) else missing("interconnect", "interconnect", "samples/s"))
    return out


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


# -- HTML ---------------------------------------------------------------------------------------
_CSS = """
body{font-family:sans-serif;max-width:1150px;margin:1em auto;color:#222;font-size:14px}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}
td.t{text-align:left}figure{margin:.5em 0}img{max-width:100%}
figcaption,.src{font-size:12px;color:#555}.why{color:#a33}
code{background:#f5f5f5;padding:0 2px}
"""


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}"
        return f"{v:.4e}"
    return str(v)


def _html_table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for v in rec:
            cls = ' class="t"' if isinstance(v, str) else ""
            cells.append(f"<td{cls}>{html.escape(_fmt(v))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _runs_of(study: Study, name: str) -> list[str]:
    df = study.tables[name]
    if "runs" in df.columns and len(df):
        return sorted({r for s in df["runs"].dropna() for r in str(s).split(",") if r})
    return []


def render_html(study: Study, figs: dict[str, list[tuple[str, str]]], title: str) -> str:
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>"]
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<p class='src'>Made by <code>tracekit study</code> on {when} from "
                 f"{len(study.runs)} run folder(s). Every number comes from tracekit's named "
                 "queries (<code>tracekit queries -v</code>) on these runs; definitions in "
                 "docs/study.md. Tables are also in this folder as CSV and Parquet.</p>")
    parts.append("<h2 id='runs'>Runs</h2>")
    rdf = pd.DataFrame([{"run_id": r.run_id, "workload": r.workload, "suite": r.suite,
                         "precision": r.precision, "world_size": r.world_size,
                         "batch_size": r.batch_size, "interconnect": r.interconnect,
                         "pass": r.kind, "profiler": r.profiler,
                         "keys from": ", ".join(sorted(set(r.origin.values())))}
                        for r in study.runs])
    parts.append(_html_table(rdf))
    parts.append("<ul>" + "".join(f"<li><a href='#{n}'>{esc(TITLES[n])}</a></li>" for n in TITLES)
                 + "</ul>")
    for name in TITLES:
        parts.append(f"<h2 id='{name}'>{esc(TITLES[name])}</h2>")
        runs = _runs_of(study, name)
        queries = ", ".join(f"{q} ({PARAMS[q]})" if q in PARAMS else q for q in SOURCES[name])
        for b64, alt in figs.get(name, []):
            parts.append(f"<figure><img alt='{esc(alt)}' src='data:image/png;base64,{b64}'>"
                         f"<figcaption>Runs: {esc(', '.join(runs) or 'none')}. "
                         f"Queries: {esc(queries)}.</figcaption></figure>")
        if name in study.reasons:
            parts.append(f"<p class='why'>{esc(study.reasons[name])}</p>")
        if name == "precision":
            parts.append("<p class='src'>Name-based estimate: kernels whose name matches "
                         f"<code>{esc(TENSOR_CORE_NAME_RE)}</code> and not "
                         f"<code>{esc(NOT_TENSOR_CORE_NAME_RE)}</code>.</p>")
        df = study.tables[name]
        parts.append(f"<p class='src'>{name}.csv, {name}.parquet — {len(df)} row(s)</p>")
        parts.append(_html_table(df) if len(df) else "<p class='why'>(empty table)</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


# -- writing ------------------------------------------------------------------------------------
INT_COLUMNS = {"world_size", "batch_size", "steps", "kernels", "cpus"}
TEXT_COLUMNS = {"workload", "suite", "precision", "interconnect", "source", "tensor_core_source", "runs"}
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
    tmp.mkdir()
    try:
        for name in COLUMNS:
            t = _arrow(study.tables[name], name)
            pacsv.write_csv(t, tmp / f"{name}.csv")
            pq.write_table(t, tmp / f"{name}.parquet")
        (tmp / "report.html").write_text(render_html(study, figs, title), encoding="utf-8")
        meta = {"runs": [{"run_id": r.run_id, "path": str(r.path), "workload": r.workload,
                          "suite": r.suite, "precision": r.precision, "world_size": r.world_size,
                          "batch_size": r.batch_size, "interconnect": r.interconnect,
                          "pass": r.kind, "origin": r.origin} for r in study.runs],
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
