"""Job identity at `tracekit convert` (tracekit/convert/identity.py): inputs that cannot be one job are refused
(exit 2, one line naming the files and the conflict, nothing written) unless --merge-unrelated;
the same distributedInfo.rank on two hosts gets two ranks in every table."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from conftest import one_error_line
from jobgen import make_job

from tracekit.cli import run
from tracekit.query import Engine


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("ident")
    return make_job(d / "a", ranks=2, seed=1), make_job(d / "b", ranks=4, seed=2), d


def edited(src, dst, **changes):
    """A copy of trace ``src`` with top-level fields changed (``base_shift_ns`` moves its
    baseTimeNanoseconds: the same trace recorded that much later)."""
    doc = json.loads(src.read_text(), parse_float=Decimal)
    shift = changes.pop("base_shift_ns", 0)
    doc["baseTimeNanoseconds"] = int(doc["baseTimeNanoseconds"]) + shift
    doc.update(changes)
    dst.write_text(json.dumps(doc, default=lambda v: float(v)))
    return dst


def refused(capsys, paths, out, *needles):
    assert run(["convert", *map(str, paths), "-o", str(out), "--jobs", "1"]) == 2
    line = one_error_line(capsys, *needles)
    assert not out.exists()
    return line


@pytest.mark.slow
def test_different_world_sizes_are_refused_then_merged_when_asked(jobs, capsys, tmp_path):
    a, b, _ = jobs
    paths = [a.paths[0], b.paths[1]]  # world size 2 and 4
    line = refused(capsys, paths, tmp_path / "run", "world size 2", "world size 4", "--merge-unrelated")
    assert a.paths[0].name in line and b.paths[1].name in line
    assert run(["convert", *map(str, paths), "-o", str(tmp_path / "run"), "--jobs", "1",
                "--merge-unrelated"]) == 0
    err = capsys.readouterr().err
    assert "merged although not one job" in err
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert m["job"]["identity_conflicts"] and "world size" in m["job"]["identity_conflicts"][0]
    with Engine([tmp_path / "run"]) as eng:
        for q in ("collective_skew", "stragglers"):
            eng.query(q)
            assert any("may not be one job" in n for n in eng.notices), (q, eng.notices)


@pytest.mark.slow
def test_windows_hours_apart_are_refused(jobs, capsys, tmp_path):
    a, _, _ = jobs
    later = edited(a.paths[1], tmp_path / "trace_rank00001.json", base_shift_ns=int(3.5 * 3600e9))
    refused(capsys, [a.paths[0], later], tmp_path / "run", "3.5 h before", "do not overlap")


@pytest.mark.slow
def test_the_same_host_and_rank_twice_is_refused(jobs, capsys, tmp_path):
    a, b, _ = jobs
    two = edited(b.paths[0], tmp_path / "other_rank0.json", distributedInfo={
        **json.loads(a.paths[0].read_text())["distributedInfo"]})  # rank 0 of 2 on node00 as well
    refused(capsys, [a.paths[0], two], tmp_path / "run", "both rank 0 on host node00")


@pytest.mark.slow
def test_the_same_rank_on_two_hosts_gets_two_ranks(jobs, tmp_path, capsys):
    # local rank 0 of two nodes: both traces record rank 0; the job numbers them 0 and 1 (file
    # order) in the manifest AND in processes, so the cross-rank queries see two ranks
    a, _, _ = jobs
    info = json.loads(a.paths[1].read_text())["distributedInfo"]
    n0 = edited(a.paths[0], tmp_path / "node0.json")
    n1 = edited(a.paths[1], tmp_path / "node1.json", distributedInfo={**info, "rank": 0})
    assert run(["convert", str(n0), str(n1), "-o", str(tmp_path / "run"), "--jobs", "1"]) == 0
    assert "renumbered" in capsys.readouterr().err
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [(r["rank"], r["trace_rank"], r["host"]) for r in m["ranks"]] == [(0, 0, "node00"), (1, 0, "node01")]
    with Engine([tmp_path / "run"]) as eng:
        procs = eng.sql("SELECT pid, rank FROM processes WHERE rank IS NOT NULL ORDER BY rank").to_pylist()
        skew = eng.query("collective_skew").to_pylist()
    assert [p["rank"] for p in procs] == [0, 1] and [p["pid"] for p in procs] == [r["pid"] for r in m["ranks"]]
    assert {r["ranks"] for r in skew} == {2}


def test_process_groups_described_differently_are_a_conflict():
    from tracekit.convert.identity import conflicts

    def part(name, rank, pg):
        meta = {"distributedInfo": {"rank": rank, "world_size": 2, "pg_config": pg}}
        return {"path": name, "dir": None, "manifest": {"tables": {}, "sources": {"kineto": {"files": [
            {"world_size": 2, "trace_metadata": meta}]}}}}

    pg = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}]
    other = [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 5]}]
    assert conflicts([part("a.json", 0, pg), part("b.json", 1, pg)], [0, 1]) == []
    [c] = conflicts([part("a.json", 0, pg), part("b.json", 1, other)], [0, 1])
    assert c.startswith("a.json and b.json describe process group '0' differently")


@pytest.mark.slow
def test_nsys_exports_of_different_world_sizes_are_refused(tmp_path, capsys):
    from helpers.jobs import rank_export as _rank_export

    def ws(n):
        return (f"UPDATE TARGET_INFO_SYSTEM_ENV SET value = value || ';WORLD_SIZE={n}' "
                "WHERE name = 'DeviceEnvironment';")

    a = _rank_export(tmp_path, "r_rank0.sqlite", 0, extra_sql=ws(2))
    b = _rank_export(tmp_path, "r_rank1.sqlite", 1, host="node2", pid_shift=7, extra_sql=ws(16))
    refused(capsys, [a, b], tmp_path / "run", "r_rank0.sqlite records world size 2",
            "r_rank1.sqlite world size 16")
