"""The study's MLPerf figure (``tracekit study``, docs/mlperf.md): MLPerf time-to-train speedup
and scaling efficiency against the number of accelerators, one line per round, submitter,
benchmark and accelerator model, from the study's ``mlperf_scaling`` table (the named query of
that name). The dashed line is perfect scaling (speedup = the accelerator ratio). A system with
no smaller one in its series (its own baseline) is in the table, not the figure."""

from __future__ import annotations

import pandas as pd

from tracekit.plots import style

TITLE = "MLPerf time to train: speedup and scaling efficiency against accelerators (result logs)"
MAX_SERIES = 12


def mlperf_figure(plt, df: pd.DataFrame):
    """Two panels (speedup, efficiency) against accelerators, log-scaled; returns the figure."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    keys = ["round", "submitter", "benchmark", "accelerator_model"]
    d = df.copy()
    for k in keys:
        d[k] = d[k].astype("object").where(d[k].notna(), "?")
    # a system alone in its series (no smaller one to compare with) is a row of the table only
    groups = [(k, g) for k, g in d.groupby(keys, sort=True) if len(g) > 1]
    for (rnd, sub, bench, acc), g in groups[:MAX_SERIES]:
        g = g.sort_values("accelerators")
        x = g["accelerators"].astype(float)
        label = style.text(f"v{rnd} {sub} {bench} ({str(acc)[:28]})")
        line, = a1.plot(x, g["speedup"].astype(float), marker="o", label=label)
        a2.plot(x, g["scaling_efficiency"].astype(float), marker="o", color=line.get_color())
        base = float(x.iloc[0])
        a1.plot([base, float(x.iloc[-1])], [1.0, float(x.iloc[-1]) / base], ls="--", lw=0.8,
                color=line.get_color(), alpha=0.6)
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("accelerators")
        ax.grid(True, which="both", alpha=0.3)
    a1.set_yscale("log", base=2)
    a1.set_ylabel("speedup of time to train (x, vs the smallest system)")
    a2.set_ylabel("scaling efficiency (speedup / accelerator ratio)")
    a2.set_ylim(0, 1.05)
    a1.set_title("speedup (dashed: perfect scaling)", fontsize=9)
    a2.set_title("scaling efficiency", fontsize=9)
    fig.suptitle(style.text(TITLE), fontsize=10)
    a1.legend(fontsize=7, loc="upper left")
    if len(groups) > MAX_SERIES:
        fig.text(0.01, -0.02, f"first {MAX_SERIES} of {len(groups)} series shown; all in "
                 "mlperf_scaling.csv", fontsize=7, va="top")
    fig.tight_layout()
    return fig
