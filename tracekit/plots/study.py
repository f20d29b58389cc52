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
    "precision": "Mixed-precision speed-up and tensor-core share of GPU time",
    "cpu": "Host CPU utilization against world size (ranks)",
    "characterization": "Compute rate against memory traffic (characterization)",
    "communication": "Communication share of step time and exposed communication",
    "interconnect": "NVLink against PCIe",
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
    ax.text(0.5, 0.5, style.text(text), ha="center", va="center", fontsize=9,
            transform=ax.transAxes, color="#a33")
    return _png(fig)


def _lines(plt, df: pd.DataFrame, ys: list[tuple[str, str]], title: str) -> str:
    fig, axes = plt.subplots(1, len(ys), figsize=(5.2 * len(ys), 3.6), squeeze=False)
    for ax, (col, label) in zip(axes[0], ys):
        for _key, g in df.groupby(["workload", "precision", "interconnect"], dropna=False, sort=True):
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
    labels = [style.text(" ".join(str(r[c]) for c in xcols if r.get(c) is not None and str(r[c]) != "nan"))
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


def _log_axis(axis, values, unit: str) -> None:
    """Log scale whose limits pad the data by a factor 3 each side (points off the corners),
    with major ticks at 1, 2 and 5 per decade, each labelled with an SI prefix and ``unit``
    (several readable ticks even when the data span less than a decade)."""
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

    lo, hi = min(values), max(values)
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    getattr(axis.axes, f"set_{axis.axis_name}lim")(lo / 3, hi * 3)
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(EngFormatter(unit=unit, places=0))
    axis.set_minor_formatter(NullFormatter())


def _scatter(plt, df: pd.DataFrame) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4))
    markers = {"mlperf": "o", "dawnbench": "s", "deepbench": "^"}
    for ax, (col, label) in zip(axes, [("dram_bytes_per_s", "DRAM traffic (bytes/s)"),
                                       ("dram_transactions_per_s", "DRAM transactions per second")]):
        d = df[df[col].notna() & df["flop_per_s"].notna()]
        for suite, g in d.groupby(d["suite"].fillna("other")):
            ax.scatter(g[col], g["flop_per_s"], marker=markers.get(suite, "D"), label=style.text(suite), s=40)
            for _, r in g.iterrows():
                ax.annotate(style.text(f"{r['workload']} {r['precision']}"), (r[col], r["flop_per_s"]),
                            fontsize=7, xytext=(4, 4), textcoords="offset points")
        if len(d) and (d[col] > 0).all() and (d["flop_per_s"] > 0).all():
            _log_axis(ax.xaxis, list(d[col]), "B/s" if col == "dram_bytes_per_s" else "/s")
            _log_axis(ax.yaxis, list(d["flop_per_s"]), "FLOP/s")
        elif not len(d):
            ax.text(0.5, 0.5, "no ncu pass records this counter", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8, color="#a33")
        ax.set_xlabel(label)
        ax.set_ylabel("compute rate (FLOP/s)")
        ax.grid(alpha=0.3, which="major")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, title="suite", title_fontsize=7)
    fig.suptitle("FLOP/s against DRAM traffic per workload (ncu passes)", fontsize=10)
    fig.tight_layout()
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


