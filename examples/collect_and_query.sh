#!/usr/bin/env bash
# Collect a tiny training run under a profiler and print its steps and phases.
#
#   bash examples/collect_and_query.sh [WORKLOAD] [PROFILER] [NPROC]
#
# WORKLOAD: any ID from `tracekit workloads` (default resnet_cifar, the DAWNBench-style ResNet);
# PROFILER: auto (nsys when on PATH, else the PyTorch profiler), nsys, torch or ncu (GPU only);
# NPROC: data-parallel processes under torchrun (Gloo on CPUs, NCCL on GPUs).
# Works on a CPU-only machine; on a GPU box use --preset full for the published model shapes.
set -euo pipefail
WORKLOAD=${1:-resnet_cifar}
PROFILER=${2:-auto}
NPROC=${3:-1}
OUT=${OUT:-runs/${WORKLOAD}-${PROFILER}-${NPROC}p}

tracekit collect "$WORKLOAD" -o "$OUT" --profiler "$PROFILER" --nproc "$NPROC" \
    --steps 3 --warmup-steps 1 --force
# One row per rank and step: wall time, data/forward/backward/optimizer/comm time, GPU busy time
# (empty on CPU-only traces), samples per second; warm-up steps are marked.
tracekit query step_summary "$OUT"
