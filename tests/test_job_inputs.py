"""Job inputs (issue 27, item 5 and the rank cases of item 9): --skip-bad-ranks at format
detection, the same trace twice by content, --rank-pattern in linear time, ranks checked."""

from __future__ import annotations

import gzip
import json
import shutil
import time

import pytest
from conftest import FIXTURES, one_error_line

from tracekit.cli import run
from tracekit.convert.job import _trace_rank, name_rank
from tracekit.convert.rank_names import MAX_RANK, valid_rank

NCCL = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
ALEXNET = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"


def test_skip_bad_ranks_skips_inputs_refused_at_detection(tmp_path, capsys):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copyfile(NCCL, d / "w_rank0.json.gz")
    (d / "w_rank1.json.gz").write_bytes(b"")  # empty
    (d / "w_rank2.json.gz").write_bytes(ALEXNET.read_bytes()[:10])  # gzip cut in its first bytes
    (d / "w_rank3.json").write_text("garbage\n")
    inputs = [str(d / n) for n in ("w_rank0.json.gz", "w_rank1.json.gz", "w_rank2.json.gz",
                                   "w_rank3.json", "w_rank4.json")]  # the last one is missing
    out = tmp_path / "job"
    assert run(["convert", *inputs, "-o", str(out), "--skip-bad-ranks"]) == 0
    err = capsys.readouterr().err
    m = json.loads((out / "manifest.json").read_text())
    assert [s["rank"] for s in m["skipped_ranks"]] == [1, 2, 3, 4]
    assert "file is empty" in m["skipped_ranks"][0]["error"]
    assert "no such file" in m["skipped_ranks"][3]["error"]
    assert err.count("tracekit: warning: skipped rank") == 4
    assert m["job"]["ranks"] == 1 and m["tables"]["kernels"]["rows"] == 2700
    # without the option the first bad input is the error, nothing written
    assert run(["convert", *inputs, "-o", str(tmp_path / "no")]) == 2
    assert "w_rank1.json.gz: file is empty" in one_error_line(capsys)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("how", ["reindented", "regzipped"])
def test_same_trace_twice_by_content_not_bytes(tmp_path, capsys, how):
    d = json.loads(gzip.decompress(NCCL.read_bytes()))
    a = tmp_path / "t_rank0.json.gz"
    shutil.copyfile(NCCL, a)
    if how == "reindented":
        b = tmp_path / "t_rank1.json"
        b.write_text(json.dumps(d, indent=3))
    else:
        b = tmp_path / "t_rank1.json.gz"
        with gzip.open(b, "wt", compresslevel=1) as f:
            json.dump(d, f)
    capsys.readouterr()
    assert run(["convert", str(a), str(b), "-o", str(tmp_path / "job")]) == 2
    assert "is the same trace as" in one_error_line(capsys)
    assert not (tmp_path / "job").exists()


def test_rank_pattern_runs_in_linear_time():
    name = "a" * 5000 + "!.json"  # Python's re: (a+)+$ backtracks 2^5000 times here
    t0 = time.monotonic()
    assert name_rank(name, r"(a+)+$") is None
    assert name_rank("x" * 100_000 + "_rank7.json", r"(?:x+x+)+_rank(\d+)") == 7
    assert time.monotonic() - t0 < 5


def test_rank_pattern_needing_backtracking_is_refused_before_work(tmp_path, capsys):
    a, b = tmp_path / "a_0.json.gz", tmp_path / "a_1.json.gz"
    shutil.copyfile(NCCL, a)
    shutil.copyfile(ALEXNET, b)
    capsys.readouterr()
    assert run(["convert", str(a), str(b), "-o", str(tmp_path / "j"), "--rank-pattern",
                r"(\d)(?=\.json)"]) == 2
    assert "RE2 syntax" in one_error_line(capsys)


@pytest.mark.parametrize("name, rank", [
    ("trace_rank3.json", 3), ("rank².json", None), ("rank" + "9" * 23 + ".json", None),
    ("w_rank2147483647.json", MAX_RANK), ("w_rank2147483648.json", None), ("7.json", 7),
])
def test_file_name_ranks_are_checked(name, rank):
    assert name_rank(name) == rank


@pytest.mark.parametrize("value", [-1, True, 2**63 - 1, 2**31, "3", 1.0, None])
def test_trace_ranks_out_of_range_are_no_rank(value):
    assert valid_rank(value) is None
    assert _trace_rank({"sources": {"kineto": {"ranks": [value]}}}) is None
    assert _trace_rank({"sources": {"nsys": {"env_rank": value}}}) is None
    assert _trace_rank({"sources": {"kineto": {"ranks": [5]}}}) == 5
