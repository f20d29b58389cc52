"""``tracekit collect``: run an NVTX-annotated workload under nsys, ncu or the PyTorch profiler
and convert the output into a run folder.

- :mod:`tracekit.collect.tools`: finding the profilers and what the installed versions accept
- :mod:`tracekit.collect.commands`: the exact command lines (pure functions)
- :mod:`tracekit.collect.orchestrate`: running them, exporting, converting, the manifest

Manifest fields added to the run folder (besides what ``tracekit convert`` writes):

- ``workload``: name, suite, task, preset, precision, batch_size (per rank), global_batch_size
  and samples_per_step (all ranks), world_size, steps, warmup_steps, channels_last, compile,
  device_type, seed, ddp_backend, shapes, nvtx_backend, and ``ranks``: one entry per rank with
  its ``pid`` (maps trace processes to ranks), hostname, device, device_name and the runner's
  own per-step wall times (``step_wall_ns``, perf_counter, an independent check of the trace)
- ``environment``: versions (python, torch, cuda, cudnn, nccl, driver, nvtx, tracekit, and the
  profiler: nsys or ncu), gpus (names), host_cpu (model, cores, physical_cores), hostname, os
- ``collect``: profiler, commands (each as a shell-quoted line) and argv, wall_s, notes,
  requested options, raw (files kept under ``raw/`` with ``--keep-raw``)
"""

from tracekit.collect.commands import Workload
from tracekit.collect.orchestrate import PROFILERS, CollectOptions, ProfilerError, choose_profiler, collect

__all__ = ["Workload", "CollectOptions", "ProfilerError", "PROFILERS", "choose_profiler", "collect"]
