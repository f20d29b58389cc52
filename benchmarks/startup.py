"""Start-up of the CLI against importing what it must, interleaved in one run (issue 39).

    python benchmarks/startup.py [--repeat 15] [--run RUN_FOLDER]

Pairs, each measured A B A B ... in the same loop so that the load of a shared machine falls on
both alike; medians and the ratio of the medians are printed (and with ``--json``, written):

- ``tracekit --help`` against ``python -c 'import typer'``;
- ``tracekit query kernel_summary RUN -f csv`` on a small run folder (the 3-kernel fixture
  export, converted here unless ``--run`` names one) against ``python -c 'import typer, duckdb'``
  (the issue's baseline) and against also importing the pyarrow modules the query reads the run
  folder's Parquet footers and writes its result with (``pyarrow.parquet``, ``pyarrow.csv``).

Every command is a fresh process of this Python (``-m tracekit``), stdout to /dev/null.

tracekit's modules are byte-compiled first (``compileall``, as ``pip install`` does): with
``PYTHONDONTWRITEBYTECODE`` set, as on this machine, an editable install never writes
``__pycache__`` and every run would compile tracekit's sources again, which the baselines
(typer, DuckDB, pyarrow: installed, so compiled) never pay. ``--no-compile`` measures without.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT.parent / "shared" / "fixtures" / "nsys" / "nsys2025.5_cuda_graph.sqlite"
PY = [sys.executable]


def wall(cmd: list[str]) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds: user + system) of one run of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def pairs(run: Path) -> list[tuple[str, list[str], str, list[str]]]:
    tk = PY + ["-m", "tracekit"]
    return [
        ("tracekit --help", tk + ["--help"], "python -c 'import typer'", PY + ["-c", "import typer"]),
        ("tracekit query kernel_summary (3 kernels)",
         tk + ["query", "kernel_summary", str(run), "-f", "csv"],
         "python -c 'import typer, duckdb'", PY + ["-c", "import typer, duckdb"]),
        ("tracekit query kernel_summary (3 kernels)",
         tk + ["query", "kernel_summary", str(run), "-f", "csv"],
         "python -c 'import typer, duckdb, pyarrow.parquet, pyarrow.csv'",
         PY + ["-c", "import typer, duckdb, pyarrow.parquet, pyarrow.csv"]),
    ]


def compile_sources() -> None:
    """Byte-code of tracekit's modules in their __pycache__ folders (git ignores them)."""
    for folder in ("tracekit", "collectors"):
        subprocess.run(PY + ["-m", "compileall", "-q", str(ROOT / folder)], check=True,
                       stdout=subprocess.DEVNULL)


def measure(run: Path, repeat: int) -> dict:
    out = {"load_start": os.getloadavg(), "pairs": []}
    for name, cmd, base_name, base in pairs(run):
        wall(cmd), wall(base)  # warm the file cache
        a, b = [], []
        for _ in range(repeat):
            a.append(wall(cmd))
            b.append(wall(base))
        ma, mb = (statistics.median(x[0] for x in a), statistics.median(x[0] for x in b))
        ca, cb = (statistics.median(x[1] for x in a), statistics.median(x[1] for x in b))
        out["pairs"].append({"command": name, "baseline": base_name, "median_s": ma,
                             "baseline_median_s": mb, "ratio": ma / mb, "median_cpu_s": ca,
                             "baseline_median_cpu_s": cb, "cpu_ratio": ca / cb,
                             "runs": a, "baseline_runs": b})
        print(f"{name}: {ma:.3f} s ({ca:.3f} s CPU); {base_name}: {mb:.3f} s ({cb:.3f} s CPU); "
              f"ratio {ma / mb:.2f} ({ca / cb:.2f} in CPU time)", flush=True)
    out["load_end"] = os.getloadavg()
    print(f"load average {out['load_start'][0]:.1f} at the start, {out['load_end'][0]:.1f} at the end")
    return out


def measure_small(repeat: int) -> dict:
    """:func:`measure` on the 3-kernel fixture (SMALL), converted into a temporary run folder."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "small"
        subprocess.run(PY + ["-m", "tracekit", "convert", str(SMALL), "-o", str(run), "-q"],
                       check=True, stdout=subprocess.DEVNULL)
        return measure(run, repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--run", type=Path, help="a small run folder (default: the 3-kernel fixture, converted)")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    ap.add_argument("--no-compile", action="store_true",
                    help="do not byte-compile tracekit first (its sources compile on every run "
                    "where no __pycache__ exists and PYTHONDONTWRITEBYTECODE is set)")
    args = ap.parse_args(argv)
    if not args.no_compile:
        compile_sources()
    res = measure(args.run, args.repeat) if args.run else measure_small(args.repeat)
    res["compiled"] = not args.no_compile
    res["python_dont_write_bytecode"] = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
