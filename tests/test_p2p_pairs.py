"""Point-to-point calls of a 2-rank job whose trace does not record the peer (issue 36, item 4):
with exactly two ranks in one communicator the peer is the other rank, and NCCL matches a pair's
calls in issue order, so collective_skew pairs them (it left all 21 out: peers not recorded)."""

from __future__ import annotations

import pytest
from jobgen import make_job

from tracekit.convert import convert
from tracekit.query.engine import Engine

pytestmark = pytest.mark.slow


def test_sendrecv_of_two_ranks_are_paired(tmp_path):
    # the jobgen job's 21 collectives (15 AllReduce, 6 Broadcast) rewritten as SendRecv kernels
    # and calls without a peer, as older PyTorch records them; one clock (offsets 0)
    job = make_job(tmp_path / "src", ranks=2, seed=5, offsets_ns=[0, 0], drifts_ppm=[0.0, 0.0],
                   straggler=1, straggler_delay_ns=60_000)
    for p in job.paths:
        text = p.read_text()
        for old in ("ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_Broadcast_RING_LL_Sum_int8_t"):
            text = text.replace(old, "ncclDevKernel_SendRecv")
        text = text.replace('"Collective name": "allreduce"', '"Collective name": "sendrecv"')
        text = text.replace('"Collective name": "broadcast"', '"Collective name": "sendrecv"')
        assert "AllReduce" not in text and "Broadcast" not in text
        p.write_text(text)
    run = convert(job.paths, tmp_path / "run", jobs=1, clock_model="none")
    with Engine([run]) as eng:
        skew = eng.query("collective_skew").to_pylist()
        strag = eng.query("stragglers").to_pylist()
        waits = eng.query("step_waits").to_pylist()
    want = [c["skew_ns"] for c in job.truth.collectives]  # true arrival skews, rank 0's clock
    assert [(r["kind"], r["collective"], r["peers"]) for r in skew] == [("p2p", "Send/Recv", "0->1")] * 21
    assert sorted(r["skew_ns"] for r in skew) == sorted(want)
    assert {r["last_rank"] for r in skew} == {1}
    # stragglers judges the pairs too (it said "no row matched"): rank 1, last at all 21, held
    # rank 0 up by each pair's true skew (2 ranks: the hold is the whole skew)
    assert [(r["rank"], r["straggler"], r["collectives"], r["last_arrivals"]) for r in strag] == \
        [(1, True, 21, 21), (0, False, 21, 0)]
    assert strag[0]["delay_caused_ns"] == sum(want)
    # step_waits, per step (the same pairs): rank 0 waits each pair's skew, rank 1 holds it up as
    # long; recounted from the truth: the pairs whose arrival lies in the rank's ProfilerStep
    t = job.truth
    want_rows = []
    for name, _, _ in t.steps[0]:
        step = int(name.split("#")[1])
        for rank in (0, 1):
            s0, e0 = next((a, b) for n, a, b in t.steps[rank] if n == name)
            mine = [c for c in t.collectives if s0 <= c["arrival_ns"][rank] < e0]
            late = sum(c["skew_ns"] for c in mine)
            want_rows.append({"rank": rank, "step": step, "collectives": len(mine),
                              "wait_ns": late if rank == 0 else 0,
                              "last_arrivals": len(mine) if rank == 1 else 0, "held_ns": late if rank == 1 else 0})
    got = [{k: r[k] for k in want_rows[0]} for r in waits]
    assert got == want_rows and sum(r["collectives"] for r in got) == 2 * 21
