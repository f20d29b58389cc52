"""`tracekit plot utilization|kernels|steps|idle|roofline`: each figure is written from named
queries on the real fixtures (the shared 2-GPU H100 and 2xV100 NVLink nsys exports, an 8-rank
job built from the NCCL Kineto trace), decodes as a non-blank image, and the queries it draws
from agree with the tables they summarize (exact sums)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.jobs import rank8_run  # noqa: F401  (module fixture: the 8-rank Kineto job)
from helpers.roofline import GEMM, PEAKS, counts, ncu_tables
from helpers.runs import steps_run

from tracekit.cli import run as cli
from tracekit.errors import InputError
from tracekit.query.engine import Engine

pytest.importorskip("matplotlib")

H100 = "nsys2026_h100_2gpu_pytorch_slice"
V100 = "nsys2020.5_2xv100_p2p_nvlink"


def check_png(path: Path, min_w: int = 600) -> None:
    """A PNG that decodes, is at least min_w pixels wide, and is not blank (many colours)."""
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[1] >= min_w and img.shape[0] >= 250
    rgb = img[..., :3]
    assert (rgb < 0.95).any(axis=2).mean() > 0.02  # ink covers more than 2% of the picture
    assert len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 20


@pytest.fixture(scope="module")
def fixture_runs(request, nsys_run):
    runs = {s: nsys_run(s) for s in (H100, V100)}
    runs["rank8"] = request.getfixturevalue("rank8_run")
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["utilization", "kernels", "idle"])
def test_plot_kinds_on_the_fixture_runs(fixture_runs, tmp_path, kind, capsys):
    for name, run in fixture_runs.items():
        out = tmp_path / f"{kind}_{name}.png"
        assert cli(["plot", kind, str(run), "-o", str(out)]) == 0, capsys.readouterr().err
        assert f"wrote {out}" in capsys.readouterr().err
        check_png(out)
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left
    svg = tmp_path / f"{kind}.svg"
    assert cli(["plot", kind, str(fixture_runs[V100]), "-o", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<?xml")


def test_utilization_bins_sum_to_gpu_utilization(fixture_runs):
    for run in fixture_runs.values():
        with Engine([run]) as eng:
            bins = eng.query("gpu_utilization_timeline").to_pylist()
            whole = {(r["pid"], r["device_id"]): r for r in eng.query("gpu_utilization").to_pylist()
                     if r["scope"] == "run"}
        per = {}
        for b in bins:
            k = per.setdefault((b["pid"], b["device_id"]), [0, 0, 0])
            k[0] += b["kernel_busy_ns"]
            k[1] += b["busy_ns"]
            k[2] += b["wall_ns"]
            assert 0 <= b["utilization"] <= b["busy_fraction"] <= 1
        assert set(per) == set(whole)
        for key, (kb, b, wall) in per.items():
            # bins span the run's first to last activity over all GPUs: a GPU's own span fits in it
            assert (kb, b) == (whole[key]["kernel_busy_ns"], whole[key]["busy_ns"])
            assert wall >= whole[key]["wall_ns"]
        assert len({b["bin_ns"] for b in bins}) == 1 and len(bins) <= 200 * len(per)
    # H100 slice: 969.4 ms span / 200 bins = 4.85 ms -> the 1-2-5 step 5 ms
    with Engine([fixture_runs[H100]]) as eng:
        assert eng.query("gpu_utilization_timeline").to_pylist()[0]["bin_ns"] == 5_000_000
        assert eng.query("gpu_utilization_timeline", {"bin_ns": "1000000"}).to_pylist()[0]["bin_ns"] == 1_000_000


def test_idle_gaps_sum_to_gpu_idle(fixture_runs):
    for run in fixture_runs.values():
        with Engine([run]) as eng:
            gaps = eng.query("gpu_idle_gaps").to_pylist()
            idle = [r for r in eng.query("gpu_idle").to_pylist() if r["scope"] == "run"]
        for r in idle:
            # scope 'run' is the GPU's first to last activity; the gaps also cover the steps of its
            # process (a leading gap from a step's start), so clip them to the run window
            w0, w1 = r["window_start_ns"], r["window_start_ns"] + r["wall_ns"]
            mine = [(g["cause"], min(g["end_ns"], w1) - max(g["start_ns"], w0)) for g in gaps
                    if (g["pid"], g["device_id"]) == (r["pid"], r["device_id"])
                    and g["start_ns"] < w1 and g["end_ns"] > w0]
            assert len(mine) == r["gaps"]
            for cause in ("host", "sync", "copy", "other"):
                assert sum(n for c, n in mine if c == cause) == r[f"idle_{cause}_ns"]


def test_gpu_time_breakdown_matches_the_summaries(fixture_runs):
    for run in fixture_runs.values():
        with Engine([run]) as eng:
            br = eng.query("gpu_time_breakdown", {"top": "0"}).to_pylist()
            ks = {r["name"]: r for r in eng.query("kernel_summary").to_pylist()}
            mem = eng.sql("SELECT sum(end_ns - start_ns) AS t, count(*) AS n FROM memcpy").to_pylist()[0]
        names = {r["name"]: r for r in br if r["level"] == "name" and r["category"] in ("compute", "nccl")}
        assert set(names) == set(ks)
        assert all(names[n]["total_ns"] == ks[n]["total_ns"] and names[n]["instances"] == ks[n]["instances"]
                   for n in ks)
        cats = {r["category"]: r for r in br if r["level"] == "category"}
        assert sum(c["share"] for c in cats.values()) == pytest.approx(1.0)
        if mem["n"]:
            assert (cats["memcpy"]["total_ns"], cats["memcpy"]["instances"]) == (mem["t"], mem["n"])
    with Engine([fixture_runs["rank8"]]) as eng:
        cats = {r["category"]: r for r in eng.query("gpu_time_breakdown").to_pylist() if r["level"] == "category"}
    assert cats["nccl"]["instances"] == 8 * 21  # 21 NCCL kernels per rank (the collectives test)


def test_plot_steps_on_a_run_with_steps(run_factory, tmp_path, capsys):
    run = steps_run(run_factory)
    out = tmp_path / "steps.png"
    assert cli(["plot", "steps", str(run), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "4 steps, 2 ranks; phases: data, forward, backward, optimizer, comm, gpu_busy" in err
    check_png(out)
    from tracekit.plots.steps import steps_data

    rows, _, _ = steps_data([run])
    assert [(r["rank"], r["step"], r["wall_ns"], r["backward_ns"], r["comm_ns"], r["gpu_busy_ns"]) for r in rows
            if r["step"] == 2] == [(0, 2, 1_000_000, 500_000, 350_000, 400_000), (1, 2, 1_000_000, 500_000, 350_000, 400_000)]
    # a run without steps: one line naming what is missing, exit 2, no file
    bare = run_factory({"nvtx_ranges": {"start_ns": [0], "end_ns": [5], "duration_ns": [5], "name": ["load"],
                                        "pid": [1], "tid": [1], "style": ["push/pop"], "domain": [""]}})
    assert cli(["plot", "steps", str(bare), "-o", str(tmp_path / "none.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no training steps" in err and "\n" not in err and not (tmp_path / "none.png").exists()


@pytest.mark.slow
def test_dollar_signs_in_trace_text_do_not_crash_mathtext(run_factory, tmp_path):
    # an unbalanced '$' makes matplotlib's mathtext raise; a balanced pair would be typeset
    run = steps_run(run_factory, kernel_name="void k<$x>(float $, int)")
    for kind in ("utilization", "kernels", "idle", "steps"):
        assert cli(["plot", kind, str(run), "-o", str(tmp_path / f"{kind}.png"), "--title", "cost $ and $x^2$"]) == 0
        check_png(tmp_path / f"{kind}.png")
    from tracekit.plots import style

    assert style.text("a$b") == r"a\$b" and style.text(None) == ""


def test_roofline_legend_title_and_labels(run_factory, tmp_path):
    # one kernel with DRAM bytes only: the marker key lists DRAM, not L2/L1 markers absent from the data
    run = run_factory(ncu_tables(
        [{"launch_id": 0, "kernel_name": GEMM, "device_name": "Test GPU", "compute_capability": "9.0"}],
        {0: {"gpu__time_duration.sum": 2000, **counts(f=(100, 50, 1000)), "dram__bytes.sum": 1000, **PEAKS}}),
        name="only_dram")
    from tracekit.plots.roofline import plot_roofline

    info = plot_roofline([run], tmp_path / "r.png")
    check_png(tmp_path / "r.png")
    assert "kernel at DRAM intensity" in info["legend"]
    assert not any("L2 intensity" in t or "L1 intensity" in t for t in info["legend"])
    assert info["title"].startswith("Hierarchical roofline — run only_dram · Test GPU")
    assert info["labels"] == ["1  gemm (100%)"]


def test_bad_output_suffix_is_a_one_line_error(fixture_runs, tmp_path, capsys):
    assert cli(["plot", "kernels", str(fixture_runs[H100]), "-o", str(tmp_path / "k.txt")]) == 2
    assert "must end in .png, .svg or .pdf" in capsys.readouterr().err
    with pytest.raises(InputError):
        from tracekit.plots.kernels import plot_kernels

        plot_kernels([run_factory_empty(tmp_path)], tmp_path / "e.png")


def run_factory_empty(tmp_path):
    from conftest import make_run

    return make_run(tmp_path / "empty", {"nvtx_ranges": {"start_ns": [0], "end_ns": [1], "name": ["x"]}})


NEW_QUERIES = ("gpu_utilization_timeline", "gpu_idle_gaps", "gpu_time_breakdown", "timeline_events",
               "timeline_window", "timeline_names", "timeline_counters")


def test_new_queries_document_their_columns(fixture_runs):
    from tracekit.query.named_queries import get_query

    with Engine([fixture_runs[H100]]) as eng:
        for name in NEW_QUERIES:
            q = get_query(name)
            assert eng.query(q).column_names == [c.name for c in q.columns], name
        for name in ("roofline_ceilings", "roofline_time_share"):
            q = get_query(name)
            assert eng.query(q).column_names == [c.name for c in q.columns], name
