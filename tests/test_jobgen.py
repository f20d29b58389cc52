"""tests/jobgen.py builds what it says: checked on the written JSON, read back with the json
module (timestamps as decimals), against the truth it returns."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from jobgen import NCCL_NAME, make_job


def nccl(path):
    doc = json.loads(path.read_text(), parse_float=Decimal)
    base = int(doc["baseTimeNanoseconds"])
    ks = sorted((base + int(e["ts"] * 1000), base + int((e["ts"] + e["dur"]) * 1000))
                for e in doc["traceEvents"] if e.get("cat") == "kernel" and NCCL_NAME.search(e["name"]))
    return doc, ks


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return make_job(tmp_path_factory.mktemp("jobgen"), ranks=4, straggler=2, straggler_delay_ns=300_000,
                    seed=5, ranks_per_host=2)


@pytest.mark.slow
def test_collectives_end_together_and_arrive_as_told(job):
    t = job.truth
    assert t.offset_ns[:2] == [0, 0] and t.offset_ns[2] == t.offset_ns[3] != 0  # hosts share clocks
    ends = []
    for r, p in enumerate(job.paths):
        doc, ks = nccl(p)
        assert doc["distributedInfo"]["rank"] == r and doc["hostname"] == t.hosts[r]
        assert len(ks) == len(t.collectives) == 21
        for (s, e), c in zip(ks, t.collectives):
            assert abs(t.to_true(r, s) - c["arrival_ns"][r]) <= 1
            assert abs(t.to_true(r, e) - c["end_ns"]) <= 1
        ends.append([t.to_true(r, e) for _, e in ks])
    for c in t.collectives:
        d = [t.delay_ns[r][t.collectives.index(c)] for r in range(4)]
        assert c["skew_ns"] == max(d) - min(d) and c["last_rank"] == 2  # 300 us beats 20 us jitter
        assert c["skew_ns"] == c["last_arrival_ns"] - c["first_arrival_ns"]
    assert t.straggler_added_ns == [7 * 300_000] * 3


@pytest.mark.slow
def test_no_whole_trace_shift(job):
    # the first event of every rank is at the job's first true time (only the clock differs)
    t = job.truth
    for r, p in enumerate(job.paths):
        doc = json.loads(p.read_text(), parse_float=Decimal)
        first = int(doc["baseTimeNanoseconds"]) + min(int(e["ts"] * 1000) for e in doc["traceEvents"] if "ts" in e)
        assert first == t.t0_ns + t.offset_ns[r]
