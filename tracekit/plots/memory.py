"""``tracekit plot memory``: allocated and reserved memory over time, one panel per device.

Data: the ``memory_timeline`` named query (per time bin the largest allocated and reserved totals,
so the highest point of a panel is ``memory_summary``'s run-wide peak), ``memory_summary`` (the
peak: its time, value and operator, marked on the panel) and ``step_summary`` (steps shaded).
Up to :data:`MAX_PANELS` devices are drawn, largest peak first; the figure says how many more
there are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

MAX_PANELS = 6


def byte_unit(max_bytes: float) -> tuple[float, str]:
    """(divisor, unit) so that values up to ``max_bytes`` read well: B, KiB, MiB or GiB."""
    for div, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if max_bytes >= 2 * div:
            return div, unit
    return 1.0, "B"


def memory_data(run_dirs: Sequence[str | os.PathLike], *, bins: int = 400, bin_ns: int = 0):
    """(memory_timeline rows, memory_summary scope 'run' rows, step rows, run ids)."""
    from tracekit.query import Session

    with Session(run_dirs) as eng:
        rows = eng.query("memory_timeline", {"bins": str(bins), "bin_ns": str(bin_ns)}).to_pylist()
        peaks = [r for r in eng.query("memory_summary").to_pylist() if r["scope"] == "run"]
        steps = eng.query("step_summary").to_pylist() if rows else []
        return rows, peaks, steps, [r.run_id for r in eng.runs]


def _label(key, many_runs: bool) -> str:
    run_id, rank, pid, device, source = key
    who = f"rank {rank} " if rank is not None else (f"pid {pid} " if pid is not None else "")
    lab = f"{who}{device} ({source})"
    return f"{run_id} {lab}" if many_runs else lab


def plot_memory(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *, bins: int = 400,
                bin_ns: int = 0, title: str | None = None) -> dict:
    """Draw memory over time into ``output``. Returns ``{"devices": shown, "of": all, "bins": n,
    "bin_ns": width, "peaks": {label: bytes}}``. :class:`InputError` when no run has memory events."""
    rows, peaks, steps, runs = memory_data(run_dirs, bins=bins, bin_ns=bin_ns)
    if not rows:
        raise InputError("nothing to plot: the run folder(s) hold no memory events (record them "
                         "with `tracekit collect --profile-memory`, torch.profiler "
                         "profile_memory=True, or nsys --cuda-memory-usage=true)",
                         path=style.single(run_dirs))
    plt = style.pyplot()
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        series.setdefault((r["run_id"], r["rank"], r["pid"], r["device"], r["source"]), []).append(r)
    peak_of = {(p["run_id"], p["rank"], p["pid"], p["device"], p["source"]): p for p in peaks}
    keys = sorted(series, key=lambda k: -(peak_of[k]["peak_allocated_bytes"] if k in peak_of else 0))
    shown = keys[:MAX_PANELS]
    # each run on its own clock: time from the run's first memory event (runs' clocks differ)
    first = {k[0]: min(r["bin_start_ns"] for r in series[k]) for k in series}
    last = {k[0]: max(r["bin_start_ns"] + r["bin_ns"] for r in series[k]) for k in series}
    t_span = max(last[k[0]] - first[k[0]] for k in shown)
    div, unit = style.time_unit(t_span)
    many_runs = len(runs) > 1
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 1.4 + 2.0 * len(shown)), sharex=not many_runs,
                             squeeze=False)
    out_peaks = {}
    for ax, key in zip(axes[:, 0], shown):
        s = series[key]
        t0, t1 = first[key[0]], last[key[0]]
        top = max(max(r["max_reserved_bytes"] or 0, r["max_allocated_bytes"] or 0) for r in s)
        bdiv, bunit = byte_unit(top)
        xs = [(r["bin_start_ns"] - t0) / div for r in s] + [(s[-1]["bin_start_ns"] + s[-1]["bin_ns"] - t0) / div]
        xs[-1] = min(xs[-1], (t1 - t0) / div)
        for st in steps:
            if st["run_id"] == key[0] and (key[2] is None or st["pid"] == key[2]):
                a = (st["start_ns"] - t0) / div
                ax.axvspan(a, a + st["wall_ns"] / div, color="0.85" if st["step"] % 2 else "0.93", lw=0, zorder=0)
        if any(r["max_reserved_bytes"] for r in s):  # none for nsys; 0 for the CPU allocator
            ax.stairs([(r["max_reserved_bytes"] or 0) / bdiv for r in s], xs, color="#dd8452", lw=1.2,
                      baseline=None, label="reserved (caching allocator)", zorder=2)
        ax.stairs([(r["max_allocated_bytes"] or 0) / bdiv for r in s], xs, fill=True, color="#4c72b0",
                  alpha=0.8, label="allocated (max in bin)", zorder=3)
        p = peak_of.get(key)
        if p is not None:
            px, py = (p["peak_at_ns"] - t0) / div, p["peak_allocated_bytes"] / bdiv
            ax.plot([px], [py], marker="v", color="#c44e52", ms=7, zorder=4)
            parts = (f"step {p['peak_step']}" if p["peak_step"] is not None else None, p["peak_phase"],
                     style.short(p["peak_op"], 40) if p["peak_op"] else None)
            where = ", ".join(str(v) for v in parts if v)
            pdiv, punit = byte_unit(p["peak_allocated_bytes"])
            value = f"{p['peak_allocated_bytes'] / pdiv:.4g} {punit}"
            ax.annotate(style.text(f"peak {value}" + (f" ({where})" if where else "")), (px, py),
                        xytext=(6, -2), textcoords="offset points", fontsize=7, color="#c44e52", va="top",
                        bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})
            out_peaks[_label(key, many_runs)] = p["peak_allocated_bytes"]
        ax.set_ylim(0, top / bdiv * 1.15 if top else 1)
        ax.set_ylabel(f"{style.text(_label(key, many_runs))}\n{bunit}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7, ncol=2)
    for ax in axes[:, 0] if many_runs else axes[-1:, 0]:
        ax.set_xlabel(f"time since the run's first memory event ({unit}); shaded: training steps", fontsize=8)
    widths = sorted({r["bin_ns"] for r in rows})
    width = widths[0]
    w_div, w_unit = style.time_unit(width)
    note = (f"bins of {width / w_div:g} {w_unit}" if len(widths) == 1 else "bins chosen per run") + \
        "; the highest allocated total in each bin"
    if len(keys) > len(shown):
        note += f"; {len(keys) - len(shown)} more device(s) with smaller peaks not shown (memory_summary lists all)"
    fig.suptitle(title and style.text(title) or style.run_title("Memory over time", runs, []).replace(
        " · GPU model not recorded", ""), fontsize=10)
    fig.text(0.5, 0.005, style.text(note), ha="center", va="bottom", fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    style.save(fig, output, protect=run_dirs)
    return {"devices": len(shown), "of": len(keys), "bins": max(len(s) for s in series.values()),
            "bin_ns": width, "peaks": out_peaks}
