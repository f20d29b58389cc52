"""Smoke tests of the foundation pieces: run folders, engine, CLI errors."""

from __future__ import annotations

import json

import pytest

from tracekit.cli import run as cli
from tracekit.query.engine import Engine
from tracekit.runfolder.checksums import reseal


def test_make_run_and_query(run_factory):
    # two kernels of the same name: 10 ns and 30 ns -> total 40, avg 20, median 20
    run = run_factory({"kernels": {"start_ns": [0, 100], "end_ns": [10, 130], "duration_ns": [10, 30],
                                   "name": ["k", "k"]}})
    with Engine([run]) as eng:
        rows = eng.query("kernel_summary").to_pylist()
    # grid and block: NULL unless -p by=grid (gpukernsum's split by launch configuration)
    assert rows == [{"run_id": run.name, "name": "k", "grid": None, "block": None, "instances": 2, "total_ns": 40, "avg_ns": 20.0,
                     "med_ns": 20.0, "min_ns": 10, "max_ns": 30,
                     "stddev_ns": pytest.approx(14.142135623730951), "time_pct": 100.0}]


def test_not_captured_is_listed(run_factory):
    run = run_factory({"kernels": {"start_ns": [], "end_ns": [], "name": []}})
    m = json.loads((run / "manifest.json").read_text())
    assert m["tables"]["kernels"]["rows"] == 0
    assert "memcpy" in m["not_captured"]
    with Engine([run]) as eng:
        rows = eng.sql("select table_name, captured from run_tables").to_pylist()
    captured = {r["table_name"]: r["captured"] for r in rows}
    assert captured["kernels"] is True and captured["memcpy"] is False


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert cli(["query", "kernel_summary", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a run folder" in err
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    assert cli(["convert", str(empty), "-o", str(tmp_path / "out")]) == 2
    assert "file is empty" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_run_folder_from_an_older_schema_reads_missing_columns_as_null(run_factory):
    import pyarrow.parquet as pq

    run = run_factory({"kernels": {"start_ns": [0], "end_ns": [5], "duration_ns": [5], "name": ["k"],
                                   "short_name": ["k"]}})
    # simulate a folder written before `short_name` existed: drop the column from the file
    t = pq.read_table(run / "kernels.parquet").drop(["short_name"])
    pq.write_table(t, run / "kernels.parquet")
    reseal(run)  # edited on purpose: new checksums
    with Engine([run]) as eng:
        rows = eng.sql("select name, short_name, duration_ns from kernels").to_pylist()
    assert rows == [{"name": "k", "short_name": None, "duration_ns": 5}]
