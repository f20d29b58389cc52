"""Multi-rank jobs: several nsys exports or Kineto traces converted into ONE run folder (one
Parquet file per rank per table, ranks in the manifest), clocks aligned, broken ranks."""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES
from helpers.jobs import BASE
from helpers.jobs import kineto_copy as _kineto
from helpers.jobs import rank_export as _rank_export

from tracekit.convert import convert
from tracekit.convert.job import name_rank
from tracekit.errors import InputError
from tracekit.query.engine import Engine

START = 1690709432747674811  # its TARGET_INFO_SESSION_START_TIME.utcEpochNs


@pytest.fixture(scope="module")
def nsys_job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("job")
    # file names say the opposite of the recorded RANK: the trace wins
    a = _rank_export(tmp, "report_rank1.sqlite", 0)
    b = _rank_export(tmp, "report_rank0.sqlite", 1, start_shift_ns=5_000_000, host="node2", pid_shift=7)
    single = convert([FIXTURES / "nsys" / f"{BASE}.sqlite"], tmp / "single")
    return convert([a, b], tmp / "job", jobs=2), single, (a, b)


def test_job_layout_and_manifest(nsys_job):
    job, single, (a, b) = nsys_job
    m = json.loads((job / "manifest.json").read_text())
    assert m["layout_version"] == 2 and m["job"] == {"format": "nsys", "rank_source": "trace", "ranks": 2,
                                                  "clock_model": "estimate"}
    got = [{k: r[k] for k in ("rank", "input", "host", "pid", "devices", "clock_offset_ns")} for r in m["ranks"]]
    assert got == [
        {"rank": 0, "input": str(a.resolve()), "host": "host", "pid": 24129, "devices": [0], "clock_offset_ns": 0},
        {"rank": 1, "input": str(b.resolve()), "host": "node2", "pid": 24136, "devices": [0],
         "clock_offset_ns": 5_000_000},
    ]
    assert all(r["worker"].startswith("local:") for r in m["ranks"])
    k = m["tables"]["kernels"]
    assert {key: k[key] for key in ("rows", "files")} == {
        "rows": 72, "files": ["kernels/rank-00000.parquet", "kernels/rank-00001.parquet"]}
    assert [len(d) for d in k["sha256"]] == [64, 64] and len(k["bytes"]) == 2
    assert not (job / ".parts").exists()


