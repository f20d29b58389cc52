"""Ranks that are no rank, end to end (issue 27, item 9): 2^63-1, 2^63 and more, `true`, -1,
a superscript digit, 23 digits, in an nsys export's recorded environment (RANK=...), in a Kineto
trace's distributedInfo.rank and in a file name. Each converts (exit 0): the value is no rank, so
the next source decides (file name, then file order), never exit 1 or a rank--0001 file."""

from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES
from helpers.jobs import kineto_copy as _kineto
from helpers.jobs import rank_export as _rank_export

from tracekit.cli import run

ALEXNET = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"
NOT_RANKS = ["9223372036854775807", "9223372036854775808", "9" * 23, "true", "²", "-1"]


def _manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.fixture(scope="module")
def second_rank(tmp_path_factory):
    d = tmp_path_factory.mktemp("rank1")
    return _rank_export(d, "b.sqlite", 1, host="node2", pid_shift=3)


@pytest.mark.parametrize("value", NOT_RANKS)
def test_nsys_environment_rank_that_is_no_rank(tmp_path, capsys, second_rank, value):
    # before: RANK=² was exit 1 (ValueError: int('²')); the others a silently odd env_rank
    a = _rank_export(tmp_path, "a.sqlite", value)
    out = tmp_path / "job"
    assert run(["convert", str(a), str(second_rank), "-o", str(out), "--jobs", "1"]) == 0
    m = _manifest(out)
    assert [r["rank"] for r in m["ranks"]] == [0, 1] and m["job"]["rank_source"] == "file order"
    assert sorted(p.name for p in (out / "kernels").iterdir()) == ["rank-00000.parquet",
                                                                   "rank-00001.parquet"]
    assert [r["trace_rank"] for r in m["ranks"]] == [None, 1]
    env = [r.get("env_rank") for r in m["sources"]["nsys"]["per_rank"]]
    # recorded as read when it is a number of at most 19 ASCII digits, else not at all
    assert env == [int(value) if value.isascii() and value.isdigit() and len(value) <= 19
                   else None, 1]


def _with_rank(tmp_path, name, value):
    doc = json.loads(gzip.decompress(ALEXNET.read_bytes()))
    doc["distributedInfo"] = {"backend": "nccl", "rank": value, "world_size": 2}
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("value", [2**63 - 1, 2**63, 2**31, True, -1])
def test_kineto_distributed_rank_that_is_no_rank(tmp_path, capsys, value):
    # before: 2^63-1 was exit 1 (ArrowInvalid: too large to fit in C integer type), 2^63 exit 1
    # (OverflowError)
    p = _with_rank(tmp_path, "k.json", value)
    out = tmp_path / "run"
    assert run(["convert", str(p), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert (f"k.json: distributedInfo.rank {json.dumps(value)} is not a rank (a whole number "
            "0..2147483647): processes.rank is NULL") in err
    assert pq.read_table(out / "processes.parquet").column("rank").to_pylist() == [None]
    assert _manifest(out)["sources"]["kineto"]["ranks"] == [value]
    if value != 2**63 - 1:
        return
    # in a job, the file name decides
    job = tmp_path / "job"
    q = _kineto(tmp_path, "w_rank3.json", 77)
    p.rename(tmp_path / "w_rank5.json")
    assert run(["convert", str(tmp_path / "w_rank5.json"), str(q), "-o", str(job)]) == 0
    m = _manifest(job)
    assert [r["rank"] for r in m["ranks"]] == [3, 5] and m["job"]["rank_source"] == "file name"


@pytest.mark.parametrize("name", ["w_rank9223372036854775807.json", "w_rank9223372036854775808.json",
                                  "w_ranktrue.json"])  # '²' and 23 digits: test_job_inputs.py
def test_file_name_rank_that_is_no_rank(tmp_path, capsys, name):
    a, b = _kineto(tmp_path, name, 10), _kineto(tmp_path, "w_rank1.json", 20)
    out = tmp_path / "job"
    assert run(["convert", str(a), str(b), "-o", str(out)]) == 0
    m = _manifest(out)
    assert [r["rank"] for r in m["ranks"]] == [0, 1] and m["job"]["rank_source"] == "file order"
    assert [r["input"].rsplit("/", 1)[-1] for r in m["ranks"]] == [name, "w_rank1.json"]
