"""Write every output a refactoring must keep, for a byte-for-byte diff before and after.

    python benchmarks/identity.py OUTDIR [--fixtures DIR] [--quick]

Converts the shared fixtures (every nsys export, every Kineto trace, the ncu CSV exports, and a
2-rank job built from the NCCL Kineto trace by ``make_rank_job.py``) into ``OUTDIR/runs/``, then
writes, with the ``tracekit`` command line (run from OUTDIR, so paths in outputs are relative):

- ``query/NAME.csv`` and ``query/NAME.err``: every named query over every run at once
  (``-f csv``), and what it printed on stderr (warnings, empty-result reasons, errors) with its
  exit status;
- ``whatif/*.csv``: ``tracekit whatif`` on the job and on the AlexNet trace;
- ``study/``: ``tracekit study`` over the Kineto runs and the job (its CSV tables; report.html);
- ``timeline/*.json``: ``tracekit timeline`` of the job and of the 2-GPU nsys export;
- ``plot/*.png``: every ``tracekit plot`` kind on a run that has its data;
- ``convert/*.err``: what each conversion printed.

Compare two output folders with ``diff -r A B`` (``--exclude runs``: run folders hold their
conversion time). ``--quick`` converts a few fixtures only. Nothing here is a test: outputs change
on purpose between rounds; the script says whether a change that should not change them did.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_FIXTURES = HERE.parent.parent / "shared" / "fixtures"
QUICK = ("nsys2026_h100_2gpu_pytorch_slice", "nsys2020.5_2xv100_p2p_nvlink", "kineto_a100_alexnet",
         "ncu2022.3_rtx2080ti_two_kernels.raw")


def _tracekit(args: list[str], cwd: Path, err: Path) -> int:
    """Run ``tracekit ARGS`` in ``cwd``; its stderr and exit status go to ``err``."""
    err.parent.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "tracekit", *args], cwd=cwd, capture_output=True,
                       text=True, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    err.write_text(f"exit {p.returncode}\n{p.stderr}", encoding="utf-8")
    return p.returncode


def _sources(fixtures: Path, quick: bool) -> dict[str, list[Path]]:
    """Run name -> the input files it is converted from."""
    files = sorted((fixtures / "nsys").glob("*.sqlite")) + sorted((fixtures / "kineto").glob("*.json.gz"))
    files += [fixtures / "ncu" / n for n in ("ncu2022.3_rtx2080ti_two_kernels.raw.csv",
                                              "ncu_v100_gene_roofline_region.details.csv",
                                              "ncu_raw_b200_sdpa_flash.csv")]
    out = {f.name.split(".sqlite")[0].split(".json")[0].removesuffix(".csv"): [f] for f in files}
    if quick:
        out = {k: v for k, v in out.items() if k in QUICK}
    return out


def convert(out: Path, fixtures: Path, quick: bool) -> list[str]:
    """Convert the fixtures and the 2-rank job; the run folders' relative paths."""
    runs = []
    for name, files in _sources(fixtures, quick).items():
        if _tracekit(["convert", *map(str, files), "-o", f"runs/{name}"], out,
                     out / "convert" / f"{name}.err") == 0:
            runs.append(f"runs/{name}")
    job_src = out / "job_src"
    subprocess.run([sys.executable, str(HERE / "make_rank_job.py"),
                    str(fixtures / "kineto" / "kineto_a100_nccl_2ranks_rank0.json.gz"), "2",
                    str(job_src)], check=True, capture_output=True)
    if _tracekit(["convert", *sorted(map(str, job_src.glob("*.json"))), "-o", "runs/job"], out,
                 out / "convert" / "job.err") == 0:
        runs.append("runs/job")
    return runs


def queries(out: Path, runs: list[str]) -> None:
    from tracekit.query import all_queries

    (out / "query").mkdir(exist_ok=True)
    for name in all_queries():
        _tracekit(["query", name, *runs, "-f", "csv", "-o", f"query/{name}.csv", "--rows", "0"],
                  out, out / "query" / f"{name}.err")


def others(out: Path, runs: list[str]) -> None:
    """whatif, study, timeline and plots."""
    have = set(runs)
    job, alex, h100 = "runs/job", "runs/kineto_a100_alexnet", "runs/nsys2026_h100_2gpu_pytorch_slice"
    if job in have:
        _tracekit(["whatif", job, "-s", "baseline", "-s", "no-straggler", "-s", "comm=0.5", "-s",
                   "launch=0", "-f", "csv", "-o", "whatif/job.csv"], out, out / "whatif" / "job.err")
        _tracekit(["timeline", job, "-o", "timeline/job.json", "--critical-path"], out,
                  out / "timeline" / "job.err")
    if alex in have:
        _tracekit(["whatif", alex, "-s", "baseline", "-s", "kernels:gemm=0.5+host=0.5", "-f", "csv",
                   "-o", "whatif/alexnet.csv"], out, out / "whatif" / "alexnet.err")
    if h100 in have:
        _tracekit(["timeline", h100, "-o", "timeline/h100.json"], out, out / "timeline" / "h100.err")
    study = [r for r in runs if "kineto" in r or r == job]
    if study:
        _tracekit(["study", *study, "-o", "study"], out, out / "study.err")
    plots = {"utilization": h100, "kernels": h100, "steps": alex, "idle": "runs/nsys2020.5_2xv100_p2p_nvlink",
             "roofline": "runs/ncu2022.3_rtx2080ti_two_kernels.raw",
             "memory": "runs/kineto_mi300_resnet_actckpt_train", "critical-path": job}
    for kind, run in plots.items():
        if run in have:
            _tracekit(["plot", kind, run, "-o", f"plot/{kind}.png"], out, out / "plot" / f"{kind}.err")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=False)
    runs = convert(a.out, a.fixtures.resolve(), a.quick)
    queries(a.out, runs)
    others(a.out, runs)
    print(f"wrote {a.out}: {len(runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
