"""``tracekit plot roofline``: the hierarchical roofline.

:func:`plot_roofline` draws the hierarchical roofline of the ``roofline`` named query: log-log
axes (arithmetic intensity in FLOP/byte against FLOP/s), one horizontal ceiling per precision the
ceilings know (fp64, fp32, fp16, tensor), one diagonal ceiling per memory level (DRAM, L2, L1),
and one point per kernel name and memory level (DRAM circle, L2 square, L1 triangle; the same
colour for a kernel's points) with its area proportional to the kernel's share of GPU time: of
the nsys kernel time when the run folder also holds an nsys pass (names matched with
``tk_kernel_key``; the ``roofline_time_share`` query), else of the summed ncu kernel time.
Ceilings come from the ``roofline_ceilings`` query. The legend keys only the marker shapes
drawn; the ``top`` kernels get a number beside their point and their name in a second legend
outside the axes, so labels never cover markers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

LEVELS = (("dram", "DRAM", "o"), ("l2", "L2", "s"), ("l1", "L1", "^"))
PRECISIONS = (("fp64", "FP64"), ("fp32", "FP32"), ("fp16", "FP16"), ("tensor", "Tensor"))

def _short(name: str, width: int = 40, escape: bool = True) -> str:
    """A kernel's label; ``escape=False`` for messages (plain text, no mathtext escapes)."""
    s = style.short(name, width)
    return s if escape else s.replace(r"\$", "$")


def roofline_data(run_dirs: Sequence[str | os.PathLike], params: dict[str, str] | None = None):
    """(kernel rows of the ``roofline`` query, ceiling rows per device, {(run_id, kernel_name):
    share of the run's nsys kernel time} for runs that also hold an nsys pass)."""
    from tracekit.query import Session

    params = dict(params or {})
    params["per"] = "kernel"
    with Session(run_dirs) as eng:
        kernels = eng.query("roofline", params).to_pylist()
        ceilings = eng.query("roofline_ceilings").to_pylist()
        shares = {(r["run_id"], r["kernel_name"]): r["share"] for r in eng.query("roofline_time_share").to_pylist()}
    return kernels, ceilings, shares


def _points(kernels: list[dict], nsys_shares: dict, nsys_runs: set) -> tuple[list, dict]:
    """([(kernel row, [(level, intensity)], share of the run's time)], {kernel: why skipped})."""
    total_by_run: dict[str, float] = {}
    for k in kernels:
        if k["time_ns"] is not None:
            total_by_run[k["run_id"]] = total_by_run.get(k["run_id"], 0.0) + k["time_ns"]
    points, skipped = [], {}
    for k in kernels:
        levels = [(lv, k[f"{lv}_intensity"]) for lv, _, _ in LEVELS if k[f"{lv}_intensity"]]
        if k["flop_per_s"] is None or not levels:
            if k["flop"] is None:
                why = "no FLOP counters (sm__sass_thread_inst_executed_op_*, tensor)"
            elif k["flop"] == 0:
                why = "0 FLOP: no place on log axes"
            elif not levels:
                why = "no byte counters at any level (dram__bytes, lts__t_bytes, l1tex__t_bytes)"
            else:
                why = "no kernel time"
            skipped[k["kernel_name"]] = why
            continue
        if k["run_id"] in nsys_runs:  # the traced run's time, not ncu's replay time
            share = nsys_shares.get((k["run_id"], k["kernel_name"]), 0.0)
        else:
            share = (k["time_ns"] or 0.0) / (total_by_run.get(k["run_id"]) or 1.0)
        points.append((k, levels, share))
    return points, skipped


def _draw_ceilings(ax, ceilings: list[dict], x_lo: float, x_hi: float, y_max: float) -> None:
    """The compute roofs (one per precision) and memory slopes (one per level) of every device."""
    styles = ["-", "--", ":", "-."]
    level_colors = {"dram": "tab:red", "l2": "tab:green", "l1": "tab:blue"}
    for di, c in enumerate(ceilings):
        prefix = f"{style.text(c['device_name'])} " if len(ceilings) > 1 else ""
        ls = styles[di % len(styles)]
        top_peak = max([c[p] for p, _ in PRECISIONS if c[p]], default=None)
        for p, label in PRECISIONS:
            if c[p]:
                lab = f"{label}{' ' + c['tensor_datatype'] if p == 'tensor' and c['tensor_datatype'] else ''}"
                ax.hlines(c[p], x_lo, x_hi, colors="0.25", linestyles=ls, linewidth=1.2)
                ax.text(x_hi / 1.2, c[p] * 1.08, f"{style.text(prefix)}{lab} {c[p] / 1e12:.3g} TFLOP/s", va="bottom",
                        ha="right", fontsize=7, color="0.2")
        for lv, label, _ in LEVELS:
            bw = c[lv]
            if not bw:
                continue
            cap = top_peak or y_max * 10
            x_end = cap / bw
            ax.plot([x_lo, x_end], [x_lo * bw, cap], color=level_colors[lv], linestyle=ls, linewidth=1.2,
                    label=f"{style.text(prefix)}{label} {bw / 1e9:,.0f} GB/s")


