"""The engine's views: one read_parquet over a literal list of files (all runs), run_id looked up
by each row's file position (DuckDB's file_index). Folder names with glob characters, files of different column sets, and the
same answers as one query per run folder."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from helpers.jobs import copy_run as _copy

from tracekit.query.engine import Engine, glob_literal
from tracekit.runfolder.checksums import reseal

A = "nsys2026_h100_2gpu_pytorch_slice"  # 3442 kernels
B = "nsys2023.1_rtx3090_conv_fp16"  # 36 kernels


def test_glob_literal():
    assert glob_literal("/a/run[12]/k.parquet") == "/a/run[[]12]/k.parquet"
    assert glob_literal("w*?") == "w[*][?]"


def test_folder_named_like_a_glob_reads_only_itself(nsys_run, tmp_path):
    # run1 (B, 36 kernels) and run2 (A, 3442) would both match the glob run[12]; the folder
    # literally named run[12] holds B: it must count 36, not 36 + 3442 or 72
    _copy(nsys_run(B), tmp_path / "run1")
    _copy(nsys_run(A), tmp_path / "run2")
    odd = _copy(nsys_run(B), tmp_path / "run[12]")
    with Engine([odd]) as e:
        assert e.sql("SELECT run_id, count(*) FROM kernels GROUP BY ALL").to_pylist() == [
            {"run_id": "run[12]", "count_star()": 36}]
    star = _copy(nsys_run(B), tmp_path / "we'ird *?")
    with Engine([star, tmp_path / "run2"]) as e:
        got = e.sql("SELECT run_id, count(*) AS n FROM kernels GROUP BY ALL ORDER BY n").to_pylist()
    assert got == [{"run_id": "we'ird *?", "n": 36}, {"run_id": "run2", "n": 3442}]


def test_runs_with_different_columns(nsys_run, tmp_path):
    # an older run folder whose kernels.parquet lacks grid_x: NULL there, values elsewhere
    old = _copy(nsys_run(B), tmp_path / "old")
    t = pq.read_table(old / "kernels.parquet")
    pq.write_table(t.drop_columns(["grid_x"]), old / "kernels.parquet")
    reseal(old)  # edited on purpose: new checksums
    new = _copy(nsys_run(B), tmp_path / "new")
    with Engine([old, new]) as e:
        got = e.sql("SELECT run_id, count(*) AS n, count(grid_x) AS with_grid, sum(duration_ns) AS d "
                    "FROM kernels GROUP BY ALL ORDER BY run_id").to_pylist()
    d = pq.read_table(new / "kernels.parquet").column("duration_ns").to_pylist()
    assert got == [{"run_id": "new", "n": 36, "with_grid": 36, "d": sum(d)},
                   {"run_id": "old", "n": 36, "with_grid": 0, "d": sum(d)}]


@pytest.mark.parametrize("name", ["kernel_summary", "gpu_idle", "nccl", "nvtx_gpu_projection",
                                  "step_summary"])
def test_many_runs_equal_each_run_alone(nsys_run, tmp_path, name):
    runs = [_copy(nsys_run(A), tmp_path / "a"), _copy(nsys_run(B), tmp_path / "b"),
            _copy(nsys_run(A), tmp_path / "c")]
    with Engine(runs) as e:
        together = e.query(name).to_pylist()
    alone = []
    for r in runs:
        with Engine([r]) as e:
            alone += e.query(name).to_pylist()
    key = lambda row: json.dumps(row, sort_keys=True, default=str)
    assert len(together) == len(alone) > 0 or name in ("nccl", "step_summary")
    assert sorted(together, key=key) == sorted(alone, key=key)
