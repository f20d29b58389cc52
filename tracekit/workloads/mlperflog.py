"""The runner's MLPerf log: ``:::MLLOG`` lines written with MLPerf's own logger
(``mlperf_logging.mllog``) by rank 0, so that a collected run carries a result log beside its
profile (``tracekit collect`` converts it into ``mlperf_events`` / ``mlperf_runs``; docs/mlperf.md).

What is logged, in order: ``submission_*`` (benchmark = the workload's MLPerf name, resnet50
being 'resnet'; org 'tracekit'; division 'open'; status 'onprem'; platform '<world size>x<device
type>') and ``init_start``; before the first step ``global_batch_size`` (per-rank batch x world
size), ``init_stop``, ``run_start``, ``block_start`` (first_epoch_num 1, epoch_count 1) and
``epoch_start`` (epoch_num 1): the runner's fixed number of steps, warm-up included, is one epoch
of one block; after the last step ``epoch_stop``, ``block_stop``, ``train_samples`` (samples per
step x steps), ``tracked_stats`` (throughput in samples/s and the mean step time over the
measured steps; metadata step = steps run) and ``run_stop`` with status 'success' (every loss
finite) or 'aborted'. run_stop - run_start is the run's time to train (mlperf_runs.time_to_train_s).

Without the ``mlperf-logging`` package, nothing is logged (:func:`open_log` says why on stderr).
"""

from __future__ import annotations

import logging
import math
import sys

ORG = "tracekit"
MLLOG = "mllog.txt"  # the log's name in tracekit collect's work folder and in mlperf_events.file
# the runner's workloads whose MLPerf benchmark has another name (the others are spelled alike)
BENCHMARKS = {"resnet50": "resnet"}


class _NoLog:
    def __getattr__(self, name):
        return lambda *a, **k: None


class RunLog:
    """Rank 0's MLLOG file of one run (see the module's description)."""

    def __init__(self, path: str):
        from mlperf_logging import mllog

        self.mllog = mllog
        lg = logging.getLogger(f"tracekit.mllog.{id(self)}")
        lg.propagate = False
        lg.setLevel(logging.INFO)
        self.handler = logging.FileHandler(path, mode="w", encoding="utf-8")
        lg.addHandler(self.handler)
        self.log = mllog.mllog.MLLogger(logger=lg, default_stack_offset=2)

    def begin(self, workload: str, world: int, device_name: str) -> None:
        c = self.mllog.constants
        self.log.event(c.SUBMISSION_BENCHMARK, BENCHMARKS.get(workload, workload))
        self.log.event(c.SUBMISSION_ORG, ORG)
        self.log.event(c.SUBMISSION_DIVISION, c.OPEN)
        self.log.event(c.SUBMISSION_STATUS, c.ONPREM)
        self.log.event(c.SUBMISSION_PLATFORM, f"{world}x{device_name}")
        self.log.start(c.INIT_START)

    def run_start(self, global_batch_size: int) -> None:
        c = self.mllog.constants
        self.log.event(c.GLOBAL_BATCH_SIZE, global_batch_size)
        self.log.end(c.INIT_STOP)
        self.log.start(c.RUN_START)
        self.log.start(c.BLOCK_START, metadata={c.FIRST_EPOCH_NUM: 1, c.EPOCH_COUNT: 1})
        self.log.start(c.EPOCH_START, metadata={c.EPOCH_NUM: 1})

    def run_stop(self, step_ns: list[int], warmup: int, samples_per_step: int, losses: list[float]) -> None:
        c = self.mllog.constants
        measured = step_ns[warmup:]
        self.log.end(c.EPOCH_STOP, metadata={c.EPOCH_NUM: 1})
        self.log.end(c.BLOCK_STOP, metadata={c.FIRST_EPOCH_NUM: 1})
        self.log.event(c.TRAIN_SAMPLES, samples_per_step * len(step_ns))
        if measured and sum(measured):
            self.log.event("tracked_stats", {"throughput": samples_per_step * len(measured) / (sum(measured) / 1e9),
                                             "step_ms": sum(measured) / len(measured) / 1e6},
                           metadata={"step": len(step_ns)})
        ok = all(math.isfinite(v) for v in losses)
        self.log.end(c.RUN_STOP, metadata={c.STATUS: c.SUCCESS if ok else c.ABORTED, c.EPOCH_NUM: 1})
        self.handler.close()


def open_log(path: str | None, rank: int):
    """A :class:`RunLog` writing ``path`` on rank 0; a no-op log elsewhere, without a path, or
    without mlperf_logging (said on stderr)."""
    if path is None or rank != 0:
        return _NoLog()
    try:
        return RunLog(path)
    except ImportError:
        print("tracekit.workloads: no MLPerf log: the mlperf-logging package is not installed "
              "(pip install mlperf-logging)", file=sys.stderr)
        return _NoLog()


def run_tables(path, extra_manifest: dict) -> dict:
    """The runner's MLPerf log at ``path`` as a collected run folder's mlperf_events and
    mlperf_runs (file :data:`MLLOG`); {} when the runner wrote none. Its manifest entry (counts,
    lines skipped, warnings) goes to ``extra_manifest['collect']['mllog']``."""
    from pathlib import Path

    import pyarrow as pa

    from tracekit.collectors.mllog import read_tables

    if not Path(path).is_file():
        return {}
    parts, warnings, source = read_tables([Path(path)])
    out = {}
    for name, tables in parts.items():
        t = pa.concat_tables(tables)
        out[name] = t.set_column(t.schema.get_field_index("file"), "file", pa.array([MLLOG] * t.num_rows))
    skipped = next(iter(source["skipped"].values()), {})
    extra_manifest["collect"]["mllog"] = {**source, "skipped": skipped, "warnings": warnings}
    return out
