"""``tracekit plot scaling-loss STUDY_DIR``: why each run of a study is slower than its baseline.

Data: the study's ``scaling_loss`` table (``STUDY_DIR/scaling_loss.parquet``, written by
``tracekit study``; docs/study.md). One waterfall per run: the baseline's step time, then each
part (skew, exposed_comm, host_launch, compute_inflation, data, idle, residual) as a step up
(loss, red) or down (gain, green) -- the residual hatched -- and the run's own step time. The
value axis is zoomed on the steps (its start is written under it) so that a part of 1 % of the
step stays visible.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from tracekit.errors import InputError
from tracekit.plots import style

PARTS = ("skew", "exposed_comm", "host_launch", "compute_inflation", "data", "idle", "residual")
MAX_RUNS = 12
_UP, _DOWN, _TOTAL, _RESID = "#c44e52", "#55a868", "#4c72b0", "#8c8c8c"


def _one(ax, rows: pd.DataFrame) -> None:
    """One run's waterfall on ``ax``."""
    r0 = rows.iloc[0]
    parts = rows.set_index("part").reindex(list(PARTS))
    base, step, delta = float(r0.baseline_step_ns), float(r0.step_ns), float(r0.delta_ns)
    scale, unit = style.time_unit(max(base, step))
    levels = [base]
    for p in PARTS:
        levels.append(levels[-1] + float(parts.at[p, "ns"] if pd.notna(parts.at[p, "ns"]) else 0.0))
    lo, hi = min(levels + [step]), max(levels + [step])
    span = max(hi - lo, 1e-9 * max(base, 1.0), 1.0)
    bottom = max(0.0, lo - 0.6 * span)
    labels = ["baseline"] + [p.replace("_", "\n") for p in PARTS] + ["run"]
    xs = range(len(labels))
    ax.bar(0, (base - bottom) / scale, bottom=bottom / scale, color=_TOTAL, width=0.7)
    ax.bar(len(labels) - 1, (step - bottom) / scale, bottom=bottom / scale, color=_TOTAL, width=0.7)
    for i, p in enumerate(PARTS, start=1):
        a, b = levels[i - 1], levels[i]
        v = b - a
        color = _RESID if p == "residual" else (_UP if v > 0 else _DOWN)
        if v:
            ax.bar(i, abs(v) / scale, bottom=min(a, b) / scale, color=color, width=0.7,
                   hatch="//" if p == "residual" else None,
                   edgecolor="white" if p == "residual" else None)
        ax.plot([i - 1.35, i + 0.35], [a / scale, a / scale], color="#999", lw=0.6)
        if p == "residual":  # always drawn: the attribution's error, never hidden
            ax.text(i, max(a, b) / scale, f"{v / scale:+.3g}\n{100 * v / delta if delta else 0:.1f}%",
                    ha="center", va="bottom", fontsize=6.5, color="#555")
        elif delta and abs(v) >= 0.005 * abs(delta):
            ax.text(i, max(a, b) / scale, f"{v / scale:+.3g}\n{100 * v / delta:.0f}%", ha="center",
                    va="bottom", fontsize=6.5)
    import math

    dec = max(0, min(4, 1 - math.floor(math.log10(max(span / scale, 1e-12)))))  # shows the delta
    for i, v in ((0, base), (len(labels) - 1, step)):
        ax.text(i, v / scale, f"{v / scale:,.{dec}f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylim(bottom / scale, (hi + 0.35 * span) / scale)
    ax.set_ylabel(f"step time ({unit})")
    ax.set_title(style.text(f"{r0.run} (world size {int(r0.world_size)}) vs {r0.baseline_run}: "
                            f"{delta / scale:+.4g} {unit} per step", 160), fontsize=9)
    if bottom > 0:
        ax.text(0.0, -0.22, f"axis starts at {bottom / scale:.4g} {unit}", transform=ax.transAxes,
                fontsize=7, color="#555")


def waterfall_figure(plt, table: pd.DataFrame):
    """The figure of the ``scaling_loss`` table (one panel per run, at most :data:`MAX_RUNS`)."""
    runs = list(dict.fromkeys(table["run"]))[:MAX_RUNS]
    cols = 1 if len(runs) == 1 else 2
    nrows = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(7.5 * cols, 3.6 * nrows), squeeze=False)
    for ax, run in zip(axes.flat, runs):
        _one(ax, table[table["run"] == run])
    for ax in list(axes.flat)[len(runs):]:
        ax.set_visible(False)
    n = len(dict.fromkeys(table["run"]))
    fig.suptitle("Why scaling loses: each run's step time against its baseline" +
                 (f" (first {MAX_RUNS} of {n} runs)" if n > MAX_RUNS else ""), fontsize=10)
    fig.tight_layout()
    return fig


def plot_scaling_loss(study_dir: str | os.PathLike, output: str | os.PathLike, *,
                      title: str | None = None) -> dict:
    """Draw the waterfall of ``study_dir``'s scaling_loss table into ``output``; returns
    ``{"runs": n}``. :class:`InputError` when the folder has no such table or it is empty."""
    import pyarrow.parquet as pq

    path = Path(study_dir) / "scaling_loss.parquet"
    if not path.is_file():
        raise InputError("no scaling_loss.parquet: not a study folder (tracekit study -o DIR "
                         "writes one)", path=study_dir)
    try:
        table = pq.read_table(path).to_pandas()
    except Exception as exc:  # noqa: BLE001 - a damaged file: one line, exit 2
        raise InputError(f"cannot read the scaling_loss table: {exc}", path=path) from None
    missing = {"run", "baseline_run", "part", "ns", "delta_ns", "step_ns", "baseline_step_ns",
               "world_size"} - set(table.columns)
    if missing:
        raise InputError(f"the scaling_loss table lacks column(s) {', '.join(sorted(missing))}", path=path)
    if table.empty:
        raise InputError("nothing to plot: the study's scaling_loss table is empty (no run has a "
                         "baseline of the same workload at a smaller world size)", path=study_dir)
    plt = style.pyplot()
    fig = waterfall_figure(plt, table)
    if title:
        fig.suptitle(style.text(title), fontsize=10)
    style.save(fig, output, protect=[study_dir])
    return {"runs": len(dict.fromkeys(table["run"]))}
