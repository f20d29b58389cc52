"""Validate `tracekit whatif` against real reruns on a GPU: pairs of runs where the second makes
the change a scenario predicts from the first (issue 34, docs/whatif.md "Validation").

    python benchmarks/whatif_gpu_pairs.py -o /tmp/pairs [--steps 8] [--batch 64]
    python benchmarks/whatif_gpu_pairs.py -o /tmp/pairs --device cpu --steps 3 --batch 8   # smoke

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
``--device cpu`` is a smoke test of the script itself (profile, convert, whatif, table) on a
machine without a GPU: the CUDA-graph and AMP pairs are skipped, and the
predictions are whatever a CPU run's graph allows (step marks only: ``launch=0`` and
``kernels:`` are n/a there, docs/whatif.md), so its numbers validate nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _model(torch, width: int, device: str):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10)).to(device)


def _train(out: Path, steps: int, batch: int, *, amp=False, graphs=False, delay_s=0.0, device="cuda") -> Path:
    """One profiled run; returns the trace file."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    m = _model(torch, 64, device)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(batch, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast(device, enabled=amp, **({} if cuda else {"dtype": torch.bfloat16})):
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
    sync()
    trace = out.with_suffix(".json")
    # one cycle, exported when it ends: an export after the profiler's context (as before) held
    # only the events of the next, empty cycle (found by --device cpu: "holds no profiler events")
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])],
                 schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        for _ in range(steps + 1):
            if delay_s:
                time.sleep(delay_s)  # host work of known length
            run()
            prof.step()
        sync()
    return trace


def _tk(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], check=True,
                          capture_output=True, text=True).stdout


def _median_step(run: Path, scenario: str = "baseline") -> tuple[float, float]:
    rows = json.loads(_tk("whatif", str(run), "-s", scenario, "-f", "json"))
    measured = statistics.median(r["measured_ns"] for r in rows[1:] or rows)  # the first step warms up
    rows = [r for r in rows if r["predicted_ns"] is not None][1:]
    return measured, statistics.median(r["predicted_ns"] for r in rows) if rows else float("nan")


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
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: a smoke test of the script without a GPU (its numbers validate nothing)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    print("pair | scenario | measured first ms | measured second ms | predicted ms | error %")
    for k, (name, first, second, scenario) in enumerate(PAIRS):
        if a.device == "cpu" and (second.get("graphs") or second.get("amp")):
            # CUDA graphs need a GPU; CPU bfloat16 autocast has no tensor-core kernels to scale
            # (a CPU run has no kernels table) and took 13x the fp32 step on the smoke machine
            print(f"{name} | {scenario or 'kernels:gemm|conv|xmma|cutlass=F'} | skipped on CPU | | |")
            continue
        runs = []
        for j, kw in enumerate((first, second)):
            kw = dict(kw)
            batch = a.batch // 2 if kw.pop("half", False) else a.batch
            trace = _train(a.out / f"pair{k}_{j}", a.steps, batch, device=a.device, **kw)
            _tk("convert", str(trace), "-o", str(a.out / f"pair{k}_{j}.run"))
            runs.append(a.out / f"pair{k}_{j}.run")
        m1, _ = _median_step(runs[0])
        m2, _ = _median_step(runs[1])
        if scenario is None and "AMP" in name:
            ratio = _gemm_ratio(runs)
            if ratio is None:
                print(f"{name} | kernels:gemm|conv|xmma|cutlass=F | {m1 / 1e6:.3f} | {m2 / 1e6:.3f} | n/a: "
                      "no GEMM or convolution kernels in the runs | n/a")
                continue
            scenario = f"kernels:gemm|conv|xmma|cutlass={ratio:.3f}"
        if scenario is None:  # host delay: the first run has it, the second not
            scenario = f"host={max(0.0, 1 - 5e6 / max(_host_ns(runs[0]), 1)):.3f}"
        _, pred = _median_step(runs[0], scenario)
        if pred != pred:  # NaN: the scenario cannot act on this run
            print(f"{name} | {scenario} | {m1 / 1e6:.3f} | {m2 / 1e6:.3f} | n/a | n/a")
            continue
        print(f"{name} | {scenario} | {m1 / 1e6:.3f} | {m2 / 1e6:.3f} | {pred / 1e6:.3f} | "
              f"{100 * (pred - m2) / m2:+.1f}")
    return 0


def _gemm_ratio(runs) -> float | None:
    """Second run's GEMM/conv kernel time over the first's (the AMP speedup of those kernels);
    None when the runs have none (a CPU run has no kernels table)."""
    sql = ("SELECT coalesce(sum(duration_ns), 0) FROM kernels WHERE regexp_matches(name, "
           "'gemm|conv|xmma|cutlass', 'i')")
    try:
        t = [float(_tk("sql", sql, str(r), "-f", "csv").splitlines()[1]) for r in runs]
    except subprocess.CalledProcessError:
        return None
    return t[1] / t[0] if t[0] and t[1] else None


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
