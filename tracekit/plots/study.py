"""The study report's figures (``tracekit study``; docs/study.md): one or two per study table,
drawn from the study's tables (which come from the named queries), as base64 PNG for the
self-contained report.html. A figure, or a panel of one, without data is left out: in its place
:func:`figures` gives one line saying what would fill it (:data:`FILL`).
"""

from __future__ import annotations

import pandas as pd

from tracekit.plots import style
from tracekit.study.tables import Study

TITLES = {
    "scaling": "Throughput and scaling efficiency against world size (ranks)",
    "mlperf_scaling": "MLPerf time to train against accelerators (result logs)",
    "precision": "Mixed-precision speed-up and tensor-core share of GPU time",
    "cpu": "Host CPU utilization against world size (ranks)",
    "characterization": "Compute rate against memory traffic (characterization)",
    "communication": "Communication share of step time and exposed communication",
    "interconnect": "NVLink against PCIe",
    "memory": "Peak memory per run (allocated and reserved, on the device with the highest peak)",
    "scaling_loss": "Why scaling loses: each run's step time against its baseline, by cause",
}


# what would fill each panel (by column) or figure (by table) that has no data
FILL = {
    "samples_per_s": "samples/s needs each run's per-GPU batch size (a manifest from `tracekit "
                     "collect`, or batch_size in --override; docs/study.md)",
    "scaling_efficiency": "scaling efficiency needs samples/s of one workload at 1 GPU and at more",
    "speedup_vs_fp32": "the speed-up against fp32 needs an fp32 run and an amp or bf16 run of one "
                       "workload, world size and per-GPU batch",
    "tensor_core_time_share": "the tensor-core share needs runs with GPU kernels",
    "cores_busy": "host CPU use needs runs with scheduler data (nsys --cpuctxsw=process-tree, as "
                  "`tracekit collect --profiler nsys` records)",
    "comm_share": "the communication share needs runs with NCCL kernels or tracekit's `comm` ranges",
    "exposed_comm_ms": "exposed communication needs runs with NCCL kernels",
    "characterization": "this figure needs an ncu pass of the workload (`tracekit collect --profiler "
                        "ncu`) or a GPU trace with recorded shapes (`tracekit collect --profiler torch`)",
    "interconnect": "this figure needs runs of one workload, precision and world size over two "
                    "interconnects (interconnect in --override: NVLink, PCIe)",
    "memory": "this figure needs runs with memory events (`tracekit collect --profile-memory`, or "
              "nsys --cuda-memory-usage=true)",
    "scaling_loss": "this figure needs runs of one workload, precision and per-GPU batch at two or "
                    "more world sizes (the smallest is the baseline)",
}
FILL["cpu_utilization"] = FILL["cores_busy"]


def _plt():
    return style.pyplot()


def _png(fig) -> str:
    return style.png_base64(fig, dpi=90)


def _series_label(row) -> str:
    parts = [row["workload"], row.get("precision")]
    if isinstance(row.get("interconnect"), str) and row.get("interconnect"):
        parts.append(row["interconnect"])
    return style.text(" ".join(str(p) for p in parts if p))


def _label_value(v) -> str:
    """A label part: world sizes and other whole numbers without '.0'."""
    if isinstance(v, float) and v.is_integer():  # NaN and inf are not
        return str(int(v))
    return str(v)


def _short(text: str, width: int = 34) -> str:
    """``text`` cut to ``width`` characters with one ``…`` in the middle (two thirds of the room
    kept from the start), unchanged when it fits."""
    if len(text) <= width:
        return text
    front = (2 * (width - 1) + 2) // 3
    return text[:front] + "…" + text[len(text) - (width - 1 - front):]


