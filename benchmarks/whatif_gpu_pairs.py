"""Validate `tracekit whatif` against real reruns on a GPU: pairs of runs where the second makes
the change a scenario predicts from the first (issue 34, docs/whatif.md "Validation").

    python benchmarks/whatif_gpu_pairs.py -o /tmp/pairs [--steps 8] [--batch 64]

Each pair trains the same small CNN (torchvision-free, synthetic data) under the PyTorch
profiler for ``--steps`` steps (ProfilerStep#N), converts both traces with ``tracekit
convert``, runs ``tracekit whatif`` on the first run with the pair's scenario and prints, per
pair: the measured median step of each run, the prediction from the first, and the error
(predicted - measured second) / measured second. Pairs:

- eager vs CUDA graphs (``launch=0``: no launch overhead);
- fp32 vs AMP (``kernels:gemm|conv|xmma|cutlass=F`` with F = the measured ratio of those
  kernels' time, so the test is of the replay, not of a guessed tensor-core speedup);
- an injected host delay of D ms per step vs none (``host=F`` with F from the delay);
- batch B vs B/2 (``kernels:.=0.5``: every kernel about half as long).

Needs a CUDA GPU and minutes, not hours; writes only under ``-o``. Not run in CI. Not yet run:
no GPU machine was available when it was written (docs/whatif.md says where its table goes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _model(torch, width: int):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10)).cuda()


def _train(out: Path, steps: int, batch: int, *, amp=False, graphs=False, delay_s=0.0) -> Path:
    """One profiled run; returns the trace file."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    m = _model(torch, 64)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(batch, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", enabled=amp):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()

    run = step
    if graphs:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        run = g.replay
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    trace = out.with_suffix(".json")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=steps)) as prof:
        for _ in range(steps + 1):
            if delay_s:
                time.sleep(delay_s)  # host work of known length
            run()
            prof.step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(trace))
    return trace


def _tk(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], check=True,
                          capture_output=True, text=True).stdout


def _median_step(run: Path, scenario: str = "baseline") -> tuple[float, float]:
    rows = json.loads(_tk("whatif", str(run), "-s", scenario, "-f", "json"))
    rows = [r for r in rows if r["predicted_ns"] is not None][1:]  # the first step warms up
    return (statistics.median(r["measured_ns"] for r in rows),
            statistics.median(r["predicted_ns"] for r in rows)) if rows else (float("nan"),) * 2


PAIRS = [
    ("eager vs CUDA graphs", {}, {"graphs": True}, "launch=0"),
    ("fp32 vs AMP", {}, {"amp": True}, None),  # scenario from the measured GEMM/conv ratio
    ("host delay 5 ms vs none", {"delay_s": 0.005}, {}, None),  # host=F from the delay
    ("batch vs batch/2", {}, {"half": True}, "kernels:.=0.5"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    print("pair | scenario | measured first ms | measured second ms | predicted ms | error %")
    for k, (name, first, second, scenario) in enumerate(PAIRS):
        runs = []
        for j, kw in enumerate((first, second)):
            kw = dict(kw)
            batch = a.batch // 2 if kw.pop("half", False) else a.batch
            trace = _train(a.out / f"pair{k}_{j}", a.steps, batch, **kw)
            _tk("convert", str(trace), "-o", str(a.out / f"pair{k}_{j}.run"))
            runs.append(a.out / f"pair{k}_{j}.run")
        m1, _ = _median_step(runs[0])
        m2, _ = _median_step(runs[1])
        if scenario is None and "AMP" in name:
            scenario = f"kernels:gemm|conv|xmma|cutlass=F{_gemm_ratio(runs):.3f}".replace("=F", "=")
        if scenario is None:  # host delay: the first run has it, the second not
            scenario = f"host={max(0.0, 1 - 5e6 / max(_host_ns(runs[0]), 1)):.3f}"
        _, pred = _median_step(runs[0], scenario)
        print(f"{name} | {scenario} | {m1 / 1e6:.3f} | {m2 / 1e6:.3f} | {pred / 1e6:.3f} | "
              f"{100 * (pred - m2) / m2:+.1f}")
    return 0


def _gemm_ratio(runs) -> float:
    """Second run's GEMM/conv kernel time over the first's (the AMP speedup of those kernels)."""
    sql = ("SELECT sum(duration_ns) FROM kernels WHERE regexp_matches(name, "
           "'gemm|conv|xmma|cutlass', 'i')")
    t = [float(_tk("sql", sql, str(r), "-f", "csv").splitlines()[1]) for r in runs]
    return t[1] / t[0] if t[0] else 1.0


def _host_ns(run) -> float:
    """Median over steps (the first aside) of the host time on the step's critical path: the
    host time between calls that host=F scales where it binds the step."""
    rows = json.loads(_tk("query", "critical_path_summary", str(run), "-f", "json"))
    per: dict = {}
    for r in rows:
        if r["category"] == "host":
            per[r["step"]] = per.get(r["step"], 0) + r["time_ns"]
    vals = [v for _, v in sorted(per.items())][1:]
    return statistics.median(vals) if vals else 1.0


if __name__ == "__main__":
    sys.exit(main())
