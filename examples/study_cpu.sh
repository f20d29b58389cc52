#!/usr/bin/env bash
# The study on a CPU-only machine: tiny presets, 1 and 2 Gloo ranks, fp32 and bf16, collected
# with `tracekit collect`, then one `tracekit study` report.
#
#   bash examples/study_cpu.sh [OUT_DIR]          # default: study-cpu
#
# Environment: WORKLOADS (default "resnet_cifar"; any IDs from `tracekit workloads`),
# PROFILER (default auto: nsys when on PATH -- it records the CPU scheduling the cpu table
# needs and the DDP `comm allreduce` ranges -- else the PyTorch profiler), STEPS (default 3),
# WARMUP (default 1), TIMEOUT (seconds per profiler command, default 600), THREADS (intra-op
# threads per rank, default 1 as torchrun gives each rank: the 1-rank runs get the same),
# PROFILER_ARGS (passed to the profiler with --extra-profiler-args, e.g. "--sample=none
# --cpuctxsw=none" where nsys 2022.4 is slow to finish on a busy machine; the cpu table then
# has no nsys data, and the report says so).
# Writes OUT_DIR/runs/<workload>_<precision>_<n>rank/ and OUT_DIR/study/report.html with
# scaling.csv, precision.csv, cpu.csv, characterization.csv (empty: ncu needs a GPU; the report
# says so), communication.csv and interconnect.csv, each also as Parquet.
# A cell whose collect fails is named and skipped; the report is built from the cells that
# succeeded, and the script then exits 1 (0 when every cell succeeded).
set -uo pipefail
OUT=${1:-study-cpu}
WORKLOADS=${WORKLOADS:-resnet_cifar}
PROFILER=${PROFILER:-auto}
STEPS=${STEPS:-3}
WARMUP=${WARMUP:-1}
TIMEOUT=${TIMEOUT:-600}
THREADS=${THREADS:-1}
PROFILER_ARGS=${PROFILER_ARGS:-}
extra=()
[ -n "$PROFILER_ARGS" ] && extra=(--extra-profiler-args "$PROFILER_ARGS")

runs=()
failed=()
for w in $WORKLOADS; do
  for prec in fp32 bf16; do
    for n in 1 2; do
      run="$OUT/runs/${w}_${prec}_${n}rank"
      if tracekit collect "$w" --preset tiny --precision "$prec" --nproc "$n" \
          --threads-per-rank "$THREADS" --steps "$STEPS" --warmup-steps "$WARMUP" \
          --profiler "$PROFILER" --timeout "$TIMEOUT" "${extra[@]}" --force -o "$run"; then
        runs+=("$run")
      else
        echo "study_cpu.sh: ${w} ${prec} ${n} rank(s) failed; going on without it" >&2
        failed+=("${w}_${prec}_${n}rank")
      fi
    done
  done
done

if [ ${#runs[@]} -eq 0 ]; then
  echo "study_cpu.sh: every collect failed (${failed[*]}); no report" >&2
  exit 1
fi
tracekit study "${runs[@]}" -o "$OUT/study" --title "tracekit study (CPU, tiny presets)" --force || exit 1
echo "open $OUT/study/report.html"
if [ ${#failed[@]} -gt 0 ]; then
  echo "study_cpu.sh: the report lacks ${#failed[@]} failed cell(s): ${failed[*]}" >&2
  exit 1
fi