def _world_axis(ax, df: pd.DataFrame) -> None:
    """Integer world-size ticks, never closer than a tick label's width: a log2 axis when the
    sizes span a factor 8 or more (1, 2, 4 ... 64 evenly spaced), else a linear one padded by half
    a rank on each side."""
    ws = sorted({int(v) for v in pd.to_numeric(df["world_size"], errors="coerce").dropna()})
    if not ws:
        return
    if len(ws) > 1 and ws[-1] / max(ws[0], 1) >= 8:
        ax.set_xscale("log", base=2)
        ax.set_xlim(ws[0] / 1.4, ws[-1] * 1.4)
    else:
        ax.set_xlim(ws[0] - 0.5, ws[-1] + 0.5)
    ax.set_xticks(ws)
    ax.set_xticklabels([str(w) for w in ws])
    ax.minorticks_off()


def _lines(plt, df: pd.DataFrame, ys: list[tuple[str, str]], title: str,
           why: dict[str, str] | None = None) -> str:
    """One panel per (column, label): a line per workload/precision/interconnect against the
    world size (callers pass only columns with a value: :func:`_with_data`; a panel without any
    still says why in it, ``why`` by column); the legend sits under the panels, never over the
    points."""
    fig, axes = plt.subplots(1, len(ys), figsize=(5.2 * len(ys), 3.6), squeeze=False)
    handles, labels = [], []
    for ax, (col, label) in zip(axes[0], ys):
        for _key, g in df.groupby(["workload", "precision", "interconnect"], dropna=False, sort=True):
            g = g.sort_values("world_size")
            if g[col].notna().any():
                (h,) = ax.plot(g["world_size"], g[col], marker="o")
                name = _short(_series_label(g.iloc[0]), 60)
                if name not in labels:
                    handles.append(h)
                    labels.append(name)
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel(label)
        _world_axis(ax, df)
        ax.grid(alpha=0.3)
        if not df[col].notna().any():
            text = (why or {}).get(col) or f"no run has a value of {label}"
            ax.text(0.5, 0.5, "\n".join(_wrap(style.text(text), 48)), ha="center", va="center",
                    fontsize=8, color="#a33", transform=ax.transAxes)
            ax.set_yticks([])
        elif col == "scaling_efficiency":
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    fig.suptitle(title, fontsize=10)
    if handles:
        below = -0.02 - 0.045 * ((len(labels) + 1) // 2)  # one row of entries per two labels
        fig.legend(handles, [style.text(x) for x in labels], loc="lower center", fontsize=7,
                   ncol=min(2, len(labels)), frameon=False, bbox_to_anchor=(0.5, below))
    fig.tight_layout()
    return _png(fig)


def _with_data(df: pd.DataFrame, cols: list[tuple[str, str]]) -> tuple[list, list[str]]:
    """(the panels of ``cols`` with at least one value, the :data:`FILL` lines of the others)."""
    keep = [(c, label) for c, label in cols if c in df and pd.to_numeric(df[c], errors="coerce").notna().any()]
    return keep, [FILL.get(c, f"{label}: no run has a value") for c, label in cols if (c, label) not in keep]


def _bar_text(v: float) -> str:
    """A bar's label: 3 significant digits, thousands separated, never scientific notation."""
    if v == 0 or abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) >= 0.001 else f"{v:.1e}"


