#!/usr/bin/env bash
# The full study on a GPU box: workloads x {1, 2, 4, 8} GPUs x {fp32, amp}, one nsys pass per
# point (step time, kernels, NCCL, host CPU) and one ncu pass per workload and precision on one
# GPU (FLOP/s and DRAM traffic for the characterization scatter and the tensor-core share),
# then one `tracekit study` report.
#
#   bash examples/study_gpu.sh [OUT_DIR]            # default: study-gpu
#
# Environment:
#   WORKLOADS     default: the MLPerf set plus DAWNBench and DeepBench-style kernels
#   GPUS          default "1 2 4 8" (counts above the machine's GPUs are skipped)
#   PRECISIONS    default "fp32 amp"
#   PRESET        default full (the published shapes); tiny for a quick check
#   STEPS/WARMUP  default 20 / 5
#   INTERCONNECT  label of this box's GPU links for the report (default: NVLink when
#                 `nvidia-smi topo -m` shows NV# links, else PCIe)
#   PCIE_PASS=1   also run every multi-GPU point with NCCL_P2P_DISABLE=1 (NCCL through host
#                 memory over PCIe), labelled PCIe: the report's NVLink-against-PCIe section
#   NCU=0         skip the ncu passes (the report then says which figures need them)
#   TIMEOUT       seconds per profiler command (default 3600)
# A cell whose collect fails is named and skipped; the report is built from the cells that
# succeeded, and the script then exits 1 (0 when every cell succeeded).
set -uo pipefail
OUT=${1:-study-gpu}
WORKLOADS=${WORKLOADS:-"resnet50 ssd maskrcnn transformer gnmt ncf dlrm minigo bert resnet_cifar gemm conv rnn"}
GPUS=${GPUS:-"1 2 4 8"}
PRECISIONS=${PRECISIONS:-"fp32 amp"}
PRESET=${PRESET:-full}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
TIMEOUT=${TIMEOUT:-3600}
NCU=${NCU:-1}
PCIE_PASS=${PCIE_PASS:-0}

have=$(nvidia-smi -L | wc -l)
if [ -z "${INTERCONNECT:-}" ]; then
  if nvidia-smi topo -m 2>/dev/null | grep -qE '\bNV[0-9]+\b'; then INTERCONNECT=NVLink; else INTERCONNECT=PCIe; fi
fi
mkdir -p "$OUT/runs"
override="$OUT/override.toml"
echo "# written by examples/study_gpu.sh: the GPU links of each run" > "$override"

runs=()
failed=()
collect() {  # RUN_NAME INTERCONNECT_LABEL ARGS...
  local name=$1 link=$2; shift 2
  if tracekit collect "$@" --timeout "$TIMEOUT" --force -o "$OUT/runs/$name"; then
    runs+=("$OUT/runs/$name")
    printf '[runs.%s]\ninterconnect = "%s"\n' "$name" "$link" >> "$override"
  else
    echo "study_gpu.sh: $name failed; going on without it" >&2
    failed+=("$name")
  fi
}

for w in $WORKLOADS; do
  for prec in $PRECISIONS; do
    for n in $GPUS; do
      [ "$n" -le "$have" ] || { echo "skip $w $prec ${n} GPUs: only $have GPUs"; continue; }
      # allreduce needs two ranks; the other DeepBench kernels run on one GPU only
      case $w in gemm|conv|rnn) [ "$n" -eq 1 ] || continue ;; allreduce) [ "$n" -gt 1 ] || continue ;; esac
      common=("$w" --preset "$PRESET" --precision "$prec" --nproc "$n" --steps "$STEPS" --warmup-steps "$WARMUP")
      collect "${w}_${prec}_${n}gpu" "$INTERCONNECT" "${common[@]}" --profiler nsys
      if [ "$PCIE_PASS" = 1 ] && [ "$n" -gt 1 ] && [ "$INTERCONNECT" != PCIe ]; then
        NCCL_P2P_DISABLE=1 collect "${w}_${prec}_${n}gpu_pcie" PCIe "${common[@]}" --profiler nsys
      fi
    done
    if [ "$NCU" = 1 ] && [ "$w" != allreduce ]; then
      # one measured step under ncu on one GPU (kernel replay makes it slow: few steps)
      collect "${w}_${prec}_ncu" "$INTERCONNECT" "$w" --preset "$PRESET" --precision "$prec" \
          --steps 1 --warmup-steps 2 --profiler ncu
    fi
  done
done

if [ ${#runs[@]} -eq 0 ]; then
  echo "study_gpu.sh: every collect failed (${failed[*]}); no report" >&2
  exit 1
fi
tracekit study "${runs[@]}" --override "$override" -o "$OUT/study" \
    --title "tracekit study ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $have GPUs)" --force || exit 1
echo "open $OUT/study/report.html"
if [ ${#failed[@]} -gt 0 ]; then
  echo "study_gpu.sh: the report lacks ${#failed[@]} failed cell(s): ${failed[*]}" >&2
  exit 1
fi
