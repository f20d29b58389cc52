"""HTA's critical path of given ProfilerStep ranges of one Kineto trace, as JSON on stdout: the peer
of benchmarks/whatif_hta.py (issue 34 item 5). Runs under HTA's own Python, never tracekit's:

    /work/htavenv/bin/python benchmarks/hta_critical_path.py TRACE.json[.gz] STEP [STEP ...]

HTA (traceinsight 0.6.1 or HolisticTraceAnalysis 0.5.0, both ``import hta`` with the same
critical-path API) is run with nanosecond rounding disabled and the last profiler step kept, so
its events are the trace's own.
One JSON object per step: the annotation's window [start_us, end_us] on HTA's (rank-aligned)
clock, whether the analysis succeeded, the path's first and last node times, the sum of its edge
weights and that sum per HTA category: ``bound_by`` where HTA gives one (cpu_bound,
data_loading, gpu_compute_bound, gpu_communication_bound, gpu_kernel_kernel_overhead,
gpu_kernel_launch_overhead), else the edge type (``dependency`` between nested CPU operators,
``sync`` for a synchronization edge). Times in microseconds, as HTA keeps them.
"""

import json
import logging
import os
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"  # HolisticTraceAnalysis 0.5.0 reads the environment
from hta.analyzers.critical_path_analysis import CPEdgeType  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def _hta_version() -> str:
    for dist in ("traceinsight", "HolisticTraceAnalysis"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            pass
    return "hta"


def _window(ta, name):
    """The CPU annotation `name`'s (start, end) and its index among the events HTA matches by
    name (HTA also lists the GPU-side gpu_user_annotation of the same name)."""
    df = ta.t.get_trace(0)
    sym = ta.t.symbol_table.get_sym_id_map()
    rows = df[(df["name"] == sym[name]) & (df["stream"] < 0)]
    allrows = df[df["name"].isin([v for k, v in sym.items() if name in k])]
    pos = list(allrows.index).index(rows.index[0])
    r = rows.iloc[0]
    return float(r["ts"]), float(r["ts"] + r["dur"]), pos


def _one(ta, name):
    start, end, pos = _window(ta, name)
    out = {"step": name, "start_us": start, "end_us": end}
    res = ta.critical_path_analysis(rank=0, annotation=name, instance_id=pos)
    if res is None or not res[1]:
        out["ok"] = False
        return out
    g = res[0]
    nodes = [g.node_list[n] for n in g.critical_path_nodes]
    per: dict = {}
    total = 0.0
    for e in g.critical_path_edges_set:
        if e.type == CPEdgeType.DEPENDENCY:
            key = "dependency"
        elif e.type == CPEdgeType.SYNC_DEPENDENCY:
            key = "sync"
        else:
            key = None
        per.setdefault(key, 0.0)
        per[key] += float(e.weight)
        total += float(e.weight)
    bd = g.get_critical_path_breakdown()
    by = bd[bd["bound_by"] != ""].groupby("bound_by").duration.sum()
    per.pop(None, None)
    per.update({k: float(v) for k, v in by.items()})
    out.update(ok=True, first_node_us=float(nodes[0].ts), last_node_us=float(nodes[-1].ts),
               weight_us=total, by=per, edges=len(g.critical_path_edges_set))
    return out


def main():
    logging.disable(logging.WARNING)
    try:  # traceinsight 0.6: an options object (the environment variable is read once, earlier)
        from hta.configs.env_options import HTAEnvOptions
        HTAEnvOptions.instance().set_disable_ns_rounding(True)
    except ImportError:
        pass
    trace = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as d:
        suffix = ".json.gz" if trace.name.endswith(".gz") else ".json"
        (Path(d) / f"rank0{suffix}").symlink_to(trace)
        ta = TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
        print(json.dumps({"hta": _hta_version(), "steps": [_one(ta, s) for s in sys.argv[2:]]}))


if __name__ == "__main__":
    main()
