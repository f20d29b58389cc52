"""``tracekit plot kernels``: where GPU time goes: the share of each category (compute kernels,
NCCL kernels, memcpy, memset) and the top kernels by total time, coloured by category.

Data: the ``gpu_time_breakdown`` named query (kernel totals equal ``kernel_summary``'s; shares
are of the run's summed GPU activity time).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tracekit.errors import InputError
from tracekit.plots import style

CATEGORIES = ("compute", "nccl", "memcpy", "memset")


def kernels_data(run_dirs: Sequence[str | os.PathLike], *, top: int = 15):
    from tracekit.query import Session

    with Session(run_dirs) as eng:
        rows = eng.query("gpu_time_breakdown", {"top": str(top)}).to_pylist()
        return rows, style.gpu_names(eng), [r.run_id for r in eng.runs]


def plot_kernels(run_dirs: Sequence[str | os.PathLike], output: str | os.PathLike, *, top: int = 15,
                 title: str | None = None) -> dict:
    """Draw the GPU-time breakdown and top ``top`` names into ``output``. Returns
    ``{"runs": [run ids drawn], "names": n}``. :class:`InputError` without GPU activity."""
    rows, gpus, runs = kernels_data(run_dirs, top=top)
    drawn = [r for r in runs if any(x["run_id"] == r for x in rows)]
    if not drawn:
        raise InputError("nothing to plot: the run folder(s) hold no kernels, memcpy or memset",
                         path=style.single(run_dirs))
    plt = style.pyplot()
    n_names = max(sum(1 for x in rows if x["run_id"] == r and x["level"] == "name") for r in drawn)
    fig, axes = plt.subplots(len(drawn), 2, figsize=(11, 0.9 + len(drawn) * max(3.2, 0.6 + 0.3 * n_names)),
                             gridspec_kw={"width_ratios": [1, 4.2]}, squeeze=False)
    for (ax_c, ax_n), run in zip(axes, drawn):
        cats = {x["category"]: x for x in rows if x["run_id"] == run and x["level"] == "category"}
        bottom = 0.0
        for c in CATEGORIES:
            if c not in cats:
                continue
            share = 100 * (cats[c]["share"] or 0)
            ax_c.bar([0], [share], bottom=bottom, color=style.CATEGORY_COLORS[c], width=0.6,
                     label=f"{style.CATEGORY_LABELS[c]} {share:.1f}%")
            if share >= 6:
                ax_c.text(0, bottom + share / 2, f"{share:.0f}%", ha="center", va="center", fontsize=7, color="white")
            bottom += share
        ax_c.set_xlim(-0.6, 0.6)
        ax_c.set_ylim(0, 100)
        ax_c.set_xticks([])
        ax_c.set_ylabel("share of GPU time (%)")
        ax_c.set_title(style.text(run) if len(drawn) > 1 else "by category", fontsize=8)
        ax_c.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=6.5, frameon=False)
        names = [x for x in rows if x["run_id"] == run and x["level"] == "name"]
        total = sum(x["total_ns"] for x in cats.values())
        div, unit = style.time_unit(max(x["total_ns"] for x in names))
        ys = range(len(names))
        ax_n.barh(list(ys), [x["total_ns"] / div for x in names],
                  color=[style.CATEGORY_COLORS[x["category"]] for x in names])
        ax_n.set_yticks(list(ys))
        kl = iter(style.kernel_labels([x["name"] for x in names if x["category"] in ("compute", "nccl")], 64))
        ax_n.set_yticklabels([next(kl) if x["category"] in ("compute", "nccl") else style.text(x["name"])
                              for x in names], fontsize=7)
        ax_n.set_ylim(max(len(names), 8) - 0.5, -0.5)  # top down; a short list keeps thin bars
        xmax = max(x["total_ns"] for x in names) / div
        ax_n.set_xlim(0, xmax * 1.18)
        for y, x in zip(ys, names):
            ax_n.text(x["total_ns"] / div + xmax * 0.01, y, f"{100 * (x['share'] or 0):.1f}%  ×{x['instances']:,}",
                      va="center", fontsize=6.5)
        ax_n.set_xlabel(f"total time ({unit}); label: share of GPU time, executions")
        ax_n.grid(alpha=0.3, axis="x")
        tdiv, tunit = style.time_unit(total)
        ax_n.set_title(f"top {len(names)} by total time (of {total / tdiv:,.1f} {tunit} summed GPU time)", fontsize=8)
    fig.suptitle(title or style.run_title("Where GPU time goes", drawn, gpus), fontsize=10)
    fig.tight_layout()
    style.save(fig, output, protect=run_dirs)
    return {"runs": drawn, "names": n_names}
