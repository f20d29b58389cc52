"""``tracekit plot steps``: step time per training step and rank, and the time of each phase.

Data: the ``step_summary`` named query (steps are the `step N` NVTX ranges; phases the `data`,
`forward`, `backward`, `optimizer` and `comm ...` ranges inside them; GPU busy time from the
kernels). Top: the wall time of every step, one line per rank (more than :data:`MAX_RANK_LINES`
ranks: the median with the min-max band). On a job with collectives, below it: the time each rank
waited at collectives in each step (the ``step_waits`` query, from the arrivals ``stragglers``
judges), so a straggler is the rank whose line stays at 0 while the others wait for it. Bottom:
each phase's time per step (mean over ranks); phases may overlap (communication runs during the
backward pass), so they are drawn side by side, not stacked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

MAX_RANK_LINES = 8
PHASES = (("data_ns", "data"), ("forward_ns", "forward"), ("backward_ns", "backward"),
          ("optimizer_ns", "optimizer"), ("comm_ns", "comm"), ("gpu_busy_ns", "gpu_busy"))


def steps_data(run_dirs: Sequence[str | os.PathLike], *, include_warmup: bool = True):
    """(step_summary rows, GPU names, run ids) of ``run_dirs``."""
    rows, _, gpus, runs = steps_and_waits(run_dirs, include_warmup=include_warmup)
    return rows, gpus, runs


def steps_and_waits(run_dirs: Sequence[str | os.PathLike], *, include_warmup: bool = True):
    """(step_summary rows, step_waits rows, GPU names, run ids) of ``run_dirs``, one session."""
    from tracekit.query import Session

    params = {"include_warmup": str(include_warmup).lower()}
    with Session(run_dirs) as eng:
        rows = eng.query("step_summary", params).to_pylist()
        waits = eng.query("step_waits", params).to_pylist()
        return rows, waits, style.gpu_names(eng), [r.run_id for r in eng.runs]


def _wait_panel(ax, waits: list[dict], many_runs: bool) -> None:
    """Per rank, the time it waited at collectives in each step (step_waits.wait_ns): a line per
    rank up to :data:`MAX_RANK_LINES` ranks, else the median and min-max band with the line of
    the rank that waited least (a straggler waits for nobody)."""
    import numpy as np

    div, unit = style.time_unit(max(max(r["wait_ns"] for r in waits), 1))
    series: dict[tuple, list[dict]] = {}
    for r in waits:
        series.setdefault((r["run_id"], r["rank"]), []).append(r)
    steps = sorted({r["step"] for r in waits})
    if len(series) > MAX_RANK_LINES:
        per = {st: [r["wait_ns"] / div for r in waits if r["step"] == st] for st in steps}
        ax.fill_between(steps, [min(per[s]) for s in steps], [max(per[s]) for s in steps], alpha=0.3,
                        label=f"min-max over {len(series)} ranks")
        ax.plot(steps, [float(np.median(per[s])) for s in steps], marker="o", ms=3, label="median rank")
        least = min(series, key=lambda k: sum(r["wait_ns"] for r in series[k]))
        series = {least: series[least]}
    for (run_id, rank), s in series.items():
        s = sorted(s, key=lambda r: r["step"])
        lab = f"rank {rank}" + (" (waits least)" if len(series) == 1 and len(steps) else "")
        ax.plot([r["step"] for r in s], [r["wait_ns"] / div for r in s], marker="o", ms=3,
                label=style.text(f"{run_id} {lab}" if many_runs else lab))
    flagged = []  # (step, row) of the rank the others wait for: it waits least, under half the median
    for st in steps:
        here = [r for r in waits if r["step"] == st]
        low = min(here, key=lambda r: r["wait_ns"])
        if len(here) > 1 and low["wait_ns"] < 0.5 * float(np.median([r["wait_ns"] for r in here])):
            flagged.append((st, low))
    if flagged and len({r["rank"] for _, r in flagged}) == 1:  # one label: the same rank every time
        worst = max(r["wait_ns"] for _, r in flagged) / div
        every = "every step" if len(flagged) == len(steps) else f"{len(flagged)} of {len(steps)} steps"
        ax.annotate(style.text(f"rank {flagged[0][1]['rank']} waits at most {worst:.3g} {unit}: {every}"),
                    (flagged[0][0], flagged[0][1]["wait_ns"] / div), textcoords="offset points",
                    xytext=(4, 6), fontsize=7)
    else:
        for st, r in flagged:
            ax.annotate(style.text(f"rank {r['rank']}"), (st, r["wait_ns"] / div), textcoords="offset points",
                        xytext=(4, 6), fontsize=7)
    ax.set_ylabel(f"waiting at\ncollectives ({unit})")
    top = max(r["wait_ns"] for r in waits) / div
    ax.set_ylim(-0.05 * top, 1.15 * top if top > 0 else 1)  # a rank at 0 stays visible
    ax.grid(alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("time each rank waited at collectives for the last arrival (step_waits); "
                 "a straggler waits for nobody", fontsize=8)
    ax.legend(fontsize=7, ncol=min(8, len(series) + 2), loc="upper center", bbox_to_anchor=(0.5, -0.25),
              frameon=False)


def plot_steps(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *,
               include_warmup: bool = True, title: str | None = None) -> dict:
    """Draw step times and phases into ``output``. Returns ``{"steps": n, "ranks": n,
    "phases": [drawn phases]}``. :class:`InputError` when the runs have no `step N` ranges."""
    import numpy as np

    rows, waits, gpus, runs = steps_and_waits(run_dirs, include_warmup=include_warmup)
    if not rows:
        raise InputError("nothing to plot: no training steps in the run folder(s) (step_summary finds "
                         "none; docs/metrics.md, Steps, says what counts as a step)", path=style.single(run_dirs))
    plt = style.pyplot()
    many_runs = len(runs) > 1
    by_series: dict[tuple, list[dict]] = {}
    for r in rows:
        by_series.setdefault((r["run_id"], r["rank"], r["pid"]), []).append(r)
    phases = [(col, name) for col, name in PHASES if any(r[col] for r in rows)]
    panels = 1 + bool(waits) + bool(phases)
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.8 + 3.0 * (panels - 1)), squeeze=False)
    ax = axes[0, 0]
    if waits:
        _wait_panel(axes[1, 0], waits, many_runs)
    div, unit = style.time_unit(max(r["wall_ns"] for r in rows))
    steps = sorted({r["step"] for r in rows})
    if len(by_series) <= MAX_RANK_LINES:
        for (run_id, rank, pid), s in by_series.items():
            lab = f"rank {rank}" if rank is not None else f"pid {pid}"
            s = sorted(s, key=lambda r: r["step"])
            ax.plot([r["step"] for r in s], [r["wall_ns"] / div for r in s], marker="o", ms=3,
                    label=style.text(f"{run_id} {lab}" if many_runs else lab))
        # above the panel, never over the lines (a 220 ms rank ran under it)
        ax.legend(fontsize=7, ncol=min(4, len(by_series)), loc="lower center", bbox_to_anchor=(0.5, 1.0),
                  frameon=False)
    else:
        per = {st: [r["wall_ns"] / div for r in rows if r["step"] == st] for st in steps}
        ax.fill_between(steps, [min(per[s]) for s in steps], [max(per[s]) for s in steps], alpha=0.3,
                        label=f"min-max over {len(by_series)} ranks")
        ax.plot(steps, [float(np.median(per[s])) for s in steps], marker="o", ms=3, label="median rank")
        ax.legend(fontsize=7, ncol=2, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    warm = sorted({r["step"] for r in rows if r["warmup"]})
    if warm:
        ax.axvspan(min(warm) - 0.5, max(warm) + 0.5, color="0.9", zorder=0)
        ax.text(min(warm) - 0.4, ax.get_ylim()[1], "warm-up", va="top", fontsize=7, color="0.4")
    ax.set_xlabel("step")
    ax.set_ylabel(f"step wall time ({unit})")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.xaxis.get_major_locator().set_params(integer=True)
    if phases:
        axp = axes[panels - 1, 0]
        width = 0.8 / len(phases)
        for i, (col, name) in enumerate(phases):
            vals = []
            for st in steps:
                v = [float(r[col]) for r in rows if r["step"] == st and r[col] is not None]
                vals.append(sum(v) / len(v) / div if v else 0)
            axp.bar([s - 0.4 + width * (i + 0.5) for s in steps], vals, width=width,
                    color=style.PHASE_COLORS[name], label="GPU busy (kernels, copies)" if name == "gpu_busy" else name)
        axp.set_xlabel("step")
        axp.set_ylabel(f"time per step ({unit}, mean over ranks)")
        axp.legend(fontsize=7, ncol=len(phases), loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
        axp.grid(alpha=0.3, axis="y")
        axp.set_xticks(steps if len(steps) <= 30 else steps[:: max(1, len(steps) // 30)])
        axp.set_title("phases (NVTX ranges inside each step; they may overlap, e.g. comm during backward)", fontsize=8)
    if not gpus and all(r["gpu_busy_ns"] is None for r in rows):
        gpus = ["CPU trace (no kernels captured)"]
    fig.suptitle(title or style.run_title("Step time", runs, gpus), fontsize=10)
    fig.tight_layout()
    style.save(fig, output, protect=run_dirs)
    return {"steps": len(steps), "ranks": len(by_series), "phases": [n for _, n in phases],
            "waits": len({(r["run_id"], r["rank"]) for r in waits})}
