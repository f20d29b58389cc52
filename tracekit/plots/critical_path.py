"""``tracekit plot critical-path``: what each step's critical path is made of.

Data: the ``critical_path_summary`` named query (the replay's critical path of every step,
docs/whatif.md). Top: per step, the share of the step's wall time of each category (kernel,
memcpy, memset, collective transfer, host, launch, sync wait, stream wait, other), stacked to
100 %, the wall time above each bar. Bottom (jobs of several ranks): the share of each rank on
the path, stacked the same way -- the straggler owns most of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

CATEGORIES = ("kernel", "memcpy", "memset", "collective transfer", "host", "launch", "sync wait",
              "stream wait", "other")
COLORS = {"kernel": "#4c72b0", "memcpy": "#55a868", "memset": "#8c8c8c",
          "collective transfer": "#dd8452", "host": "#c44e52", "launch": "#8172b3",
          "sync wait": "#ccb974", "stream wait": "#64b5cd", "other": "#dddddd"}
MAX_STEPS = 60


def critical_path_data(run_dirs: Sequence[str | os.PathLike]):
    from tracekit.query import Session

    with Session(run_dirs) as eng:
        rows = eng.query("critical_path_summary").to_pylist()
        return rows, style.gpu_names(eng), [r.run_id for r in eng.runs]


def _stack(ax, xs, keys, share, colors, labels):
    bottom = [0.0] * len(xs)
    for k in keys:
        vals = [share.get((x, k), 0.0) for x in xs]
        if not any(vals):
            continue
        ax.bar(range(len(xs)), vals, bottom=bottom, color=colors(k), label=labels(k), width=0.8)
        bottom = [b + v for b, v in zip(bottom, vals)]


def plot_critical_path(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *,
                       title: str | None = None) -> dict:
    """Draw the critical path's share by category (and by rank for jobs) per step into
    ``output``. Returns ``{"steps": n, "ranks": n, "categories": [drawn]}``.
    :class:`InputError` when the runs have no steps to replay."""
    rows, gpus, runs = critical_path_data(run_dirs)
    if not rows:
        raise InputError("nothing to plot: no steps to replay in the run folder(s) (step_summary "
                         "finds none; docs/whatif.md)", path=style.single(run_dirs))
    plt = style.pyplot()
    many_runs = len(runs) > 1
    xs = sorted({(r["run_id"], r["step"]) for r in rows})[:MAX_STEPS]
    keep = set(xs)
    rows = [r for r in rows if (r["run_id"], r["step"]) in keep]
    wall = {(r["run_id"], r["step"]): r["wall_ns"] for r in rows}
    by_cat: dict = {}
    by_rank: dict = {}
    for r in rows:
        x = (r["run_id"], r["step"])
        by_cat[(x, r["category"])] = by_cat.get((x, r["category"]), 0.0) + r["share_pct"]
        by_rank[(x, r["rank"])] = by_rank.get((x, r["rank"]), 0.0) + r["share_pct"]
    ranks = sorted({r["rank"] for r in rows}, key=lambda v: (v is None, v))
    fig, axes = plt.subplots(2 if len(ranks) > 1 else 1, 1, squeeze=False,
                             figsize=(10, 6.8 if len(ranks) > 1 else 3.8))
    ax = axes[0, 0]
    _stack(ax, xs, CATEGORIES, by_cat, COLORS.get, str)
    div, unit = style.time_unit(max(wall.values()))
    for i, x in enumerate(xs):
        ax.text(i, 101, f"{wall[x] / div:.3g}", ha="center", va="bottom", fontsize=6)
    labels = [style.text(f"{x[0]} {x[1]}" if many_runs else str(x[1])) for x in xs]
    ax.set_xticks(range(len(xs)), labels, fontsize=7, rotation=90 if many_runs else 0)
    ax.set_ylim(0, 112)
    ax.set_ylabel("share of step wall time (%)")
    ax.set_title(f"critical path by category (step wall time in {unit} above each bar)", fontsize=8)
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    if len(ranks) > 1:
        axr = axes[1, 0]
        cmap = plt.get_cmap("tab20")
        _stack(axr, xs, ranks, by_rank, lambda k: cmap(ranks.index(k) % 20), lambda k: f"rank {k}")
        axr.set_xticks(range(len(xs)), labels, fontsize=7, rotation=90 if many_runs else 0)
        axr.set_ylim(0, 105)
        axr.set_ylabel("share of step wall time (%)")
        axr.set_title("critical path by rank (a job's path crosses ranks at collectives)", fontsize=8)
        axr.legend(fontsize=7, ncol=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    (axes[-1, 0]).set_xlabel("step")
    fig.suptitle(title or style.run_title("Critical path", runs, gpus), fontsize=10)
    fig.tight_layout()
    style.save(fig, output, protect=run_dirs)
    drawn = [c for c in CATEGORIES if any(by_cat.get((x, c)) for x in xs)]
    return {"steps": len(xs), "ranks": len(ranks), "categories": drawn}
