"""The study report's figures (``tracekit study``; docs/study.md): one or two per study table,
drawn from the study's tables (which come from the named queries), as base64 PNG for the
self-contained report.html. A table without data gets a figure stating why.
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


def _plt():
    return style.pyplot()


def _png(fig) -> str:
    return style.png_base64(fig, dpi=90)


def _series_label(row) -> str:
    parts = [row["workload"], row.get("precision")]
    if isinstance(row.get("interconnect"), str) and row.get("interconnect"):
        parts.append(row["interconnect"])
    return style.text(" ".join(str(p) for p in parts if p))


def _note_figure(plt, title: str, text: str, xlabel: str, ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xticks([])
    ax.set_yticks([])
    # line by line: the wrapping's own line breaks are not trace text (escaped, they were drawn
    # as '\n' and the note ran out of the figure)
    shown = "\n".join(style.text(line) for line in text.split("\n"))
    ax.text(0.5, 0.5, shown, ha="center", va="center", fontsize=9,
            transform=ax.transAxes, color="#a33")
    return _png(fig)


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
    world size. A panel without any value says why in it (``why`` by column); the legend sits
    under the panels, never over the points."""
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


def _bars(plt, df: pd.DataFrame, cols: list[tuple[str, str]], title: str, xcols: list[str]) -> str:
    fig, axes = plt.subplots(1, len(cols), figsize=(5.2 * len(cols), 3.8), squeeze=False)
    labels = [style.text(_short(" ".join(_label_value(r[c]) for c in xcols
                                         if r.get(c) is not None and str(r[c]) != "nan")))
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


def figures(study: Study) -> dict[str, list[tuple[str, str]]]:
    """{table: [(base64 PNG, alt text)]}: every table gets at least one figure; a figure whose
    data is missing (e.g. no ncu pass) is drawn with the reason in it."""
    plt = _plt()
    t = study.tables
    out: dict[str, list[tuple[str, str]]] = {}

    def missing(name, xlabel, ylabel):
        why = study.reasons.get(name, "no data")
        return [(_note_figure(plt, TITLES[name], "\n".join(_wrap(why, 75)), xlabel, ylabel),
                 f"{TITLES[name]}: {why}")]

    sc = t["scaling"]
    why = {"samples_per_s": "no run records its batch size, so no samples/s (give batch_size in "
                            "--override, docs/study.md)",
           "scaling_efficiency": "needs samples/s of one workload at two or more world sizes",
           "comm_share": "no run has NCCL kernels or comm ranges",
           "exposed_comm_ms": "no run has NCCL kernels (exposed communication)",
           "cores_busy": "no run has scheduling data (nsys --cpuctxsw, or tracekit collect)",
           "cpu_utilization": "no run has scheduling data (nsys --cpuctxsw, or tracekit collect)"}
    out["scaling"] = ([(_lines(plt, sc, [("samples_per_s", "samples/s"),
                                          ("scaling_efficiency", "scaling efficiency")],
                               TITLES["scaling"], why), TITLES["scaling"])]
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
                           TITLES["cpu"], why), TITLES["cpu"])]
                  if len(cpu) else missing("cpu", "GPUs", "cores busy"))
    ch = t["characterization"]
    out["characterization"] = ([(_scatter(plt, ch), TITLES["characterization"])]
                               if len(ch) and ch["flop_per_s"].notna().any()
                               else missing("characterization", "DRAM bytes/s", "FLOP/s"))
    cm = t["communication"]
    if len(cm):
        cm = cm.assign(exposed_comm_ms=pd.to_numeric(cm["exposed_comm_ns"], errors="coerce") / 1e6)
    out["communication"] = ([(_lines(plt, cm, [("comm_share", "communication share of step time"),
                                               ("exposed_comm_ms", "exposed communication per step (ms)")],
                                     TITLES["communication"], why), TITLES["communication"])]
                            if len(cm) else missing("communication", "GPUs", "share"))
    ic = t["interconnect"]
    out["interconnect"] = ([(_bars(plt, ic, [("samples_per_s", "samples/s"),
                                             ("comm_share", "communication share")],
                                   TITLES["interconnect"],
                                   ["workload", "precision", "world_size", "interconnect"]),
                             TITLES["interconnect"])]
                           if len(ic) else missing("interconnect", "interconnect", "samples/s"))
    mem = t["memory"]
    out["memory"] = ([(_bars(plt, mem.assign(peak_allocated_mib=mem["peak_allocated_bytes"] / 2**20,
                                             peak_reserved_mib=mem["peak_reserved_bytes"] / 2**20),
                             [("peak_allocated_mib", "peak allocated (MiB)"),
                              ("peak_reserved_mib", "peak reserved (MiB)")],
                             TITLES["memory"], ["workload", "precision", "world_size", "device"]), TITLES["memory"])]
                     if len(mem) else missing("memory", "run", "MiB"))
    from tracekit.plots.scaling_loss import waterfall_figure

    sl = t.get("scaling_loss")
    out["scaling_loss"] = ([(_png(waterfall_figure(plt, sl)), TITLES["scaling_loss"])]
                           if sl is not None and len(sl) else missing("scaling_loss", "part", "step time"))
    from tracekit.plots.mlperf import mlperf_figure

    if len(t.get("mlperf_scaling", ())):  # only with MLPerf result logs (tracekit.study.mlperf)
        out["mlperf_scaling"] = [(_png(mlperf_figure(plt, t["mlperf_scaling"])), TITLES["mlperf_scaling"])]
    return out


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


