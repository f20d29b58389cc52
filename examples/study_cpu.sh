#!/usr/bin/env bash
# The study on a CPU-only machine: tiny presets, 1 and 2 Gloo ranks, fp32 and bf16, collected
# with `tracekit collect`, then one `tracekit study` report.
#
#   bash examples/study_cpu.sh [OUT_DIR]          # default: study-cpu
#
# Environment: WORKLOADS (default "resnet_cifar"; any IDs from `tracekit workloads`),
# PROFILER (default auto: nsys when on PATH -- it records the CPU scheduling the cpu table
# needs and the DDP `comm allreduce` ranges -- else the PyTorch profiler), STEPS (default 3),
# WARMUP (default 1), TIMEOUT (seconds per profiler command, default 600).
# Writes OUT_DIR/runs/<workload>_<precision>_<n>rank/ and OUT_DIR/study/report.html with
# scaling.csv, precision.csv, cpu.csv, characterization.csv (empty: ncu needs a GPU; the report
# says so), communication.csv and interconnect.csv, each also as Parquet.
set -euo pipefail
OUT=${1:-study-cpu}
WORKLOADS=${WORKLOADS:-resnet_cifar}
PROFILER=${PROFILER:-auto}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
TIMEOUT=${TIMEOUT:-600}
# torchrun gives each rank one thread; one process alone would take every core
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

runs=()
for w in $WORKLOADS; do
  for prec in fp32 bf16; do
    for n in 1 2; do
      run="$OUT/runs/${w}_${prec}_${n}rank"
      tracekit collect "$w" --preset tiny --precision "$prec" --nproc "$n" \
          --steps "$STEPS" --warmup-steps "$WARMUP" --profiler "$PROFILER" \
          --timeout "$TIMEOUT" --force -o "$run"
      runs+=("$run")
    done
  done
done

tracekit study "${runs[@]}" -o "$OUT/study" --title "tracekit study (CPU, tiny presets)" --force
echo "open $OUT/study/report.html"
