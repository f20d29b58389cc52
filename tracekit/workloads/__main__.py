"""``python -m tracekit.workloads WORKLOAD [options]``: train one workload (also under torchrun).

Prints one summary line per run on rank 0; ``--result-json PATH`` writes the result (rank 0, or
one file per rank when PATH contains ``{rank}``). Bad options: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from tracekit.errors import TracekitError, one_line
from tracekit.workloads.loop import DEVICES, PRECISIONS, RunConfig, run
from tracekit.workloads.registry import PRESETS, REGISTRY


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tracekit.workloads",
        description="Train one NVTX-annotated workload on synthetic data (see docs/workloads.md). "
        "Run under torchrun for data-parallel training.")
    p.add_argument("workload", choices=list(REGISTRY), metavar="WORKLOAD",
                   help="one of: " + ", ".join(REGISTRY))
    p.add_argument("--preset", choices=PRESETS, default="tiny", help="model size (default: tiny)")
    p.add_argument("--steps", type=int, default=10, help="measured steps (default: 10)")
    p.add_argument("--warmup-steps", type=int, default=2, help="warm-up steps before them (default: 2)")
    p.add_argument("--batch-size", type=int, default=None, help="per-rank batch (default: the preset's)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32, amp (fp16 autocast + GradScaler, CUDA only) or bf16 autocast")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory layout for conv models")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--device", choices=DEVICES, default="auto", help="default: cuda when available")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and synthetic data")
    p.add_argument("--result-json", metavar="PATH", default=None,
                   help="write the result JSON here ({rank} in PATH: one file per rank)")
    p.add_argument("--torch-profile", metavar="DIR", default=None,
                   help="record torch.profiler over the measured steps; one Chrome trace per rank "
                   "in DIR (rankN.json)")
    p.add_argument("--profile-memory", action="store_true",
                   help="with --torch-profile: record every allocation and free "
                   "(torch.profiler profile_memory=True)")
    p.add_argument("--mllog", metavar="PATH", default=None,
                   help="rank 0 writes an MLPerf log (:::MLLOG lines, mlperf_logging.mllog) here")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    config = RunConfig(workload=a.workload, preset=a.preset, steps=a.steps, warmup_steps=a.warmup_steps,
                       batch_size=a.batch_size, precision=a.precision, channels_last=a.channels_last,
                       compile=a.compile, device=a.device, seed=a.seed, result_json=a.result_json,
                       torch_profile=a.torch_profile, profile_memory=a.profile_memory, mllog=a.mllog,
                       command=[sys.executable, "-m", "tracekit.workloads", *argv])
    try:
        r = run(config)
    except TracekitError as exc:
        print(f"tracekit.workloads: error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    if r["rank"] == 0:
        print(f"{r['workload']} {r['preset']} {r['precision']} on {r['world_size']} x {r['device_type']}: "
              f"{r['steps']} steps (+{r['warmup_steps']} warm-up), batch {r['batch_size']}/rank, "
              f"{r['mean_step_ns'] / 1e6:.2f} ms/step, {r['samples_per_s']:.1f} samples/s, "
              f"last loss {r['losses'][-1]:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
