"""``tracekit plot utilization``: GPU busy fraction over time, one row per GPU (rank).

Data: the ``gpu_utilization_timeline`` named query (exact busy time per time bin; the bins of a
GPU sum to ``gpu_utilization``'s busy time). Up to :data:`MAX_LINE_ROWS` GPUs are drawn as one
filled line plot each (kernels, and kernels or copies); more as a heatmap with one row per GPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

MAX_LINE_ROWS = 4


def utilization_data(run_dirs: Sequence[str | os.PathLike], *, bins: int = 200, bin_ns: int = 0):
    """(rows of ``gpu_utilization_timeline``, GPU names) for ``run_dirs``."""
    from tracekit.query import Session

    with Session(run_dirs) as eng:
        rows = eng.query("gpu_utilization_timeline", {"bins": str(bins), "bin_ns": str(bin_ns)}).to_pylist()
        return rows, style.gpu_names(eng), [r.run_id for r in eng.runs]


def plot_utilization(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *, bins: int = 200,
                     bin_ns: int = 0, title: str | None = None) -> dict:
    """Draw GPU utilization over time into ``output``. Returns ``{"gpus": n, "bins": n,
    "bin_ns": width}``. :class:`InputError` when the runs have no kernels, memcpy or memset."""
    rows, gpus, runs = utilization_data(run_dirs, bins=bins, bin_ns=bin_ns)
    if not rows:
        raise InputError("nothing to plot: the run folder(s) hold no kernels, memcpy or memset "
                         "(a CPU-only trace, or an ncu-only run)", path=style.single(run_dirs))
    plt = style.pyplot()
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        series.setdefault((r["run_id"], r["rank"], r["pid"], r["device_id"]), []).append(r)
    many_runs = len(runs) > 1
    pids = {(k[0], k[2]) for k in series}
    labels = []
    for run_id, rank, pid, dev in series:
        lab = style.gpu_label(rank, pid, dev, many_pids=len(pids) > len(runs))
        labels.append(f"{run_id} {lab}" if many_runs else lab)
    span_ns = max(r["bin_start_ns"] + r["wall_ns"] - s[0]["bin_start_ns"] for s in series.values() for r in s[-1:])
    div, unit = style.time_unit(span_ns)
    width = rows[0]["bin_ns"]
    w_div, w_unit = style.time_unit(width)
    subtitle = f"bins of {width / w_div:g} {w_unit}; busy = at least one kernel" + (
        " (or, lighter, a kernel or a copy)" if len(series) <= MAX_LINE_ROWS else "") + " ran on the GPU"
    head = title or style.run_title("GPU utilization over time", runs, gpus)
    if len(series) <= MAX_LINE_ROWS:
        fig, axes = plt.subplots(len(series), 1, figsize=(10, 1.2 + 1.6 * len(series)), sharex=True, squeeze=False)
        for ax, s, lab in zip(axes[:, 0], series.values(), labels):
            t0 = s[0]["bin_start_ns"]
            xs = [(r["bin_start_ns"] - t0) / div for r in s] + [(s[-1]["bin_start_ns"] + s[-1]["wall_ns"] - t0) / div]
            k = [100 * (r["utilization"] or 0) for r in s]
            a = [100 * (r["busy_fraction"] or 0) for r in s]
            ax.stairs(a, xs, fill=True, color=style.CATEGORY_COLORS["memcpy"], alpha=0.35,
                      label="kernels or copies")
            ax.stairs(k, xs, fill=True, color=style.CATEGORY_COLORS["compute"], alpha=0.9, label="kernels")
            ax.set_ylim(0, 105)
            ax.set_ylabel("busy (%)")
            ax.grid(alpha=0.3)
            total_k = sum(r["kernel_busy_ns"] for r in s) / max(sum(r["wall_ns"] for r in s), 1)
            # the row's name and its total above its panel, never over the bars (nor rotated into
            # the next row's label, as a two-line y label of a long run id was)
            ax.set_title(style.text(lab), loc="left", fontsize=8)
            ax.set_title(f"kernels busy {100 * total_k:.1f}% of the span", loc="right", fontsize=7)
        handles, names = axes[0, 0].get_legend_handles_labels()
        legend = (handles, names)
        axes[-1, 0].set_xlabel(f"time since the first GPU activity ({unit})")
    else:
        import numpy as np

        legend = None
        fig, ax = plt.subplots(figsize=(10, 1.5 + 0.28 * len(series)))
        mesh = None
        for i, s in enumerate(series.values()):
            t0 = s[0]["bin_start_ns"]
            end = (s[-1]["bin_start_ns"] + s[-1]["wall_ns"] - t0) / div
            xs = np.array([(r["bin_start_ns"] - t0) / div for r in s] + [end])
            z = np.array([[100 * (r["utilization"] or 0) for r in s]])
            mesh = ax.pcolormesh(xs, [i - 0.5, i + 0.5], z, vmin=0, vmax=100, cmap="viridis", shading="flat")
        ax.set_yticks(range(len(series)))
        ax.set_yticklabels([style.text(lab) for lab in labels])
        ax.set_ylim(len(series) - 0.5, -0.5)
        ax.set_xlabel(f"time since the first GPU activity ({unit})")
        ax.set_ylabel("GPU")
        cb = fig.colorbar(mesh, ax=ax, pad=0.01)
        cb.set_label("kernel busy (%)")
    import textwrap

    head_lines = textwrap.wrap(head, 110) or [""]
    h_in = fig.get_size_inches()[1]
    top = 1 - (0.17 * len(head_lines) + (0.17 if legend else 0)) / h_in  # title, legend: above the panels
    fig.suptitle("\n".join(head_lines), fontsize=10, y=0.995, va="top")
    if legend:
        fig.legend(*legend, loc="upper center", fontsize=7, ncol=2, frameon=False,
                   bbox_to_anchor=(0.5, 1 - (0.22 * len(head_lines) + 0.02) / h_in))
    fig.text(0.5, 0.005, style.text(subtitle), ha="center", va="bottom", fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, top))
    style.save(fig, output, protect=run_dirs)
    return {"gpus": len(series), "bins": max(len(s) for s in series.values()), "bin_ns": width}
