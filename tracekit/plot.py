"""Plots of query results (matplotlib, Agg backend; written atomically).

:func:`plot_roofline` draws the hierarchical roofline of the ``roofline`` named query: log-log
axes (arithmetic intensity in FLOP/byte against FLOP/s), one horizontal ceiling per precision the
ceilings know (fp64, fp32, fp16, tensor), one diagonal ceiling per memory level (DRAM, L2, L1),
and one point per kernel name and memory level (DRAM circle, L2 square, L1 triangle; the same
colour for a kernel's points) with its area proportional to the kernel's share of GPU time: of
the nsys kernel time when the run folder also holds an nsys pass (names matched with
``tk_kernel_key``), else of the summed ncu kernel time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tracekit.errors import InputError, ToolNotFoundError

LEVELS = (("dram", "DRAM", "o"), ("l2", "L2", "s"), ("l1", "L1", "^"))
PRECISIONS = (("fp64", "FP64"), ("fp32", "FP32"), ("fp16", "FP16"), ("tensor", "Tensor"))

_CEILINGS_SQL = """
SELECT device_name,
       avg(peak_fp64_flop_per_s) AS fp64, avg(peak_fp32_flop_per_s) AS fp32,
       avg(peak_fp16_flop_per_s) AS fp16, avg(peak_tensor_flop_per_s) AS tensor,
       avg(peak_dram_bytes_per_s) AS dram, avg(peak_l2_bytes_per_s) AS l2, avg(peak_l1_bytes_per_s) AS l1,
       any_value(tensor_datatype) AS tensor_datatype
