"""Cost of reading MLPerf training result logs: ``tracekit convert`` of a results folder into a
run folder (parse, system descriptions, Parquet, manifest with checksums) against the baseline,
mlperf_logging's own parser (``compliance_checker.mlp_parser.parse_file`` with the round's
ruleset) reading the same files into memory, as a ratio.

    python benchmarks/mllog_convert.py [FOLDER ...]   # default: the 130 x DGX-1 ResNet-50 logs (12 MB)

Each measurement is the best of 3 (CPU seconds and wall seconds); prints one line per folder
(docs/mlperf.md, "Speed").
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tracekit.collectors.mllog import expand_inputs
from tracekit.convert import convert

DEFAULT = (Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "mllog" / "training_results_v0.6"
           / "NVIDIA" / "results" / "dgx1_n130_ngc19.05_mxnet")


def best(fn, n: int = 3) -> tuple[float, float]:
    runs = []
    for _ in range(n):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.process_time() - c0, time.perf_counter() - w0))
    return min(runs)


def measure(folder: Path) -> str:
    """One line: tracekit convert of ``folder`` against mlperf_logging's parser of its files."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    files = expand_inputs(folder)
    size = sum(p.stat().st_size for p in files)
    m = re.search(r"training_results_v(\d+)\.(\d+)", str(folder))
    ruleset = f"{m.group(1)}.{m.group(2)}.0" if m else "0.6.0"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"

        def ours():
            shutil.rmtree(out, ignore_errors=True)
            convert([folder], out)

        ours_cpu, ours_wall = best(ours)
    base_cpu, base_wall = best(lambda: [parse_file(str(p), ruleset=ruleset) for p in files])
    return (f"{folder.name}: {len(files)} files, {size / 1e6:.1f} MB: tracekit convert {ours_cpu:.2f} s CPU "
            f"({ours_wall:.2f} s wall), mlperf_logging parse_file {base_cpu:.2f} s CPU "
            f"({base_wall:.2f} s wall); ratio {ours_cpu / base_cpu:.2f}")


def main(folders: list[Path]) -> None:
    for folder in folders:
        print(measure(folder))


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]] or [DEFAULT])
