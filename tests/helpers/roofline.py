"""Hand-written ncu tables for the roofline golden tests: launches, counters, a report's peaks."""

from __future__ import annotations

OP = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"


def ncu_tables(launches: list[dict], metrics: dict[int, dict[str, float]]) -> dict:
    """ncu_launches / ncu_metrics column dicts; metric values are given in base units already."""
    rows = [(lid, name, v) for lid, ms in metrics.items() for name, v in ms.items()]
    return {
        "ncu_launches": {k: [row.get(k) for row in launches] for k in
                         ("launch_id", "kernel_name", "device_name", "compute_capability")},
        "ncu_metrics": {
            "launch_id": [r[0] for r in rows],
            "metric_name": [r[1] for r in rows],
            "unit": [""] * len(rows),
            "value": [float(r[2]) for r in rows],
            "base_unit": [""] * len(rows),
            "raw_value": [str(r[2]) for r in rows],
        },
    }


def counts(d=(0, 0, 0), f=(0, 0, 0), h=(0, 0, 0)) -> dict[str, float]:
    """Instruction counters (add, mul, fma) per precision."""
    out = {}
    for p, vals in (("d", d), ("f", f), ("h", h)):
        for op, v in zip(("add", "mul", "fma"), vals):
            out[OP.format(p + op)] = v
    return out


PEAKS = {  # a report's own peaks: see expected ceilings below
    OP.format("ffma") + ".peak_sustained": 64,     # 2 x 64 inst/cycle x 1e9 Hz = 1.28e11 FLOP/s
    OP.format("dfma") + ".peak_sustained": 2,      # 2 x 2 x 1e9 = 4e9 FLOP/s
    "sm__cycles_elapsed.avg.per_second": 1e9,
    "dram__bytes.sum.peak_sustained": 10, "dram__cycles_elapsed.avg.per_second": 2e9,  # 2e10 B/s
    "lts__t_bytes.sum.peak_sustained": 40, "lts__cycles_elapsed.avg.per_second": 1e9,  # 4e10 B/s
    "l1tex__t_bytes.sum.peak_sustained": 100, "l1tex__cycles_elapsed.avg.per_second": 1e9,  # 1e11 B/s
}

GEMM = "gemm(float*, int)"
