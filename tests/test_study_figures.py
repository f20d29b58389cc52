"""Study figures say why a panel is empty, use integer world-size ticks, keep legends off the
points and mark characterization points by their source (issue 28)."""

from __future__ import annotations

import math

import pandas as pd

import tracekit.plots.study as sf


def _capture(monkeypatch):
    figs = []

    def keep(fig):
        figs.append(fig)
        return "png"
    monkeypatch.setattr(sf, "_png", keep)
    return figs


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def test_empty_panel_says_why_and_world_sizes_are_integers(monkeypatch):
    figs = _capture(monkeypatch)
    df = pd.DataFrame({"workload": ["a", "a"], "precision": ["fp32", "fp32"], "interconnect": [None, None],
                       "world_size": [1.0, 16.0], "samples_per_s": [math.nan, math.nan],
                       "scaling_efficiency": [math.nan, math.nan]})
    sf._lines(sf._plt(), df, [("samples_per_s", "samples/s"), ("scaling_efficiency", "eff")], "t",
              {"samples_per_s": "no batch size"})
    [fig] = figs
    texts = _texts(fig)
    assert "no batch size" in texts and "no run has a value of eff" in texts
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "16"]  # not 1.0 / 16.0
    assert ax.get_xscale() == "log"  # 1 .. 16: evenly spaced powers of two, labels never touch


def test_legend_under_the_panels_and_labels_without_dot_zero(monkeypatch):
    figs = _capture(monkeypatch)
    df = pd.DataFrame({"workload": ["w"] * 2, "precision": ["bf16"] * 2, "interconnect": [None] * 2,
                       "world_size": [1.0, 2.0], "comm_share": [0.1, 0.2]})
    sf._lines(sf._plt(), df, [("comm_share", "share")], "t")
    [fig] = figs
    assert fig.legends and not fig.axes[0].get_legend()  # a figure legend, not one over the points
    assert sf._label_value(2.0) == "2" and sf._label_value(2.5) == "2.5"


def test_characterization_points_marked_by_source(monkeypatch):
    figs = _capture(monkeypatch)
    df = pd.DataFrame({"workload": ["gene", "mlp"], "precision": ["fp64", "fp32"], "suite": ["hpc", "micro"],
                       "flop_per_s": [2.2e11, 4e9], "dram_bytes_per_s": [7.9e11, 4.2e9],
                       "dram_transactions_per_s": [2.5e10, 1.3e8],
                       "source": ["ncu roofline (FLOP, dram_bytes, time_ns)", "operator model (op_flops)"]})
    sf._scatter(sf._plt(), df)
    [fig] = figs
    key = "\n".join(t.get_text() for t in fig.texts)
    assert "1: gene fp64 (ncu counters)" in key and "2: mlp fp32 (operator FLOP model)" in key
    faces = [tuple(c.get_facecolors()[0]) if len(c.get_facecolors()) else None
             for c in fig.axes[0].collections]
    assert faces[0] is not None and faces[0][3] > 0  # filled: ncu
    assert faces[1] is None or faces[1][3] == 0  # hollow: the operator model
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert len(labels) <= 6  # one tick per decade over 3 decades: no overlapping labels