def _draw_kernels(plt, ax, points: list, top: int) -> list:
    """A marker per kernel and level, area by share of time; numbers beside the ``top`` largest.
    Returns the legend handles of the numbered kernels."""
    cmap = plt.get_cmap("tab10")
    ranked = sorted(points, key=lambda p: -p[2])
    markers = dict((a, m) for a, _, m in LEVELS)
    drawn_levels: set[str] = set()
    kernel_handles = []
    names = style.kernel_labels([k["kernel_name"] for k, _, _ in ranked[:top]], 48)
    for i, (k, levels, share) in enumerate(ranked):
        color = cmap(i % 10)
        size = 30 + 1500 * share
        for lv, inten in levels:
            drawn_levels.add(lv)
            ax.scatter([inten], [k["flop_per_s"]], s=size, marker=markers[lv], color=color, alpha=0.75,
                       edgecolors="black", linewidths=0.5, zorder=3)
        if i < top:  # a number beside the point, the name in the kernel legend: labels never cover markers
            inten = levels[0][1]
            ax.annotate(str(i + 1), (inten, k["flop_per_s"]), textcoords="offset points",
                        xytext=(6 + (size ** 0.5) / 2, 2), fontsize=8, color=color, fontweight="bold", zorder=4)
            kernel_handles.append(plt.Line2D([], [], marker="o", linestyle="", color=color,
                                             label=f"{i + 1}  {names[i]} ({100 * share:.0f}%)"))
    for lv, label, marker in LEVELS:  # marker key only for the levels drawn
        if lv in drawn_levels:
            ax.scatter([], [], marker=marker, color="0.5", edgecolors="black", label=f"kernel at {label} intensity")
    return kernel_handles


def plot_roofline(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *,
                  params: dict[str, str] | None = None, title: str | None = None, top: int = 8) -> dict:
    """Draw the roofline of ``run_dirs`` into ``output`` (PNG, SVG or PDF by suffix).

    Returns ``{"plotted": [kernel names], "skipped": {kernel: reason}, "title": text, "legend":
    [ceiling and marker legend texts], "labels": [numbered kernel legend texts]}``. Raises
    :class:`InputError` when no kernel has both a FLOP count and a byte count at some level
    (the message quotes what is missing), :class:`ToolNotFoundError` without matplotlib.
    """
    from tracekit.outfile import check_output

    check_output(output, run_dirs, create_parent=True)
    kernels, ceilings, nsys_shares = roofline_data(run_dirs, params)
    nsys_runs = {run for run, _ in nsys_shares}
    if not kernels:
        raise InputError("no ncu launches in the run folder(s): convert an ncu CSV or .ncu-rep into them")
    plt = style.pyplot()

    points, skipped = _points(kernels, nsys_shares, nsys_runs)
    if not points:
        name, why = next(iter(skipped.items()))
        raise InputError(f"nothing to plot: no kernel has both FLOP and byte counters "
                         f"(e.g. {_short(name, escape=False)}: {why}); "
                         "`tracekit query roofline` lists what each kernel lacks")

    fig, ax = plt.subplots(figsize=(12, 6.5), dpi=110)
    xs = [i for _, lv, _ in points for _, i in lv]
    ys = [k["flop_per_s"] for k, _, _ in points]
    peaks = [c[p] for c in ceilings for p, _ in PRECISIONS if c[p]]
    bws = [c[lv] for c in ceilings for lv, _, _ in LEVELS if c[lv]]
    x_lo = min(xs + [p / b for p in peaks for b in bws] or xs) / 10
    x_hi = max(xs + [p / b for p in peaks for b in bws] or xs) * 10
    _draw_ceilings(ax, ceilings, x_lo, x_hi, max(ys))
    kernel_handles = _draw_kernels(plt, ax, points, top)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_all = ys + peaks
    ax.set_ylim(min(ys) / 10, max(y_all) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    basis = "nsys kernel time" if nsys_runs else "ncu kernel time"
    runs = sorted({k["run_id"] for k in kernels})
    gpus = [c["device_name"] for c in ceilings if c["device_name"]]
    ax.set_title(style.text(title) if title else
                 style.run_title("Hierarchical roofline", runs, gpus) + f"\n(point area: share of {basis})")
    ax.grid(True, which="major", linewidth=0.3)
    first = ax.legend(loc="lower right", fontsize=7)
    if kernel_handles:
        ax.add_artist(first)
        ax.legend(handles=kernel_handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7,
                  title="kernels (share of time)", title_fontsize=7, frameon=False)
    fig.tight_layout()
    drawn = {"title": ax.get_title(), "legend": [t.get_text() for t in first.get_texts()],
             "labels": [h.get_label() for h in kernel_handles]}
    style.save(fig, output, protect=run_dirs)
    return {"plotted": [k["kernel_name"] for k, _, _ in points], "skipped": skipped, **drawn}