def test_job_reads_as_one_dataset_with_a_glob(nsys_job):
    job, single, _ = nsys_job
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{job}/kernels/*.parquet')").fetchall() == [(72,)]
    assert ds.dataset(str(job / "kernels"), format="parquet").count_rows() == 72


def test_job_beside_single_folders_keeps_each_rows_run(nsys_job, tmp_path):
    # a job's 2 per-rank files between two one-file run folders: every row keeps its own run_id
    # (the views look run_id up by each row's file position in one read_parquet list)
    from helpers.jobs import copy_run as _copy

    job, single, _ = nsys_job
    before, after = _copy(single, tmp_path / "a_single"), _copy(single, tmp_path / "z_single")
    with Engine([before, job, after]) as e:
        got = e.sql("SELECT run_id, pid, count(*) AS n, sum(duration_ns) AS d FROM kernels "
                    "GROUP BY ALL ORDER BY run_id, pid").to_pylist()
    d = sum(pq.read_table(single / "kernels.parquet").column("duration_ns").to_pylist())
    jid = json.loads((job / "manifest.json").read_text())["run_id"]
    want = sorted([("a_single", 24129), (jid, 24129), (jid, 24136), ("z_single", 24129)])
    assert got == [{"run_id": r, "pid": p, "n": 36, "d": d} for r, p in want]


def test_job_clock_alignment_and_ids(nsys_job):
    job, single, _ = nsys_job
    one = pq.read_table(single / "kernels.parquet").sort_by("start_ns")
    with Engine([job]) as e:
        r0 = e.sql("SELECT start_ns, end_ns FROM kernels WHERE pid = 24129 ORDER BY start_ns")
        r1 = e.sql("SELECT start_ns, end_ns FROM kernels WHERE pid = 24136 ORDER BY start_ns")
        ranks = e.sql("SELECT pid, rank FROM processes WHERE rank IS NOT NULL ORDER BY pid").to_pylist()
        ids = e.sql("SELECT count(DISTINCT range_id) AS d, count(*) AS n FROM nvtx_ranges").to_pylist()[0]
        summary = e.query("kernel_summary").to_pylist()
    assert r0.column("start_ns").to_pylist() == one.column("start_ns").to_pylist()
    # rank 1's session started 5 ms later: its timestamps move 5 ms onto rank 0's clock
    assert r1.column("start_ns").to_pylist() == [t + 5_000_000 for t in one.column("start_ns").to_pylist()]
    assert r1.column("end_ns").to_pylist() == [t + 5_000_000 for t in one.column("end_ns").to_pylist()]
    assert ranks == [{"pid": 24129, "rank": 0}, {"pid": 24136, "rank": 1}]
    assert ids["d"] == ids["n"] == 2 * pq.read_metadata(single / "nvtx_ranges.parquet").num_rows  # unique
    with Engine([single]) as e:
        alone = {r["name"]: r["instances"] for r in e.query("kernel_summary").to_pylist()}
    assert {r["name"]: r["instances"] for r in summary} == {k: 2 * v for k, v in alone.items()}


def test_older_layout_still_read(nsys_run, tmp_path):
    import shutil

    old = tmp_path / "v1"
    shutil.copytree(nsys_run(BASE), old)
    m = json.loads((old / "manifest.json").read_text())
    m["layout_version"] = 1
    (old / "manifest.json").write_text(json.dumps(m))
    with Engine([old]) as e:
        assert e.sql("SELECT count(*) FROM kernels").to_pylist() == [{"count_star()": 36}]


def test_name_rank():
    assert name_rank("report_rank3.sqlite") == 3
    assert name_rank("trace-RANK_12.json.gz") == 12
    assert name_rank("node2.gpu5.json") == 5  # no 'rank': the last number
    assert name_rank("job7_worker-3.pt.trace.json", r"worker-(\d+)") == 3
    assert name_rank("x.json") is None


def test_rank_from_file_name_pattern_and_order(tmp_path):
    a, b = _kineto(tmp_path, "w_rank7.json", 10), _kineto(tmp_path, "w_rank2.json", 20)
    run = convert([a, b], tmp_path / "by_name", jobs=1)
    m = json.loads((run / "manifest.json").read_text())
    assert m["job"]["rank_source"] == "file name"
    assert [(r["rank"], r["pid"]) for r in m["ranks"]] == [(2, 20), (7, 10)]
    run = convert([a, b], tmp_path / "by_pattern", rank_pattern=r"w_rank(\d)", jobs=1)
    assert [r["rank"] for r in json.loads((run / "manifest.json").read_text())["ranks"]] == [2, 7]
    c, d = _kineto(tmp_path, "first.json", 10), _kineto(tmp_path, "second.json", 20)
    run = convert([c, d], tmp_path / "by_order", jobs=1)
    m = json.loads((run / "manifest.json").read_text())
    assert m["job"]["rank_source"] == "file order"
    assert [(r["rank"], r["pid"], r["input"]) for r in m["ranks"]] == [(0, 10, str(c)), (1, 20, str(d))]
    with pytest.raises(InputError, match="--rank-pattern"):
        convert([a, b], tmp_path / "bad_pattern", rank_pattern=r"w_rank\d", jobs=1)


def test_broken_rank_fails_naming_it_or_is_skipped(tmp_path):
    good = _kineto(tmp_path, "r_rank0.json", 10)
    bad = tmp_path / "r_rank1.json"
    bad.write_text(good.read_text()[:5000])  # truncated mid-trace
    with pytest.raises(InputError, match="r_rank1.json"):
        convert([good, bad], tmp_path / "run", jobs=2)
    assert not (tmp_path / "run").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    run = convert([good, bad], tmp_path / "run", jobs=1, skip_bad_ranks=True)
    m = json.loads((run / "manifest.json").read_text())
    assert [r["rank"] for r in m["ranks"]] == [0]
    assert [(s["rank"], s["input"]) for s in m["skipped_ranks"]] == [(1, str(bad))]
    assert any(w.startswith("skipped rank 1 (r_rank1.json): ") for w in m["warnings"])


def test_cli_broken_rank_exit_2(tmp_path):
    good = _kineto(tmp_path, "r_rank0.json", 10)
    bad = tmp_path / "r_rank1.json"
    bad.write_text("{\"traceEvents\": [")
    p = subprocess.run([sys.executable, "-m", "tracekit", "convert", str(good), str(bad), "-o",
                        str(tmp_path / "run"), "--jobs", "1"], capture_output=True, text=True)
    assert p.returncode == 2 and "r_rank1.json" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "run").exists()
    p = subprocess.run([sys.executable, "-m", "tracekit", "convert", str(good), str(bad), "-o",
                        str(tmp_path / "run"), "--jobs", "1", "--skip-bad-ranks"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "warning: skipped rank 1 (r_rank1.json)" in " ".join(p.stderr.split())