FROM tk_roofline_launches() GROUP BY device_name ORDER BY device_name
"""


def _short(name: str, width: int = 40, escape: bool = True) -> str:
    from tracekit.collectors.ncu import base_name

    s = base_name(name) or "?"
    s = s if len(s) <= width else s[: width - 1] + "…"
    return plain(s) if escape else s


def plain(text: str) -> str:
    """Trace text as literal matplotlib text: a ``$`` would start mathtext (a kernel named
    ``$\\frac{$`` fails to draw), so each is escaped."""
    return str(text).replace("$", r"\$")


_NSYS_SHARE_SQL = """
WITH n AS (
    SELECT run_id, key, t / sum(t) OVER (PARTITION BY run_id) AS share
    FROM (SELECT run_id, tk_kernel_key(name) AS key, sum(end_ns - start_ns) AS t
          FROM kernels WHERE end_ns > start_ns GROUP BY 1, 2)
)
SELECT l.run_id, l.kernel_name, n.share
FROM (SELECT DISTINCT run_id, kernel_name FROM ncu_launches) l
JOIN n ON n.run_id = l.run_id AND n.key = tk_kernel_key(l.kernel_name)
"""


def roofline_data(run_dirs: Sequence[str | os.PathLike], params: dict[str, str] | None = None):
    """(kernel rows of the ``roofline`` query, ceiling rows per device, {(run_id, kernel_name):
    share of the run's nsys kernel time} for runs that also hold an nsys pass)."""
    from tracekit.engine import Engine

    params = dict(params or {})
    params["per"] = "kernel"
    with Engine(run_dirs) as eng:
        kernels = eng.query("roofline", params).to_pylist()
        ceilings = eng.sql(_CEILINGS_SQL).to_pylist()
        shares = {(r["run_id"], r["kernel_name"]): r["share"] for r in eng.sql(_NSYS_SHARE_SQL).to_pylist()}
    return kernels, ceilings, shares


def plot_roofline(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *,
                  params: dict[str, str] | None = None, title: str | None = None, top: int = 8) -> dict:
    """Draw the roofline of ``run_dirs`` into ``output`` (PNG, SVG or PDF by suffix).

    Returns ``{"plotted": [kernel names], "skipped": {kernel: reason}}``. Raises
    :class:`InputError` when no kernel has both a FLOP count and a byte count at some level
    (the message quotes what is missing), :class:`ToolNotFoundError` without matplotlib.
    """
    from tracekit.outfile import check_output

    check_output(output, run_dirs, create_parent=True)
    kernels, ceilings, nsys_shares = roofline_data(run_dirs, params)
    nsys_runs = {run for run, _ in nsys_shares}
    if not kernels:
        raise InputError("no ncu launches in the run folder(s): convert an ncu CSV or .ncu-rep into them")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ToolNotFoundError("plots need matplotlib: pip install 'tracekit[plot]'") from None

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
    if not points:
        name, why = next(iter(skipped.items()))
        raise InputError(f"nothing to plot: no kernel has both FLOP and byte counters "
                         f"(e.g. {_short(name, escape=False)}: {why}); "
                         "`tracekit query roofline` lists what each kernel lacks")

    fig, ax = plt.subplots(figsize=(9, 6.5), dpi=120)
    xs = [i for _, lv, _ in points for _, i in lv]
    ys = [k["flop_per_s"] for k, _, _ in points]
    peaks = [c[p] for c in ceilings for p, _ in PRECISIONS if c[p]]
    bws = [c[lv] for c in ceilings for lv, _, _ in LEVELS if c[lv]]
    x_lo = min(xs + [p / b for p in peaks for b in bws] or xs) / 10
    x_hi = max(xs + [p / b for p in peaks for b in bws] or xs) * 10
    styles = ["-", "--", ":", "-."]
    level_colors = {"dram": "tab:red", "l2": "tab:green", "l1": "tab:blue"}
    for di, c in enumerate(ceilings):
        prefix = f"{plain(c['device_name'])} " if len(ceilings) > 1 else ""
        ls = styles[di % len(styles)]
        top_peak = max([c[p] for p, _ in PRECISIONS if c[p]], default=None)
        for p, label in PRECISIONS:
            if c[p]:
                lab = f"{label}{' ' + c['tensor_datatype'] if p == 'tensor' and c['tensor_datatype'] else ''}"
                ax.hlines(c[p], x_lo, x_hi, colors="0.25", linestyles=ls, linewidth=1.2)
                ax.text(x_hi / 1.2, c[p] * 1.08, f"{prefix}{lab} {c[p] / 1e12:.3g} TFLOP/s", va="bottom",
                        ha="right", fontsize=7, color="0.2")
        for lv, label, _ in LEVELS:
            bw = c[lv]
            if not bw:
                continue
            cap = top_peak or max(ys) * 10
            x_end = cap / bw
            ax.plot([x_lo, x_end], [x_lo * bw, cap], color=level_colors[lv], linestyle=ls, linewidth=1.2,
                    label=f"{prefix}{label} {bw / 1e9:,.0f} GB/s")
    cmap = plt.get_cmap("tab10")
    ranked = sorted(points, key=lambda p: -p[2])
    for i, (k, levels, share) in enumerate(ranked):
        color = cmap(i % 10)
        size = 30 + 1500 * share
        for lv, inten in levels:
            marker = dict((a, m) for a, _, m in LEVELS)[lv]
            ax.scatter([inten], [k["flop_per_s"]], s=size, marker=marker, color=color, alpha=0.75,
                       edgecolors="black", linewidths=0.5, zorder=3)
        if i < top:
            inten = levels[0][1]
            ax.annotate(f"{_short(k['kernel_name'])} ({100 * share:.0f}%)", (inten, k["flop_per_s"]),
                        textcoords="offset points", xytext=(8, 4 + 9 * (i % 3)), fontsize=7, color=color)
    for lv, label, marker in LEVELS:
        ax.scatter([], [], marker=marker, color="0.5", edgecolors="black", label=f"kernel at {label} intensity")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_all = ys + peaks
    ax.set_ylim(min(ys) / 10, max(y_all) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    basis = "nsys kernel time" if nsys_runs else "ncu kernel time"
    ax.set_title(title or f"Hierarchical roofline (point area: share of {basis})")
    ax.grid(True, which="major", linewidth=0.3)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    _save(fig, Path(output), protect=run_dirs)
    plt.close(fig)
    return {"plotted": [k["kernel_name"] for k, _, _ in points], "skipped": skipped}


def _save(fig, out: Path, protect=()) -> None:
    """Write ``fig`` to ``out`` by the rules of :func:`tracekit.outfile.write_output` (format from
    the suffix, PNG without one)."""
    from tracekit.outfile import write_output

    fmt = out.suffix.lstrip(".").lower() or "png"
    try:
        write_output(out, lambda f: fig.savefig(f, format=fmt), protect, create_parent=True)
    except ValueError as exc:  # an image format matplotlib does not know
        raise InputError(f"cannot write the plot: {' '.join(str(exc).split())}", path=out) from None
