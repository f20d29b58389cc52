"""NVTX-annotated PyTorch training workloads (MLPerf Training v0.5-v0.7, DAWNBench, DeepBench).

- :data:`REGISTRY`: workload name -> :class:`~tracekit.workloads.registry.WorkloadSpec`
  (suite, description, presets with shapes and default per-rank batch sizes). Needs no torch.
- :func:`run` (``RunConfig`` or a dict of its fields) -> result dict; also
  ``python -m tracekit.workloads WORKLOAD ...`` (works under ``torchrun``).
- NVTX convention: :mod:`tracekit.workloads.annotate` and docs/workloads.md.
"""

from tracekit.schema.step_ranges import DOMAIN, PHASES, STEP_RE, parse_step_message, step_message
from tracekit.workloads.loop import RunConfig, run
from tracekit.workloads.registry import PRESETS, REGISTRY, SUITES, Preset, WorkloadSpec

__all__ = ["REGISTRY", "SUITES", "PRESETS", "Preset", "WorkloadSpec", "RunConfig", "run", "DOMAIN",
           "PHASES", "STEP_RE", "step_message", "parse_step_message"]
