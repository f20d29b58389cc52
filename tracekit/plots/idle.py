"""``tracekit plot idle``: GPU idle time by cause per GPU, and the histogram of idle-gap lengths.

Data: the ``gpu_idle`` named query (scope 'run': each GPU from its first to its last activity;
causes host, sync, copy, other as that query defines them) and ``gpu_idle_gaps`` (the gaps it
sums, one row each).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

CAUSES = ("host", "sync", "copy", "other")


def idle_data(run_dirs: Sequence[str | os.PathLike]):
    from tracekit.query import Session

    with Session(run_dirs) as eng:
        idle = [r for r in eng.query("gpu_idle").to_pylist() if r["scope"] == "run"]
        gaps = eng.query("gpu_idle_gaps").to_pylist()
        return idle, gaps, style.gpu_names(eng), [r.run_id for r in eng.runs]


def plot_idle(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *,
              title: str | None = None) -> dict:
    """Draw idle time by cause and the gap-length histogram into ``output``. Returns
    ``{"gpus": n, "gaps": n}``. :class:`InputError` when no GPU has any activity."""
    idle, gaps, gpus, runs = idle_data(run_dirs)
    if not idle:
        raise InputError("nothing to plot: the run folder(s) hold no kernels, memcpy or memset",
                         path=style.single(run_dirs))
    plt = style.pyplot()
    many_runs = len(runs) > 1
    pids = {(r["run_id"], r["pid"]) for r in idle}
    labels = []
    for r in idle:
        lab = style.gpu_label(r["rank"], r["pid"], r["device_id"], many_pids=len(pids) > len(runs))
        labels.append(style.text(f"{r['run_id']} {lab}" if many_runs else lab))
    fig, (ax_b, ax_h) = plt.subplots(1, 2, figsize=(11, 2.4 + max(2.2, 0.32 * len(idle))),
                                     gridspec_kw={"width_ratios": [1.1, 1]})
    div, unit = style.time_unit(max(r["idle_ns"] for r in idle) or 1)
    left = [0.0] * len(idle)
    for c in CAUSES:
        vals = [(r[f"idle_{c}_ns"] or 0) / div for r in idle]
        ax_b.barh(range(len(idle)), vals, left=left, color=style.IDLE_COLORS[c], label=style.IDLE_LABELS[c])
        left = [a + b for a, b in zip(left, vals)]
    xmax = max(left) or 1
    for i, r in enumerate(idle):
        ax_b.text(left[i] + xmax * 0.01, i,
                  f"{100 * (r['idle_fraction'] or 0):.1f}% of {r['wall_ns'] / div:,.1f} {unit}",
                  va="center", fontsize=7)
    ax_b.set_xlim(0, xmax * 1.35)
    ax_b.set_yticks(range(len(idle)))
    ax_b.set_yticklabels(labels)
    ax_b.invert_yaxis()
    ax_b.set_xlabel(f"idle time ({unit}); label: idle share of the GPU's active span")
    ax_b.set_title("idle time by cause", fontsize=9)
    ax_b.grid(alpha=0.3, axis="x")
    ax_b.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=6.5, frameon=False)
    sizes = [g["gap_ns"] for g in gaps if g["gap_ns"] and g["gap_ns"] > 0]
    if sizes:
        lo, hi = math.floor(math.log10(min(sizes))), math.ceil(math.log10(max(sizes)))
        hi = max(hi, lo + 1)
        edges = [10 ** (lo + i / 4) for i in range(4 * (hi - lo) + 1)]
        data = [[g["gap_ns"] / 1e3 for g in gaps if g["cause"] == c and g["gap_ns"] > 0] for c in CAUSES]
        ax_h.hist(data, bins=[e / 1e3 for e in edges], stacked=True,
                  color=[style.IDLE_COLORS[c] for c in CAUSES], label=[c for c in CAUSES])
        ax_h.set_xscale("log")
        ax_h.set_xlabel("gap length (µs, log scale)")
        ax_h.set_ylabel("gaps (count, all GPUs)")
        ax_h.grid(alpha=0.3)
        ax_h.legend(fontsize=6.5, title="cause", title_fontsize=7)
    else:
        ax_h.text(0.5, 0.5, "no idle gaps", ha="center", va="center", transform=ax_h.transAxes)
        ax_h.set_xlabel("gap length (µs)")
        ax_h.set_ylabel("gaps (count)")
    ax_h.set_title(f"idle-gap lengths ({len(sizes):,} gaps)", fontsize=9)
    fig.suptitle(title or style.run_title("GPU idle time", runs, gpus), fontsize=10)
    fig.tight_layout()
    style.save(fig, output, protect=run_dirs)
    return {"gpus": len(idle), "gaps": len(sizes)}