def _bars(plt, df: pd.DataFrame, cols: list[tuple[str, str]], title: str, xcols: list[str],
          rows: dict[str, pd.Series] | None = None) -> str:
    """One bar panel per (column, label) over the rows of ``df`` (``rows``: by column, the rows
    a panel shows, e.g. not the fp32 rows of a speed-up against fp32); a missing value is a grey
    ``n/a`` bar; labels over the bars stay inside the axes."""
    fig, axes = plt.subplots(1, len(cols), figsize=(5.2 * len(cols), 3.8), squeeze=False)
    for ax, (col, label) in zip(axes[0], cols):
        d = df[rows[col]] if rows and col in rows else df
        labels = [style.text(_short(" ".join(_label_value(r[c]) for c in xcols
                                             if r.get(c) is not None and str(r[c]) != "nan")))
                  for _, r in d.iterrows()]
        vals = pd.to_numeric(d[col], errors="coerce")
        ax.bar(range(len(d)), vals.fillna(0), color=["#4c72b0" if v == v else "#ddd" for v in vals])
        for i, v in enumerate(vals):
            ax.text(i, 0 if v != v else v, "n/a" if v != v else _bar_text(v), ha="center",
                    va="bottom", fontsize=7)
        top = vals.max()
        if top == top and top > 0:
            ax.set_ylim(0, top * 1.15)  # room for the tallest bar's label
        ax.set_xticks(range(len(d)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def _log_axis(axis, values, unit: str) -> None:
    """Log scale whose limits pad the data by a factor 3 each side (points off the corners),
    with major ticks at 1, 2 and 5 per decade, each labelled with an SI prefix and ``unit``
    (several readable ticks even when the data span less than a decade)."""
    import math

    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

    lo, hi = min(values), max(values)
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    getattr(axis.axes, f"set_{axis.axis_name}lim")(lo / 3, hi * 3)
    decades = math.log10(hi * 9 / lo)  # the axis' span
    # 1-2-5 ticks over a decade or two; one per decade beyond (labels of "10 GB/s" width collide)
    subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(EngFormatter(unit=unit, places=0))
    axis.set_minor_formatter(NullFormatter())


def _scatter(plt, df: pd.DataFrame) -> str:
    """Compute rate against DRAM traffic, one point per workload and source: filled markers are
    ncu counters, hollow ones the operator FLOP model; points are numbered and the numbers named
    under the panels (labels beside the points piled up)."""
    from matplotlib.ticker import EngFormatter

    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4))
    markers = {"mlperf": "o", "dawnbench": "s", "deepbench": "^"}
    d_all = df[df["flop_per_s"].notna()].reset_index(drop=True)
    keys = [f"{i + 1}: {_short(style.text(f'{r.workload} {r.precision}'), 44)} "
            f"({'ncu counters' if 'ncu' in str(r.source).lower() else 'operator FLOP model'})"
            for i, r in d_all.iterrows()]
    for ax, (col, label) in zip(axes, [("dram_bytes_per_s", "DRAM traffic (bytes/s)"),
                                       ("dram_transactions_per_s", "DRAM transactions per second")]):
        d = d_all[d_all[col].notna()]
        for i, r in d.iterrows():
            model = "ncu" not in str(r["source"]).lower()  # the study's source text names ncu
            ax.scatter([r[col]], [r["flop_per_s"]], marker=markers.get(r["suite"], "D"), s=44,
                       facecolors="none" if model else "#4c72b0", edgecolors="#4c72b0")
            ax.annotate(str(i + 1), (r[col], r["flop_per_s"]), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        if len(d) and (d[col] > 0).all() and (d["flop_per_s"] > 0).all():
            _log_axis(ax.xaxis, list(d[col]), "B/s" if col == "dram_bytes_per_s" else "/s")
            _log_axis(ax.yaxis, list(d["flop_per_s"]), "FLOP/s")
        else:  # no offset text ("1e10") over the panel: SI prefixes on the ticks
            ax.xaxis.set_major_formatter(EngFormatter(unit="B/s" if col == "dram_bytes_per_s" else "/s"))
            ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
        if not len(d):
            ax.text(0.5, 0.5, "no run records this counter", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8, color="#a33")
        ax.set_xlabel(label)
        ax.set_ylabel("compute rate (FLOP/s)")
        ax.grid(alpha=0.3, which="major")
    fig.suptitle("FLOP/s against DRAM traffic per workload (filled: ncu counters; hollow: "
                 "operator FLOP model)", fontsize=10)
    fig.tight_layout()
    if keys:
        fig.text(0.01, -0.02, "\n".join(keys), fontsize=7, va="top", ha="left")
    return _png(fig)


def memory_unit(values) -> tuple[str, float]:
    """(label, divisor) for memory sizes in bytes: GiB when the largest is at least 1 GiB, else
    MiB; the memory figure's axis and the report's memory table use the same."""
    top = pd.to_numeric(pd.Series(list(values), dtype="object"), errors="coerce").max()
    return ("GiB", 2.0**30) if top == top and top >= 2**30 else ("MiB", 2.0**20)


def figures(study: Study) -> dict[str, list[tuple[str | None, str]]]:
    """{table: [(base64 PNG, alt text)]}. A figure without data is left out, and so is a panel
    without data in a figure that has others: in their place come entries (None, line), each one
    line saying what would fill the figure or panel (:data:`FILL`)."""
    plt = _plt()
    t = study.tables
    out: dict[str, list[tuple[str | None, str]]] = {}

    def draw(name, df, cols, kind, **kw):
        keep, notes = _with_data(df, cols)
        figs = []
        if keep:
            png = (_lines(plt, df, keep, TITLES[name]) if kind == "lines"
                   else _bars(plt, df, keep, TITLES[name], **kw))
            figs.append((png, TITLES[name]))
        out[name] = figs + [(None, n) for n in dict.fromkeys(notes)]

    draw("scaling", t["scaling"], [("samples_per_s", "samples/s"),
                                   ("scaling_efficiency", "scaling efficiency")], "lines")
    pc = t["precision"]
    fp32 = pc["precision"] == "fp32" if len(pc) else pd.Series(dtype=bool)
    if len(pc):  # an fp32 run's speed-up against itself, 1, is not shown
        pc = pc.assign(speedup_vs_fp32=pd.to_numeric(pc["speedup_vs_fp32"], errors="coerce").where(~fp32))
    draw("precision", pc, [("speedup_vs_fp32", "speed-up vs fp32 (x)"),
                           ("tensor_core_time_share", "tensor-core share of GPU time")], "bars",
         xcols=["workload", "precision", "world_size"], rows={"speedup_vs_fp32": ~fp32})
    draw("cpu", t["cpu"], [("cores_busy", "CPU cores busy"),
                           ("cpu_utilization", "CPU utilization (0-1)")], "lines")
    ch = t["characterization"]
    out["characterization"] = ([(_scatter(plt, ch), TITLES["characterization"])]
                               if len(ch) and ch["flop_per_s"].notna().any()
                               else [(None, FILL["characterization"])])
    cm = t["communication"]
    if len(cm):
        cm = cm.assign(exposed_comm_ms=pd.to_numeric(cm["exposed_comm_ns"], errors="coerce") / 1e6)
    draw("communication", cm, [("comm_share", "communication share of step time"),
                               ("exposed_comm_ms", "exposed communication per step (ms)")], "lines")
    ic = t["interconnect"]
    out["interconnect"] = ([(_bars(plt, ic, [("samples_per_s", "samples/s"),
                                             ("comm_share", "communication share")],
                                   TITLES["interconnect"],
                                   ["workload", "precision", "world_size", "interconnect"]),
                             TITLES["interconnect"])]
                           if len(ic) else [(None, FILL["interconnect"])])
    mem = t["memory"]
    if len(mem):
        unit, f = memory_unit(list(mem["peak_allocated_bytes"]) + list(mem["peak_reserved_bytes"]))
        mem = mem.assign(peak_allocated=pd.to_numeric(mem["peak_allocated_bytes"], errors="coerce") / f,
                         peak_reserved=pd.to_numeric(mem["peak_reserved_bytes"], errors="coerce") / f)
        out["memory"] = [(_bars(plt, mem, [("peak_allocated", f"peak allocated ({unit})"),
                                           ("peak_reserved", f"peak reserved ({unit})")],
                                TITLES["memory"], ["workload", "precision", "world_size", "device"]),
                          TITLES["memory"])]
    else:
        out["memory"] = [(None, FILL["memory"])]
    from tracekit.plots.scaling_loss import waterfall_figure

    sl = t.get("scaling_loss")
    out["scaling_loss"] = ([(_png(waterfall_figure(plt, sl)), TITLES["scaling_loss"])]
                           if sl is not None and len(sl) else [(None, FILL["scaling_loss"])])
    from tracekit.plots.mlperf import mlperf_figure

    if len(t.get("mlperf_scaling", ())):  # only with MLPerf result logs (tracekit.study.mlperf)
        out["mlperf_scaling"] = [(_png(mlperf_figure(plt, t["mlperf_scaling"])), TITLES["mlperf_scaling"])]
    return out


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


