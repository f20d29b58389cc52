"""The Kineto collector's `collectives` table (NCCL message sizes linked to their kernels) and the
`nccl` query's sizes and bandwidths on it.

Expected values are recomputed here from the raw JSON with the json module (timestamps parsed as
decimals), with the test's own dtype sizes; see docs/kineto.md ("Collectives")."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal

import pytest
from conftest import FIXTURES

from tracekit.convert import convert
from tracekit.query.engine import Engine

NCCL_TRACE = FIXTURES / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"
NCCL_NAME = re.compile(r"nccl(Dev)?Kernel_")
SIZES = {"Float": 4, "Long": 8, "BFloat16": 2, "Byte": 1}  # bytes per element, for this test
ARG_KEYS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "In split size",
            "Out split size", "Process Group Name", "Process Group Description", "Process Group Ranks")


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f, parse_float=Decimal)


def rows(run, sql):
    with Engine([run]) as eng:
        return eng.sql(sql).to_pylist()


@pytest.fixture(scope="module")
def raw():
    return load(NCCL_TRACE)


@pytest.fixture(scope="module")
def nccl_run(kineto_run):
    return kineto_run(NCCL_TRACE.name.removesuffix(".json.gz"))


def expected_collectives(doc):
    base = int(doc.get("baseTimeNanoseconds", 0))
    host_pid = {e["pid"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"}
    assert len(host_pid) == 1
    out = []
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and NCCL_NAME.search(e["name"]):
            a = e["args"]
            size = SIZES[a["dtype"]]
            out.append({"start_ns": base + int(e["ts"] * 1000), "pid": next(iter(host_pid)),
                        "device_id": a["device"], "stream_id": a["stream"], "correlation_id": a["correlation"],
                        "collective": a["Collective name"], "dtype": a["dtype"], "element_bytes": size,
                        "in_elements": a["In msg nelems"], "out_elements": a["Out msg nelems"],
                        "in_bytes": a["In msg nelems"] * size, "out_bytes": a["Out msg nelems"] * size,
                        "group_size": a["Group size"], "process_group": a["Process Group Name"],
                        "seq": None,  # the trace's PyTorch writes no 'Seq' argument
                        "peer_rank": None,  # no send/recv
                        "_dur_ns": int(e["dur"] * 1000), "_name": e["name"]})
    return sorted(out, key=lambda r: r["start_ns"])


def test_collectives_rows_match_the_raw_json(raw, nccl_run):
    want = [{k: v for k, v in r.items() if not k.startswith("_")} for r in expected_collectives(raw)]
    got = rows(nccl_run, "SELECT * EXCLUDE (run_id) FROM collectives ORDER BY start_ns")
    assert len(want) == 21 and got == want
    # every row is linked to a kernel of the kernels table
    [(linked,)] = [tuple(r.values()) for r in rows(nccl_run, (
        "SELECT count(*) FROM collectives c JOIN kernels k ON k.pid = c.pid AND k.device_id = c.device_id "
        "AND k.correlation_id = c.correlation_id AND k.start_ns = c.start_ns"))]
    assert linked == 21
    man = json.loads((nccl_run / "manifest.json").read_text())
    assert man["sources"]["kineto"]["files"][0]["collectives"] == {
        "nccl_kernels": 21, "record_param_comms": 27, "from_kernel_args": 21,
        "from_record_param_comms": 0, "unsized_dtype": 0}


def test_nccl_query_sizes_and_bandwidth(raw, nccl_run):
    exp = expected_collectives(raw)
    n = raw["distributedInfo"]["world_size"]
    assert n == 2 and {r["group_size"] for r in exp} == {n}
    factor = {"AllReduce": 2 * (n - 1) / n, "Broadcast": 1.0}
    with Engine([nccl_run]) as eng:
        got = {r["collective"]: r for r in eng.query("nccl").to_pylist()}
    assert set(got) == {"AllReduce", "Broadcast"}
    for coll, word in (("AllReduce", "allreduce"), ("Broadcast", "broadcast")):
        sel = [r for r in exp if r["collective"] == word]
        assert all(coll in r["_name"] for r in sel)
        msg = sum(max(r["in_bytes"], r["out_bytes"]) for r in sel)
        ns = sum(r["_dur_ns"] for r in sel)
        g = got[coll]
        assert (g["count"], g["sized_count"], g["message_bytes"], g["nccl_ns"], g["ranks"]) == \
            (len(sel), len(sel), msg, ns, n)
        assert g["avg_message_bytes"] == pytest.approx(msg / len(sel))
        assert g["bus_factor"] == factor[coll]
        assert g["algbw_bytes_per_s"] == pytest.approx(msg / ns * 1e9, rel=1e-12)
        assert g["busbw_bytes_per_s"] == pytest.approx(msg / ns * 1e9 * factor[coll], rel=1e-12)
    # the figures docs/metrics.md quotes
    assert (got["AllReduce"]["message_bytes"], got["Broadcast"]["message_bytes"]) == (306_684_384, 638_712)
    assert round(got["AllReduce"]["algbw_bytes_per_s"] / 1e9, 3) == 6.558
    # a 4-rank communicator (ranks parameter): AllReduce factor 2 * 3 / 4
    with Engine([nccl_run]) as eng:
        four = {r["collective"]: r for r in eng.query("nccl", {"ranks": "4"}).to_pylist()}
    assert four["AllReduce"]["bus_factor"] == 1.5
    assert four["AllReduce"]["busbw_bytes_per_s"] == pytest.approx(1.5 * got["AllReduce"]["algbw_bytes_per_s"])


def test_record_param_comms_when_kernels_have_no_args(raw, nccl_run, tmp_path):
    # older PyTorch writes the sizes only on the record_param_comms operator: strip them from the
    # kernels; the operator with the kernel's External id gives the same rows
    doc = load(NCCL_TRACE)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            for k in ARG_KEYS:
                e["args"].pop(k, None)
    path = tmp_path / "stripped.json"
    path.write_text(json.dumps(doc, default=str))
    run = convert([path], tmp_path / "run")
    sql = "SELECT * EXCLUDE (run_id) FROM collectives ORDER BY start_ns"
    assert rows(run, sql) == rows(nccl_run, sql)
    man = json.loads((run / "manifest.json").read_text())
    c = man["sources"]["kineto"]["files"][0]["collectives"]
    assert (c["from_kernel_args"], c["from_record_param_comms"]) == (0, 21)
    # the 6 'wait' operators (dtype Byte) launch no NCCL kernel: 27 operators, 21 rows
    ops = [e for e in raw["traceEvents"] if e.get("name") == "record_param_comms"]
    assert len(ops) == 27 and sum(e["args"]["Collective name"] == "wait" for e in ops) == 6


def test_golden_trace(tmp_path):
    # host pid 7. Kernels (device 0, stream 3), ts in us:
    #  c1 ncclDevKernel_Generic with args: reduce_scatter, BFloat16, in 1000 / out 250 elements
    #  c2 ncclKernel_AllGather without args; record_param_comms ext 20: all_gather Long, in 8 out 16
    #  c3 ncclKernel_Broadcast without args and no operator: not sized, no row
    #  c4 ncclDevKernel_AllReduce with an unknown dtype: row kept, bytes null
    #  a  gemm kernel: not communication
    # plus a 'wait' record_param_comms (ext 40) that launches nothing
    def k(name, ts, corr, ext, **args):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 3, "ts": ts, "dur": 2,
                "args": {"device": 0, "stream": 3, "correlation": corr, "External id": ext, **args}}

    def op(ts, ext, **args):
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 7, "tid": 7, "ts": ts,
                "dur": 1, "args": {"External id": ext, **args}}

    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 1, "dur": 1,
         "args": {"correlation": 1}},
        k("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", 10, 1, 10, **{
            "Collective name": "reduce_scatter", "dtype": "BFloat16", "In msg nelems": 1000,
            "Out msg nelems": 250, "Group size": 4, "Process Group Name": "3"}),
        op(18, 20, **{"Collective name": "all_gather", "dtype": "Long", "In msg nelems": 8,
                      "Out msg nelems": 16, "Group size": 2, "Process Group Description": "tp"}),
        k("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 20, 2, 20),
        k("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", 30, 3, 30),
        op(39, 40, **{"Collective name": "wait", "dtype": "Byte", "In msg nelems": 0, "Out msg nelems": 0}),
        k("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 40, 4, 41, **{
            "Collective name": "allreduce", "dtype": "Quantum7", "In msg nelems": 5, "Out msg nelems": 5}),
        k("gemm", 50, 5, 50),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    run = convert([path], tmp_path / "run")
    got = rows(run, "SELECT correlation_id, pid, start_ns, collective, dtype, element_bytes, in_bytes, out_bytes, "
                    "group_size, process_group FROM collectives ORDER BY start_ns")
    assert [tuple(r.values()) for r in got] == [
        (1, 7, 10_000, "reduce_scatter", "BFloat16", 2, 2000, 500, 4, "3"),
        (2, 7, 20_000, "all_gather", "Long", 8, 64, 128, 2, "tp"),
        (4, 7, 40_000, "allreduce", "Quantum7", None, None, None, None, None),
    ]
    with Engine([run]) as eng:
        q = {r["collective"]: r for r in eng.query("nccl").to_pylist()}
    # ReduceScatter: size max(2000, 500) = 2000 B in 2000 ns -> 1e9 B/s; n = its group size 4
    assert (q["ReduceScatter"]["message_bytes"], q["ReduceScatter"]["ranks"]) == (2000, 4)
    assert q["ReduceScatter"]["algbw_bytes_per_s"] == pytest.approx(1e9)
    assert q["ReduceScatter"]["busbw_bytes_per_s"] == pytest.approx(0.75e9)  # (4-1)/4
    # AllGather on its own 2-rank group: 128 B in 2000 ns = 6.4e7 B/s, factor (2-1)/2
    assert (q["AllGather"]["message_bytes"], q["AllGather"]["ranks"], q["AllGather"]["bus_factor"]) == (128, 2, 0.5)
    assert q["AllGather"]["busbw_bytes_per_s"] == pytest.approx(3.2e7)
    # unsized kernels: no bandwidth; n falls back to the run's largest group (4)
    assert q["Broadcast"]["sized_count"] == 0 and q["Broadcast"]["message_bytes"] is None
    assert q["AllReduce"]["count"] == 1 and q["AllReduce"]["message_bytes"] is None
    assert (q["Broadcast"]["ranks"], q["AllReduce"]["ranks"]) == (4, 4)
    man = json.loads((run / "manifest.json").read_text())
    assert man["sources"]["kineto"]["files"][0]["collectives"] == {
        "nccl_kernels": 4, "record_param_comms": 2, "from_kernel_args": 2,
        "from_record_param_comms": 1, "unsized_dtype": 1}


def test_cpu_only_trace_has_no_collectives(tmp_path):
    run = convert([FIXTURES / "kineto" / "kineto_cpu_only_rank.json.gz"], tmp_path / "run")
    man = json.loads((run / "manifest.json").read_text())
    assert "collectives" in man["not_captured"] and "collectives" not in man["tables"]


def test_nccl_one_row_per_communicator_size(run_factory):
    # two AllReduce kernels on an 8-rank group and one on a 2-rank group, same GPU: two rows,
    # each with its own bus factor (2*7/8 = 1.75 and 2*1/2 = 1), never one n for the whole run
    name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    run = run_factory({
        "kernels": {"start_ns": [0, 100, 200], "end_ns": [10, 110, 220], "duration_ns": [10, 10, 20],
                    "pid": [1] * 3, "device_id": [0] * 3, "stream_id": [5] * 3, "correlation_id": [1, 2, 3],
                    "name": [name] * 3},
        "collectives": {"start_ns": [0, 100, 200], "pid": [1] * 3, "device_id": [0] * 3,
                        "correlation_id": [1, 2, 3], "collective": ["allreduce"] * 3,
                        "in_bytes": [100, 300, 1000], "out_bytes": [100, 300, 1000], "group_size": [8, 8, 2]},
    })
    with Engine([run]) as eng:
        got = {r["ranks"]: r for r in eng.query("nccl").to_pylist()}
    assert set(got) == {8, 2}
    # n = 8: 400 B in 20 ns = 2e10 B/s, busbw 3.5e10; n = 2: 1000 B in 20 ns = 5e10 B/s, busbw 5e10
    assert (got[8]["count"], got[8]["message_bytes"], got[8]["bus_factor"]) == (2, 400, 1.75)
    assert got[8]["algbw_bytes_per_s"] == pytest.approx(2e10) and got[8]["busbw_bytes_per_s"] == pytest.approx(3.5e10)
    assert (got[2]["count"], got[2]["bus_factor"]) == (1, 1.0)
    assert got[2]["busbw_bytes_per_s"] == pytest.approx(5e10)


def test_damaged_sizes_are_null_not_an_error(tmp_path):
    # a size beyond int64, a group size of 1e400, non-text collective/dtype, and elements x bytes
    # beyond int64: the rows are kept, the unknown sizes are null, the conversion succeeds
    text = ('{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":7,"tid":7,'
            '"ts":1,"dur":1,"args":{"correlation":1}},'
            '{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_x","pid":0,"tid":3,"ts":5,"dur":1,'
            '"args":{"device":0,"stream":3,"correlation":1,"Collective name":["x"],"dtype":5,'
            '"In msg nelems":99999999999999999999999,"Out msg nelems":"12","Group size":1e400}},'
            '{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_x","pid":0,"tid":3,"ts":7,"dur":1,'
            '"args":{"device":0,"stream":3,"correlation":2,"Collective name":"allreduce","dtype":"Float",'
            '"In msg nelems":4611686018427387904,"Out msg nelems":4611686018427387904}}]}')
    path = tmp_path / "bad.json"
    path.write_text(text)
    run = convert([path], tmp_path / "run")
    got = rows(run, "SELECT collective, dtype, element_bytes, in_elements, out_elements, in_bytes, out_bytes, "
                    "group_size FROM collectives ORDER BY start_ns")
    assert [tuple(r.values()) for r in got] == [
        ("['x']", "5", None, None, 12, None, None, None),
        ("allreduce", "Float", 4, 2**62, 2**62, None, None, None),
    ]
